/* The session: lazy connect (config, channel client, SessionOpen -> SessionAccept), the device
 * facts of SessionAccept, and the close at unload (docs/remoting.md "Sessions"). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call/allocs.h"
#include "call/busy.h"
#include "call/config.h"
#include "call/connection.h"
#include "call/contexts.h"
#include "call/direct.h"
#include "call/env.h"
#include "call/image_hints.h"
#include "call/lanes.h"
#include "call/notice.h"
#include "call/rpc_session.h"
#include "call/rpc_stats.h"
#include "call/transport.h"
#include "component.h"
#include "sluice/channel.h"
#include "sluice/lanes.h"
#include "sluice/log.h"
#include "sluice/wire.h"

static pthread_mutex_t g_conn_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_state; /* 0 not tried, 1 connected, -1 failed */
static CUresult g_fail_rc;
static sl_client *g_client; /* the backend's channel: admission, and the calls without direct */
static sl_client *g_direct; /* the session worker's direct channel (direct.c), NULL: none */
static uint32_t g_direct_port;
static uint8_t g_ticket[64];
static size_t g_ticket_len;
static uint32_t g_lane_ports[SL_LANE_MAX]; /* the bulk lanes SessionAccept offered (lanes.c) */
static uint8_t g_lane_tickets[SL_LANE_MAX][SL_LANE_TICKET];
static unsigned g_nlanes;
static int g_driver_version;
static struct sl_fe_device *g_devs;
static int g_ndevs;

/* ------------------------------------------------------------------ transport over sl_client */
static sl_code tr_send(void *t, const void *msg, size_t len, const struct iovec *bulk, size_t n,
                       sl_error *e)
{
    return sl_client_send(t, msg, len, bulk, n, e);
}

static sl_code tr_recv(void *t, const void **msg, size_t *len, uint64_t *bulk_len, int timeout_ms,
                       sl_error *e)
{
    return sl_client_recv(t, msg, len, bulk_len, timeout_ms, e);
}

static sl_code tr_recv_bulk(void *t, void *dst, size_t len, sl_error *e)
{
    return sl_client_recv_bulk(t, dst, len, e);
}

/* The same over the session worker's direct channel: a failure asks the backend's channel why
 * (direct.c). */
static sl_code tr_direct_send(void *t, const void *msg, size_t len, const struct iovec *bulk,
                              size_t n, sl_error *e)
{
    sl_code sc = sl_client_send(t, msg, len, bulk, n, e);
    if (sc)
        sl_fe_direct_why(g_client, e);
    return sc ? e->code : sc;
}

static sl_code tr_direct_recv(void *t, const void **msg, size_t *len, uint64_t *bulk_len,
                              int timeout_ms, sl_error *e)
{
    sl_code sc = sl_client_recv(t, msg, len, bulk_len, timeout_ms, e);
    if (sc && sc != SL_ERR_TIMEOUT)
        sl_fe_direct_why(g_client, e);
    return sc ? e->code : sc;
}

static sl_code tr_direct_recv_bulk(void *t, void *dst, size_t len, sl_error *e)
{
    sl_code sc = sl_client_recv_bulk(t, dst, len, e);
    if (sc)
        sl_fe_direct_why(g_client, e);
    return sc ? e->code : sc;
}

static int tr_fds(void *t, int *fds, int n)
{
    return sl_client_fds(t, fds, n);
}

static int tr_has_input(void *t)
{
    return sl_client_has_input(t);
}

/* ------------------------------------------------------------------ session open */
static void free_devices(void)
{
    for (int i = 0; i < g_ndevs; i++)
        free(g_devs[i].attrs);
    free(g_devs);
    g_devs = NULL;
    g_ndevs = 0;
}

