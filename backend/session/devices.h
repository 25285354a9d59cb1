/* The devices' facts (devices.c), read once from the real driver at start: what SessionAccept
 * tells the guest, and the CUdevice of each guest ordinal. */
#ifndef SLUICE_BE_SESSION_DEVICES_H
#define SLUICE_BE_SESSION_DEVICES_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/driver_api.h"
#include "sluice/error.h"

struct be_device {
    CUdevice dev;
    char name[256];
    uint8_t uuid[16];
    int has_uuid;
    uint64_t total_mem;
    int32_t *attrs;
    size_t n_attrs;
    uint8_t luid[8];
    int has_luid;
    unsigned luid_mask;
};

struct be_devices {
    int driver_version;
    int count;
    struct be_device *dev;
};

/* cuInit + every immutable fact of every device. */
sl_code be_devices_load(const struct sl_driver_api *api, struct be_devices *d, sl_error *e);
void be_devices_free(struct be_devices *d);

#endif
