/* Usage records through the real control channel: the agent's supervisor spawns a backend
 * (usage_backend.c) that sends records with duplicates and re-sends plus a malformed one; the
 * agent stores each once, acknowledges only after the commit (the backend checks every ack
 * against the database), completes the records from the instance table, keeps the instance's
 * lifetime, and serves /metrics (fetched with a plain socket). A second ag_usage on the same
 * store (an agent restart) starts with the same totals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "supervisor.h"
#include "usage_ingest.h"
#include "usage_store.h"

#define PROJ    "f241e906010e4917ae8153f4fb8aa021"
#define INST    "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60"
#define DOMAIN  "instance-0000abcd"
#define RECORDS 40

static char tmp[64], db[128];

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int count_lines(const char *prefix, const char *contains)
{
    char path[256], line[512];
    snprintf(path, sizeof path, "%s/state/backends/%s/usage-events.log", tmp, PROJ);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += !strncmp(line, prefix, strlen(prefix)) && (!contains || strstr(line, contains));
    if (f)
        fclose(f);
    return n;
}

/* GET path over a plain TCP socket; returns the whole response (malloc'd). */
static char *http_get(int port, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)r;
        if (len + 1 >= cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    close(fd);
    return buf;
}

typedef struct sums {
    uint64_t busy, n;
    int completed;
} sums;

static int add_rec(const sl_usage_rec *r, void *ud)
{
    sums *s = ud;
    s->busy += r->gpu_busy_ns;
    s->n++;
    s->completed += !strcmp(r->domain, DOMAIN) && !strcmp(r->name, "web-??") &&
                    !strcmp(r->tier, "silver") && r->gpu_share == 0.5;
    return 0;
}

static int count_life(const sl_usage_life *l, void *ud)
{
    *(int *)ud += !strcmp(l->instance, INST) && l->open;
    return 0;
}

