/* libvirt connection, events, keepalive, reconnect and resync. */
#include "virt.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "novameta.h"
#include "sluice/log.h"

#define COMPONENT   "agent"
#define BACKOFF_MAX 30000

typedef struct qnode {
    ag_obs o;
    struct qnode *next;
} qnode;

struct ag_virt {
    char uri[256];
    pthread_t th;
    pthread_mutex_t mu;
    qnode *head, *tail;
    int efd;
    volatile int stop;
    volatile int lost; /* set by the close callback (or a test) */
    volatile int up;
    virConnectPtr conn; /* only the thread touches it */
    int cb[3];
    int timer;
};

void ag_obs_clear(ag_obs *o)
{
    free(o->meta_xml);
    o->meta_xml = NULL;
}

static void push(ag_virt *v, const ag_obs *o)
{
    qnode *n = malloc(sizeof *n);
    if (!n) {
        free(o->meta_xml);
        return;
    }
    n->o = *o;
    n->next = NULL;
    pthread_mutex_lock(&v->mu);
    if (v->tail)
        v->tail->next = n;
    else
        v->head = n;
    v->tail = n;
    pthread_mutex_unlock(&v->mu);
    uint64_t one = 1;
    ssize_t w = write(v->efd, &one, sizeof one);
    (void)w;
}

int ag_virt_next(ag_virt *v, ag_obs *o)
{
    pthread_mutex_lock(&v->mu);
    qnode *n = v->head;
    if (n) {
        v->head = n->next;
        if (!v->head)
            v->tail = NULL;
    } else {
        uint64_t x;
        ssize_t r = read(v->efd, &x, sizeof x);
        (void)r;
    }
    pthread_mutex_unlock(&v->mu);
    if (!n)
        return 0;
    *o = n->o;
    free(n);
    return 1;
}

int ag_virt_fd(const ag_virt *v)
{
    return v->efd;
}

int ag_virt_connected(ag_virt *v)
{
    return v->up;
}

void ag_virt_force_reconnect(ag_virt *v)
{
    v->lost = 1;
}

/* The Nova metadata element, 1.1 then 1.0; NULL if the domain has none. */
static char *nova_meta(virDomainPtr d, int *ns)
{
    *ns = 11;
    char *x = virDomainGetMetadata(d, VIR_DOMAIN_METADATA_ELEMENT, AG_NOVA_NS_11, 0);
    if (!x) {
        *ns = 10;
        x = virDomainGetMetadata(d, VIR_DOMAIN_METADATA_ELEMENT, AG_NOVA_NS_10, 0);
    }
    if (!x)
        virResetLastError();
    return x;
}

static void observe(ag_virt *v, virDomainPtr d, ag_obs_kind kind, int running, const char *reason)
{
    ag_obs o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    if (virDomainGetUUIDString(d, o.uuid) != 0)
        return;
    const char *name = virDomainGetName(d);
    snprintf(o.domain, sizeof o.domain, "%s", name ? name : "");
    o.running = running;
    snprintf(o.reason, sizeof o.reason, "%s", reason ? reason : "");
    if (kind == AG_OBS_UP || kind == AG_OBS_META || kind == AG_OBS_DOWN)
        o.meta_xml = nova_meta(d, &o.meta_ns);
    if (kind != AG_OBS_GONE && !o.meta_xml) {
        sl_log(SL_LOG_DEBUG, COMPONENT, "domain %s (%s): no Nova metadata, ignored", o.domain,
               o.uuid);
        if (kind != AG_OBS_DOWN)
            return;
    }
    push(v, &o);
}

static const char *stop_reason(int detail)
{
    switch (detail) {
    case VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN:
        return "stopped";
    case VIR_DOMAIN_EVENT_STOPPED_DESTROYED:
        return "destroyed";
    case VIR_DOMAIN_EVENT_STOPPED_CRASHED:
        return "crashed";
    case VIR_DOMAIN_EVENT_STOPPED_MIGRATED:
        return "migrated";
    case VIR_DOMAIN_EVENT_STOPPED_SAVED:
        return "saved";
    case VIR_DOMAIN_EVENT_STOPPED_FAILED:
        return "failed";
    default:
        return "stopped";
    }
}

