/* The backend's side of the agent's control channel when the agent gave it a key
 * (--control-key, backend/daemon/control.c): only keyed messages are obeyed, new sessions wait for
 * the agent's grant set, a grant set revokes what it leaves out, a disconnected agent holds new
 * sessions, a reconnected one hears the hello and the live sessions, and a backend without word
 * from its agent for the orphan grace ends itself. A real DEALER (be_control) and a ROUTER
 * standing in for the agent on an ipc:// socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/control.h"
#include "daemon/grants.h"
#include "sluice/log.h"

#define PROJ "3c9d2f7e8a1b4c6d9e0f1a2b3c4d5e6f"
#define A    "6f1e0c2a-1b7d-4c55-9a0e-3f2b8d7c1e42"
#define B    "6f1e0c2a-1b7d-4c55-9a0e-3f2b8d7c1e43"

static struct {
    char dir[64], keyfile[128], ep[160];
    uint8_t key[BE_CONTROL_KEY_LEN];
    void *zctx, *router;
    uint8_t rid[256];
    size_t rlen;
    uint64_t seq;
    char revoked[8][64];
    int n_revoked, shutdowns, reconnects;
    char shutdown_why[64];
} T;

static void on_revoke(void *user, const char *uuid, const char *reason)
{
    (void)user;
    (void)reason;
    snprintf(T.revoked[T.n_revoked++ % 8], sizeof T.revoked[0], "%s", uuid);
}

static void on_shutdown(void *user, const char *reason)
{
    (void)user;
    T.shutdowns++;
    snprintf(T.shutdown_why, sizeof T.shutdown_why, "%s", reason);
}

static void on_reconnected(void *user)
{
    (void)user;
    T.reconnects++;
}

static int64_t ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void router_open(void)
{
    T.router = zmq_socket(T.zctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(T.router, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_bind(T.router, T.ep), 0);
}

/* The next report from the backend (processing the backend meanwhile); NULL after wait_ms. */
static Sluice__Control__BackendReport *next_report(struct be_control *c, int wait_ms)
{
    int64_t until = ms() + wait_ms;
    while (ms() < until) {
        be_control_process(c);
        zmq_pollitem_t it = {T.router, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 20) <= 0)
            continue;
        int n = zmq_recv(T.router, T.rid, sizeof T.rid, 0);
        assert_true(n > 0);
        T.rlen = (size_t)n;
        uint8_t buf[65536];
        n = zmq_recv(T.router, buf, sizeof buf, 0);
        assert_true(n > 0);
        Sluice__Control__BackendReport *r =
            sluice__control__backend_report__unpack(NULL, (size_t)n, buf);
        assert_non_null(r);
        return r;
    }
    return NULL;
}

static Sluice__Control__BackendReport *report_of(struct be_control *c, int kind, int wait_ms)
{
    int64_t until = ms() + wait_ms;
    while (ms() < until) {
        Sluice__Control__BackendReport *r = next_report(c, (int)(until - ms()));
        if (!r)
            return NULL;
        if ((int)r->kind_case == kind)
            return r;
        sluice__control__backend_report__free_unpacked(r, NULL);
    }
    return NULL;
}

static void send_ctl(Sluice__Control__BackendControl *m, const uint8_t *key)
{
    m->seq = ++T.seq;
    if (key)
        m->agent_key = (ProtobufCBinaryData){BE_CONTROL_KEY_LEN, (uint8_t *)key};
    size_t n = sluice__control__backend_control__get_packed_size(m);
    uint8_t *buf = malloc(n);
    sluice__control__backend_control__pack(m, buf);
    assert_int_equal(zmq_send(T.router, T.rid, T.rlen, ZMQ_SNDMORE), (int)T.rlen);
    assert_int_equal(zmq_send(T.router, buf, n, 0), (int)n);
    free(buf);
}

static void grant_set(const char *const *uuids, size_t n, const uint8_t *key)
{
    Sluice__Control__Grant g[4], *gp[4];
    for (size_t i = 0; i < n; i++) {
        sluice__control__grant__init(&g[i]);
        g[i].instance_uuid = (char *)uuids[i];
        g[i].project_id = PROJ;
        gp[i] = &g[i];
    }
    Sluice__Control__GrantSet gs = SLUICE__CONTROL__GRANT_SET__INIT;
    gs.grants = gp;
    gs.n_grants = n;
    gs.reason = "test";
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT_SET;
    m.grant_set = &gs;
    send_ctl(&m, key);
}

/* 0 when a session of instance uuid would be admitted; else the reason in why. */
static int check(struct be_grants *g, const char *uuid, char *why, size_t n)
{
    sl_peer_identity id;
    memset(&id, 0, sizeof id);
    id.authenticated = 1;
    snprintf(id.instance_id, sizeof id.instance_id, "%s", uuid);
    snprintf(id.project_id, sizeof id.project_id, PROJ);
    return be_grants_check(g, PROJ, &id, why, n);
}

