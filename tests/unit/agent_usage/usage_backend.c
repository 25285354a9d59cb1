/* A stand-in for sluice-backend that sends usage records to the agent over the real control
 * channel (docs/agent.md) the way a backend must: records with unique ids, some sent twice at
 * once, every unacknowledged one sent again every 500 ms, plus one malformed record. For every
 * UsageAck it checks, in the agent's usage database (read-only), that the acknowledged records
 * are already committed. Lines in STATE_DIR/usage-events.log: "start PID", "session opened",
 * "ack ID ok", "ack ID MISSING" (acknowledged before the commit: a failure), "ack-malformed ID"
 * (a failure), "done" (every record acknowledged, session closed), "shutdown".
 * Environment: SLUICE_TEST_USAGE_DB (the agent's database), SLUICE_TEST_INSTANCE,
 * SLUICE_TEST_RECORDS (default 40). */
#include <poll.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "sluice_control.pb-c.h"

#define MAX_RECORDS 1000
#define MALFORMED   "eeeeeeee-0000-4000-8000-00000000bad0"

static FILE *logf_;
static void *sock;
static uint64_t seq;

static void note(const char *fmt, const char *a)
{
    fprintf(logf_, fmt, a);
    fflush(logf_);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void send_report(Sluice__Control__BackendReport *r)
{
    r->seq = ++seq;
    size_t n = sluice__control__backend_report__get_packed_size(r);
    uint8_t *buf = malloc(n ? n : 1);
    sluice__control__backend_report__pack(r, buf);
    zmq_send(sock, buf, n, 0);
    free(buf);
}

static char ids[MAX_RECORDS][40];
static int acked[MAX_RECORDS];
static int n_rec;
static int64_t base_ns;
static const char *instance, *project;

static void send_record(int i)
{
    Sluice__Control__UsageRecord u = SLUICE__CONTROL__USAGE_RECORD__INIT;
    u.record_id = i < 0 ? MALFORMED : ids[i];
    u.instance_uuid = (char *)instance;
    u.project_id = (char *)project;
    u.flavor = "g1.small";
    u.gpu_uuid = "GPU-test";
    u.session_id = 1;
    u.interval_start_ns = base_ns + (int64_t)(i < 0 ? 0 : i) * 10000000000LL;
    u.interval_end_ns = u.interval_start_ns + 10000000000LL;
    if (i < 0) /* ends before it starts */
        u.interval_end_ns = u.interval_start_ns - 1;
    u.gpu_busy_ns = 1000000000ULL + (uint64_t)(i < 0 ? 0 : i);
    u.kernel_ns = 2000000000ULL;
    u.kernels = 10;
    u.bytes_htod = 1000;
    u.bytes_dtoh = 10;
    u.memory_high_water = (uint64_t)(i < 0 ? 0 : i) * 1000;
    u.calls = 30;
    u.quota_refusals = (uint32_t)(i < 0 ? 0 : i % 2);
    u.measurement = "double";
    u.final = i == n_rec - 1;
    Sluice__Control__BackendReport r = SLUICE__CONTROL__BACKEND_REPORT__INIT;
    r.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_USAGE;
    r.usage = &u;
    send_report(&r);
}

static void session(Sluice__Control__SessionEvent__Kind kind)
{
    Sluice__Control__SessionEvent ev = SLUICE__CONTROL__SESSION_EVENT__INIT;
    ev.kind = kind;
    ev.instance_uuid = (char *)instance;
    ev.project_id = (char *)project;
    ev.session_id = 1;
    Sluice__Control__BackendReport r = SLUICE__CONTROL__BACKEND_REPORT__INIT;
    r.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION;
    r.session = &ev;
    send_report(&r);
}

/* A handshake refused on its certificate: no instance known (sluice_sessions_refused_total). */
static void refused_certificate(void)
{
    Sluice__Control__SessionEvent ev = SLUICE__CONTROL__SESSION_EVENT__INIT;
    ev.kind = SLUICE__CONTROL__SESSION_EVENT__KIND__REFUSED;
    ev.instance_uuid = "";
    ev.project_id = (char *)project;
    ev.detail = "peer certificate certificate has expired";
    ev.reason = "certificate";
    Sluice__Control__BackendReport r = SLUICE__CONTROL__BACKEND_REPORT__INIT;
    r.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION;
    r.session = &ev;
    send_report(&r);
}

/* 1 if the agent's database already holds the record. */
static int committed(const char *db, const char *id)
{
    sqlite3 *h;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(h);
        return 0;
    }
    sqlite3_busy_timeout(h, 2000);
    sqlite3_stmt *q;
    int found = 0;
    if (sqlite3_prepare_v2(h, "SELECT 1 FROM records WHERE record_id = ?1", -1, &q, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
        found = sqlite3_step(q) == SQLITE_ROW;
        sqlite3_finalize(q);
    }
    sqlite3_close(h);
    return found;
}

static void on_ack(const char *db, const Sluice__Control__UsageAck *a)
{
    for (size_t k = 0; k < a->n_record_ids; k++) {
        const char *id = a->record_ids[k];
        if (!strcmp(id, MALFORMED)) {
            note("ack-malformed %s\n", id);
            continue;
        }
        note(committed(db, id) ? "ack %s ok\n" : "ack %s MISSING\n", id);
        for (int i = 0; i < n_rec; i++)
            if (!strcmp(ids[i], id))
                acked[i] = 1;
    }
}

int main(int argc, char **argv)
{
    const char *listen = NULL, *control = NULL, *state = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--project"))
            project = argv[i + 1];
        else if (!strcmp(argv[i], "--listen"))
            listen = argv[i + 1];
        else if (!strcmp(argv[i], "--control"))
            control = argv[i + 1];
        else if (!strcmp(argv[i], "--state-dir"))
            state = argv[i + 1];
    }
    const char *db = getenv("SLUICE_TEST_USAGE_DB");
    instance = getenv("SLUICE_TEST_INSTANCE");
    const char *nr = getenv("SLUICE_TEST_RECORDS");
    n_rec = nr ? atoi(nr) : 40;
    if (!project || !listen || !control || !state || !db || !instance || n_rec < 1 ||
        n_rec > MAX_RECORDS)
        return 2;
    char path[1024];
    snprintf(path, sizeof path, "%s/usage-events.log", state);
    logf_ = fopen(path, "a");
    if (!logf_)
        return 3;
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    note("start %s\n", pid);
    srand((unsigned)getpid());
    for (int i = 0; i < n_rec; i++)
        snprintf(ids[i], sizeof ids[i], "%08x-%04x-4000-8000-%012d", (unsigned)rand(),
                 (unsigned)rand() & 0xffff, i);
    base_ns = now_ns() - 3600000000000LL;

    void *ctx = zmq_ctx_new();
    sock = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_connect(sock, control) != 0)
        return 4;
    Sluice__Control__BackendHello h = SLUICE__CONTROL__BACKEND_HELLO__INIT;
    h.project_id = (char *)project;
    h.pid = (uint32_t)getpid();
    h.endpoint = (char *)listen;
    h.version = "usage-test";
    Sluice__Control__BackendReport r = SLUICE__CONTROL__BACKEND_REPORT__INIT;
    r.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_HELLO;
    r.hello = &h;
    send_report(&r);
    session(SLUICE__CONTROL__SESSION_EVENT__KIND__OPENED);
    refused_certificate();
    note("session opened%s\n", "");
    send_record(-1);

    int next = 0, done = 0, stop = 0;
    int64_t last_resend = mono_ms();
    while (!stop) {
        /* first delivery: a few per round, each fifth one twice at once */
        for (int k = 0; k < 4 && next < n_rec; k++, next++) {
            send_record(next);
            if (next % 5 == 0)
                send_record(next);
        }
        if (next >= n_rec && mono_ms() - last_resend >= 500) {
            for (int i = 0; i < n_rec; i++)
                if (!acked[i])
                    send_record(i);
            last_resend = mono_ms();
        }
        int all = 1;
        for (int i = 0; i < n_rec && all; i++)
            all = acked[i];
        if (all && !done) {
            session(SLUICE__CONTROL__SESSION_EVENT__KIND__CLOSED);
            /* its worker outlived the grace period (sluice_session_workers_killed_total) */
            session(SLUICE__CONTROL__SESSION_EVENT__KIND__WORKER_KILLED);
            note("done%s\n", "");
            done = 1;
        }
        zmq_pollitem_t pi = {sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&pi, 1, 50) <= 0)
            continue;
        static uint8_t buf[1 << 20];
        int n;
        while ((n = zmq_recv(sock, buf, sizeof buf, ZMQ_DONTWAIT)) >= 0) {
            Sluice__Control__BackendControl *m =
                sluice__control__backend_control__unpack(NULL, (size_t)n, buf);
            if (!m)
                continue;
            Sluice__Control__BackendReport a = SLUICE__CONTROL__BACKEND_REPORT__INIT;
            Sluice__Control__Ack ack = SLUICE__CONTROL__ACK__INIT;
            Sluice__Control__Pong pong = SLUICE__CONTROL__PONG__INIT;
            ack.control_seq = m->seq;
            ack.ok = 1;
            a.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_ACK;
            a.ack = &ack;
            switch (m->kind_case) {
            case SLUICE__CONTROL__BACKEND_CONTROL__KIND_USAGE_ACK:
                on_ack(db, m->usage_ack);
                break;
            case SLUICE__CONTROL__BACKEND_CONTROL__KIND_SHUTDOWN:
                note("shutdown%s\n", "");
                stop = 1;
                break;
            case SLUICE__CONTROL__BACKEND_CONTROL__KIND_PING:
                pong.nonce = m->ping->nonce;
                a.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_PONG;
                a.pong = &pong;
                break;
            default:
                break;
            }
            send_report(&a);
            sluice__control__backend_control__free_unpacked(m, NULL);
        }
    }
    zmq_close(sock);
    zmq_ctx_term(ctx);
    fclose(logf_);
    return 0;
}
