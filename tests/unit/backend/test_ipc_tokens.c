/* The backend parent's IPC token registry (backend/daemon/ipc_tokens.c): a token resolves to the
 * real handle only for a session of the exporter's instance and only as the kind registered; a
 * forged token, another instance's, or one whose exporter ended or dropped it resolves to
 * nothing; the bounds hold. The worker's side (backend/daemon/broker.c): a session thread's request
 * gets the parent's answer, and stops waiting when the parent is gone or silent. Shareable
 * handles: the registry owns the exporter's descriptor and closes it on every path; the
 * parent <-> worker records carry one descriptor with a message, and close one nobody takes
 * (backend/daemon/ipc.c). Descriptors are counted in /proc/self/fd. */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/broker.h"
#include "daemon/ipc.h"
#include "daemon/ipc_tokens.h"

#define INST_A "11111111-1111-1111-1111-111111111111"
#define INST_B "22222222-2222-2222-2222-222222222222"

static void real_of(uint8_t *r, uint8_t seed)
{
    for (int i = 0; i < BE_IPC_TOKEN_BYTES; i++)
        r[i] = (uint8_t)(seed + i);
}

static void same_instance_resolves_the_real_handle(void **state)
{
    (void)state;
    be_ipc_tokens *t = be_ipc_tokens_new();
    uint8_t real[BE_IPC_TOKEN_BYTES], tok[BE_IPC_TOKEN_BYTES], out[BE_IPC_TOKEN_BYTES];
    char why[256];
    real_of(real, 3);
    assert_int_equal(
        be_ipc_tokens_register(t, BE_TOKEN_MEM, real, sizeof real, INST_A, 7, tok, why, sizeof why),
        0);
    assert_memory_not_equal(tok, real, sizeof tok); /* the guest never sees the real handle */
    size_t len = 0;
    uint64_t exp = 0;
    assert_int_equal(
        be_ipc_tokens_resolve(t, BE_TOKEN_MEM, tok, INST_A, 8, out, &len, &exp, why, sizeof why),
        0);
    assert_memory_equal(out, real, sizeof real);
    assert_int_equal(len, sizeof real);
    assert_int_equal(exp, 7);
    be_ipc_tokens_free(t);
}

static void another_instance_forged_or_other_kind_is_refused(void **state)
{
    (void)state;
    be_ipc_tokens *t = be_ipc_tokens_new();
    uint8_t real[BE_IPC_TOKEN_BYTES], tok[BE_IPC_TOKEN_BYTES], out[BE_IPC_TOKEN_BYTES];
    char why[256];
    real_of(real, 9);
    assert_int_equal(be_ipc_tokens_register(t, BE_TOKEN_EVENT, real, sizeof real, INST_A, 1, tok,
                                            why, sizeof why),
                     0);
    size_t len = 0;
    uint64_t exp = 0;
    memset(out, 0xee, sizeof out);
    assert_int_equal(
        be_ipc_tokens_resolve(t, BE_TOKEN_EVENT, tok, INST_B, 2, out, &len, &exp, why, sizeof why),
        -1);
    assert_non_null(strstr(why, "another instance"));
    assert_int_equal(out[0], 0xee); /* nothing written */
    assert_int_equal(
        be_ipc_tokens_resolve(t, BE_TOKEN_MEM, tok, INST_A, 2, out, &len, &exp, why, sizeof why),
        -1);
    assert_non_null(strstr(why, "event handle"));
    uint8_t forged[BE_IPC_TOKEN_BYTES];
    memcpy(forged, tok, sizeof forged);
    forged[63] ^= 1;
    assert_int_equal(be_ipc_tokens_resolve(t, BE_TOKEN_EVENT, forged, INST_A, 2, out, &len, &exp,
                                           why, sizeof why),
                     -1);
    assert_non_null(strstr(why, "unknown token"));
    /* the real handle itself, replayed as a token, is no token */
    assert_int_equal(
        be_ipc_tokens_resolve(t, BE_TOKEN_EVENT, real, INST_A, 2, out, &len, &exp, why, sizeof why),
        -1);
    assert_int_equal(out[0], 0xee);
    be_ipc_tokens_free(t);
}

