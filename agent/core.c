/* The agent's main loop: libvirt observations -> instance table -> backends and revocations. */
#include "core.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "novameta.h"
#include "sluice/log.h"
#include "usage_ingest.h"
#include "virt.h"

#define COMPONENT "agent"
#define MAX_WATCH 8

struct ag_core {
    const ag_config *cfg;
    void (*placement)(void *user, const ag_instance *in, int placed);
    void *placement_user;
    ag_instances *inst;
    ag_supervisor *sup;
    ag_virt *virt;
    unsigned gen;
    int in_resync;
    ag_usage *usage;
    struct {
        int fd;
        int (*fn)(void *);
        void *user;
    } watch[MAX_WATCH];
    int n_watch;
};

static void fill_from_meta(ag_core *c, ag_instance *in, const ag_novameta *m)
{
    snprintf(in->name, sizeof in->name, "%s", m->name);
    snprintf(in->project_id, sizeof in->project_id, "%s", m->project_id);
    snprintf(in->project_name, sizeof in->project_name, "%s", m->project_name);
    snprintf(in->user_id, sizeof in->user_id, "%s", m->user_id);
    snprintf(in->flavor, sizeof in->flavor, "%s", m->flavor);
    memcpy(in->ips, m->ips, sizeof in->ips);
    in->n_ips = m->n_ips;
    in->ns_version = m->ns_version;
    memset(&in->sla, 0, sizeof in->sla);
    in->gpu = ag_policy_resolve(&c->cfg->policy, m->flavor, m->has_extra_specs ? m->specs : NULL,
                                m->n_specs, &in->sla);
}

/* The entry for o, refreshed from its metadata; 0 if the domain is not a Nova instance. */
static int load(ag_core *c, const ag_obs *o, ag_instance *in, int *known)
{
    *known = ag_instances_get(c->inst, o->uuid, in);
    if (!*known) {
        memset(in, 0, sizeof *in);
        snprintf(in->uuid, sizeof in->uuid, "%s", o->uuid);
    }
    snprintf(in->domain, sizeof in->domain, "%s", o->domain);
    if (!o->meta_xml)
        return *known;
    ag_novameta m;
    sl_error e;
    if (ag_novameta_parse(o->meta_xml, strlen(o->meta_xml), o->meta_ns, &m, &e) != SL_OK) {
        sl_log(SL_LOG_WARNING, COMPONENT, "domain %s (%s): Nova metadata ignored: %s", o->domain,
               o->uuid, e.msg);
        return *known;
    }
    fill_from_meta(c, in, &m);
    return 1;
}

static void report(ag_core *c, const ag_instance *in, int placed)
{
    if (c->placement)
        c->placement(c->placement_user, in, placed);
}

static void revoke_now(ag_core *c, ag_instance *in, const char *reason)
{
    ag_supervisor_revoke(c->sup, in->project_id, in->uuid, reason);
    in->revoke_at_ms = 0;
}

static void on_up(ag_core *c, const ag_obs *o)
{
    ag_instance in;
    int known;
    if (!load(c, o, &in, &known))
        return;
    int was_running = known && in.running;
    if (in.revoke_at_ms) {
        sl_log(SL_LOG_NOTICE, COMPONENT,
               "instance %s (%s): running again within the reboot "
               "debounce, not revoked",
               in.uuid, in.domain);
        in.revoke_at_ms = 0;
    }
    in.running = 1;
    in.undefined = 0;
    in.resync_gen = c->gen;
    ag_instances_put(c->inst, &in);
    if (!was_running)
        sl_log(SL_LOG_NOTICE, COMPONENT, "instance %s (%s, project %s, flavor %s): running, %s",
               in.uuid, in.domain, in.project_id, in.flavor,
               in.gpu ? "GPU flavor" : "not a GPU flavor");
    if (in.gpu) {
        if (!was_running)
            report(c, &in, 1);
        ag_supervisor_ensure(c->sup, in.project_id);
    }
}

static void schedule_revoke(ag_core *c, ag_instance *in, const char *reason)
{
    snprintf(in->stop_reason, sizeof in->stop_reason, "%s", reason);
    in->revoke_at_ms = ag_now_ms() + (int64_t)c->cfg->reboot_debounce_s * 1000;
}

static void on_down(ag_core *c, const ag_obs *o)
{
    ag_instance in;
    int known;
    if (!load(c, o, &in, &known))
        return;
    in.resync_gen = c->gen;
    if (known && in.running) {
        in.running = 0;
        sl_log(SL_LOG_NOTICE, COMPONENT, "instance %s (%s): %s", in.uuid, in.domain, o->reason);
        if (in.gpu)
            schedule_revoke(c, &in, o->reason);
    }
    ag_instances_put(c->inst, &in);
}