static CUresult take_accept(const Sluice__Wire__SessionAccept *a)
{
    g_driver_version = a->driver_version < 13000 ? 13000 : (int)a->driver_version;
    g_direct_port = a->direct_port;
    g_ticket_len = a->direct_ticket.len <= sizeof g_ticket ? a->direct_ticket.len : 0;
    if (g_ticket_len)
        memcpy(g_ticket, a->direct_ticket.data, g_ticket_len);
    g_nlanes = 0; /* the envelope checked: <= SL_LANE_MAX ports, one 32-byte ticket each */
    for (size_t i = 0; i < a->n_lane_ports && i < SL_LANE_MAX; i++) {
        g_lane_ports[i] = a->lane_ports[i];
        memcpy(g_lane_tickets[i], a->lane_tickets[i].data, SL_LANE_TICKET);
        g_nlanes++;
    }
    sl_fe_image_hints_set(a->image_hints, a->n_image_hints);
    g_devs = calloc(a->n_devices ? a->n_devices : 1, sizeof *g_devs);
    if (!g_devs)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < a->n_devices; i++) {
        const Sluice__Wire__DeviceInfo *d = a->devices[i];
        struct sl_fe_device *o = &g_devs[i];
        o->ordinal = (int)i;
        snprintf(o->name, sizeof o->name, "%s", d->name ? d->name : "");
        if (d->uuid.len == 16) {
            memcpy(o->uuid.bytes, d->uuid.data, 16);
            o->has_uuid = 1;
        }
        o->total_mem = d->total_mem;
        o->nattrs = d->n_attributes;
        o->attrs = calloc(d->n_attributes ? d->n_attributes : 1, sizeof(int));
        if (!o->attrs)
            return CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t k = 0; k < d->n_attributes; k++)
            o->attrs[k] = d->attributes[k];
        if (d->luid.len == 8) {
            memcpy(o->luid, d->luid.data, 8);
            o->has_luid = 1;
        }
        o->luid_mask = d->luid_device_node_mask;
        o->primary_context = d->primary_context;
        sl_fe_ctx_remember((CUcontext)(uintptr_t)d->primary_context, (int)i);
        g_ndevs++;
    }
    return CUDA_SUCCESS;
}

/* The bulk lanes to ask for ($SLUICE_LANES, 2..8; 0: none, also without the direct channel). */
static unsigned lanes_wanted(void)
{
    unsigned n = (unsigned)sl_fe_env_uint("SLUICE_LANES", 1, SL_LANE_MAX);
    return n >= 2 && sl_fe_env_uint("SLUICE_DIRECT", 1, 1) ? n : 0;
}

/* After the direct channel: every lane SessionAccept offered, each with its ticket, or none (one
 * warning says why; large copies then take the direct channel). */
static void open_lanes(const char *endpoint, const sl_tls_config *tls, const sl_channel_opts *opts)
{
    sl_client *c[SL_LANE_MAX];
    unsigned n = 0;
    char ep[600] = "";
    sl_error err;
    sl_channel_opts lo = *opts;
    lo.chunk_size = SL_LANE_CHUNK;
    for (; n < g_nlanes; n++) {
        c[n] = sl_fe_worker_connect(endpoint, tls, &lo, g_lane_ports[n], g_lane_tickets[n],
                                    SL_LANE_TICKET, ep, sizeof ep, &err);
        if (!c[n])
            break;
    }
    if (n == g_nlanes && sl_fe_lanes_start(c, n, &err) == SL_OK)
        return;
    for (unsigned i = 0; n < g_nlanes && i < n; i++)
        sl_client_close(c[i]);
    sl_log(SL_LOG_WARNING, SL_FE_COMPONENT,
           "the session's bulk lanes cannot be used (%s%s%s); large copies take the direct "
           "channel (SLUICE_LANES=1 skips this attempt)",
           ep, ep[0] ? ": " : "", err.msg);
}

static sl_code open_session(sl_client *c, sl_error *err, CUresult *rc)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char client[128];
    snprintf(client, sizeof client, "sluice-frontend %s pid %d", "0.1", (int)getpid());
    Sluice__Wire__SessionOpen open = SLUICE__WIRE__SESSION_OPEN__INIT;
    open.protocol_version = 1;
    open.cuda_version = CUDA_VERSION;
    open.client = client;
    open.pid = (uint32_t)getpid();
    open.hostname = host;
    open.lanes = lanes_wanted(); /* $SLUICE_LANES (lanes.c) */
    Sluice__Wire__ServerMessage *sm = NULL;
    sl_code sc = sl_fe_open_exchange(c, &open, 30000, &sm, err);
    if (sc)
        return sc;
    if (sm->kind_case == SLUICE__WIRE__SERVER_MESSAGE__KIND_CLOSE) {
        sc = sl_fail(err, SL_ERR_REFUSED, "backend refused the session: %s",
                     sm->close->detail ? sm->close->detail : "");
    } else if (sm->kind_case != SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT) {
        sc = sl_fail(err, SL_ERR_PROTOCOL, "expected SessionAccept, got message kind %d",
                     (int)sm->kind_case);
    } else {
        *rc = take_accept(sm->accept);
        if (*rc == CUDA_SUCCESS)
            sl_log(SL_LOG_DEBUG, SL_FE_COMPONENT, "session %llu open: driver %u, %zu device(s)",
                   (unsigned long long)sm->accept->session_id, sm->accept->driver_version,
                   sm->accept->n_devices);
    }
    sl_wire_free_server(sm);
    return sc;
}