static void tokens_die_with_their_exporter(void **state)
{
    (void)state;
    be_ipc_tokens *t = be_ipc_tokens_new();
    uint8_t real[BE_IPC_TOKEN_BYTES], a[BE_IPC_TOKEN_BYTES], b[BE_IPC_TOKEN_BYTES],
        c[BE_IPC_TOKEN_BYTES], out[BE_IPC_TOKEN_BYTES];
    char why[256];
    real_of(real, 1);
    assert_int_equal(
        be_ipc_tokens_register(t, BE_TOKEN_MEM, real, 16, INST_A, 5, a, why, sizeof why), 0);
    assert_int_equal(
        be_ipc_tokens_register(t, BE_TOKEN_POOL_PTR, real, 4, INST_A, 5, b, why, sizeof why), 0);
    assert_int_equal(
        be_ipc_tokens_register(t, BE_TOKEN_MEM, real, 16, INST_A, 6, c, why, sizeof why), 0);
    assert_memory_not_equal(a, c, sizeof a);
    size_t len = 0;
    uint64_t exp = 0;
    /* a short handle (a POSIX fd's number is 4 bytes) comes back zero-padded */
    assert_int_equal(
        be_ipc_tokens_resolve(t, BE_TOKEN_POOL_PTR, b, INST_A, 6, out, &len, &exp, why, sizeof why),
        0);
    assert_int_equal(len, 4);
    assert_int_equal(out[4], 0);
    /* only the exporter drops its token */
    assert_int_equal(be_ipc_tokens_drop(t, a, 6), -1);
    assert_int_equal(be_ipc_tokens_drop(t, a, 5), 0);
    assert_int_equal(
        be_ipc_tokens_resolve(t, BE_TOKEN_MEM, a, INST_A, 6, out, &len, &exp, why, sizeof why), -1);
    assert_int_equal(be_ipc_tokens_drop_session(t, 5), 1);
    assert_int_equal(
        be_ipc_tokens_resolve(t, BE_TOKEN_POOL_PTR, b, INST_A, 6, out, &len, &exp, why, sizeof why),
        -1);
    assert_non_null(strstr(why, "exporter ended"));
    assert_int_equal(be_ipc_tokens_count(t), 1); /* session 6's is still there */
    assert_int_equal(
        be_ipc_tokens_resolve(t, BE_TOKEN_MEM, c, INST_A, 5, out, &len, &exp, why, sizeof why), 0);
    be_ipc_tokens_free(t);
}