static void on_gone(ag_core *c, ag_instance *in, const char *reason)
{
    sl_log(SL_LOG_NOTICE, COMPONENT, "instance %s (%s): %s", in->uuid, in->domain, reason);
    int had = in->running || in->revoke_at_ms;
    in->running = 0;
    ag_instances_remove(c->inst, in->uuid);
    if (in->gpu && had) {
        revoke_now(c, in, reason);
        report(c, in, 0);
        ag_supervisor_release(c->sup, in->project_id);
    } else if (in->gpu) {
        report(c, in, 0); /* defined, never started (on_defined placed it) */
    }
}

/* A GPU instance newly defined, not running. Nova's spawn defines the domain, then builds the
 * config drive, whose vendordata nova-hook answers only for an instance placed on an agent,
 * then starts it: placed now, the config drive carries a token (docs/enrollment.md). */
static void on_defined(ag_core *c, const ag_obs *o)
{
    ag_instance in;
    int known;
    if (!load(c, o, &in, &known) || !in.gpu)
        return;
    in.resync_gen = c->gen;
    ag_instances_put(c->inst, &in);
    sl_log(SL_LOG_NOTICE, COMPONENT,
           "instance %s (%s, project %s, flavor %s): defined, not running yet: placed on this "
           "host",
           in.uuid, in.domain, in.project_id, in.flavor);
    report(c, &in, 1);
}

static void on_meta(ag_core *c, const ag_obs *o)
{
    ag_instance old, in;
    int known;
    if (!ag_instances_get(c->inst, o->uuid, &old)) {
        if (o->running)
            on_up(c, o);
        else if (!strcmp(o->reason, "defined"))
            on_defined(c, o);
        return;
    }
    if (!load(c, o, &in, &known))
        return;
    if (in.n_ips != old.n_ips || memcmp(in.ips, old.ips, sizeof in.ips))
        sl_log(SL_LOG_INFO, COMPONENT, "instance %s (%s): metadata changed, %d port IPs", in.uuid,
               in.domain, in.n_ips);
    if (old.gpu && !in.gpu && (old.running || old.revoke_at_ms)) {
        revoke_now(c, &in, "no longer a GPU flavor");
        ag_instances_put(c->inst, &in);
        report(c, &in, 0);
        ag_supervisor_release(c->sup, in.project_id);
        return;
    }
    ag_instances_put(c->inst, &in);
    if (in.gpu && in.running) {
        if (!old.gpu || strcmp(old.project_id, in.project_id) || strcmp(old.flavor, in.flavor))
            report(c, &in, 1);
        ag_supervisor_ensure(c->sup, in.project_id);
    }
}

static void resync_end(ag_core *c)
{
    size_t n;
    ag_instance *all = ag_instances_snapshot(c->inst, &n);
    for (size_t i = 0; i < n; i++)
        if (all[i].resync_gen != c->gen)
            on_gone(c, &all[i], "undefined (not listed at resync)");
    free(all);
    ag_supervisor_resynced(c->sup);
    c->in_resync = 0;
}

/* The journal's fields of what follows: the instance, and its project when the table knows it. */
static void log_fields(ag_core *c, const char *uuid)
{
    ag_instance in;
    int known = uuid && *uuid && ag_instances_get(c->inst, uuid, &in);
    sl_log_set_thread_fields(
        &(sl_log_fields){.project = known ? in.project_id : NULL, .instance = uuid});
}

static void handle(ag_core *c, ag_obs *o)
{
    log_fields(c, o->uuid);
    switch (o->kind) {
    case AG_OBS_UP:
        on_up(c, o);
        break;
    case AG_OBS_DOWN:
        on_down(c, o);
        break;
    case AG_OBS_GONE: {
        ag_instance in;
        if (ag_instances_get(c->inst, o->uuid, &in))
            on_gone(c, &in, o->reason);
        break;
    }
    case AG_OBS_META:
        on_meta(c, o);
        break;
    case AG_OBS_REBOOT:
        sl_log(SL_LOG_INFO, COMPONENT, "domain %s (%s): guest rebooted", o->domain, o->uuid);
        break;
    case AG_OBS_RESYNC_BEGIN:
        c->gen++;
        c->in_resync = 1;
        break;
    case AG_OBS_RESYNC_END:
        resync_end(c);
        break;
    case AG_OBS_DISCONNECTED:
        sl_log(SL_LOG_WARNING, COMPONENT, "libvirt: %s; reconnecting", o->reason);
        break;
    }
    sl_log_set_thread_fields(NULL);
    ag_obs_clear(o);
}

