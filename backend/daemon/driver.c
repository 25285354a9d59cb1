/* The real driver: dlopen, the checks that it is NVIDIA's and not Sluice's own frontend, cuInit
 * and the devices' facts; `--probe-driver PATH` runs this once at start in a short-lived child. */
#include <dlfcn.h>
#include <string.h>

#include "daemon/driver.h"
#include "bounds.h"
#include "sluice/log.h"

sl_code be_driver_open(const char *path, struct sl_driver_api *api, struct be_devices *devs,
                       void **dl_out, int *nbound, sl_error *e)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return sl_fail(e, SL_ERR_CONFIG, "--driver %s: %s", path, dlerror());
    if (!dlsym(dl, "cuDriverGetVersion") || !dlsym(dl, "cuInit")) {
        dlclose(dl);
        return sl_fail(e, SL_ERR_CONFIG, "--driver %s does not export the CUDA driver API", path);
    }
    if (dlsym(dl, "sl_fe_call") || dlsym(dl, "sl_fe_export_table")) {
        dlclose(dl);
        return sl_fail(e, SL_ERR_CONFIG,
                       "--driver %s is Sluice's own frontend; point it at the real NVIDIA driver",
                       path);
    }
    memset(api, 0, sizeof *api);
    int nb = sl_driver_api_load(api, dl);
    if (nbound)
        *nbound = nb;
    if (be_devices_load(api, devs, e) != SL_OK)
        return e->code;
    *dl_out = dl;
    return SL_OK;
}

int be_probe_main(const char *driver, const char *project)
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
    sl_log(SL_LOG_NOTICE, BE_COMPONENT,
           "project %s: driver %s, version %d, %d device%s, %d entry points bound (checked by a "
           "probe process; each session runs in a worker process of its own)",
           project, driver, devs.driver_version, devs.count, devs.count == 1 ? "" : "s", nbound);
    be_devices_free(&devs);
    return 0;
}