static void bounds_and_bad_arguments(void **state)
{
    (void)state;
    be_ipc_tokens *t = be_ipc_tokens_new();
    uint8_t real[BE_IPC_TOKEN_BYTES + 1], tok[BE_IPC_TOKEN_BYTES];
    char why[256];
    real_of(real, 2);
    assert_int_equal(be_ipc_tokens_register(t, BE_TOKEN_MEM, real, BE_IPC_TOKEN_BYTES + 1, INST_A,
                                            1, tok, why, sizeof why),
                     -1);
    assert_int_equal(
        be_ipc_tokens_register(t, BE_TOKEN_MEM, real, 0, INST_A, 1, tok, why, sizeof why), -1);
    assert_int_equal(be_ipc_tokens_register(t, (enum be_ipc_token_kind)99, real, 8, INST_A, 1, tok,
                                            why, sizeof why),
                     -1);
    assert_int_equal(be_ipc_tokens_register(t, BE_TOKEN_MEM, real, 8, "", 1, tok, why, sizeof why),
                     -1);
    uint8_t first[BE_IPC_TOKEN_BYTES], again[BE_IPC_TOKEN_BYTES];
    for (int i = 0; i < BE_IPC_TOKENS_PER_SESSION; i++) {
        memcpy(real, &i, sizeof i); /* another handle each time */
        assert_int_equal(
            be_ipc_tokens_register(t, BE_TOKEN_MEM, real, 8, INST_A, 1, tok, why, sizeof why), 0);
        if (i == 0)
            memcpy(first, tok, sizeof tok);
    }
    /* the same handle again is the same token, and costs nothing */
    int zero = 0;
    memcpy(real, &zero, sizeof zero);
    assert_int_equal(
        be_ipc_tokens_register(t, BE_TOKEN_MEM, real, 8, INST_A, 1, again, why, sizeof why), 0);
    assert_memory_equal(first, again, sizeof first);
    assert_int_equal(be_ipc_tokens_count(t), BE_IPC_TOKENS_PER_SESSION);
    int past = BE_IPC_TOKENS_PER_SESSION;
    memcpy(real, &past, sizeof past);
    assert_int_equal(
        be_ipc_tokens_register(t, BE_TOKEN_MEM, real, 8, INST_A, 1, tok, why, sizeof why), -1);
    assert_non_null(strstr(why, "session's IPC handle limit"));
    /* another session still may */
    assert_int_equal(
        be_ipc_tokens_register(t, BE_TOKEN_MEM, real, 8, INST_A, 2, tok, why, sizeof why), 0);
    assert_int_equal(be_ipc_tokens_drop_session(t, 1), BE_IPC_TOKENS_PER_SESSION);
    assert_int_equal(be_ipc_tokens_count(t), 1);
    be_ipc_tokens_free(t);
}

/* The parent's record from a worker: register, then resolve from another session, wrong sizes and
 * unknown ops refused; the instance is the parent's, never the request's. */
static void serve_requests(void **state)
{
    (void)state;
    be_ipc_tokens *t = be_ipc_tokens_new();
    struct be_ipc_token_req r = {.op = BE_TOKEN_OP_REGISTER, .kind = BE_TOKEN_MEM, .len = 64};
    struct be_ipc_token_ans a, b;
    real_of(r.real, 5);
    be_ipc_tokens_serve(t, INST_A, 1, &r, sizeof r, &a);
    assert_int_equal(a.result, 0);
    struct be_ipc_token_req q = {.op = BE_TOKEN_OP_RESOLVE, .kind = BE_TOKEN_MEM};
    memcpy(q.token, a.token, sizeof q.token);
    be_ipc_tokens_serve(t, INST_A, 2, &q, sizeof q, &b);
    assert_int_equal(b.result, 0);
    assert_int_equal(b.len, 64);
    assert_int_equal(b.exporter, 1);
    assert_memory_equal(b.real, r.real, 64);
    be_ipc_tokens_serve(t, INST_B, 3, &q, sizeof q, &b);
    assert_int_equal(b.result, -1);
    assert_non_null(strstr(b.why, "another instance"));
    be_ipc_tokens_serve(t, INST_A, 2, &q, sizeof q - 1, &b);
    assert_int_equal(b.result, -1);
    assert_non_null(strstr(b.why, "expected"));
    q.op = 77;
    be_ipc_tokens_serve(t, INST_A, 2, &q, sizeof q, &b);
    assert_int_equal(b.result, -1);
    assert_non_null(strstr(b.why, "unknown op"));
    q.op = BE_TOKEN_OP_DROP; /* only the exporter drops */
    be_ipc_tokens_serve(t, INST_A, 2, &q, sizeof q, &b);
    assert_int_equal(b.result, -1);
    be_ipc_tokens_serve(t, INST_A, 1, &q, sizeof q, &b);
    assert_int_equal(b.result, 0);
    assert_int_equal(be_ipc_tokens_count(t), 0);
    be_ipc_tokens_free(t);
}

/* The parent and the worker's main thread, played by one thread: what the session thread sent is
 * served against the registry and answered (or, with drop_requests, never answered). */