static void test_keyed_control(void **state)
{
    (void)state;
    snprintf(T.dir, sizeof T.dir, "/tmp/be-ctlkey-XXXXXX");
    assert_non_null(mkdtemp(T.dir));
    snprintf(T.keyfile, sizeof T.keyfile, "%s/control.key", T.dir);
    snprintf(T.ep, sizeof T.ep, "ipc://%s/control.sock", T.dir);
    FILE *f = fopen(T.keyfile, "w");
    assert_non_null(f);
    for (size_t i = 0; i < sizeof T.key; i++) {
        T.key[i] = (uint8_t)(0xa0 + i);
        fprintf(f, "%02x", T.key[i]);
    }
    fputc('\n', f);
    fclose(f);
    T.zctx = zmq_ctx_new();
    router_open();
    struct be_grants *g = be_grants_new();
    struct be_control_hooks h = {
        .revoke = on_revoke, .shutdown = on_shutdown, .reconnected = on_reconnected, .user = NULL};
    struct be_control *c = NULL;
    sl_error e;
    assert_int_equal(be_control_open(T.ep, PROJ, "tcp://127.0.0.1:47001", g, &h, &c, &e), SL_OK);
    /* a key file that is not 64 hex digits is refused */
    char bad[160];
    snprintf(bad, sizeof bad, "%s/bad.key", T.dir);
    f = fopen(bad, "w");
    fputs("not a key\n", f);
    fclose(f);
    assert_int_equal(be_control_require_key(c, bad, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "hex digits"));
    assert_int_equal(be_control_require_key(c, T.keyfile, &e), SL_OK);

    Sluice__Control__BackendReport *r =
        report_of(c, SLUICE__CONTROL__BACKEND_REPORT__KIND_HELLO, 5000);
    assert_non_null(r);
    sluice__control__backend_report__free_unpacked(r, NULL);
    char why[300];
    /* before the agent's grant set: new sessions are held */
    assert_int_equal(check(g, A, why, sizeof why), 1);
    assert_non_null(strstr(why, "not connected"));

    /* a grant set without the key (or with another key) is ignored: no ack, nothing granted */
    const char *a[] = {A};
    grant_set(a, 1, NULL);
    uint8_t other[BE_CONTROL_KEY_LEN];
    memcpy(other, T.key, sizeof other);
    other[5] ^= 1;
    grant_set(a, 1, other);
    assert_null(report_of(c, SLUICE__CONTROL__BACKEND_REPORT__KIND_ACK, 500));
    assert_int_equal(check(g, A, why, sizeof why), 1);

    /* the agent's grant set: A admitted */
    grant_set(a, 1, T.key);
    r = report_of(c, SLUICE__CONTROL__BACKEND_REPORT__KIND_ACK, 3000);
    assert_non_null(r);
    assert_true(r->ack->ok);
    sluice__control__backend_report__free_unpacked(r, NULL);
    assert_int_equal(check(g, A, why, sizeof why), 0);
    assert_int_equal(check(g, B, why, sizeof why), 1);

    /* a set without A revokes A (its sessions end: the hook) and admits B */
    const char *b[] = {B};
    grant_set(b, 1, T.key);
    r = report_of(c, SLUICE__CONTROL__BACKEND_REPORT__KIND_ACK, 3000);
    assert_non_null(r);
    sluice__control__backend_report__free_unpacked(r, NULL);
    assert_int_equal(T.n_revoked, 1);
    assert_string_equal(T.revoked[0], A);
    assert_int_equal(check(g, A, why, sizeof why), 1);
    assert_int_equal(check(g, B, why, sizeof why), 0);

    /* the agent goes away: new sessions are held at once */
    zmq_close(T.router);
    int64_t until = ms() + 3000;
    while (check(g, B, why, sizeof why) == 0 && ms() < until) {
        be_control_process(c);
        usleep(20000);
    }
    assert_int_equal(check(g, B, why, sizeof why), 1);
    assert_non_null(strstr(why, "not connected"));

    /* an agent comes back in time: hello and the live sessions again; B after its set */
    router_open();
    r = report_of(c, SLUICE__CONTROL__BACKEND_REPORT__KIND_HELLO, 5000);
    assert_non_null(r);
    sluice__control__backend_report__free_unpacked(r, NULL);
    assert_int_equal(T.reconnects, 1);
    assert_int_equal(check(g, B, why, sizeof why), 1);
    grant_set(b, 1, T.key);
    r = report_of(c, SLUICE__CONTROL__BACKEND_REPORT__KIND_ACK, 3000);
    assert_non_null(r);
    sluice__control__backend_report__free_unpacked(r, NULL);
    assert_int_equal(check(g, B, why, sizeof why), 0);
    assert_int_equal(T.shutdowns, 0);

    /* no word from the agent for the orphan grace: the backend ends itself, once */
    be_control_set_orphan_grace(c, 1500);
    int64_t t0 = ms();
    while (!T.shutdowns && ms() - t0 < 5000) {
        be_control_process(c);
        usleep(20000);
    }
    assert_int_equal(T.shutdowns, 1);
    assert_string_equal(T.shutdown_why, "no agent");
    assert_true(ms() - t0 >= 1000); /* the grant set just before was word from the agent */
    assert_int_equal(check(g, B, why, sizeof why), 1);
    for (int i = 0; i < 10; i++)
        be_control_process(c);
    assert_int_equal(T.shutdowns, 1);

    be_control_close(c);
    be_grants_free(g);
    zmq_close(T.router);
    zmq_ctx_term(T.zctx);
    unlink(T.keyfile);
    unlink(bad);
    char sock[200];
    snprintf(sock, sizeof sock, "%s/control.sock", T.dir);
    unlink(sock);
    rmdir(T.dir);
}