static int on_lifecycle(virConnectPtr c, virDomainPtr d, int event, int detail, void *opaque)
{
    (void)c;
    ag_virt *v = opaque;
    switch (event) {
    case VIR_DOMAIN_EVENT_STARTED:
    case VIR_DOMAIN_EVENT_RESUMED:
        observe(v, d, AG_OBS_UP, 1, "started");
        break;
    case VIR_DOMAIN_EVENT_STOPPED:
        observe(v, d, AG_OBS_DOWN, 0, stop_reason(detail));
        break;
    case VIR_DOMAIN_EVENT_CRASHED:
        observe(v, d, AG_OBS_DOWN, 0, "crashed");
        break;
    case VIR_DOMAIN_EVENT_UNDEFINED:
        observe(v, d, AG_OBS_GONE, 0, "undefined");
        break;
    case VIR_DOMAIN_EVENT_DEFINED:
        observe(v, d, AG_OBS_META, virDomainIsActive(d) == 1, "defined");
        break;
    default:
        break;
    }
    return 0;
}

static int on_reboot(virConnectPtr c, virDomainPtr d, void *opaque)
{
    (void)c;
    observe(opaque, d, AG_OBS_REBOOT, 1, "rebooted");
    return 0;
}

static int on_metadata(virConnectPtr c, virDomainPtr d, int type, const char *nsuri, void *opaque)
{
    (void)c;
    if (type != VIR_DOMAIN_METADATA_ELEMENT ||
        (nsuri && strcmp(nsuri, AG_NOVA_NS_11) && strcmp(nsuri, AG_NOVA_NS_10)))
        return 0;
    observe(opaque, d, AG_OBS_META, virDomainIsActive(d) == 1, "metadata");
    return 0;
}

static void on_close(virConnectPtr c, int reason, void *opaque)
{
    (void)c;
    ag_virt *v = opaque;
    static const char *why[] = {"error", "end of file", "keepalive timeout", "client"};
    sl_log(SL_LOG_WARNING, COMPONENT, "libvirt connection closed (%s)",
           reason >= 0 && reason < 4 ? why[reason] : "unknown");
    v->lost = 1;
}

static void tick(int timer, void *opaque)
{
    (void)timer;
    (void)opaque;
}

static void disconnect(ag_virt *v)
{
    if (!v->conn)
        return;
    for (int i = 0; i < 3; i++)
        if (v->cb[i] >= 0)
            virConnectDomainEventDeregisterAny(v->conn, v->cb[i]);
    virConnectUnregisterCloseCallback(v->conn, on_close);
    virConnectClose(v->conn);
    v->conn = NULL;
    v->up = 0;
}

static void resync(ag_virt *v)
{
    virDomainPtr *doms = NULL;
    int n = virConnectListAllDomains(v->conn, &doms, 0);
    if (n < 0) {
        sl_log(SL_LOG_WARNING, COMPONENT, "libvirt: listing domains failed: %s",
               virGetLastErrorMessage());
        v->lost = 1;
        return;
    }
    ag_obs o = {.kind = AG_OBS_RESYNC_BEGIN};
    push(v, &o);
    for (int i = 0; i < n; i++) {
        int active = virDomainIsActive(doms[i]) == 1;
        observe(v, doms[i], active ? AG_OBS_UP : AG_OBS_DOWN, active,
                active ? "running at resync" : "not running at resync");
        virDomainFree(doms[i]);
    }
    free(doms);
    ag_obs end = {.kind = AG_OBS_RESYNC_END};
    push(v, &end);
    sl_log(SL_LOG_INFO, COMPONENT, "libvirt: resynchronized from %d domains", n);
}

