/* ZeroMQ socket settings shared by client and server, and small helpers. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void sl_channel_opts_default(sl_channel_opts *o)
{
    *o = (sl_channel_opts){
        .max_message = 16u << 20,
        .max_frame = 4u << 20,
        .chunk_size = 256u << 10,
        .hwm = 64,
        .handshake_timeout_ms = 10000,
        .io_timeout_ms = 30000,
        .heartbeat_ivl_ms = 1000,
        .heartbeat_timeout_ms = 5000,
        .connect_attempts = 3,
        .connect_backoff_ms = 200,
        .idle_timeout_ms = 0,
        .max_peers = 1024,
        .linger_ms = 500,
        .spin_us = 0,
        .max_bulk = (uint64_t)1 << 30,
        .bulk_min_rate = 1u << 20,
        .bulk_grace_ms = 2000,
        .max_out_queue = (size_t)256 << 20,
        .max_unauth = 256,
        .max_unauth_per_addr = 32,
    };
}

static sl_code setint(void *sock, int opt, int v, const char *name, sl_error *err)
{
    if (zmq_setsockopt(sock, opt, &v, sizeof v) != 0)
        return sl_fail(err, SL_ERR_IO, "zmq_setsockopt(%s=%d): %s", name, v, zmq_strerror(errno));
    return SL_OK;
}

sl_code ch_zsock_setup(void *sock, const sl_channel_opts *o, int server, sl_error *err)
{
    sl_code rc;
    /* blocking queues, never dropping: a full HWM blocks the sender (DEALER) or makes the
     * ROUTER send wait up to io_timeout (ROUTER_MANDATORY turns drops into errors) */
    if ((rc = setint(sock, ZMQ_SNDHWM, o->hwm, "SNDHWM", err)) ||
        (rc = setint(sock, ZMQ_RCVHWM, o->hwm, "RCVHWM", err)) ||
        (rc = setint(sock, ZMQ_LINGER, o->linger_ms, "LINGER", err)) ||
        (rc = setint(sock, ZMQ_SNDTIMEO, o->io_timeout_ms, "SNDTIMEO", err)) ||
        (rc = setint(sock, ZMQ_HEARTBEAT_IVL, o->heartbeat_ivl_ms, "HEARTBEAT_IVL", err)) ||
        (rc = setint(sock, ZMQ_HEARTBEAT_TIMEOUT, o->heartbeat_timeout_ms, "HEARTBEAT_TIMEOUT",
                     err)) ||
        (rc = setint(sock, ZMQ_HEARTBEAT_TTL, o->heartbeat_timeout_ms, "HEARTBEAT_TTL", err)))
        return rc;
    /* ZeroMQ drops the connection of a peer sending a frame over twice our limit before
     * allocating it; frames between the limit and twice it reach us and end the session with
     * SL_ERR_TOO_LARGE, so the peer is told why. */
    int64_t maxmsg = (int64_t)o->max_frame * 2;
    if (zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) != 0)
        return sl_fail(err, SL_ERR_IO, "zmq_setsockopt(MAXMSGSIZE): %s", zmq_strerror(errno));
    if (server && (rc = setint(sock, ZMQ_ROUTER_MANDATORY, 1, "ROUTER_MANDATORY", err)))
        return rc;
    /* the server never waits for one peer: a full queue is that peer's (server_out.c); and
     * ZeroMQ's own greeting must finish within the TLS handshake's time */
    if (server &&
        ((rc = setint(sock, ZMQ_SNDTIMEO, 0, "SNDTIMEO", err)) ||
         (rc = setint(sock, ZMQ_HANDSHAKE_IVL, o->handshake_timeout_ms, "HANDSHAKE_IVL", err))))
        return rc;
    return SL_OK;
}

void ch_zfree(void *data, void *hint)
{
    (void)hint;
    ch_buf_free(data);
}

int64_t ch_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ch_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int ch_monitor_read(void *mon, int *value)
{
    if (value)
        *value = -1;
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return 0;
    }
    int ev = 0;
    if (zmq_msg_size(&m) >= 2) {
        uint16_t e16;
        memcpy(&e16, zmq_msg_data(&m), sizeof e16); /* host byte order */
        ev = e16;
        if (value && zmq_msg_size(&m) >= 6) {
            int32_t v;
            memcpy(&v, (const uint8_t *)zmq_msg_data(&m) + 2, sizeof v); /* the fd, mostly */
            *value = v;
        }
    }
    while (zmq_msg_more(&m)) {
        zmq_msg_close(&m);
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, mon, ZMQ_DONTWAIT) < 0)
            break;
    }
    zmq_msg_close(&m);
    return ev;
}