static CUresult connect_now(void)
{
    struct sl_fe_config cfg;
    sl_error err;
    if (sl_fe_config_load(NULL, &cfg, &err)) {
        sl_log(SL_LOG_ERR, SL_FE_COMPONENT, "no Sluice backend configured: %s", err.msg);
        return CUDA_ERROR_NO_DEVICE;
    }
    sl_tls_config tls = {.mode = SL_TLS_MUTUAL,
                         .ca_file = cfg.ca,
                         .cert_file = cfg.cert,
                         .key_file = cfg.key,
                         .server_name = getenv("SLUICE_SERVER_NAME")};
    sl_channel_opts opts;
    sl_channel_opts_default(&opts);
    opts.handshake_timeout_ms = (int)sl_fe_env_uint("SLUICE_CONNECT_TIMEOUT_MS", 5000, 600000);
    opts.connect_attempts = 2;
    /* a spinning thread, or a second busy one (the sender), only pays where it does not take
     * the CPU of the threads it waits for */
    int many_cpus = sysconf(_SC_NPROCESSORS_ONLN) >= 4;
    opts.spin_us = (int)sl_fe_env_uint("SLUICE_SPIN_US", many_cpus ? SL_FE_SPIN_US_DEFAULT : 0,
                                       SL_FE_SPIN_US_MAX);
    sl_client *c = NULL;
    if (sl_fe_preflight(&cfg) != CUDA_SUCCESS)
        return CUDA_ERROR_NO_DEVICE;
    if (sl_client_connect(cfg.endpoint, &tls, &opts, &c, &err)) {
        sl_fe_explain_connect(&cfg, &err);
        return CUDA_ERROR_NO_DEVICE;
    }
    CUresult rc = CUDA_ERROR_NO_DEVICE;
    if (open_session(c, &err, &rc)) {
        sl_log(SL_LOG_ERR, SL_FE_COMPONENT, "cannot open a session with %s: %s", cfg.endpoint,
               err.msg);
        sl_client_close(c);
        free_devices();
        return CUDA_ERROR_NO_DEVICE;
    }
    if (rc != CUDA_SUCCESS) {
        sl_client_close(c);
        free_devices();
        return rc;
    }
    g_client = c;
    g_direct = sl_fe_direct_open(cfg.endpoint, &tls, &opts, g_direct_port, g_ticket, g_ticket_len);
    memset(g_ticket, 0, sizeof g_ticket); /* single use */
    if (g_direct && g_nlanes)
        open_lanes(cfg.endpoint, &tls, &opts);
    memset(g_lane_tickets, 0, sizeof g_lane_tickets);
    struct sl_fe_transport tr = {tr_send, tr_recv, tr_recv_bulk, c, tr_fds, tr_has_input};
    if (g_direct) /* the calls go to the session's worker; g_client says why it ended */
        tr = (struct sl_fe_transport){tr_direct_send, tr_direct_recv, tr_direct_recv_bulk,
                                      g_direct,       tr_fds,         tr_has_input};
    sl_fe_rpc_attach(&tr);
    int sender = sl_fe_rpc_sender_from_env(many_cpus);
    struct sl_fe_rpc_limits lim = {256,
                                   (size_t)4 << 20,
                                   4096,
                                   (uint64_t)256 << 20,
                                   sl_fe_rpc_flush_us_from_env(sender),
                                   sl_fe_rpc_start_us_from_env(sender),
                                   sender,
                                   (unsigned)opts.spin_us,
                                   sl_fe_rpc_hold_us_from_env(sender)};
    sl_fe_rpc_set_limits(&lim);
    sl_fe_allocs_configure(
        (int)sl_fe_env_uint("SLUICE_ALLOC_CACHE", 1, 1),
        (uint64_t)sl_fe_env_uint("SLUICE_ALLOC_CACHE_MB", SL_FE_ALLOC_CACHE_MB_DEFAULT,
                                 SL_FE_ALLOC_CACHE_MB_MAX)
            << 20,
        sl_fe_env_uint("SLUICE_ALLOC_CACHE_ENTRIES", SL_FE_ALLOC_CACHE_ENTRIES_DEFAULT,
                       SL_FE_ALLOC_CACHE_ENTRIES_MAX));
    return CUDA_SUCCESS;
}

