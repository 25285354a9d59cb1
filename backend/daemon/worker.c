/* Session worker processes. The parent (loop.c) never loads the driver: a sticky error such as
 * CUDA_ERROR_ILLEGAL_ADDRESS poisons the whole process on the real driver, so every session runs
 * in a process of its own: `sluice-backend --session-worker FD ...` (the same binary, exec'd by
 * the parent after fork, workers.c; the hidden mode loads the driver (driver.c), answers
 * SessionOpen with the device facts and runs the session code of session/session.c).
 * `--probe-driver PATH` checks the driver once at start, in a short-lived child, with the same
 * code (driver.c).
 *
 * Parent <-> worker: a SOCK_SEQPACKET socketpair carrying a byte stream of messages
 * (be_ipc_hdr, then msg_len bytes, then bulk_len bytes), cut into records of at most 64 KiB.
 * Parent -> worker: BE_IPC_MSG, the ClientMessage bytes the parent decoded and checked (CallFrame
 * or CallbackDone) and the calls' bulk, each call's at a 16-byte aligned offset; the worker
 * decodes and checks them again. Worker ->
 * parent: BE_IPC_SEND (an encoded ServerMessage and its bulk, for the guest), BE_IPC_CLOSE
 * (end the session: code, reason) and BE_IPC_USAGE (an encoded UsageRecord, accounting.c).
 * Both ways: BE_IPC_TOKEN, a session thread's IPC token request and the parent's answer
 * (broker.c, ipc_tokens.c). EOF
 * on the socket ends the worker (the parent shut its side down: the worker sends its final
 * usage record, frees everything and exits) or tells the parent that the worker is gone. The
 * worker also maps the tenant's accounting page (`--acct-fd`, quota.c). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/worker.h"
#include "accounting/quota.h"
#include "accounting/records.h"
#include "api/callback.h"
#include "bounds.h"
#include "daemon/accept.h"
#include "daemon/broker.h"
#include "daemon/config.h"
#include "daemon/direct.h"
#include "daemon/driver.h"
#include "daemon/ipc.h"
#include "daemon/lanes.h"
#include "daemon/outbox.h"
#include "session/bulk_pool.h"
#include "session/image_cache.h"
#include "session/image_store.h"
#include "session/printf.h"
#include "session/session.h"
#include "session/image_writer.h"
#include "session/spin.h"
#include "sluice/log.h"
#include "sluice/relax.h"

static int w_fd = -1;
static pthread_mutex_t w_mu = PTHREAD_MUTEX_INITIALIZER;
static struct be_direct *w_direct;      /* the direct endpoint (direct.c), NULL: none */
static struct be_direct *w_direct_left; /* one left open for the process's exit (w_run_direct) */
static be_broker *w_broker;             /* the IPC token broker's worker side (broker.c) */
static struct be_lanes *w_lanes;        /* the bulk lanes (lanes.c), NULL: none */
static struct be_acct_shm *w_shm;       /* the tenant's accounting page, NULL: none */
static int w_acct_slot;                 /* this worker's slot in it */

static int w_token_send(const void *msg, size_t len, int fd)
{
    pthread_mutex_lock(&w_mu);
    int rc = be_ipc_send_fd(w_fd, BE_IPC_TOKEN, msg, len, fd);
    pthread_mutex_unlock(&w_mu);
    return rc;
}

/* Replies go to the direct channel once the guest opened it, else to the parent; the end of
 * the session always goes to the parent (it ends the session and tells the worker). */
static void w_sink(int close_it, sl_code code, const char *why, uint8_t *msg, size_t len,
                   uint8_t *bulk, size_t blen)
{
    pthread_mutex_lock(&w_mu); /* w_direct goes (w_run_direct) only under it */
    if (!close_it && w_direct && be_direct_attached(w_direct)) {
        be_direct_push(w_direct, msg, len, bulk, blen);
        pthread_mutex_unlock(&w_mu);
        return;
    }
    if (close_it)
        be_ipc_send_blocking(w_fd, BE_IPC_CLOSE, (int32_t)code, why, strlen(why), NULL, 0);
    else
        be_ipc_send_blocking(w_fd, BE_IPC_SEND, 0, msg, len, bulk, blen);
    pthread_mutex_unlock(&w_mu);
    free(msg);
    be_bulk_free(bulk);
}

/* The staging slots' page-locked bytes come from the backend's budget (bulk_pool.c). */
static int w_pin(void *u, int64_t bytes)
{
    (void)u;
    return be_acct_pin(w_shm, w_acct_slot, bytes);
}

