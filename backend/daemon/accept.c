/* Session admission: the TLS accept hook (the grants), SessionOpen (the limits of the backend and
 * of the instance's SLA, the accounting slot, then a worker process or an in-process session) and
 * the SessionAccept message (device facts). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/accept.h"
#include "accounting/quota.h"
#include "accounting/records.h"
#include "daemon/config.h"
#include "daemon/control.h"
#include "daemon/direct.h"
#include "daemon/grants.h"
#include "daemon/lanes.h"
#include "daemon/outbox.h"
#include "daemon/sessions.h"
#include "daemon/state.h"
#include "daemon/workers.h"
#include "session/devices.h"
#include "session/image_cache.h"
#include "session/image_store.h"
#include "session/session.h"
#include "sluice/log.h"
#include "sluice_control.pb-c.h"

sl_code be_encode_accept(const struct be_devices *devs, const sl_be_session *s,
                         const struct be_direct *direct, const struct be_lanes *lanes,
                         uint8_t **buf, size_t *len, sl_error *e)
{
    uint32_t lane_ports[SL_LANE_MAX];
    ProtobufCBinaryData lane_tickets[SL_LANE_MAX];
    int nd = devs ? devs->count : 0;
    Sluice__Wire__DeviceInfo *di = calloc(nd ? (size_t)nd : 1, sizeof *di);
    Sluice__Wire__DeviceInfo **dp = calloc(nd ? (size_t)nd : 1, sizeof *dp);
    if (!di || !dp) {
        free(di);
        free(dp);
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < nd; i++) {
        const struct be_device *d = &devs->dev[i];
        sluice__wire__device_info__init(&di[i]);
        di[i].ordinal = i;
        di[i].name = (char *)d->name;
        if (d->has_uuid)
            di[i].uuid = (ProtobufCBinaryData){16, (uint8_t *)d->uuid};
        di[i].total_mem = be_acct_total_mem(s, d->total_mem); /* min(device, quota) */
        di[i].attributes = d->attrs;
        di[i].n_attributes = d->n_attrs;
        if (d->has_luid)
            di[i].luid = (ProtobufCBinaryData){8, (uint8_t *)d->luid};
        di[i].luid_device_node_mask = d->luid_mask;
        di[i].primary_context = s->primary_ids[i];
        dp[i] = &di[i];
    }
    int dv = devs ? devs->driver_version : 0;
    Sluice__Wire__SessionAccept acc = SLUICE__WIRE__SESSION_ACCEPT__INIT;
    acc.protocol_version = 1;
    acc.driver_version = (uint32_t)(dv < 13000 ? 13000 : dv);
    acc.session_id = s->id;
    acc.max_message_bytes = SL_WIRE_MAX_MESSAGE;
    acc.max_bulk_bytes = BE_MAX_BULK_PER_CALL;
    acc.devices = dp;
    acc.n_devices = (size_t)nd;
    if (direct) { /* the worker's own endpoint (direct.c) */
        acc.direct_port = be_direct_port(direct);
        acc.direct_ticket =
            (ProtobufCBinaryData){BE_DIRECT_TICKET, (uint8_t *)be_direct_ticket(direct)};
        unsigned nl = be_lanes_count(lanes);
        for (unsigned i = 0; i < nl && i < SL_LANE_MAX; i++) {
            lane_ports[i] = be_lanes_port(lanes, i);
            lane_tickets[i] =
                (ProtobufCBinaryData){SL_LANE_TICKET, (uint8_t *)be_lanes_ticket(lanes, i)};
        }
        acc.lane_ports = lane_ports;
        acc.n_lane_ports = nl;
        acc.lane_tickets = lane_tickets;
        acc.n_lane_tickets = nl;
    }
    /* the images this process and the tenant's store hold: the guest sends the others with
     * their first slLoadImage (a duplicate hint costs nothing) */
    uint64_t *hints = malloc(SL_WIRE_MAX_IMAGE_HINTS * sizeof *hints);
    if (hints) {
        acc.n_image_hints = be_image_cache_hints(hints, SL_WIRE_MAX_IMAGE_HINTS);
        acc.n_image_hints += be_image_store_hints(hints + acc.n_image_hints,
                                                  SL_WIRE_MAX_IMAGE_HINTS - acc.n_image_hints);
        acc.image_hints = hints;
    }
    Sluice__Wire__ServerMessage m = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT;
    m.accept = &acc;
    sl_code rc = sl_wire_encode_server(&m, NULL, buf, len, e);
    free(hints);
    free(di);
    free(dp);
    return rc;
}