static int connect_once(ag_virt *v)
{
    v->conn = virConnectOpenReadOnly(v->uri);
    if (!v->conn)
        return -1;
    v->lost = 0;
    v->cb[0] = virConnectDomainEventRegisterAny(v->conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                                VIR_DOMAIN_EVENT_CALLBACK(on_lifecycle), v, NULL);
    v->cb[1] = virConnectDomainEventRegisterAny(v->conn, NULL, VIR_DOMAIN_EVENT_ID_REBOOT,
                                                VIR_DOMAIN_EVENT_CALLBACK(on_reboot), v, NULL);
    v->cb[2] = virConnectDomainEventRegisterAny(v->conn, NULL, VIR_DOMAIN_EVENT_ID_METADATA_CHANGE,
                                                VIR_DOMAIN_EVENT_CALLBACK(on_metadata), v, NULL);
    if (v->cb[0] < 0) {
        disconnect(v);
        return -1;
    }
    if (virConnectRegisterCloseCallback(v->conn, on_close, v, NULL) != 0)
        virResetLastError(); /* drivers without a persistent connection (test:///) */
    if (virConnectSetKeepAlive(v->conn, 5, 3) != 0)
        virResetLastError();
    v->up = 1;
    sl_log(SL_LOG_NOTICE, COMPONENT, "libvirt: connected to %s (read-only)", v->uri);
    resync(v);
    return 0;
}

static void *run(void *arg)
{
    ag_virt *v = arg;
    int backoff = 1000;
    struct timespec next = {0, 0};
    int logged = 0;
    while (!v->stop) {
        if (v->conn && v->lost) {
            disconnect(v);
            ag_obs o = {.kind = AG_OBS_DISCONNECTED};
            snprintf(o.reason, sizeof o.reason, "connection lost");
            push(v, &o);
            clock_gettime(CLOCK_MONOTONIC, &next);
        }
        if (!v->conn) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec < next.tv_sec ||
                (now.tv_sec == next.tv_sec && now.tv_nsec < next.tv_nsec)) {
                struct timespec ts = {0, 50 * 1000000};
                nanosleep(&ts, NULL);
                continue;
            }
            if (connect_once(v) == 0) {
                backoff = 1000;
                logged = 0;
            } else {
                if (!logged++ || backoff == BACKOFF_MAX)
                    sl_log(SL_LOG_WARNING, COMPONENT,
                           "libvirt: cannot connect to %s: %s; "
                           "retrying in %d ms",
                           v->uri, virGetLastErrorMessage(), backoff);
                virResetLastError();
                next = now;
                next.tv_sec += backoff / 1000;
                next.tv_nsec += (long)(backoff % 1000) * 1000000;
                if (next.tv_nsec >= 1000000000) {
                    next.tv_sec++;
                    next.tv_nsec -= 1000000000;
                }
                backoff = backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : backoff * 2;
            }
            continue;
        }
        if (virEventRunDefaultImpl() < 0) {
            sl_log(SL_LOG_WARNING, COMPONENT, "libvirt event loop: %s", virGetLastErrorMessage());
            virResetLastError();
        }
    }
    disconnect(v);
    return NULL;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_rc;

static void init_libvirt(void)
{
    init_rc = virInitialize() == 0 && virEventRegisterDefaultImpl() == 0 ? 0 : -1;
}

static void quiet(void *u, virErrorPtr err)
{
    (void)u;
    (void)err;
}

sl_code ag_virt_start(const char *uri, ag_virt **out, sl_error *e)
{
    pthread_once(&once, init_libvirt);
    if (init_rc)
        return sl_fail(e, SL_ERR_IO, "libvirt initialization failed");
    virSetErrorFunc(NULL, quiet);
    ag_virt *v = calloc(1, sizeof *v);
    if (!v)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    snprintf(v->uri, sizeof v->uri, "%s", uri);
    v->cb[0] = v->cb[1] = v->cb[2] = -1;
    pthread_mutex_init(&v->mu, NULL);
    v->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    /* wakes the event loop every 200 ms so stop and lost are seen */
    v->timer = virEventAddTimeout(200, tick, NULL, NULL);
    if (v->efd < 0 || v->timer < 0 || pthread_create(&v->th, NULL, run, v) != 0) {
        if (v->timer >= 0)
            virEventRemoveTimeout(v->timer);
        if (v->efd >= 0)
            close(v->efd);
        free(v);
        return sl_fail(e, SL_ERR_IO, "cannot start the libvirt thread");
    }
    *out = v;
    return SL_OK;
}

void ag_virt_stop(ag_virt *v)
{
    if (!v)
        return;
    v->stop = 1;
    pthread_join(v->th, NULL);
    virEventRemoveTimeout(v->timer);
    ag_obs o;
    while (ag_virt_next(v, &o))
        ag_obs_clear(&o);
    close(v->efd);
    pthread_mutex_destroy(&v->mu);
    free(v);
}