static void w_close(sl_code code, const char *why)
{
    w_sink(1, code, why, NULL, 0, NULL, 0);
}

static void w_usage(void *user, const uint8_t *rec, size_t len)
{
    (void)user;
    pthread_mutex_lock(&w_mu);
    be_ipc_send_blocking(w_fd, BE_IPC_USAGE, 0, rec, len, NULL, 0);
    pthread_mutex_unlock(&w_mu);
}

/* be_ipc_read that polls for spin_ns before it blocks (spin.c). */
static int read_spinning(int fd, struct be_ipc_rx *rx, uint64_t spin_ns)
{
    if (spin_ns) {
        uint64_t end = be_now_ns() + spin_ns;
        do {
            int r = be_ipc_read(fd, rx, 1);
            if (r != 2)
                return r;
            sl_cpu_relax();
        } while (be_now_ns() < end);
    }
    return be_ipc_read(fd, rx, 0);
}

/* One decoded ClientMessage (a CallFrame, queued, or a CallbackDone) with the calls' bulk, each
 * call's at a BE_IPC_ALIGN offset of blob; takes m and blob. 0 = go on. */
static int w_frame(sl_be_session *s, Sluice__Wire__ClientMessage *m, uint8_t *blob,
                   uint64_t blob_len)
{
    sl_error e;
    if (m->kind_case == SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLBACK_DONE) {
        if (m->callback_done)
            be_callback_done(s, m->callback_done->id);
        sl_wire_free_client(m);
        be_bulk_free(blob);
        return 0;
    }
    if (m->kind_case != SLUICE__WIRE__CLIENT_MESSAGE__KIND_CALLS) {
        sl_wire_free_client(m);
        be_bulk_free(blob);
        w_close(SL_ERR_PROTOCOL, "unexpected message for the session worker");
        return -1;
    }
    const Sluice__Wire__CallFrame *f = m->calls;
    struct be_job *job = calloc(1, sizeof *job);
    if (job)
        job->bulk = calloc(f->n_calls ? f->n_calls : 1, sizeof *job->bulk);
    if (!job || !job->bulk) {
        free(job);
        sl_wire_free_client(m);
        be_bulk_free(blob);
        w_close(SL_ERR_NOMEM, "out of memory");
        return -1;
    }
    job->msg = m;
    job->lanes = w_lanes ? be_lanes_in(w_lanes) : NULL; /* a call's pieces (session.c waits) */
    job->blob = blob;            /* the calls' bulk, back to back: job->bulk[i] point into it */
    uint64_t off = 0, bytes = 0; /* each call's bulk at a BE_IPC_ALIGN offset (workers.c) */
    for (size_t i = 0; i < f->n_calls; i++) {
        uint64_t len = f->calls[i]->bulk_length;
        if (!len)
            continue;
        uint64_t at = BE_IPC_ALIGN(off);
        if (len > BE_MAX_BULK_PER_CALL || at > blob_len || len > blob_len - at) {
            be_job_free(job);
            w_close(SL_ERR_PROTOCOL, "the calls' bulk lengths do not add up");
            return -1;
        }
        job->bulk[i] = job->blob + at;
        off = at + len;
        bytes += len;
    }
    if (off != blob_len) {
        be_job_free(job);
        w_close(SL_ERR_PROTOCOL, "the calls' bulk lengths do not add up");
        return -1;
    }
    job->bytes = bytes;
    if (be_session_enqueue(s, job, &e) != SL_OK) {
        be_job_free(job);
        w_close(e.code, e.msg);
        return -1;
    }
    return 0;
}

/* The parent's answer to an IPC token request (broker.c). 0 = go on. */
static int w_token_answer(struct be_ipc_rx *rx)
{
    if (be_broker_answer(w_broker, rx->msg, (size_t)rx->hdr.msg_len, be_ipc_rx_take_fd(rx)) == 0)
        return 0;
    w_close(SL_ERR_PROTOCOL, "an IPC token answer from the parent that nobody asked for");
    return -1;
}

/* One BE_IPC_MSG from the parent; takes rx's buffers. 0 = go on. */
static int w_message(sl_be_session *s, struct be_ipc_rx *rx)
{
    Sluice__Wire__ClientMessage *m = NULL;
    sl_error e;
    if (sl_wire_decode_client(rx->msg, rx->hdr.msg_len, NULL, &m, &e) != SL_OK) {
        w_close(SL_ERR_PROTOCOL, e.msg);
        return -1;
    }
    uint8_t *blob = rx->bulk;
    rx->bulk = NULL;
    return w_frame(s, m, blob, rx->hdr.bulk_len);
}

