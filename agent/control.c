/* The control ROUTER. */
#include "control.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "sluice/log.h"

#define COMPONENT "agent"

struct ag_control {
    void *ctx, *sock;
    char path[512];
};

sl_code ag_control_bind(const char *path, int gid, ag_control **out, sl_error *e)
{
    ag_control *c = calloc(1, sizeof *c);
    if (!c)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    if (strlen(path) >= sizeof c->path - 8) {
        free(c);
        return sl_fail(e, SL_ERR_INVALID, "control socket path too long");
    }
    snprintf(c->path, sizeof c->path, "%s", path);
    c->ctx = zmq_ctx_new();
    c->sock = c->ctx ? zmq_socket(c->ctx, ZMQ_ROUTER) : NULL;
    if (!c->sock)
        goto fail;
    int one = 1, zero = 0, hwm = 1000;
    zmq_setsockopt(c->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(c->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    int64_t max = AG_CONTROL_MAX_MSG + 1024;
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &max, sizeof max);
    unlink(path); /* a stale socket of an earlier run */
    char ep[600];
    snprintf(ep, sizeof ep, "ipc://%s", path);
    mode_t old = umask(0117);
    int rc = zmq_bind(c->sock, ep);
    umask(old);
    if (rc != 0)
        goto fail;
    chmod(path, 0660);
    if (gid >= 0 && chown(path, (uid_t)-1, (gid_t)gid) != 0)
        sl_log(SL_LOG_WARNING, COMPONENT, "control socket %s: chgrp: %s", path, strerror(errno));
    *out = c;
    return SL_OK;
fail:;
    sl_code code = sl_fail(e, SL_ERR_IO, "control socket %s: %s", path, zmq_strerror(errno));
    ag_control_close(c);
    return code;
}

int ag_control_fd(const ag_control *c)
{
    int fd = -1;
    size_t n = sizeof fd;
    zmq_getsockopt(c->sock, ZMQ_FD, &fd, &n);
    return fd;
}

static int more(void *sock)
{
    int m = 0;
    size_t n = sizeof m;
    zmq_getsockopt(sock, ZMQ_RCVMORE, &m, &n);
    return m;
}

static void drain_rest(void *sock)
{
    while (more(sock)) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        zmq_msg_recv(&m, sock, ZMQ_DONTWAIT);
        zmq_msg_close(&m);
    }
}

int ag_control_recv(ag_control *c, ag_ctl_peer *peer, Sluice__Control__BackendReport **rep)
{
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, c->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&id);
        return 0;
    }
    size_t idlen = zmq_msg_size(&id);
    if (idlen == 0 || idlen > sizeof peer->id || !more(c->sock)) {
        zmq_msg_close(&id);
        drain_rest(c->sock);
        sl_log(SL_LOG_WARNING, COMPONENT, "control: dropped a message with a bad routing id");
        return -1;
    }
    memcpy(peer->id, zmq_msg_data(&id), idlen);
    peer->len = idlen;
    zmq_msg_close(&id);
    zmq_msg_init(&body);
    int n = zmq_msg_recv(&body, c->sock, ZMQ_DONTWAIT);
    int extra = more(c->sock);
    drain_rest(c->sock);
    if (n <= 0 || extra || (size_t)n > AG_CONTROL_MAX_MSG) {
        zmq_msg_close(&body);
        sl_log(SL_LOG_WARNING, COMPONENT,
               "control: dropped a message (empty, multi-frame or over %u bytes)",
               AG_CONTROL_MAX_MSG);
        return -1;
    }
    *rep = sluice__control__backend_report__unpack(NULL, (size_t)n, zmq_msg_data(&body));
    zmq_msg_close(&body);
    if (!*rep) {
        sl_log(SL_LOG_WARNING, COMPONENT, "control: dropped an undecodable BackendReport");
        return -1;
    }
    return 1;
}

sl_code ag_control_send(ag_control *c, const ag_ctl_peer *peer, const void *buf, size_t len,
                        sl_error *e)
{
    if (zmq_send(c->sock, peer->id, peer->len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(c->sock, buf, len, ZMQ_DONTWAIT) < 0)
        return sl_fail(e, errno == EHOSTUNREACH ? SL_ERR_PEER_LOST : SL_ERR_IO, "control send: %s",
                       zmq_strerror(errno));
    return SL_OK;
}

void *ag_control_pack(const Sluice__Control__BackendControl *msg, size_t *len)
{
    *len = sluice__control__backend_control__get_packed_size(msg);
    void *buf = malloc(*len ? *len : 1);
    if (buf)
        sluice__control__backend_control__pack(msg, buf);
    return buf;
}

void ag_control_close(ag_control *c)
{
    if (!c)
        return;
    if (c->sock)
        zmq_close(c->sock);
    if (c->ctx)
        zmq_ctx_term(c->ctx);
    if (c->path[0])
        unlink(c->path);
    free(c);
}
