/* Usage forwarding to a real registry (run by test_forward.py, which makes the PKI and starts
 * sluice-novahook, possibly later than this program): N records in a fresh agent usage store,
 * pairs of sessions busy together for a second of each record (their shared time is half of
 * it), the last 4 records idle; forwarded by the agent's registry thread (agent/report.c) in
 * batches of 7. Until the windows are settled only the idle records go (the others' shared
 * time is not final); once settled, every record goes, with its shared time, until none is
 * pending; then every forwarded mark is cleared (as if the agent died between the push and the
 * mark) and they are all forwarded again: the registry must still hold each record once.
 * Prints "agent_shared_ns SUM" for the caller to compare with the registry's.
 * usage: usage_forward DB ENDPOINT CA CERT KEY N */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "report.h"
#include "usage_store.h"

/* Waits until at most `left` records are pending. */
static int wait_pending(ag_usage_store *s, ag_report *r, int secs, uint64_t left)
{
    for (int i = 0; i < secs * 20; i++) {
        uint64_t pending = UINT64_MAX;
        sl_error e;
        if (ag_usage_store_pending(s, &pending, &e) != SL_OK) {
            fprintf(stderr, "usage_forward: %s\n", e.msg);
            return -1;
        }
        if (pending <= left)
            return 0;
        if (i % 20 == 0)
            ag_report_usage_kick(r);
        usleep(50000);
    }
    return -1;
}

