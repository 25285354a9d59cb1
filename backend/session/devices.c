/* Device facts for SessionAccept: every immutable value of every device, read once at start
 * from the real driver. The device hooks (guest ordinal <-> CUdevice) are session/hooks.c. */
#include "session/devices.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "sluice/error.h"
#include "sluice/log.h"
#include "sluice/wire.h"

sl_code be_devices_load(const struct sl_driver_api *api, struct be_devices *d, sl_error *e)
{
    memset(d, 0, sizeof *d);
    if (!api->cuInit || !api->cuDriverGetVersion || !api->cuDeviceGetCount || !api->cuDeviceGet)
        return sl_fail(e, SL_ERR_CONFIG, "the driver lacks cuInit/cuDriverGetVersion/cuDeviceGet");
    CUresult rc = api->cuInit(0);
    if (rc != CUDA_SUCCESS)
        return sl_fail(e, SL_ERR_CONFIG, "cuInit failed: CUresult %d", (int)rc);
    if ((rc = api->cuDriverGetVersion(&d->driver_version)) != CUDA_SUCCESS)
        return sl_fail(e, SL_ERR_CONFIG, "cuDriverGetVersion failed: CUresult %d", (int)rc);
    int n = 0;
    if ((rc = api->cuDeviceGetCount(&n)) != CUDA_SUCCESS)
        return sl_fail(e, SL_ERR_CONFIG, "cuDeviceGetCount failed: CUresult %d", (int)rc);
    if (n < 0)
        n = 0;
    if ((unsigned)n > SL_WIRE_MAX_DEVICES)
        n = SL_WIRE_MAX_DEVICES;
    d->dev = calloc(n ? (size_t)n : 1, sizeof *d->dev);
    if (!d->dev)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    d->count = n;
    size_t nattr = CU_DEVICE_ATTRIBUTE_MAX;
    if (nattr > SL_WIRE_MAX_DEVICE_ATTRIBUTES)
        nattr = SL_WIRE_MAX_DEVICE_ATTRIBUTES;
    for (int i = 0; i < n; i++) {
        struct be_device *v = &d->dev[i];
        if ((rc = api->cuDeviceGet(&v->dev, i)) != CUDA_SUCCESS) {
            be_devices_free(d);
            return sl_fail(e, SL_ERR_CONFIG, "cuDeviceGet(%d) failed: CUresult %d", i, (int)rc);
        }
        if (!api->cuDeviceGetName || api->cuDeviceGetName(v->name, sizeof v->name, v->dev))
            snprintf(v->name, sizeof v->name, "CUDA device %d", i);
        v->name[sizeof v->name - 1] = 0;
        CUuuid u;
        if (api->cuDeviceGetUuid_v2 && api->cuDeviceGetUuid_v2(&u, v->dev) == CUDA_SUCCESS) {
            memcpy(v->uuid, u.bytes, 16);
            v->has_uuid = 1;
        }
        size_t tm = 0;
        if (api->cuDeviceTotalMem_v2 && api->cuDeviceTotalMem_v2(&tm, v->dev) == CUDA_SUCCESS)
            v->total_mem = tm;
        v->attrs = calloc(nattr, sizeof *v->attrs);
        if (!v->attrs) {
            be_devices_free(d);
            return sl_fail(e, SL_ERR_NOMEM, "out of memory");
        }
        v->n_attrs = nattr;
        for (size_t a = 1; a < nattr && api->cuDeviceGetAttribute; a++) {
            int val = 0;
            if (api->cuDeviceGetAttribute(&val, (CUdevice_attribute)a, v->dev) == CUDA_SUCCESS)
                v->attrs[a] = val;
        }
        char luid[8];
        unsigned mask = 0;
        if (api->cuDeviceGetLuid && api->cuDeviceGetLuid(luid, &mask, v->dev) == CUDA_SUCCESS) {
            memcpy(v->luid, luid, 8);
            v->has_luid = 1;
            v->luid_mask = mask;
        }
        sl_log(SL_LOG_INFO, BE_COMPONENT, "device %d: %s, %llu MiB", i, v->name,
               (unsigned long long)(v->total_mem >> 20));
    }
    return SL_OK;
}

void be_devices_free(struct be_devices *d)
{
    if (d->dev)
        for (int i = 0; i < d->count; i++)
            free(d->dev[i].attrs);
    free(d->dev);
    memset(d, 0, sizeof *d);
}
