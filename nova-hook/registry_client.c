/* The agent's registry client: one request, the reply with its seq. */
#include "registry_client.h"

#include <stdlib.h>
#include <time.h>

struct nh_regclient {
    sl_client *ch;
    uint64_t seq;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

sl_code nh_regclient_connect(const char *endpoint, const sl_tls_config *tls,
                             const sl_channel_opts *opts, nh_regclient **out, sl_error *e)
{
    *out = NULL;
    if (!endpoint || !tls || tls->mode != SL_TLS_MUTUAL)
        return sl_fail(e, SL_ERR_INVALID, "registry client: an endpoint and mutual TLS needed");
    nh_regclient *c = calloc(1, sizeof *c);
    if (!c)
        return sl_fail(e, SL_ERR_NOMEM, "registry client: out of memory");
    sl_code rc = sl_client_connect(endpoint, tls, opts, &c->ch, e);
    if (rc != SL_OK) {
        free(c);
        return rc;
    }
    c->seq = (uint64_t)time(NULL) << 20; /* fresh per session: no confusion across restarts */
    *out = c;
    return SL_OK;
}

sl_code nh_regclient_call(nh_regclient *c, Sluice__Control__RegistryRequest *req, int timeout_ms,
                          Sluice__Control__RegistryReply **reply, sl_error *e)
{
    *reply = NULL;
    if (!c || !req)
        return sl_fail(e, SL_ERR_INVALID, "registry client: NULL argument");
    req->seq = ++c->seq;
    size_t n = sluice__control__registry_request__get_packed_size(req);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return sl_fail(e, SL_ERR_NOMEM, "registry client: out of memory");
    sluice__control__registry_request__pack(req, buf);
    sl_code rc = sl_client_send(c->ch, buf, n, NULL, 0, e);
    free(buf);
    if (rc != SL_OK)
        return rc;
    int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    for (;;) {
        int left = deadline < 0 ? -1 : (int)(deadline - now_ms());
        if (deadline >= 0 && left < 0)
            left = 0;
        const void *msg;
        size_t len;
        uint64_t bulk = 0;
        if ((rc = sl_client_recv(c->ch, &msg, &len, &bulk, left, e)) != SL_OK)
            return rc;
        if (bulk > 0 || len > NH_REGCLIENT_MAX_REPLY)
            return sl_fail(e, SL_ERR_PROTOCOL, "registry reply of %zu bytes with %llu bulk", len,
                           (unsigned long long)bulk);
        Sluice__Control__RegistryReply *r = sluice__control__registry_reply__unpack(NULL, len, msg);
        if (!r)
            return sl_fail(e, SL_ERR_PROTOCOL, "registry reply of %zu bytes is undecodable", len);
        if (r->seq == req->seq) {
            *reply = r;
            return SL_OK;
        }
        uint64_t got = r->seq;
        sluice__control__registry_reply__free_unpacked(r, NULL);
        if (got > req->seq)
            return sl_fail(e, SL_ERR_PROTOCOL, "registry reply for seq %llu, expected %llu",
                           (unsigned long long)got, (unsigned long long)req->seq);
        /* a late reply to a request that timed out: skip it */
    }
}

void nh_regclient_reply_free(Sluice__Control__RegistryReply *r)
{
    if (r)
        sluice__control__registry_reply__free_unpacked(r, NULL);
}

sl_client *nh_regclient_channel(nh_regclient *c)
{
    return c ? c->ch : NULL;
}

void nh_regclient_close(nh_regclient *c)
{
    if (!c)
        return;
    sl_client_close(c->ch);
    free(c);
}