/* No agent to take them: past ZeroMQ's queue every report is refused (EAGAIN), and the log says so
 * once per BE_CONTROL_WARN_MS with a count, not once per refused send (14,454 lines in a minute
 * under load, issue 18); the usage records stay queued. */
static void test_refused_sends_warn_once(void **state)
{
    (void)state;
    char path[] = "/tmp/sluice-ctl-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *log = fdopen(fd, "w+");
    assert_non_null(log);
    sl_log_set_stream(log);
    char ep[96];
    snprintf(ep, sizeof ep, "ipc:///tmp/sluice-nobody-%d", (int)getpid());
    struct be_grants *g = be_grants_new();
    struct be_control_hooks h = {.user = NULL};
    struct be_control *c = NULL;
    sl_error e;
    assert_int_equal(be_control_open(ep, PROJ, "tcp://127.0.0.1:47002", g, &h, &c, &e), SL_OK);
    /* ZeroMQ queues 1000 messages for the agent that is not there, then refuses */
    for (int i = 0; i < 1500; i++) {
        char rec[8]; /* UsageRecord{record_id: "rNNNN"} */
        snprintf(rec, sizeof rec, "\n\005r%04d", i);
        be_control_usage(c, (const uint8_t *)rec, 7);
    }
    assert_int_equal(be_control_usage_waiting(c), 1500);
    be_control_close(c);
    be_grants_free(g);
    sl_log_set_stream(stderr);
    rewind(log);
    char line[512];
    int warnings = 0;
    while (fgets(line, sizeof line, log))
        warnings += strstr(line, "control: send:") != NULL;
    fclose(log);
    unlink(path);
    assert_int_equal(warnings, 1); /* the first refusal's; the next 500 within the interval: none */
}

/* Session events ZeroMQ refuses (no agent yet past its queue of 1000) are held and reach the
 * agent later, every one, in order; usage records were always queued, session events were lost. */
static void test_session_events_held(void **state)
{
    (void)state;
    snprintf(T.ep, sizeof T.ep, "ipc:///tmp/sluice-held-%d", (int)getpid());
    T.zctx = zmq_ctx_new();
    struct be_grants *g = be_grants_new();
    struct be_control_hooks h = {.user = NULL};
    struct be_control *c = NULL;
    sl_error e;
    assert_int_equal(be_control_open(T.ep, PROJ, "tcp://127.0.0.1:47003", g, &h, &c, &e), SL_OK);
    enum { N = 1500 };
    for (int i = 0; i < N; i++)
        be_control_session(c, SLUICE__CONTROL__SESSION_EVENT__KIND__OPENED, A, PROJ,
                           (uint64_t)i + 1, "");
    assert_true(be_control_events_held(c) >= N - 1000);
    router_open();
    uint64_t next = 1;
    Sluice__Control__BackendReport *r;
    while (next <= N && (r = report_of(c, SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION, 5000))) {
        assert_int_equal(r->session->session_id, next);
        next++;
        sluice__control__backend_report__free_unpacked(r, NULL);
    }
    assert_int_equal(next, N + 1);
    assert_int_equal(be_control_events_held(c), 0);
    be_control_close(c);
    be_grants_free(g);
    zmq_close(T.router);
    zmq_ctx_term(T.zctx);
    unlink(T.ep + strlen("ipc://"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_keyed_control),
                                       cmocka_unit_test(test_refused_sends_warn_once),
                                       cmocka_unit_test(test_session_events_held)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