static void test_ingest(void **st)
{
    (void)st;
    snprintf(tmp, sizeof tmp, "/tmp/ag-usage-ingest-XXXXXX");
    assert_non_null(mkdtemp(tmp));
    snprintf(db, sizeof db, "%s/usage.db", tmp);
    static ag_config cfg;
    char text[1024];
    snprintf(text, sizeof text,
             "advertise_address = 127.0.0.1\nbackend_bind = 127.0.0.1\n"
             "backend_port_min = 47600\nbackend_port_max = 47699\nrun_dir = %s/run\n"
             "state_dir = %s/state\nbackend_path = %s\ntoken_public_key = /dev/null\n"
             "usage_db = %s\nbackend_stop_grace = 2\n",
             tmp, tmp, USAGE_BACKEND, db);
    ag_config_defaults(&cfg);
    sl_error e;
    if (ag_config_parse("test.conf", text, &cfg, &e) != SL_OK)
        fail_msg("%s", e.msg);
    cfg.backend_user[0] = cfg.backend_group[0] = '\0';

    ag_instances *inst = ag_instances_new();
    ag_instance in = {0};
    snprintf(in.uuid, sizeof in.uuid, "%s", INST);
    snprintf(in.project_id, sizeof in.project_id, "%s", PROJ);
    snprintf(in.domain, sizeof in.domain, "%s", DOMAIN);
    snprintf(in.name, sizeof in.name, "web-\xc3\xa9"); /* UTF-8: stored as printable ASCII */
    snprintf(in.flavor, sizeof in.flavor, "g1.small");
    snprintf(in.sla.tier, sizeof in.sla.tier, "silver");
    in.sla.gpu_share = 0.5;
    in.running = in.gpu = 1;
    assert_int_equal(ag_instances_put(inst, &in), 0);

    ag_supervisor *sup;
    ag_supervisor_opts so = {&cfg, inst, NULL, NULL};
    assert_int_equal(ag_supervisor_new(&so, &sup, &e), SL_OK);
    ag_usage_store *store;
    assert_int_equal(ag_usage_store_open(cfg.usage_db, 0, &store, &e), SL_OK);
    ag_metrics *m = ag_metrics_new("0.1.0");
    ag_usage *u;
    ag_usage_opts uo = {store, m, inst, NULL, NULL, 0, 0};
    assert_int_equal(ag_usage_new(&uo, &u, &e), SL_OK);
    ag_supervisor_set_usage(sup, u);
    ag_metrics_http *http;
    assert_int_equal(ag_metrics_http_start(m, "127.0.0.1", 0, &http, &e), SL_OK);
    int port = ag_metrics_http_port(http);
    assert_true(port > 0);

    setenv("SLUICE_TEST_USAGE_DB", db, 1);
    setenv("SLUICE_TEST_INSTANCE", INST, 1);
    char nrec[16];
    snprintf(nrec, sizeof nrec, "%d", RECORDS);
    setenv("SLUICE_TEST_RECORDS", nrec, 1);
    ag_supervisor_ensure(sup, PROJ);
    double t0 = mono_s();
    while (count_lines("done", NULL) == 0 && mono_s() - t0 < 30) {
        struct pollfd p = {ag_supervisor_fd(sup), POLLIN, 0};
        poll(&p, 1, 20);
        ag_supervisor_tick(sup);
        ag_usage_tick(u, 1, ag_supervisor_running(sup));
    }
    if (!count_lines("done", NULL))
        fail_msg("the backend's records were not all acknowledged within 30 s");
    for (int i = 0; i < 20; i++) { /* the SessionEvent CLOSED after "done" */
        struct pollfd p = {ag_supervisor_fd(sup), POLLIN, 0};
        poll(&p, 1, 20);
        ag_supervisor_tick(sup);
    }
    ag_usage_tick(u, 1, ag_supervisor_running(sup));

    /* acknowledged only once committed; every record; never the malformed one */
    assert_int_equal(count_lines("ack ", "MISSING"), 0);
    assert_int_equal(count_lines("ack-malformed", NULL), 0);
    assert_true(count_lines("ack ", " ok") >= RECORDS);
    ag_usage_stats stats;
    ag_usage_get_stats(u, &stats);
    assert_int_equal(stats.stored, RECORDS);
    assert_true(stats.duplicates >= RECORDS / 5); /* each fifth one sent twice at once */
    assert_true(stats.rejected >= 1);
    assert_int_equal(stats.failed_commits, 0);
    uint64_t n;
    assert_int_equal(ag_usage_store_count(store, &n, &e), SL_OK);
    assert_int_equal(n, RECORDS);
    sums s = {0};
    assert_int_equal(ag_usage_store_records(store, INT64_MIN, INT64_MAX, NULL, add_rec, &s, &e),
                     SL_OK);
    uint64_t want_busy = RECORDS * 1000000000ULL + RECORDS * (RECORDS - 1) / 2;
    assert_int_equal(s.busy, want_busy);
    assert_int_equal(s.completed, RECORDS); /* domain, name, tier, share from the table */
    int open_lives = 0;
    assert_int_equal(
        ag_usage_store_lives(store, INT64_MIN, INT64_MAX, NULL, count_life, &open_lives, &e),
        SL_OK);
    assert_int_equal(open_lives, 1);

    /* /metrics over a plain socket (what `curl -s http://127.0.0.1:PORT/metrics` does) */
    char *resp = http_get(port, "/metrics");
    assert_non_null(strstr(resp, "HTTP/1.0 200") ? resp : strstr(resp, "HTTP/1.1 200"));
    assert_non_null(strstr(resp, "Content-Type: text/plain; version=0.0.4"));
    char want[512];
    const char *labels = "{project_id=\"" PROJ "\",instance_id=\"" INST "\",domain=\"" DOMAIN
                         "\",gpu_uuid=\"GPU-test\"}";
    snprintf(want, sizeof want, "sluice_gpu_busy_seconds_total%s %llu.%09llu\n", labels,
             (unsigned long long)(want_busy / 1000000000ULL),
             (unsigned long long)(want_busy % 1000000000ULL));
    if (!strstr(resp, want))
        fail_msg("missing %s in\n%s", want, resp);
    snprintf(want, sizeof want, "sluice_kernels_total%s %d\n", labels, RECORDS * 10);
    assert_non_null(strstr(resp, want));
    snprintf(want, sizeof want, "sluice_quota_refusals_total%s %d\n", labels, RECORDS / 2);
    assert_non_null(strstr(resp, want));
    snprintf(want, sizeof want, "sluice_memory_high_water_bytes%s %d\n", labels,
             (RECORDS - 1) * 1000);
    assert_non_null(strstr(resp, want));
    assert_non_null(strstr(resp, "sluice_sessions_open{project_id=\"" PROJ "\",instance_id=\"" INST
                                 "\",domain=\"" DOMAIN "\"} 0\n"));
    assert_non_null(strstr(resp, "sluice_sessions_opened_total{project_id=\"" PROJ
                                 "\",instance_id=\"" INST "\",domain=\"" DOMAIN "\"} 1\n"));
    assert_non_null(strstr(resp, "sluice_sessions_refused_total{project_id=\"" PROJ
                                 "\",instance_id=\"\",domain=\"\",reason=\"certificate\"} 1\n"));
    assert_non_null(strstr(resp, "sluice_session_workers_killed_total{project_id=\"" PROJ
                                 "\",instance_id=\"" INST "\",domain=\"" DOMAIN "\"} 1\n"));
    assert_non_null(strstr(resp, "sluice_agent_build_info{version=\""));
    assert_non_null(strstr(resp, "sluice_agent_libvirt_connected 1\n"));
    assert_non_null(strstr(resp, "sluice_agent_backends_running 1\n"));
    snprintf(want, sizeof want, "sluice_agent_usage_records_pending_forward %d\n", RECORDS);
    assert_non_null(strstr(resp, want));
    assert_null(strstr(resp, "sluice_agent_usage_records_rejected_total 0\n"));
    free(resp);
    resp = http_get(port, "/nope");
    assert_non_null(strstr(resp, " 404 "));
    free(resp);

    /* stop: the backend gets Shutdown and exits */
    ag_supervisor_stop_all(sup);
    assert_int_equal(count_lines("shutdown", NULL), 1);
    ag_metrics_http_stop(http);
    ag_supervisor_free(sup);
    ag_usage_free(u);
    ag_metrics_free(m);

    /* an agent restart: the totals come back from the store */
    m = ag_metrics_new("0.1.0");
    uo.metrics = m;
    assert_int_equal(ag_usage_new(&uo, &u, &e), SL_OK);
    size_t len;
    char *t = ag_metrics_render(m, &len);
    snprintf(want, sizeof want, "sluice_gpu_busy_seconds_total%s %llu.%09llu\n", labels,
             (unsigned long long)(want_busy / 1000000000ULL),
             (unsigned long long)(want_busy % 1000000000ULL));
    assert_non_null(strstr(t, want));
    snprintf(want, sizeof want, "sluice_usage_records_total%s %d\n", labels, RECORDS);
    assert_non_null(strstr(t, want));
    free(t);
    ag_usage_free(u);
    ag_metrics_free(m);
    ag_usage_store_close(store);
    ag_instances_free(inst);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ingest)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
