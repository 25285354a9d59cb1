/* Run on the GPU machine (not a unit test): asks the REAL driver's INTEGRITY_CHECK[1] and
 * computes our answer (frontend/exports/integrity.c) from the same inputs: the real driver version,
 * the real table addresses, this process and thread, the same seconds, and the real devices'
 * UUID and PCI domain/bus/device. Prints both per version; exit 0 only if all match.
 *
 *   build-fe/tests/unit/frontend/integrity_probe [path to the real libcuda.so.1]
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "exports/integrity.h"

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*export_fn)(const void **, const CUuuid *);
typedef CUresult (*int_out_fn)(int *);
typedef CUresult (*device_get_fn)(CUdevice *, int);
typedef CUresult (*uuid_fn)(CUuuid *, CUdevice);
typedef CUresult (*attr_fn)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*integrity_fn)(uint32_t, uint64_t, uint64_t[2]);

static const uint8_t CUDART_ID[16] = {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
                                      0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9};
static const uint8_t INTEGRITY_ID[16] = {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b,
                                         0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2};

static void *sym(void *lib, const char *a, const char *b)
{
    void *p = dlsym(lib, a);
    if (!p && b)
        p = dlsym(lib, b);
    if (!p) {
        fprintf(stderr, "integrity_probe: %s not found\n", a);
        exit(2);
    }
    return p;
}

static const void *const *get_table(export_fn get, const uint8_t id[16])
{
    CUuuid u;
    const void *t = NULL;
    memcpy(u.bytes, id, 16);
    CUresult rc = get(&t, &u);
    if (rc != CUDA_SUCCESS || !t) {
        fprintf(stderr, "integrity_probe: cuGetExportTable rc=%d\n", (int)rc);
        exit(2);
    }
    return t;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "integrity_probe: %s\n", dlerror());
        return 2;
    }
    init_fn cu_init = (init_fn)sym(lib, "cuInit", NULL);
    export_fn get_export = (export_fn)sym(lib, "cuGetExportTable", NULL);
    int_out_fn driver_version = (int_out_fn)sym(lib, "cuDriverGetVersion", NULL);
    int_out_fn device_count = (int_out_fn)sym(lib, "cuDeviceGetCount", NULL);
    device_get_fn device_get = (device_get_fn)sym(lib, "cuDeviceGet", NULL);
    uuid_fn device_uuid = (uuid_fn)sym(lib, "cuDeviceGetUuid_v2", "cuDeviceGetUuid");
    attr_fn device_attr = (attr_fn)sym(lib, "cuDeviceGetAttribute", NULL);

    if (cu_init(0) != CUDA_SUCCESS) {
        fprintf(stderr, "integrity_probe: cuInit failed\n");
        return 2;
    }
    const void *const *cudart = get_table(get_export, CUDART_ID);
    const void *const *integ = get_table(get_export, INTEGRITY_ID);
    integrity_fn real = (integrity_fn)integ[1];

    int drv = 0, n = 0;
    driver_version(&drv);
    device_count(&n);
    if (n < 0 || n > 64)
        return 2;
    struct sl_fe_integrity_device devs[64];
    memset(devs, 0, sizeof devs);
    for (int i = 0; i < n; i++) {
        CUdevice d = 0;
        device_get(&d, i);
        device_uuid(&devs[i].uuid, d);
        device_attr(&devs[i].pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d);
        device_attr(&devs[i].pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d);
        device_attr(&devs[i].pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d);
    }
    printf("driver %d, %d device(s), pid %d, CUDART %p, INTEGRITY %p, slot1 %p\n", drv, n,
           (int)getpid(), (const void *)cudart, (const void *)integ, integ[1]);

    const uint32_t versions[] = {13000, 13001, 13002, 12082, 12092, 5, 13003, 13009};
    uint64_t secs = (uint64_t)time(NULL);
    int mismatches = 0;
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        uint64_t r[2] = {0, 0}, o[2] = {0, 0};
        CUresult rc = real(versions[i], secs, r);
        struct sl_fe_integrity_input in = {
            .driver_version = (uint32_t)drv,
            .version = versions[i],
            .pid = (uint32_t)getpid(),
            .thread_id = (uint32_t)(uintptr_t)pthread_self(),
            .cudart_table = (uint64_t)(uintptr_t)cudart,
            .integrity_table = (uint64_t)(uintptr_t)integ,
            .slot1 = (uint64_t)(uintptr_t)integ[1],
            .unix_seconds = secs,
            .devices = devs,
            .device_count = (size_t)n,
        };
        sl_fe_integrity_compute(&in, o);
        int match = rc == CUDA_SUCCESS && r[0] == o[0] && r[1] == o[1];
        mismatches += !match;
        printf("version %5u rc=%d real=%016" PRIx64 " %016" PRIx64 " ours=%016" PRIx64
               " %016" PRIx64 " %s\n",
               versions[i], (int)rc, r[0], r[1], o[0], o[1], match ? "MATCH" : "DIFFER");
    }
    printf("%s\n", mismatches ? "FAIL" : "ALL MATCH");
    return mismatches ? 1 : 0;
}
