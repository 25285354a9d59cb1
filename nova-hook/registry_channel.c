/* The registry over the Sluice channel: accept agents, decode, handle, reply. */
#include "registry_channel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "registry.h"
#include "sluice/channel.h"
#include "sluice/log.h"
#include "validate.h"

#define COMPONENT "nova-hook/registry-channel"

struct nh_regchan {
    sl_server *srv;
    nh_store *store;
    char *allowed; /* comma-separated, or NULL: any host */
};

/* Is host an entry of the comma-separated list? */
static int listed(const char *list, const char *host)
{
    size_t n = strlen(host);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && memcmp(p, host, n) == 0)
            return 1;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

static int accept_agent(void *user, const sl_peer_identity *id, sl_error *why)
{
    const nh_regchan *c = user;
    const char *refusal = NULL;
    if (!id->authenticated)
        refusal = "no authenticated certificate";
    else if (strcmp(id->project_id, NH_AGENT_OU) != 0)
        refusal = "certificate OU is not " NH_AGENT_OU " (not an agent certificate)";
    else if (!nh_valid_host(id->instance_id))
        refusal = "certificate CN is not a host name";
    else if (c->allowed && !listed(c->allowed, id->instance_id))
        refusal = "host is not in registry_hosts";
    if (!refusal)
        return 0;
    sl_log(SL_LOG_WARNING, COMPONENT, "agent refused: CN %s, OU %s, serial %s: %s", id->instance_id,
           id->project_id, id->serial, refusal);
    sl_fail(why, SL_ERR_REFUSED, "registry: %s", refusal);
    return 1;
}

sl_code nh_regchan_process(nh_store *s, const char *host, int64_t now, const void *req,
                           size_t req_len, uint8_t **out, size_t *out_len, sl_error *store_err,
                           sl_error *e)
{
    *out = NULL;
    *out_len = 0;
    store_err->code = SL_OK;
    store_err->msg[0] = '\0';
    if (req_len == 0 || req_len > NH_REGCHAN_MAX_MESSAGE)
        return sl_fail(e, SL_ERR_PROTOCOL, "request of %zu bytes (1..%u)", req_len,
                       NH_REGCHAN_MAX_MESSAGE);
    Sluice__Control__RegistryRequest *m =
        sluice__control__registry_request__unpack(NULL, req_len, req);
    if (!m)
        return sl_fail(e, SL_ERR_PROTOCOL, "request of %zu bytes is not a RegistryRequest",
                       req_len);
    nh_reply r;
    nh_reply_init(&r);
    nh_peer peer = {host, now};
    if (nh_registry_handle(s, &peer, m, &r, store_err) == SL_OK)
        store_err->code = SL_OK;
    else if (store_err->code == SL_OK)
        sl_fail(store_err, SL_ERR_IO, "registry store failed");
    size_t n = sluice__control__registry_reply__get_packed_size(&r.msg);
    uint8_t *buf = malloc(n ? n : 1);
    sl_code rc = SL_OK;
    if (!buf)
        rc = sl_fail(e, SL_ERR_NOMEM, "registry reply: out of memory");
    else
        sluice__control__registry_reply__pack(&r.msg, buf);
    nh_reply_free(&r); /* the reply points into the request: pack first */
    sluice__control__registry_request__free_unpacked(m, NULL);
    if (rc == SL_OK) {
        *out = buf;
        *out_len = n;
    }
    return rc;
}

static void drop(nh_regchan *c, const sl_server_event *ev, sl_code code, const char *why)
{
    sl_log(SL_LOG_WARNING, COMPONENT, "agent %s (session %llu) dropped: %s",
           ev->identity->instance_id, (unsigned long long)ev->peer, why);
    sl_error e;
    if (sl_server_disconnect(c->srv, ev->peer, code, why, &e) != SL_OK)
        sl_log(SL_LOG_DEBUG, COMPONENT, "disconnect: %s", e.msg);
}

