/* fuzz_report: libFuzzer target for the agent's side of the control channel: what a backend
 * (which serves tenants, so may be subverted) sends, a BackendReport, decoded as the agent does
 * (ag_control_recv's unpack) and handed where the supervisor hands it: usage records through
 * the checks into a real usage store (agent/usage_ingest.c: ag_usage_take, ag_usage_commit,
 * in a scratch folder, /dev/shm when there is one), session events to the open-session gauges
 * and the store's open sessions (ag_usage_session); every 256 inputs the metrics are rendered
 * and the sessions closed as when the backend ends (ag_usage_backend_ended). Every record the
 * store then holds must pass the checks (ag_usage_record_check) or be the agent's own. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "instances.h"
#include "metrics.h"
#include "usage_ingest.h"
#include "usage_record.h"
#include "usage_store.h"

#define PROJECT "f241e906010e4917ae8153f4fb8aa021"

static char dir[64], path[128];
static ag_usage_store *store;
static ag_metrics *metrics;
static ag_instances *inst;
static ag_usage *usage;
static unsigned runs;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void close_all(void)
{
    ag_usage_free(usage);
    ag_usage_store_close(store);
    char p[160];
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", path, suffix[i]);
        unlink(p);
    }
}

static void open_all(void)
{
    sl_error e;
    ag_usage_opts o = {0};
    if (ag_usage_store_open(path, 0, &store, &e) != SL_OK)
        abort();
    o.store = store;
    o.metrics = metrics;
    o.instances = inst;
    if (ag_usage_new(&o, &usage, &e) != SL_OK)
        abort();
}

static void cleanup(void)
{
    close_all();
    ag_metrics_free(metrics);
    ag_instances_free(inst);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("SLUICE_LOG_LEVEL", "err", 1);
    snprintf(dir, sizeof dir, "%s/fuzz-rep-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir))
        abort();
    snprintf(path, sizeof path, "%s/usage.db", dir);
    metrics = ag_metrics_new("0.1.0");
    inst = ag_instances_new();
    if (!metrics || !inst)
        abort();
    ag_instance in;
    memset(&in, 0, sizeof in);
    snprintf(in.uuid, sizeof in.uuid, "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60");
    snprintf(in.project_id, sizeof in.project_id, PROJECT);
    snprintf(in.name, sizeof in.name, "vm \"one\"\n");
    snprintf(in.flavor, sizeof in.flavor, "g1.small");
    in.running = in.gpu = 1;
    in.sla.gpu_share = 0.5;
    ag_instances_put(inst, &in);
    open_all();
    atexit(cleanup);
    return 0;
}

static void no_ack(void *user, const char *project, char *const *ids, size_t n)
{
    (void)user;
    if (strcmp(project, PROJECT) != 0 || !n)
        abort();
    for (size_t i = 0; i < n; i++)
        if (!ids[i] || !ag_usage_is_uuid(ids[i]))
            abort(); /* acknowledged a record that should have been refused */
}

static int check_row(const sl_usage_rec *r, void *ud)
{
    (void)ud;
    if (!ag_usage_is_uuid(r->record_id) || !ag_usage_is_uuid(r->instance) ||
        strcmp(r->project, PROJECT) != 0 || r->end_ns < r->start_ns)
        abort(); /* stored something the checks refuse */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20)) /* AG_CONTROL_MAX_MSG: larger frames are dropped unread */
        return 0;
    if (++runs % 20000 == 0) {
        close_all();
        open_all();
    }
    Sluice__Control__BackendReport *r = sluice__control__backend_report__unpack(NULL, size, data);
    if (!r)
        return 0;
    int taken = 0;
    switch (r->kind_case) {
    case SLUICE__CONTROL__BACKEND_REPORT__KIND_USAGE:
        taken = ag_usage_take(usage, PROJECT, r);
        ag_usage_commit(usage, no_ack, NULL);
        break;
    case SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION:
        ag_usage_session(usage, PROJECT, r->session);
        break;
    default:
        break;
    }
    if (!taken)
        sluice__control__backend_report__free_unpacked(r, NULL);
    if (runs % 256 == 0) {
        size_t len = 0;
        free(ag_metrics_render(metrics, &len));
        ag_usage_backend_ended(usage, PROJECT, "fuzz");
        sl_error e;
        if (ag_usage_store_records(store, 0, INT64_MAX, NULL, check_row, NULL, &e) != SL_OK)
            abort();
    }
    return 0;
}