static be_ipc_tokens *p_tokens;
static be_broker *p_broker;
static int drop_requests;
static int p_failed; /* cmocka asserts only on the test's own thread */
static struct be_ipc_token_req p_req;
static int p_pending;
static pthread_mutex_t p_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t p_cv = PTHREAD_COND_INITIALIZER;

static int parent_send(const void *msg, size_t len, int fd)
{
    (void)fd;
    if (len != sizeof p_req)
        return -1;
    pthread_mutex_lock(&p_mu);
    memcpy(&p_req, msg, len);
    p_pending = !drop_requests;
    pthread_cond_signal(&p_cv);
    pthread_mutex_unlock(&p_mu);
    return 0;
}

static void *parent_thread(void *arg)
{
    (void)arg;
    for (int served = 0; served < 2; served++) {
        pthread_mutex_lock(&p_mu);
        while (!p_pending)
            pthread_cond_wait(&p_cv, &p_mu);
        p_pending = 0;
        struct be_ipc_token_req r = p_req;
        pthread_mutex_unlock(&p_mu);
        struct be_ipc_token_ans a;
        be_ipc_tokens_serve(p_tokens, INST_A, (uint64_t)(served + 1), &r, sizeof r, &a);
        if (be_broker_answer(p_broker, &a, sizeof a, -1) != 0)
            p_failed = 1;
    }
    return NULL;
}

static void broker_asks_and_gets_the_answer(void **state)
{
    (void)state;
    p_tokens = be_ipc_tokens_new();
    p_broker = be_broker_new(parent_send);
    drop_requests = 0;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, parent_thread, NULL), 0);
    struct be_ipc_token_req r = {.op = BE_TOKEN_OP_REGISTER, .kind = BE_TOKEN_EVENT, .len = 64};
    real_of(r.real, 11);
    struct be_ipc_token_ans a, b;
    assert_int_equal(be_broker_ask(p_broker, &r, &a, 5000), 0);
    assert_int_equal(a.result, 0);
    struct be_ipc_token_req q = {.op = BE_TOKEN_OP_RESOLVE, .kind = BE_TOKEN_MEM};
    memcpy(q.token, a.token, sizeof q.token);
    assert_int_equal(be_broker_ask(p_broker, &q, &b, 5000), 0);
    assert_int_equal(b.result, -1); /* the parent's refusal comes back: an event token */
    assert_non_null(strstr(b.why, "event handle"));
    pthread_join(th, NULL);
    assert_int_equal(p_failed, 0);
    /* an answer nobody asked for, or of the wrong size, is the parent's protocol violation */
    assert_int_equal(be_broker_answer(p_broker, &a, sizeof a, -1), -1);
    assert_int_equal(be_broker_answer(p_broker, &a, sizeof a - 1, -1), -1);
    be_broker_gone(p_broker);
    assert_int_equal(be_broker_ask(p_broker, &q, &b, 5000), -1);
    assert_non_null(strstr(b.why, "gone"));
    be_broker_free(p_broker);
    be_ipc_tokens_free(p_tokens);
}

