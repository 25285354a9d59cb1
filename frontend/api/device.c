/* Device queries answered locally from SessionAccept.devices, and cuInit /
 * cuDriverGetVersion (docs/remoting.md "Sessions").
 *
 * cuDriverGetVersion connects lazily (the first call that needs the backend connects, cudart
 * asks for the version before cuInit): it reports the backend's driver version, never below
 * 13000, and 13000 when no backend can be reached (cuInit then says CUDA_ERROR_NO_DEVICE). The
 * integrity hash (INTEGRITY_CHECK) covers this value, so the hook reports the same one. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "api/device.h"
#include "call/connection.h"

static CUresult dev_get(CUdevice d, const struct sl_fe_device **out)
{
    CUresult rc = sl_fe_ensure_session();
    if (rc != CUDA_SUCCESS)
        return rc;
    *out = sl_fe_session_device((int)d);
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

int sl_fe_reported_driver_version(void)
{
    int v = sl_fe_session_driver_version();
    return v ? v : 13000;
}

/* Whether cuInit succeeded: the session may be open before it (cuDriverGetVersion connects), but
 * the driver answers the context and profiler calls CUDA_ERROR_NOT_INITIALIZED until cuInit. */
static atomic_int g_init_done;

int sl_fe_init_done(void)
{
    return atomic_load(&g_init_done);
}

void sl_fe_init_mark_done(void)
{
    atomic_store(&g_init_done, 1);
}

CUresult cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sl_fe_ensure_session();
    if (rc == CUDA_SUCCESS)
        sl_fe_init_mark_done();
    return rc;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    (void)sl_fe_ensure_session();
    *driverVersion = sl_fe_reported_driver_version();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sl_fe_ensure_session();
    if (rc != CUDA_SUCCESS)
        return rc;
    *count = sl_fe_session_device_count();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sl_fe_device *d;
    CUresult rc = dev_get(ordinal, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sl_fe_device *d;
    CUresult rc = dev_get(dev, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    snprintf(name, (size_t)len, "%s", d->name);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sl_fe_device *d;
    CUresult rc = dev_get(dev, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (d->has_uuid)
        *uuid = d->uuid;
    else
        memset(uuid, 0, sizeof *uuid);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult cuDeviceGetLuid(char *luid, unsigned int *deviceNodeMask, CUdevice dev)
{
    if (!luid || !deviceNodeMask)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sl_fe_device *d;
    CUresult rc = dev_get(dev, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!d->has_luid)
        return CUDA_ERROR_NOT_SUPPORTED; /* Linux drivers have no LUID either */
    memcpy(luid, d->luid, 8);
    *deviceNodeMask = d->luid_mask;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sl_fe_device *d;
    CUresult rc = dev_get(dev, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    *bytes = (size_t)d->total_mem;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    size_t b = 0;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = cuDeviceTotalMem_v2(&b, dev);
    if (rc == CUDA_SUCCESS)
        *bytes = b > 0xffffffffu ? 0xffffffffu : (unsigned int)b;
    return rc;
}

/* What Sluice offers, whatever the device can: the guest's CPU and the device never touch the
 * same managed page at once (pages move at call boundaries, docs/remoting.md "Managed memory"),
 * and the device cannot reach the guest's pageable memory. */
static int offered(int a, int v)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
        return 0;
    default:
        return v;
    }
}

static int attr_of(const struct sl_fe_device *d, int a)
{
    return a >= 0 && (size_t)a < d->nattrs ? offered(a, d->attrs[a]) : 0;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sl_fe_device *d;
    CUresult rc = dev_get(dev, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((int)attrib <= 0 || (int)attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = attr_of(d, (int)attrib);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sl_fe_device *d;
    CUresult rc = dev_get(dev, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    snprintf(pciBusId, (size_t)len, "%08X:%02X:%02X.0",
             (unsigned)attr_of(d, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
             (unsigned)attr_of(d, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
             (unsigned)attr_of(d, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
    return CUDA_SUCCESS;
}

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sl_fe_device *d;
    CUresult rc = dev_get(dev, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    *major = attr_of(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    *minor = attr_of(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetProperties(CUdevprop *prop, CUdevice dev)
{
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sl_fe_device *d;
    CUresult rc = dev_get(dev, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    prop->maxThreadsPerBlock = attr_of(d, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    prop->maxThreadsDim[0] = attr_of(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
    prop->maxThreadsDim[1] = attr_of(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
    prop->maxThreadsDim[2] = attr_of(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
    prop->maxGridSize[0] = attr_of(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
    prop->maxGridSize[1] = attr_of(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
    prop->maxGridSize[2] = attr_of(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
    prop->sharedMemPerBlock = attr_of(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    prop->totalConstantMemory = attr_of(d, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
    prop->SIMDWidth = attr_of(d, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    prop->memPitch = attr_of(d, CU_DEVICE_ATTRIBUTE_MAX_PITCH);
    prop->regsPerBlock = attr_of(d, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    prop->clockRate = attr_of(d, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    prop->textureAlign = attr_of(d, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
    return CUDA_SUCCESS;
}

/* hooks.h: the integrity hash and the tables see exactly what the calls above report. */
CUresult sl_fe_device_count(int *count)
{
    return cuDeviceGetCount(count);
}

CUresult sl_fe_device_uuid(CUdevice dev, CUuuid *uuid)
{
    return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult sl_fe_device_attribute(CUdevice dev, CUdevice_attribute attr, int *value)
{
    return cuDeviceGetAttribute(value, attr, dev);
}