static void on_message(nh_regchan *c, const sl_server_event *ev)
{
    const char *host = ev->identity->instance_id;
    if (ev->bulk_len > 0) {
        drop(c, ev, SL_ERR_PROTOCOL, "registry requests carry no bulk");
        return;
    }
    uint8_t *out = NULL;
    size_t out_len = 0;
    sl_error store_err, e;
    if (nh_regchan_process(c->store, host, (int64_t)time(NULL), ev->msg, ev->len, &out, &out_len,
                           &store_err, &e) != SL_OK) {
        drop(c, ev, e.code, e.msg);
        return;
    }
    if (store_err.code != SL_OK)
        sl_log(SL_LOG_ERR, COMPONENT, "request from %s: %s", host, store_err.msg);
    /* an empty reply (every field default) is zero bytes; the channel wants at least one */
    static const uint8_t empty_seq0[] = {0x08, 0x00};
    const void *msg = out_len ? (const void *)out : (const void *)empty_seq0;
    if (sl_server_send(c->srv, ev->peer, msg, out_len ? out_len : sizeof empty_seq0, NULL, 0, &e) !=
        SL_OK)
        sl_log(SL_LOG_WARNING, COMPONENT, "reply to %s lost: %s", host, e.msg);
    free(out);
}

sl_code nh_regchan_poll(nh_regchan *c, int timeout_ms, sl_error *e)
{
    sl_server_event ev;
    sl_code rc = sl_server_poll(c->srv, timeout_ms, &ev, e);
    if (rc == SL_ERR_TIMEOUT)
        return SL_OK;
    if (rc != SL_OK)
        return rc;
    switch (ev.kind) {
    case SL_EV_ACCEPTED:
        sl_log(SL_LOG_INFO, COMPONENT, "agent %s connected (session %llu, serial %s)",
               ev.identity->instance_id, (unsigned long long)ev.peer, ev.identity->serial);
        break;
    case SL_EV_MESSAGE:
        on_message(c, &ev);
        break;
    case SL_EV_CLOSED:
        sl_log(SL_LOG_INFO, COMPONENT, "agent %s (session %llu) gone: %s",
               ev.identity ? ev.identity->instance_id : "?", (unsigned long long)ev.peer,
               ev.reason.msg);
        break;
    default:
        break;
    }
    return SL_OK;
}

sl_code nh_regchan_start(const nh_regchan_opts *o, nh_regchan **out, sl_error *e)
{
    *out = NULL;
    if (!o->endpoint || !o->store || !o->ca_pem || !o->cert_pem || !o->key_pem)
        return sl_fail(e, SL_ERR_INVALID, "registry channel: endpoint, store and PEMs needed");
    nh_regchan *c = calloc(1, sizeof *c);
    if (!c)
        return sl_fail(e, SL_ERR_NOMEM, "registry channel: out of memory");
    c->store = o->store;
    if (o->allowed_hosts && *o->allowed_hosts && !(c->allowed = strdup(o->allowed_hosts))) {
        free(c);
        return sl_fail(e, SL_ERR_NOMEM, "registry channel: out of memory");
    }
    sl_tls_config tls = {
        .mode = SL_TLS_MUTUAL, .ca_pem = o->ca_pem, .cert_pem = o->cert_pem, .key_pem = o->key_pem};
    sl_channel_opts opts;
    sl_channel_opts_default(&opts);
    opts.max_message = NH_REGCHAN_MAX_MESSAGE;
    sl_server_hooks hooks = {.accept = accept_agent, .user = c};
    sl_code rc = sl_server_bind(o->endpoint, &tls, &opts, &hooks, &c->srv, e);
    if (rc != SL_OK) {
        char msg[SL_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", e->msg);
        sl_fail(e, rc, "registry channel %s: %s", o->endpoint, msg);
        nh_regchan_stop(c);
        return rc;
    }
    *out = c;
    return SL_OK;
}

const char *nh_regchan_endpoint(const nh_regchan *c)
{
    return sl_server_endpoint(c->srv);
}

void nh_regchan_stop(nh_regchan *c)
{
    if (!c)
        return;
    sl_server_close(c->srv);
    free(c->allowed);
    free(c);
}
