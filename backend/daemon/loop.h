/* The server process's channel thread (loop.c). */
#ifndef SLUICE_BE_DAEMON_LOOP_H
#define SLUICE_BE_DAEMON_LOOP_H

#include "daemon/config.h"
#include "session/devices.h"
#include "sluice/driver_api.h"

/* Asks the running server to load its certificate, key and CA files again (SIGHUP: the agent
 * renewed the certificate). Async-signal-safe. */
void be_server_request_reload(void);
/* Runs until *stop. Returns 0 on a clean exit. */
int be_server_run(const struct be_config *cfg, const struct sl_driver_api *api,
                  const struct be_devices *devs, volatile int *stop);

#endif