CUresult sl_fe_ensure_session(void)
{
    pthread_mutex_lock(&g_conn_lock);
    if (g_state == 0) {
        CUresult rc = connect_now();
        g_state = rc == CUDA_SUCCESS ? 1 : -1;
        g_fail_rc = rc;
    }
    CUresult rc = g_state == 1 ? CUDA_SUCCESS : g_fail_rc;
    pthread_mutex_unlock(&g_conn_lock);
    return rc;
}

int sl_fe_session_driver_version(void)
{
    return g_driver_version;
}

int sl_fe_session_device_count(void)
{
    return g_ndevs;
}

const struct sl_fe_device *sl_fe_session_device(int ordinal)
{
    if (ordinal < 0 || ordinal >= g_ndevs)
        return NULL;
    return &g_devs[ordinal];
}

/* "what: call n, call n, ..." for the 8 calls most counted by top. */
static void log_top(const char *what, size_t (*top)(uint32_t *, uint64_t *, size_t))
{
    uint32_t ids[8];
    uint64_t counts[8];
    size_t n = top(ids, counts, 8);
    char line[512];
    size_t at = 0;
    for (size_t i = 0; i < n && at < sizeof line; i++) {
        const struct sl_call_info *ci = sl_call_lookup(ids[i]);
        int w = snprintf(line + at, sizeof line - at, "%s%s %llu", i ? ", " : "",
                         ci ? ci->name : "?", (unsigned long long)counts[i]);
        if (w < 0)
            break;
        at += (size_t)w;
    }
    if (n)
        sl_log(SL_LOG_NOTICE, SL_FE_COMPONENT, "session stats: %s: %s", what, line);
}

/* SLUICE_STATS=1: one line at exit saying what the session cost (docs/tenant-guide.md). */
static void log_stats(void)
{
    const char *v = getenv("SLUICE_STATS");
    if (!v || !*v || !strcmp(v, "0"))
        return;
    struct sl_fe_rpc_stats st;
    sl_fe_rpc_stats(&st);
    sl_log(SL_LOG_NOTICE, SL_FE_COMPONENT,
           "session stats: %llu sync calls (%.1f ms waiting for replies), %llu async calls in "
           "%llu frames (%llu sent by the sender thread, %llu taken along by a synchronous "
           "call), %llu fences, %llu answers given here (memo, idle and busy streams), "
           "%llu callbacks, %llu deferred errors",
           (unsigned long long)st.sync_calls, (double)st.wait_ns / 1e6,
           (unsigned long long)st.async_calls, (unsigned long long)st.frames_sent,
           (unsigned long long)st.frames_handed, (unsigned long long)st.frames_joined,
           (unsigned long long)st.fences, (unsigned long long)st.memo_hits,
           (unsigned long long)st.callbacks_run, (unsigned long long)st.deferred_errors);
    if (sl_fe_busy_answers())
        sl_log(SL_LOG_NOTICE, SL_FE_COMPONENT,
               "session stats: %llu queries of busy streams and events answered here (not ready)",
               (unsigned long long)sl_fe_busy_answers());
    unsigned lanes;
    uint64_t sent, sent_b, got, got_b;
    sl_fe_lanes_stats(&lanes, &sent, &sent_b, &got, &got_b);
    if (lanes)
        sl_log(SL_LOG_NOTICE, SL_FE_COMPONENT,
               "session stats: %u bulk lanes carried %llu pieces (%.1f MiB) to the device and "
               "%llu pieces (%.1f MiB) back",
               lanes, (unsigned long long)sent, (double)sent_b / 1048576.0, (unsigned long long)got,
               (double)got_b / 1048576.0);
    log_top("synchronous calls most made", sl_fe_rpc_top_sync);
    log_top("the memo was emptied by", sl_fe_rpc_top_forget);
    log_top("the idle context was forgotten by", sl_fe_rpc_top_unclean);
}

__attribute__((destructor)) static void sl_fe_session_close(void)
{
    pthread_mutex_lock(&g_conn_lock);
    if (g_state == 1 && g_client) {
        log_stats();
        sl_fe_rpc_detach();
        sl_fe_lanes_close();
        sl_client_close(g_direct);
        g_direct = NULL;
        sl_client_close(g_client);
        g_client = NULL;
    }
    pthread_mutex_unlock(&g_conn_lock);
}
