/* The outbox: what a session's thread hands the channel thread (replies, the end of a session
 * found late, usage records of in-process sessions), woken through the server's eventfd; in a
 * session worker process, its sink to the parent (worker.c). sessions.c drains it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/outbox.h"
#include "daemon/state.h"
#include "session/bulk_pool.h"

static be_outbox_sink sink; /* a session worker process: the outbox goes to its parent */

void be_outbox_set_sink(be_outbox_sink f)
{
    sink = f;
}

static void out_push(struct be_server *srv, struct be_out *o)
{
    pthread_mutex_lock(&srv->out_mu);
    if (srv->out_tail)
        srv->out_tail->next = o;
    else
        srv->out_head = o;
    srv->out_tail = o;
    pthread_mutex_unlock(&srv->out_mu);
    uint64_t one = 1;
    ssize_t w = write(srv->efd, &one, sizeof one);
    (void)w;
}

void be_outbox_push_reply(struct be_server *srv, sl_peer peer, uint8_t *msg, size_t len,
                          uint8_t *bulk, size_t bulk_len)
{
    if (!srv) { /* a session worker process, or a bare session in a test */
        if (sink) {
            sink(0, SL_OK, NULL, msg, len, bulk, bulk_len);
            return;
        }
        free(msg);
        be_bulk_free(bulk);
        return;
    }
    struct be_out *o = calloc(1, sizeof *o);
    if (!o) {
        free(msg);
        be_bulk_free(bulk);
        return;
    }
    *o = (struct be_out){NULL, peer, msg, len, bulk, bulk_len, 0, 0, SL_OK, ""};
    out_push(srv, o);
}

sl_code be_outbox_push_message(struct be_server *srv, sl_peer peer,
                               const Sluice__Wire__ServerMessage *m, sl_error *e)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (sl_wire_encode_server(m, NULL, &buf, &len, e) != SL_OK)
        return e->code;
    be_outbox_push_reply(srv, peer, buf, len, NULL, 0);
    return SL_OK;
}

/* An in-process session's usage record (thread mode), taken by the channel thread. */
void be_outbox_usage(void *user, const uint8_t *rec, size_t len)
{
    struct be_server *srv = user;
    struct be_out *o = calloc(1, sizeof *o);
    uint8_t *copy = o ? malloc(len ? len : 1) : NULL;
    if (!copy) {
        free(o);
        return;
    }
    memcpy(copy, rec, len);
    o->msg = copy;
    o->len = len;
    o->usage = 1;
    out_push(srv, o);
}

void be_outbox_push_close(struct be_server *srv, sl_peer peer, sl_code code, const char *why)
{
    if (!srv) {
        if (sink)
            sink(1, code, why, NULL, 0, NULL, 0);
        return;
    }
    struct be_out *o = calloc(1, sizeof *o);
    if (!o)
        return;
    o->peer = peer;
    o->close = 1;
    o->code = code;
    snprintf(o->why, sizeof o->why, "%s", why);
    out_push(srv, o);
}