static void broker_stops_waiting_for_a_silent_parent(void **state)
{
    (void)state;
    p_broker = be_broker_new(parent_send);
    drop_requests = 1;
    struct be_ipc_token_req q = {.op = BE_TOKEN_OP_RESOLVE, .kind = BE_TOKEN_MEM};
    struct be_ipc_token_ans b;
    assert_int_equal(be_broker_ask(p_broker, &q, &b, 50), -1);
    assert_non_null(strstr(b.why, "no answer"));
    /* a late answer must not pair with a later request: none is sent any more */
    struct be_ipc_token_ans late = {0};
    assert_int_equal(be_broker_answer(p_broker, &late, sizeof late, -1), -1);
    assert_int_equal(be_broker_ask(p_broker, &q, &b, 50), -1);
    be_broker_free(p_broker);
    drop_requests = 0;
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

static ino_t ino(int fd)
{
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    return st.st_ino;
}

static void registry_owns_descriptors(void **state)
{
    (void)state;
    int before = open_fds();
    be_ipc_tokens *t = be_ipc_tokens_new();
    uint8_t real[16] = {1, 2, 3}, tok[BE_IPC_TOKEN_BYTES], again[BE_IPC_TOKEN_BYTES];
    uint8_t out[BE_IPC_TOKEN_BYTES];
    char why[256];
    int fd = memfd_create("pool", 0);
    ino_t want = ino(fd);
    assert_int_equal(be_ipc_tokens_register_fd(t, BE_TOKEN_POOL, real, sizeof real, fd, INST_A, 7,
                                               tok, why, sizeof why),
                     0);
    assert_int_equal(be_ipc_tokens_fds(t), 1);
    /* the same pool again: the same token, the new descriptor closed */
    assert_int_equal(be_ipc_tokens_register_fd(t, BE_TOKEN_POOL, real, sizeof real,
                                               memfd_create("pool2", 0), INST_A, 7, again, why,
                                               sizeof why),
                     0);
    assert_memory_equal(tok, again, sizeof tok);
    assert_int_equal(be_ipc_tokens_fds(t), 1);
    /* a kind with a descriptor needs one, a kind without takes none: refused, closed */
    assert_int_equal(be_ipc_tokens_register_fd(t, BE_TOKEN_ALLOC, real, sizeof real, -1, INST_A, 7,
                                               again, why, sizeof why),
                     -1);
    assert_int_equal(be_ipc_tokens_register_fd(t, BE_TOKEN_MEM, real, sizeof real,
                                               memfd_create("x", 0), INST_A, 7, again, why,
                                               sizeof why),
                     -1);
    /* resolved for the same instance: a copy of the descriptor, of the same file */
    struct be_ipc_token_req q = {.op = BE_TOKEN_OP_RESOLVE, .kind = BE_TOKEN_POOL};
    memcpy(q.token, tok, sizeof q.token);
    struct be_ipc_token_ans a;
    int got = -1;
    /* a descriptor that comes with a resolution is closed */
    be_ipc_tokens_serve_fd(t, INST_A, 8, &q, sizeof q, memfd_create("stray", 0), &a, &got);
    assert_int_equal(a.result, 0);
    assert_true(got >= 0);
    assert_int_equal(ino(got), want);
    close(got);
    /* another instance: nothing */
    be_ipc_tokens_serve_fd(t, INST_B, 9, &q, sizeof q, -1, &a, &got);
    assert_int_equal(a.result, -1);
    assert_int_equal(got, -1);
    /* a bad request's descriptor is closed too */
    be_ipc_tokens_serve_fd(t, INST_A, 8, &q, sizeof q - 1, memfd_create("stray", 0), &a, &got);
    assert_int_equal(a.result, -1);
    /* the exporter released it: forgotten, closed */
    size_t n = 0;
    uint64_t exp = 0;
    int held = -1;
    assert_int_equal(be_ipc_tokens_forget(t, BE_TOKEN_POOL, real, sizeof real, 8), -1);
    assert_int_equal(be_ipc_tokens_forget(t, BE_TOKEN_POOL, real, sizeof real, 7), 0);
    assert_int_equal(be_ipc_tokens_resolve_fd(t, BE_TOKEN_POOL, tok, INST_A, 8, out, &n, &exp,
                                              &held, why, sizeof why),
                     -1);
    /* bounds: descriptors per session */
    for (int i = 0; i < BE_IPC_TOKEN_FDS_PER_SESSION; i++) {
        real[0] = (uint8_t)i;
        real[1] = 0xee;
        assert_int_equal(be_ipc_tokens_register_fd(t, BE_TOKEN_ALLOC, real, sizeof real,
                                                   memfd_create("a", 0), INST_A, 7, tok, why,
                                                   sizeof why),
                         0);
    }
    real[1] = 0xef;
    assert_int_equal(be_ipc_tokens_register_fd(t, BE_TOKEN_ALLOC, real, sizeof real,
                                               memfd_create("a", 0), INST_A, 7, tok, why,
                                               sizeof why),
                     -1);
    assert_non_null(strstr(why, "shareable handle limit"));
    assert_int_equal(open_fds(), before + BE_IPC_TOKEN_FDS_PER_SESSION);
    /* the exporter ended: every descriptor closed */
    assert_int_equal(be_ipc_tokens_drop_session(t, 7), BE_IPC_TOKEN_FDS_PER_SESSION);
    assert_int_equal(be_ipc_tokens_fds(t), 0);
    assert_int_equal(open_fds(), before);
    /* the registry's end closes what it holds */
    assert_int_equal(be_ipc_tokens_register_fd(t, BE_TOKEN_POOL, real, sizeof real,
                                               memfd_create("p", 0), INST_A, 7, tok, why,
                                               sizeof why),
                     0);
    be_ipc_tokens_free(t);
    assert_int_equal(open_fds(), before);
}

static void records_carry_one_descriptor(void **state)
{
    (void)state;
    int before = open_fds();
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    int fd = memfd_create("share", 0);
    struct be_ipc_token_req r = {.op = BE_TOKEN_OP_REGISTER, .kind = BE_TOKEN_POOL, .len = 16};
    assert_int_equal(be_ipc_send_fd(sv[0], BE_IPC_TOKEN, &r, sizeof r, fd), 0);
    assert_int_equal(be_ipc_send_fd(sv[0], BE_IPC_TOKEN, &r, sizeof r, -1), 0);
    assert_int_equal(be_ipc_send_fd(sv[0], BE_IPC_MSG, "x", 1, fd), 0); /* nobody takes it */
    struct be_ipc_rx rx = {0};
    assert_int_equal(be_ipc_read(sv[1], &rx, 0), 1);
    assert_int_equal(rx.hdr.type, BE_IPC_TOKEN);
    assert_int_equal(rx.hdr.msg_len, sizeof r);
    int got = be_ipc_rx_take_fd(&rx);
    assert_true(got >= 0 && got != fd);
    assert_int_equal(ino(got), ino(fd));
    assert_int_equal(be_ipc_rx_take_fd(&rx), -1);
    close(got);
    be_ipc_rx_next(&rx);
    assert_int_equal(be_ipc_read(sv[1], &rx, 0), 1);
    assert_int_equal(be_ipc_rx_take_fd(&rx), -1); /* none came with it */
    be_ipc_rx_next(&rx);
    assert_int_equal(be_ipc_read(sv[1], &rx, 0), 1);
    assert_int_equal(rx.hdr.type, BE_IPC_MSG);
    be_ipc_rx_next(&rx); /* closes the descriptor nobody took */
    assert_int_equal(open_fds(), before + 3);
    /* two descriptors with one record: malformed, both closed */
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(2 * sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct be_ipc_hdr h = {BE_IPC_TOKEN, 0, 0, 0};
    struct iovec iov = {&h, sizeof h};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(2 * sizeof(int));
    int two[2] = {fd, fd};
    memcpy(CMSG_DATA(c), two, sizeof two);
    assert_int_equal(sendmsg(sv[0], &mh, 0), (ssize_t)sizeof h);
    assert_int_equal(be_ipc_read(sv[1], &rx, 0), -1);
    be_ipc_rx_free(&rx);
    assert_int_equal(open_fds(), before + 3);
    close(fd);
    close(sv[0]);
    close(sv[1]);
    assert_int_equal(open_fds(), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_instance_resolves_the_real_handle),
        cmocka_unit_test(another_instance_forged_or_other_kind_is_refused),
        cmocka_unit_test(tokens_die_with_their_exporter),
        cmocka_unit_test(bounds_and_bad_arguments),
        cmocka_unit_test(serve_requests),
        cmocka_unit_test(broker_asks_and_gets_the_answer),
        cmocka_unit_test(broker_stops_waiting_for_a_silent_parent),
        cmocka_unit_test(registry_owns_descriptors),
        cmocka_unit_test(records_carry_one_descriptor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