static int shared_sum(const sl_usage_rec *sum, uint64_t records, void *ud)
{
    (void)records;
    *(uint64_t *)ud += sum->gpu_shared_ns;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: usage_forward DB ENDPOINT CA CERT KEY N\n");
        return 2;
    }
    int n = atoi(argv[6]);
    ag_usage_store *s;
    sl_error e;
    if (n < 1 || n > 5000 || ag_usage_store_open(argv[1], 0, &s, &e) != SL_OK) {
        fprintf(stderr, "usage_forward: bad N or %s\n", e.msg);
        return 2;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL;
    static char ids[5000][40];
    int idle = n >= 8 ? 4 : 0;
    for (int i = 0; i < n; i++) {
        Sluice__Control__UsageRecord u = SLUICE__CONTROL__USAGE_RECORD__INIT;
        Sluice__Control__BusyInterval iv = SLUICE__CONTROL__BUSY_INTERVAL__INIT, *ivp = &iv;
        snprintf(ids[i], sizeof ids[i], "%08x-0000-4000-8000-%012d", (unsigned)ts.tv_sec, i);
        u.record_id = ids[i];
        u.instance_uuid = "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60";
        u.project_id = "f241e906010e4917ae8153f4fb8aa021";
        u.flavor = "g1.small";
        u.gpu_uuid = "GPU-test";
        u.instance_name = "web-1";
        u.domain_name = "instance-00000001";
        u.sla_tier = "silver";
        u.gpu_share = 0.5;
        /* records 2k and 2k + 1: two sessions over the same 10 s, busy together its first second */
        u.session_id = (uint64_t)i + 1;
        u.final = 1;
        u.interval_start_ns = now - 10000000000LL * ((n - i + 1) / 2);
        u.interval_end_ns = u.interval_start_ns + 10000000000LL;
        u.kernels = 3;
        if (i < n - idle) {
            iv.start_ns = u.interval_start_ns;
            iv.end_ns = iv.start_ns + 1000000000LL;
            u.busy = &ivp;
            u.n_busy = 1;
            u.gpu_busy_ns = 1000000000ULL;
        }
        const Sluice__Control__UsageRecord *p[] = {&u};
        if (ag_usage_store_put(s, p, 1, ts.tv_sec, NULL, &e) != SL_OK) {
            fprintf(stderr, "usage_forward: %s\n", e.msg);
            return 1;
        }
    }
    ag_metrics *m = ag_metrics_new("0.1.0");
    ag_report_opts o = {0};
    o.endpoint = argv[2];
    o.ca_file = argv[3];
    o.cert_file = argv[4];
    o.key_file = argv[5];
    o.enroll_endpoint = "tcp://127.0.0.1:7400";
    o.slots = 4;
    o.version = "test";
    o.retry_max_ms = 1000;
    o.usage = s;
    o.metrics = m;
    o.usage_batch = 7;
    ag_report *r;
    if (ag_report_start(&o, &r, &e) != SL_OK) {
        fprintf(stderr, "usage_forward: %s\n", e.msg);
        return 1;
    }
    int rc = 0;
    /* the idle records go; the others wait for their windows to be settled */
    if (wait_pending(s, r, 40, (uint64_t)(n - idle)) != 0) {
        fprintf(stderr, "usage_forward: idle records still pending after 40 s\n");
        rc = 1;
    }
    usleep(1000000);
    ag_report_usage_kick(r);
    usleep(500000);
    uint64_t held = 0;
    ag_usage_store_pending(s, &held, &e);
    printf("held %llu\n", (unsigned long long)held);
    if (!rc && held != (uint64_t)(n - idle)) {
        fprintf(stderr, "usage_forward: %llu records pending before the settling, want %d\n",
                (unsigned long long)held, n - idle);
        rc = 1;
    }
    /* every session ended: all windows settled (what the agent's loop does every 2 s) */
    const ag_usage_settle_opts so = {10000000000LL, 0, 0, 100000};
    ag_usage_settled done;
    if (!rc && ag_usage_store_settle(s, &so, now + 20000000000LL, &done, &e) != SL_OK) {
        fprintf(stderr, "usage_forward: %s\n", e.msg);
        rc = 1;
    }
    ag_report_usage_kick(r); /* as the agent does when settling released records */
    if (!rc && wait_pending(s, r, 40, 0) != 0) {
        fprintf(stderr, "usage_forward: records still pending after 40 s\n");
        rc = 1;
    }
    /* the thread marks the store first, then its stats and gauges: give it a moment */
    ag_report_stats st;
    char *t = NULL;
    for (int i = 0; !rc && i < 100; i++) {
        size_t len;
        free(t);
        t = ag_metrics_render(m, &len);
        ag_report_get_stats(r, &st);
        if (st.usage_forwarded == (uint64_t)n &&
            !strstr(t, "sluice_agent_last_forward_timestamp_seconds 0\n") &&
            strstr(t, "sluice_agent_usage_records_pending_forward 0\n"))
            break;
        usleep(50000);
    }
    ag_report_get_stats(r, &st);
    printf("forwarded %llu last_forward %lld\n", (unsigned long long)st.usage_forwarded,
           (long long)st.last_forward);
    if (!rc && (strstr(t, "sluice_agent_last_forward_timestamp_seconds 0\n") ||
                !strstr(t, "sluice_agent_usage_records_pending_forward 0\n"))) {
        fprintf(stderr, "usage_forward: metrics not updated:\n%s", t);
        rc = 1;
    }
    free(t);
    if (!rc) { /* the agent died after the push, before the marks: all sent again */
        sqlite3 *h;
        if (sqlite3_open(argv[1], &h) != SQLITE_OK ||
            sqlite3_exec(h, "UPDATE records SET forwarded = 0", NULL, NULL, NULL) != SQLITE_OK) {
            fprintf(stderr, "usage_forward: %s\n", sqlite3_errmsg(h));
            rc = 1;
        }
        sqlite3_close(h);
        ag_report_usage_kick(r);
        if (!rc && wait_pending(s, r, 40, 0) != 0) {
            fprintf(stderr, "usage_forward: re-sent records still pending after 40 s\n");
            rc = 1;
        }
        for (int i = 0; i < 100; i++) {
            ag_report_get_stats(r, &st);
            if (st.usage_forwarded == 2 * (uint64_t)n)
                break;
            usleep(50000);
        }
        printf("forwarded %llu\n", (unsigned long long)st.usage_forwarded);
    }
    ag_report_stop(r);
    uint64_t shared = 0;
    if (!rc && ag_usage_store_totals(s, shared_sum, &shared, &e) == SL_OK)
        printf("agent_shared_ns %llu\n", (unsigned long long)shared);
    ag_metrics_free(m);
    ag_usage_store_close(s);
    return rc;
}
