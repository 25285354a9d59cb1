/* One agent's side of the failover test (test_failover.py): the agent's own registry reporter
 * (agent/report.c) over its own usage store, as sluice-agent runs them. It registers, places
 * one instance, then stores BATCH usage records every INTERVAL ms until TOTAL are stored (the
 * reporter forwards them meanwhile, whichever registry is up), then waits until the registry
 * acknowledged every one of them.
 * usage: ha_agent DB ENDPOINTS CA CERT KEY INSTANCE PROJECT TOTAL BATCH INTERVAL_MS
 * prints: "placed", then at the end "generated N forwarded M sessions S pending P" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "report.h"
#include "usage_store.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 11) {
        fprintf(stderr, "usage: ha_agent DB ENDPOINTS CA CERT KEY INSTANCE PROJECT TOTAL BATCH "
                        "INTERVAL_MS\n");
        return 2;
    }
    const char *instance = argv[6], *project = argv[7];
    int total = atoi(argv[8]), batch = atoi(argv[9]), interval = atoi(argv[10]);
    if (total < 1 || total > 100000 || batch < 1 || batch > 1000 || interval < 1) {
        fprintf(stderr, "ha_agent: bad TOTAL, BATCH or INTERVAL_MS\n");
        return 2;
    }
    ag_usage_store *s;
    sl_error e;
    if (ag_usage_store_open(argv[1], 0, &s, &e) != SL_OK) {
        fprintf(stderr, "ha_agent: %s\n", e.msg);
        return 1;
    }
    ag_metrics *m = ag_metrics_new("0.1.0");
    ag_report_opts o = {0};
    o.endpoint = argv[2];
    o.ca_file = argv[3];
    o.cert_file = argv[4];
    o.key_file = argv[5];
    o.enroll_endpoint = "tcp://192.0.2.10:7400";
    o.slots = 8;
    o.version = "ha-test";
    o.retry_max_ms = 1000;
    o.call_timeout_ms = 2000;
    o.ping_interval_ms = 1000;
    o.usage = s;
    o.metrics = m;
    o.usage_batch = 16;
    ag_report *r;
    if (ag_report_start(&o, &r, &e) != SL_OK) {
        fprintf(stderr, "ha_agent: %s\n", e.msg);
        return 1;
    }
    ag_report_place(r, instance, project, "g1.small");
    for (int i = 0; i < 300; i++) { /* the placement acknowledged: vendordata can find it */
        ag_report_stats st;
        ag_report_get_stats(r, &st);
        if (st.connected && st.pending == 0 && st.placed == 1)
            break;
        usleep(50000);
    }
    printf("placed\n");
    fflush(stdout);
    const char *host = ag_report_host(r);
    int made = 0, seq = 0;
    while (made < total) {
        Sluice__Control__UsageRecord recs[1000];
        const Sluice__Control__UsageRecord *p[1000];
        char ids[1000][64];
        int n = total - made < batch ? total - made : batch;
        int64_t end = now_ns();
        for (int i = 0; i < n; i++, seq++) {
            Sluice__Control__UsageRecord u = SLUICE__CONTROL__USAGE_RECORD__INIT;
            snprintf(ids[i], sizeof ids[i], "%s-%06d", host, seq);
            u.record_id = ids[i];
            u.instance_uuid = (char *)instance;
            u.project_id = (char *)project;
            u.flavor = "g1.small";
            u.gpu_uuid = "GPU-ha";
            u.instance_name = "ha-vm";
            u.domain_name = "instance-0000ha";
            u.sla_tier = "silver";
            u.gpu_share = 0.5;
            u.interval_start_ns = end - 1000000000LL;
            u.interval_end_ns = end;
            u.gpu_busy_ns = 1000000;
            u.kernels = 1;
            u.measurement = "events";
            recs[i] = u;
            p[i] = &recs[i];
        }
        if (ag_usage_store_put(s, p, (size_t)n, end / 1000000000LL, NULL, &e) != SL_OK) {
            fprintf(stderr, "ha_agent: %s\n", e.msg);
            return 1;
        }
        made += n;
        ag_report_usage_kick(r);
        usleep((useconds_t)interval * 1000);
    }
    uint64_t pending = 1;
    for (int i = 0; i < 1800 && pending; i++) { /* up to 90 s */
        if (ag_usage_store_pending(s, &pending, &e) != SL_OK)
            break;
        if (pending && i % 20 == 0)
            ag_report_usage_kick(r);
        if (pending)
            usleep(50000);
    }
    ag_report_stats st;
    ag_report_get_stats(r, &st);
    printf("generated %d forwarded %llu sessions %u pending %llu\n", made,
           (unsigned long long)st.usage_forwarded, st.sessions, (unsigned long long)pending);
    ag_report_stop(r);
    ag_metrics_free(m);
    ag_usage_store_close(s);
    return pending == 0 ? 0 : 1;
}
