/* Registry request handling: register, unregister, place, remove, usage, ping. */
#include "registry.h"

#include <jansson.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/log.h"
#include "validate.h"

#define COMPONENT "nova-hook/registry"

void nh_reply_init(nh_reply *r)
{
    memset(r, 0, sizeof *r);
    sluice__control__registry_reply__init(&r->msg);
    sluice__control__usage_ack__init(&r->ack);
    sluice__control__pong__init(&r->pong);
    r->msg.detail = r->detail;
}

void nh_reply_free(nh_reply *r)
{
    free(r->ids);
    r->ids = NULL;
}

/* ok = 0 with a detail; returns SL_OK (a refusal is an answer, not a failure). */
static sl_code refuse(nh_reply *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static sl_code refuse(nh_reply *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
    r->msg.ok = 0;
    return SL_OK;
}

static sl_code store_failed(nh_reply *r, sl_code rc, const sl_error *e)
{
    snprintf(r->detail, sizeof r->detail, "registry store failed; retry later");
    r->msg.ok = 0;
    return rc == SL_OK ? SL_ERR_IO : rc;
    (void)e;
}

/* The request must be about the authenticated host. */
static int host_matches(const nh_peer *p, const char *host)
{
    return !p->host || strcmp(p->host, host) == 0;
}

/* ------------------------------------------------------------------------------- agents */

static int valid_ca_pem(const char *pem)
{
    size_t n = strlen(pem);
    if (n > NH_REGISTRY_MAX_CA_BYTES)
        return 0;
    BIO *bio = BIO_new_mem_buf(pem, (int)n);
    X509 *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    int ok = x && X509_check_ca(x) >= 1;
    X509_free(x);
    BIO_free(bio);
    return ok;
}

static sl_code check_agent(const Sluice__Control__AgentInfo *a, nh_reply *r)
{
    if (!nh_valid_host(a->host))
        return refuse(r, "agent: host is missing or not a host name");
    if (!nh_valid_endpoint(a->enrollment_endpoint))
        return refuse(r, "agent %s: enrollment_endpoint is not tcp://HOST:PORT", a->host);
    if (a->slots_total > NH_REGISTRY_MAX_SLOTS)
        return refuse(r, "agent %s: slots_total %u over %d", a->host, a->slots_total,
                      NH_REGISTRY_MAX_SLOTS);
    if (a->n_gpus > NH_REGISTRY_MAX_GPUS)
        return refuse(r, "agent %s: more than %d GPUs", a->host, NH_REGISTRY_MAX_GPUS);
    for (size_t i = 0; i < a->n_gpus; i++)
        if (!nh_valid_printable(a->gpus[i]->uuid, 1, 64) ||
            !nh_valid_printable(a->gpus[i]->name, 0, 128))
            return refuse(r, "agent %s: gpu %zu has a bad uuid or name", a->host, i);
    if (!nh_valid_printable(a->version, 0, 64))
        return refuse(r, "agent %s: version is not printable ASCII of at most 64 bytes", a->host);
    if (a->ca_pem && *a->ca_pem && !valid_ca_pem(a->ca_pem))
        return refuse(r, "agent %s: ca_pem is not a PEM CA certificate", a->host);
    r->msg.ok = 1;
    return SL_OK;
}

static char *gpus_json(const Sluice__Control__AgentInfo *a)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < a->n_gpus; i++) {
        const Sluice__Control__Gpu *g = a->gpus[i];
        json_t *o = json_pack("{s:s, s:s, s:I}", "uuid", g->uuid, "name", g->name ? g->name : "",
                              "memory_bytes", (json_int_t)g->memory_bytes);
        if (!o || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    char *s = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
    json_decref(arr);
    return s;
}

static sl_code do_register(nh_store *s, const nh_peer *p, const Sluice__Control__AgentInfo *a,
                           nh_reply *r, sl_error *e)
{
    sl_code rc = check_agent(a, r);
    if (rc != SL_OK || !r->msg.ok)
        return rc;
    if (!host_matches(p, a->host))
        return refuse(r, "agent: host %s is not the authenticated host %s", a->host, p->host);
    char *gpus = gpus_json(a);
    if (!gpus)
        return store_failed(r, sl_fail(e, SL_ERR_NOMEM, "registry: out of memory"), e);
    nh_agent_in in = {a->host, a->enrollment_endpoint, a->slots_total, gpus, a->version, a->ca_pem};
    rc = nh_store_register(s, &in, p->now, e);
    free(gpus);
    if (rc != SL_OK)
        return store_failed(r, rc, e);
    sl_log(SL_LOG_INFO, COMPONENT, "agent %s registered: endpoint %s, %u slots, %zu GPUs", a->host,
           a->enrollment_endpoint, a->slots_total, a->n_gpus);
    snprintf(r->detail, sizeof r->detail, "registered");
    return SL_OK;
}

static sl_code do_unregister(nh_store *s, const nh_peer *p, const Sluice__Control__AgentInfo *a,
                             nh_reply *r, sl_error *e)
{
    if (!nh_valid_host(a->host))
        return refuse(r, "unregister: host is missing or not a host name");
    if (!host_matches(p, a->host))
        return refuse(r, "unregister: host %s is not the authenticated host %s", a->host, p->host);
    int existed = 0;
    sl_code rc = nh_store_unregister(s, a->host, &existed, e);
    if (rc != SL_OK)
        return store_failed(r, rc, e);
    sl_log(SL_LOG_INFO, COMPONENT, "agent %s unregistered%s", a->host,
           existed ? "" : " (was not registered)");
    r->msg.ok = 1;
    snprintf(r->detail, sizeof r->detail, existed ? "unregistered" : "was not registered");
    return SL_OK;
}

/* ---------------------------------------------------------------------------- placements */

static sl_code do_place(nh_store *s, const nh_peer *p, const Sluice__Control__Placement *pl,
                        nh_reply *r, sl_error *e)
{
    if (!nh_valid_id(pl->instance_uuid))
        return refuse(r, "place: instance_uuid is missing or not an id");
    if (!nh_valid_id(pl->project_id))
        return refuse(r, "place %s: project_id is missing or not an id", pl->instance_uuid);
    if (!nh_valid_printable(pl->flavor, 1, 255))
        return refuse(r, "place %s: flavor is missing or not printable", pl->instance_uuid);
    if (!nh_valid_host(pl->host))
        return refuse(r, "place %s: host is missing or not a host name", pl->instance_uuid);
    if (!host_matches(p, pl->host))
        return refuse(r, "place %s: host %s is not the authenticated host %s", pl->instance_uuid,
                      pl->host, p->host);
    if (pl->since_unix < 0)
        return refuse(r, "place %s: since_unix is negative", pl->instance_uuid);
    int64_t since = pl->since_unix ? pl->since_unix : p->now;
    sl_code rc =
        nh_store_place(s, pl->instance_uuid, pl->project_id, pl->flavor, pl->host, since, e);
    if (rc == SL_ERR_REFUSED)
        return refuse(r, "place %s: host %s is not a registered agent", pl->instance_uuid,
                      pl->host);
    if (rc != SL_OK)
        return store_failed(r, rc, e);
    sl_log(SL_LOG_INFO, COMPONENT, "instance %s (project %s, flavor %s) placed on %s",
           pl->instance_uuid, pl->project_id, pl->flavor, pl->host);
    r->msg.ok = 1;
    snprintf(r->detail, sizeof r->detail, "placed");
    return SL_OK;
}

static sl_code do_remove(nh_store *s, const nh_peer *p, const Sluice__Control__Removal *rm,
                         nh_reply *r, sl_error *e)
{
    if (!nh_valid_id(rm->instance_uuid))
        return refuse(r, "remove: instance_uuid is missing or not an id");
    if (!nh_valid_host(rm->host))
        return refuse(r, "remove %s: host is missing or not a host name", rm->instance_uuid);
    if (!host_matches(p, rm->host))
        return refuse(r, "remove %s: host %s is not the authenticated host %s", rm->instance_uuid,
                      rm->host, p->host);
    int removed = 0;
    sl_code rc = nh_store_unplace(s, rm->instance_uuid, rm->host, &removed, e);
    if (rc != SL_OK)
        return store_failed(r, rc, e);
    sl_log(SL_LOG_INFO, COMPONENT, "instance %s removed from %s%s", rm->instance_uuid, rm->host,
           removed ? "" : " (was not placed there)");
    r->msg.ok = 1; /* idempotent: removing twice is fine */
    snprintf(r->detail, sizeof r->detail, removed ? "removed" : "was not placed on this host");
    return SL_OK;
}

/* --------------------------------------------------------------------------------- usage */

static int valid_record(const Sluice__Control__UsageRecord *u)
{
    return nh_valid_printable(u->record_id, 1, 128) && nh_valid_id(u->instance_uuid) &&
           nh_valid_id(u->project_id) && nh_valid_printable(u->flavor, 0, 255) &&
           nh_valid_printable(u->gpu_uuid, 0, 64) && nh_valid_printable(u->measurement, 0, 16) &&
           nh_valid_printable(u->instance_name, 0, 255) &&
           nh_valid_printable(u->domain_name, 0, 255) && nh_valid_printable(u->sla_tier, 0, 32) &&
           u->gpu_share >= 0 && u->gpu_share <= 1 && /* false for NaN too */
           u->interval_start_ns >= 0 && u->interval_end_ns >= u->interval_start_ns &&
           /* a record's share of the GPU's busy time lies within its interval */
           (!u->shared ||
            u->shared->gpu_shared_ns <= (uint64_t)(u->interval_end_ns - u->interval_start_ns));
}

static sl_code do_usage(nh_store *s, const nh_peer *p, const char *host,
                        const Sluice__Control__UsagePush *u, nh_reply *r, sl_error *e)
{
    if (u->n_records > NH_REGISTRY_MAX_RECORDS)
        return refuse(r, "usage: %zu records in one push, at most %d", u->n_records,
                      NH_REGISTRY_MAX_RECORDS);
    for (size_t i = 0; i < u->n_records; i++)
        if (!valid_record(u->records[i]))
            return refuse(r,
                          "usage: record %zu is malformed (ids, strings, interval or shared "
                          "time longer than the interval); nothing stored",
                          i);
    r->ids = calloc(u->n_records ? u->n_records : 1, sizeof *r->ids);
    if (!r->ids)
        return store_failed(r, sl_fail(e, SL_ERR_NOMEM, "registry: out of memory"), e);
    size_t added = 0;
    sl_code rc = nh_store_usage_insert(s, host, u->records, u->n_records, p->now, &added, e);
    if (rc != SL_OK)
        return store_failed(r, rc, e);
    /* stored (now or before): acknowledge every record */
    for (size_t i = 0; i < u->n_records; i++)
        r->ids[i] = u->records[i]->record_id;
    r->ack.n_record_ids = u->n_records;
    r->ack.record_ids = r->ids;
    r->msg.usage_ack = &r->ack;
    r->msg.ok = 1;
    snprintf(r->detail, sizeof r->detail, "stored %zu new of %zu", added, u->n_records);
    sl_log(SL_LOG_DEBUG, COMPONENT, "usage from %s: %zu records, %zu new", host, u->n_records,
           added);
    return SL_OK;
}

/* ------------------------------------------------------------------------------ dispatch */

sl_code nh_registry_handle(nh_store *s, const nh_peer *p,
                           const Sluice__Control__RegistryRequest *req, nh_reply *r, sl_error *e)
{
    r->msg.seq = req->seq;
    r->msg.ok = 0;
    if (p->host && req->kind_case != SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REGISTER) {
        /* every other request comes from a registered agent; it counts as a heartbeat */
        int known = 0;
        sl_code rc = nh_store_touch(s, p->host, p->now, &known, e);
        if (rc != SL_OK)
            return store_failed(r, rc, e);
        if (!known && req->kind_case != SLUICE__CONTROL__REGISTRY_REQUEST__KIND_UNREGISTER)
            return refuse(r, "host %s is not registered: register first", p->host);
    }
    switch (req->kind_case) {
    case SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REGISTER:
        return do_register(s, p, req->register_, r, e);
    case SLUICE__CONTROL__REGISTRY_REQUEST__KIND_UNREGISTER:
        return do_unregister(s, p, req->unregister, r, e);
    case SLUICE__CONTROL__REGISTRY_REQUEST__KIND_PLACE:
        return do_place(s, p, req->place, r, e);
    case SLUICE__CONTROL__REGISTRY_REQUEST__KIND_REMOVE:
        return do_remove(s, p, req->remove, r, e);
    case SLUICE__CONTROL__REGISTRY_REQUEST__KIND_USAGE:
        if (!p->host)
            return refuse(r, "usage: needs an authenticated host");
        return do_usage(s, p, p->host, req->usage, r, e);
    case SLUICE__CONTROL__REGISTRY_REQUEST__KIND_PING:
        r->pong.nonce = req->ping->nonce;
        r->msg.pong = &r->pong;
        r->msg.ok = 1;
        snprintf(r->detail, sizeof r->detail, "pong");
        return SL_OK;
    default:
        return refuse(r, "empty or unknown request kind %d", (int)req->kind_case);
    }
}