static int w_direct_frame(void *user, Sluice__Wire__ClientMessage *m, uint8_t *blob,
                          uint64_t blob_len)
{
    return w_frame(user, m, blob, blob_len);
}

/* A call's bulk comes on the lanes: its place in the frame's blob is where they put it. */
static int w_direct_lanes(void *user, uint64_t seq, uint8_t *dst, uint64_t n, uint32_t k, char *why,
                          size_t why_len)
{
    (void)user;
    sl_error e;
    if (sl_lane_asm_expect(be_lanes_in(w_lanes), seq, dst, n, k, &e) == SL_OK)
        return 0;
    snprintf(why, why_len, "%s", e.msg);
    return -1;
}

/* A host-to-device frame's bulk lands in a slot of the session's page-locked pool when one is
 * free (session/bulk_pool.c). */
static uint8_t *w_direct_staged(void *user, uint64_t len)
{
    sl_be_session *s = user;
    return be_pool_take(s->pool, (size_t)len);
}

/* The images the session sent are in the tenant's store before the process ends (a later
 * session then need not send them again). */
static void settle_images(void)
{
    if (!be_image_store_settle(BE_IMAGE_SETTLE_MS))
        sl_log(SL_LOG_INFO, BE_COMPONENT,
               "image store: images still being written after %u ms are left for a later "
               "session to send",
               BE_IMAGE_SETTLE_MS);
}

/* The guest's direct channel ended: the parent ends the session (it tells the agent, closes the
 * guest's channel with it) and then this worker. */
static void w_direct_ended(void *user, sl_code code, const char *why)
{
    (void)user;
    w_close(code, why);
}

/* The worker's loop with a direct endpoint: the parent's socket (its messages while the guest
 * uses the backend's channel, the end of the session), the direct channel and the replies
 * waiting for it. 1 when the session ended (EOF from the parent), 0 when the worker stopped it. */
static int w_run_direct(int fd, sl_be_session *s)
{
    int gone = 0;
    struct be_direct_hooks h = {.frame = w_direct_frame,
                                .ended = w_direct_ended,
                                .lanes = w_lanes ? w_direct_lanes : NULL,
                                .staged = w_direct_staged,
                                .user = s};
    struct be_ipc_rx rx = {0};
    int fds[2];
    be_direct_fds(w_direct, fds);
    sl_code code = SL_ERR_CLOSED;
    char why[256] = "the backend ended the session";
    uint64_t active_at = 0;
    for (int stop = 0; !stop;) {
        uint64_t now = be_now_ns();
        int spinning = s->spin_ns && now - active_at < s->spin_ns;
        zmq_pollitem_t it[3] = {{NULL, fd, ZMQ_POLLIN, 0},
                                {NULL, fds[0], ZMQ_POLLIN, 0},
                                {NULL, fds[1], ZMQ_POLLIN, 0}};
        int np = zmq_poll(it, 3, spinning ? 0 : be_direct_wait_ms(w_direct, 100));
        int busy = np > 0;
        for (;;) {
            int r = be_ipc_read(fd, &rx, 1);
            if (r == 2)
                break;
            busy = 1;
            if (r == -1) {
                w_close(SL_ERR_PROTOCOL, "malformed message from the parent");
                stop = 1;
                break;
            }
            if (r != 1) {
                stop = gone = 1; /* EOF: the session ended */
                break;
            }
            if (rx.hdr.type == BE_IPC_TOKEN) {
                stop = w_token_answer(&rx) != 0;
            } else if (rx.hdr.type == BE_IPC_CLOSE) { /* the parent ends the session: why */
                code = rx.hdr.code > 0 ? (sl_code)rx.hdr.code : SL_ERR_CLOSED;
                snprintf(why, sizeof why, "%s", (const char *)rx.msg);
            } else if (rx.hdr.type != BE_IPC_MSG ||
                       (be_direct_attached(w_direct) && !be_direct_let_go_unused(w_direct))) {
                code = SL_ERR_PROTOCOL;
                snprintf(why, sizeof why, "%s",
                         "calls on the backend's channel while the session's direct channel is "
                         "open");
                w_close(code, why);
                stop = 1;
            } else {
                be_direct_shut(w_direct); /* the guest took the backend's channel */
                stop = w_message(s, &rx) != 0;
            }
            be_ipc_rx_next(&rx);
            if (stop)
                break;
        }
        if (!stop)
            busy |= be_direct_turn(w_direct, &h);
        if (busy)
            active_at = be_now_ns();
        else if (spinning)
            sl_cpu_relax();
    }
    be_ipc_rx_free(&rx);
    pthread_mutex_lock(&w_mu);
    struct be_direct *d = w_direct;
    w_direct = NULL; /* replies from here on go to the parent, which drops them */
    pthread_mutex_unlock(&w_mu);
    if (gone && code == SL_ERR_PEER_LOST) {
        /* The backend lost the guest (killed, its VM gone) and this process exits next
         * (be_worker_main): no CLOSE can reach the guest, and closing the endpoint would only
         * delay the exit by the CLOSE's linger (up to 500 ms) and ZeroMQ's context teardown
         * (its threads' hand-offs: 0.1-0.4 s each on a loaded host, e2e.teardown). */
        w_direct_left = d;
        return gone;
    }
    be_direct_close(d, code, why);
    return gone;
}

