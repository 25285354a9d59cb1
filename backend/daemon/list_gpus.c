/* `sluice-backend --list-gpus --driver PATH`: the GPUs the driver shows, for the agent, which
 * never loads the driver itself and registers them with the registry (AgentInfo.gpus). One line
 * per GPU on stdout: "GPU-uuid<TAB>memory bytes<TAB>name" (name escaped, sluice/log.h). */
#include <stdio.h>

#include "daemon/list_gpus.h"
#include "accounting/usage.h"
#include "bounds.h"
#include "daemon/driver.h"
#include "session/devices.h"
#include "sluice/log.h"

int be_list_gpus_main(const char *driver)
{
    struct sl_driver_api api;
    struct be_devices devs;
    void *dl = NULL;
    int nbound = 0;
    sl_error e;
    if (be_driver_open(driver, &api, &devs, &dl, &nbound, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "%s", e.msg);
        return 1;
    }
    for (int i = 0; i < devs.count; i++) {
        const struct be_device *d = &devs.dev[i];
        char uuid[41] = "GPU-unknown", name[1024];
        if (d->has_uuid)
            be_usage_gpu_uuid(d->uuid, uuid);
        printf("%s\t%llu\t%s\n", uuid, (unsigned long long)d->total_mem,
               sl_log_escape(d->name, name, sizeof name));
    }
    be_devices_free(&devs);
    return fflush(stdout) == 0 ? 0 : 1;
}