/* Due revocations; returns ms until the next one (or 1000). */
static int timers(ag_core *c)
{
    int64_t now = ag_now_ms(), next = 1000;
    size_t n;
    ag_instance *all = ag_instances_snapshot(c->inst, &n);
    for (size_t i = 0; i < n; i++) {
        ag_instance *in = &all[i];
        if (!in->revoke_at_ms)
            continue;
        if (in->revoke_at_ms > now) {
            if (in->revoke_at_ms - now < next)
                next = in->revoke_at_ms - now;
            continue;
        }
        ag_instance cur;
        if (!ag_instances_get(c->inst, in->uuid, &cur) || cur.running || !cur.revoke_at_ms)
            continue;
        revoke_now(c, &cur, cur.stop_reason[0] ? cur.stop_reason : "stopped");
        ag_instances_put(c->inst, &cur);
        report(c, &cur, 0);
        ag_supervisor_release(c->sup, cur.project_id);
    }
    free(all);
    return (int)next;
}

sl_code ag_core_new(const ag_core_opts *o, ag_core **out, sl_error *e)
{
    ag_core *c = calloc(1, sizeof *c);
    if (!c || !(c->inst = ag_instances_new())) {
        free(c);
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    }
    c->cfg = o->cfg;
    c->placement = o->placement;
    c->placement_user = o->placement_user;
    ag_supervisor_opts so = {o->cfg, c->inst, o->issue, o->issue_user};
    sl_code rc = ag_supervisor_new(&so, &c->sup, e);
    if (rc == SL_OK)
        rc = ag_virt_start(o->cfg->libvirt_uri, &c->virt, e);
    if (rc != SL_OK) {
        ag_core_free(c);
        return rc;
    }
    *out = c;
    return SL_OK;
}

int ag_core_watch(ag_core *c, int fd, int (*fn)(void *user), void *user)
{
    if (c->n_watch >= MAX_WATCH)
        return -1;
    c->watch[c->n_watch].fd = fd;
    c->watch[c->n_watch].fn = fn;
    c->watch[c->n_watch].user = user;
    c->n_watch++;
    return 0;
}

void ag_core_run_once(ag_core *c, int timeout_ms)
{
    struct pollfd p[2 + MAX_WATCH];
    p[0] = (struct pollfd){ag_virt_fd(c->virt), POLLIN, 0};
    p[1] = (struct pollfd){ag_supervisor_fd(c->sup), POLLIN, 0};
    for (int i = 0; i < c->n_watch; i++)
        p[2 + i] = (struct pollfd){c->watch[i].fd, POLLIN, 0};
    int t = ag_supervisor_tick(c->sup);
    int tt = timers(c);
    if (tt < t)
        t = tt;
    if (timeout_ms >= 0 && timeout_ms < t)
        t = timeout_ms;
    poll(p, (nfds_t)(2 + c->n_watch), t < 0 ? 0 : t);
    ag_obs o;
    for (int i = 0; i < 10000 && ag_virt_next(c->virt, &o); i++)
        handle(c, &o);
    timers(c);
    ag_supervisor_tick(c->sup);
    for (int i = 0; i < c->n_watch; i++)
        c->watch[i].fd = c->watch[i].fn(c->watch[i].user);
    if (c->usage)
        ag_usage_tick(c->usage, ag_virt_connected(c->virt), ag_supervisor_running(c->sup));
}

void ag_core_set_usage(ag_core *c, ag_usage *u)
{
    c->usage = u;
    ag_supervisor_set_usage(c->sup, u);
}

ag_instances *ag_core_instances(ag_core *c)
{
    return c->inst;
}

ag_supervisor *ag_core_supervisor(ag_core *c)
{
    return c->sup;
}

int ag_core_libvirt_connected(ag_core *c)
{
    return ag_virt_connected(c->virt);
}

void ag_core_force_reconnect(ag_core *c)
{
    ag_virt_force_reconnect(c->virt);
}

void ag_core_free(ag_core *c)
{
    if (!c)
        return;
    ag_virt_stop(c->virt);
    if (c->sup) {
        ag_supervisor_stop_all(c->sup);
        ag_supervisor_free(c->sup);
    }
    ag_instances_free(c->inst);
    free(c);
}