/* Serves the session's calls as the parent forwards them (no direct channel); 1 when the session
 * ended (EOF from the parent), 0 when the worker stopped it. */
static int w_run_parent(int fd, sl_be_session *s)
{
    struct be_ipc_rx rx = {0};
    int gone = 0;
    for (;;) {
        int r = read_spinning(fd, &rx, s->spin_ns);
        if (r == -1) {
            w_close(SL_ERR_PROTOCOL, "malformed message from the parent");
            break;
        }
        if (r != 1) { /* EOF: the session ended */
            gone = 1;
            break;
        }
        int stop = rx.hdr.type == BE_IPC_TOKEN ? w_token_answer(&rx) != 0
                   : rx.hdr.type != BE_IPC_MSG ? 1
                                               : w_message(s, &rx) != 0;
        be_ipc_rx_next(&rx);
        if (stop)
            break;
    }
    be_ipc_rx_free(&rx);
    return gone;
}

int be_worker_main(int fd, const char *driver, uint64_t sid, const char *instance,
                   const char *project, const struct be_worker_opts *o)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the parent */
    prctl(PR_SET_NAME, "sl-worker");  /* not "exe" (/proc/self/exe) in ps, top and logs */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, SIG_IGN); /* the parent ends us by closing the socket (then SIGKILL) */
    signal(SIGHUP, SIG_IGN);  /* a certificate reload is the server's business */
    signal(SIGINT, SIG_IGN);
    w_fd = fd;
    be_outbox_set_sink(w_sink);
    be_image_store_set_dir(o->image_dir);
    if (o->image_dir && *o->image_dir)
        be_image_writer_start(); /* images sent are stored off the call path (image_writer.c) */
    struct sl_driver_api api;
    struct be_devices devs;
    void *dl = NULL;
    sl_error e;
    if (be_printf_init(&e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "session %llu: device printf capture: %s",
               (unsigned long long)sid, e.msg);
        w_close(SL_ERR_IO, "session worker could not start: device printf capture");
        return 1;
    }
    if (be_driver_open(driver, &api, &devs, &dl, NULL, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, BE_COMPONENT, "session %llu: %s", (unsigned long long)sid, e.msg);
        char why[SL_ERROR_MSG_MAX + 40];
        snprintf(why, sizeof why, "session worker could not start: %s", e.msg);
        w_close(SL_ERR_CONFIG, why);
        return 1;
    }
    sl_be_session *s = be_session_new(sid, &api, &devs);
    if (!s) {
        be_devices_free(&devs);
        w_close(SL_ERR_NOMEM, "out of memory");
        return 1;
    }
    snprintf(s->instance, sizeof s->instance, "%s", instance);
    snprintf(s->project, sizeof s->project, "%s", project);
    w_broker = be_broker_new(w_token_send);
    if (!w_broker) {
        be_session_free(s);
        be_devices_free(&devs);
        w_close(SL_ERR_NOMEM, "out of memory");
        return 1;
    }
    s->broker = w_broker;
    s->spin_ns = (uint64_t)o->spin_us * 1000u;
    if (o->staging_slots != BE_POOL_SLOTS) { /* --staging-slots (bulk_pool.c) */
        be_pool_free(s->pool);
        s->pool = o->staging_slots ? be_pool_new(s->api, o->staging_slots) : NULL;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = 1;
    struct be_acct_shm *shm = NULL;
    if (o->acct_fd >= 0) { /* the tenant's accounting page (quota.c) */
        if (o->acct_slot < 0 || o->acct_slot >= BE_ACCT_MAX_SLOTS || o->acct_inst < 0 ||
            o->acct_inst >= BE_ACCT_MAX_INST)
            sl_fail(&e, SL_ERR_CONFIG, "--acct-slot/--acct-inst out of range");
        else
            be_acct_shm_attach(o->acct_fd, &shm, &e);
        if (!shm) {
            w_close(SL_ERR_CONFIG, e.msg);
            goto out;
        }
        w_shm = shm;
        w_acct_slot = o->acct_slot;
        be_pool_budget(s->pool, w_pin, NULL);
    }
    struct be_acct_cfg ac = {
        .interval_ns = (int64_t)(o->usage_interval_s ? o->usage_interval_s : BE_USAGE_INTERVAL_S) *
                       1000000000LL,
        .shm = shm,
        .slot = o->acct_slot,
        .inst = o->acct_inst,
        .no_timing = o->no_gpu_timing,
        .emit = w_usage};
    if (be_acct_attach(s, &ac, &e) != SL_OK) {
        w_close(e.code, e.msg);
        goto out;
    }
    if (o->direct.listen && be_direct_open(&o->direct, &w_direct, &e) != SL_OK)
        sl_log(SL_LOG_WARNING, BE_COMPONENT,
               "session %llu: no direct endpoint (%s); the guest's calls take the backend's "
               "channel",
               (unsigned long long)sid, e.msg);
    if (w_direct && o->lanes >= 2) {
        if (be_lanes_open(&o->direct, o->lanes > SL_LANE_MAX ? SL_LANE_MAX : o->lanes, w_direct,
                          &w_lanes, &e) != SL_OK)
            sl_log(SL_LOG_WARNING, BE_COMPONENT,
                   "session %llu: no bulk lanes (%s); large copies take the direct channel",
                   (unsigned long long)sid, e.msg);
        s->lanes = w_lanes;
    }
    if (be_encode_accept(&devs, s, w_direct, w_lanes, &buf, &len, &e) != SL_OK) {
        w_close(SL_ERR_NOMEM, e.msg);
        goto out;
    }
    w_sink(0, SL_OK, NULL, buf, len, NULL, 0);
    if (be_printf_watch(s, &e) != SL_OK || be_session_start(s, &e) != SL_OK) {
        w_close(e.code, e.msg);
        goto out;
    }
    rc = 0;
    int gone = w_direct ? w_run_direct(fd, s) : w_run_parent(fd, s);
    be_broker_gone(w_broker); /* a session thread waiting for the parent stops waiting */
    if (gone) {
        /* The session ended (its guest is gone, revoked, the backend stops): the work it left
         * queued on the GPU is nobody's any more. Waiting for it (synchronizing its streams and
         * contexts) took seconds on a shared GPU and got workers killed after the grace period
         * (docs/backend.md, "Teardown"): the final usage record says what completed, then the
         * process exits and the driver frees its contexts, as for a program that exits. */
        be_printf_unwatch();
        if (!be_session_abandon(s, BE_ABANDON_WAIT_MS)) {
            const char *in = atomic_load(&s->doing);
            sl_log(SL_LOG_WARNING, BE_COMPONENT,
                   "session %llu: its thread is still waiting for the GPU (in %s) %d ms after "
                   "the session ended: the worker exits without the final usage record (the "
                   "server writes one)",
                   (unsigned long long)sid, in ? in : "the session's loop", BE_ABANDON_WAIT_MS);
        }
        settle_images();
        _exit(0);
    }
out:
    if (w_direct) { /* it never served: the session did not start */
        pthread_mutex_lock(&w_mu);
        struct be_direct *d = w_direct;
        w_direct = NULL;
        pthread_mutex_unlock(&w_mu);
        be_direct_close(d, SL_ERR_CLOSED, "the session did not start");
    }
    be_lanes_close(w_lanes, SL_ERR_CLOSED, "the session did not start");
    w_lanes = NULL;
    s->lanes = NULL;
    be_printf_unwatch(); /* the watcher lets go of s before it is freed */
    be_session_free(s);  /* joins the worker thread: final usage record, frees everything */
    be_acct_shm_unmap(shm);
    be_devices_free(&devs);
    be_images_clear();
    settle_images();
    be_broker_free(w_broker);
    w_broker = NULL;
    return rc;
}
