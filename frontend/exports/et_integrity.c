/* INTEGRITY_CHECK d4082055...: 3 slots; cudart verifies [1]'s answers bit for bit (a wrong
 * one makes cudaMalloc fail with 103). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "exports/et_integrity.h"
#include "api/device.h"
#include "exports/et_cudart.h"
#include "exports/integrity.h"

/* A cap on what the device-count hook may report (CUDA itself supports far fewer). */
#define MAX_DEVICES 1024

static const sl_fe_slot TABLE[3];

static CUresult device_facts(CUdevice dev, struct sl_fe_integrity_device *out)
{
    CUresult rc = sl_fe_device_uuid(dev, &out->uuid);
    int v = 0;
    if (rc == CUDA_SUCCESS)
        rc = sl_fe_device_attribute(dev, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, &v);
    out->pci_domain = v;
    if (rc == CUDA_SUCCESS)
        rc = sl_fe_device_attribute(dev, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, &v);
    out->pci_bus = v;
    if (rc == CUDA_SUCCESS)
        rc = sl_fe_device_attribute(dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, &v);
    out->pci_device = v;
    return rc;
}

/* [1] integrity(uint32 version, uint64 unix_seconds, uint64 out[2]). */
static CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2])
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    struct sl_fe_integrity_input in = {
        .driver_version = (uint32_t)sl_fe_reported_driver_version(),
        .version = version,
        .pid = (uint32_t)getpid(),
        .thread_id = (uint32_t)(uintptr_t)pthread_self(),
        .cudart_table = (uint64_t)(uintptr_t)sl_fe_et_cudart_interface(),
        .integrity_table = (uint64_t)(uintptr_t)TABLE,
        .slot1 = (uint64_t)(uintptr_t)TABLE[1],
        .unix_seconds = unix_seconds,
    };
    if (version % 10 == 0 || version % 10 == 1) {
        sl_fe_integrity_compute(&in, out); /* constants; the devices are not needed */
        return CUDA_SUCCESS;
    }
    int count = 0;
    CUresult rc = sl_fe_device_count(&count);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (count < 0 || count > MAX_DEVICES)
        return CUDA_ERROR_UNKNOWN;
    struct sl_fe_integrity_device *devs = NULL;
    if (count > 0) {
        devs = calloc((size_t)count, sizeof *devs);
        if (!devs)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < count && rc == CUDA_SUCCESS; i++)
        rc = device_facts((CUdevice)i, &devs[i]);
    if (rc == CUDA_SUCCESS) {
        in.devices = devs;
        in.device_count = (size_t)count;
        sl_fe_integrity_compute(&in, out);
    }
    free(devs);
    return rc;
}

/* [2]: unknown; non-NULL in 580, one shim says it takes a bool. Returns success. */
static CUresult integrity_slot2(int enabled)
{
    (void)enabled;
    return CUDA_SUCCESS;
}

static const sl_fe_slot TABLE[3] = {
    SL_FE_ET_SIZE(3),
    SL_FE_ET_FN(integrity_check),
    SL_FE_ET_FN(integrity_slot2),
};

const sl_fe_slot *sl_fe_et_integrity_check(void)
{
    return TABLE;
}
