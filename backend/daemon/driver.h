/* Loading the real driver (driver.c), in a session worker and in the probe at start. */
#ifndef SLUICE_BE_DAEMON_DRIVER_H
#define SLUICE_BE_DAEMON_DRIVER_H

#include "session/devices.h"
#include "sluice/driver_api.h"
#include "sluice/error.h"

/* dlopen + checks (real driver, not our frontend) + cuInit + device facts. */
sl_code be_driver_open(const char *path, struct sl_driver_api *api, struct be_devices *devs,
                       void **dl, int *nbound, sl_error *e);
int be_probe_main(const char *driver, const char *project);

#endif