void be_accept_open(struct be_server *srv, const sl_server_event *ev,
                    const Sluice__Wire__SessionOpen *o)
{
    if (be_sessions_find(srv, ev->peer)) {
        be_sessions_violation(srv, ev->peer, SL_ERR_PROTOCOL, "a second SessionOpen");
        return;
    }
    if (o->protocol_version != 1) {
        be_sessions_violation(srv, ev->peer, SL_ERR_PROTOCOL, "protocol version not 1");
        return;
    }
    sl_error e;
    unsigned max = srv->cfg->max_sessions ? srv->cfg->max_sessions : BE_DEFAULT_MAX_SESSIONS;
    const char *inst = ev->identity->instance_id;
    struct be_sla sla;
    be_grants_sla(srv->grants, inst, &sla);
    unsigned of_inst = 0;
    for (struct be_sess_node *x = srv->sessions; x; x = x->next)
        of_inst += !x->ended && !strcmp(x->instance, inst);
    char why[200] = "";
    if (srv->live >= max)
        snprintf(why, sizeof why, "the backend serves its maximum of %u sessions; try later", max);
    else if (sla.max_sessions && of_inst >= sla.max_sessions)
        snprintf(why, sizeof why,
                 "instance %.40s has its maximum of %u session%s (flavor %.60s); try later", inst,
                 sla.max_sessions, sla.max_sessions == 1 ? "" : "s",
                 sla.flavor[0] ? sla.flavor : "?");
    if (why[0]) {
        sl_log(SL_LOG_WARNING, BE_COMPONENT, "refused a session of instance %s project %s: %s",
               inst, ev->identity->project_id, why);
        be_control_refused(srv->ctl, "limit", inst, ev->identity->project_id, why);
        sl_server_disconnect(srv->srv, ev->peer, SL_ERR_REFUSED, why, &e);
        return;
    }
    struct be_sess_node *n = calloc(1, sizeof *n);
    if (!n) {
        sl_server_disconnect(srv->srv, ev->peer, SL_ERR_NOMEM, "out of memory", &e);
        return;
    }
    n->fd = -1;
    n->acct_slot = n->acct_inst = -1;
    n->peer = ev->peer;
    n->id = ev->peer; /* the channel's session number: its lines and ours name the same one */
    snprintf(n->instance, sizeof n->instance, "%s", ev->identity->instance_id);
    snprintf(n->project, sizeof n->project, "%s", ev->identity->project_id);
    snprintf(n->fingerprint, sizeof n->fingerprint, "%s", ev->identity->fingerprint);
    n->lanes = o->lanes; /* checked by the envelope: <= SL_LANE_MAX */
    snprintf(n->flavor, sizeof n->flavor, "%s", sla.flavor);
    if (srv->acct) {
        n->acct_inst = be_acct_inst_set(srv->acct, inst, &sla);
        n->acct_slot = be_acct_slot_take(srv->acct, n->acct_inst);
        if (n->acct_inst < 0 || n->acct_slot < 0) {
            sl_log(SL_LOG_ERR, BE_COMPONENT,
                   "refused a session of instance %s: the accounting page is full", inst);
            be_sessions_node_free(srv, n);
            sl_server_disconnect(srv->srv, ev->peer, SL_ERR_REFUSED,
                                 "the backend cannot account for another session; try later", &e);
            return;
        }
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (srv->cfg->worker_exe) {
        if (be_workers_spawn(srv, n, &e) != SL_OK) {
            sl_log(SL_LOG_ERR, BE_COMPONENT, "session %llu instance %s: no worker: %s",
                   (unsigned long long)n->id, n->instance, e.msg);
            be_sessions_node_free(srv, n);
            sl_server_disconnect(srv->srv, ev->peer, e.code, e.msg, &e);
            return;
        }
        /* the worker answers SessionAccept once it has loaded the driver */
    } else {
        sl_be_session *s = be_session_new(n->id, srv->api, srv->devs);
        if (!s) {
            be_sessions_node_free(srv, n);
            sl_server_disconnect(srv->srv, ev->peer, SL_ERR_NOMEM, "out of memory", &e);
            return;
        }
        s->peer = ev->peer;
        s->srv = srv;
        memcpy(s->instance, n->instance, sizeof s->instance);
        memcpy(s->project, n->project, sizeof s->project);
        s->spin_ns = (uint64_t)srv->cfg->spin_us * 1000u;
        n->s = s;
        struct be_acct_cfg ac = {.interval_ns = (int64_t)(srv->cfg->usage_interval_s
                                                              ? srv->cfg->usage_interval_s
                                                              : BE_USAGE_INTERVAL_S) *
                                                1000000000LL,
                                 .shm = srv->acct,
                                 .slot = n->acct_slot,
                                 .inst = n->acct_inst,
                                 .no_timing = srv->cfg->no_gpu_timing,
                                 .emit = be_outbox_usage,
                                 .user = srv};
        if (be_acct_attach(s, &ac, &e) != SL_OK || be_session_start(s, &e) != SL_OK) {
            be_sessions_node_free(srv, n);
            sl_server_disconnect(srv->srv, ev->peer, e.code, e.msg, &e);
            return;
        }
    }
    n->next = srv->sessions;
    srv->sessions = n;
    srv->live++;
    be_control_session(srv->ctl, SLUICE__CONTROL__SESSION_EVENT__KIND__OPENED, n->instance,
                       n->project, n->id, "");
    if (n->s) {
        if (be_encode_accept(srv->devs, n->s, NULL, NULL, &buf, &len, &e) != SL_OK) {
            be_sessions_violation(srv, ev->peer, SL_ERR_NOMEM, "out of memory");
            return;
        }
        if (sl_server_send(srv->srv, ev->peer, buf, len, NULL, 0, &e) != SL_OK)
            sl_log(SL_LOG_WARNING, BE_COMPONENT, "peer %llu: send: %s",
                   (unsigned long long)ev->peer, e.msg);
        free(buf);
    }
    sl_log(SL_LOG_NOTICE, BE_COMPONENT,
           "session %llu instance %s project %s: opened (guest pid %u on %.64s, %.80s, CUDA %u)%s",
           (unsigned long long)n->id, n->instance, n->project, o->pid,
           o->hostname ? o->hostname : "", o->client ? o->client : "", o->cuda_version,
           n->pid ? "; worker process started" : "");
    if (n->pid)
        sl_log(SL_LOG_INFO, BE_COMPONENT, "session %llu: worker pid %d", (unsigned long long)n->id,
               (int)n->pid);
}

int be_accept_hook(void *user, const sl_peer_identity *id, sl_error *why)
{
    struct be_server *srv = user;
    char reason[200];
    if (be_grants_check(srv->grants, srv->cfg->project, id, reason, sizeof reason) == 0)
        return 0;
    sl_log(SL_LOG_NOTICE, BE_COMPONENT, "refused instance %s project %s from %s: %s",
           id->instance_id, id->project_id, id->address[0] ? id->address : "?", reason);
    be_control_refused(srv->ctl, "grant", id->instance_id, id->project_id, reason);
    sl_fail(why, SL_ERR_REFUSED, "%s", reason);
    return 1;
}
