/* Tenant backend supervision and the grants they hold. */
#include "supervisor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "sluice/log.h"
#include "usage_ingest.h"

#define COMPONENT       "agent"
#define RETRANSMIT_MS   2000
#define PING_MS         10000
#define SILENCE_MS      30000 /* no report for this long: the backend is killed and restarted */
#define HELLO_MS        30000 /* no hello this long after the start: same */
#define STABLE_MS       60000 /* a backend that ran this long restarts with the first backoff */
#define KILL_AFTER_TERM 2000

typedef struct grant {
    char uuid[40];
    char sha[65];
    int64_t not_after;
} grant;

typedef struct pending {
    uint64_t seq;
    void *buf;
    size_t len;
    int64_t sent_ms;
} pending;

typedef struct backend {
    char project[64];
    int port;
    pid_t pid;
    int wanted, stopping, termed;
    int64_t started_ms, next_start_ms, term_at_ms, kill_at_ms;
    int64_t cert_issued_ms; /* when its server certificate was issued (0: none issued) */
    int backoff_ms, restarts;
    int connected;
    ag_ctl_peer peer;
    int64_t last_heard_ms, last_ping_ms;
    uint64_t seq;
    grant *grants;
    size_t n_grants, cap_grants;
    pending *pend;
    size_t n_pend, cap_pend;
} backend;

struct ag_supervisor {
    pthread_mutex_t mu;
    const ag_config *cfg;
    ag_instances *inst;
    ag_issue_fn issue;
    void *issue_user;
    ag_control *ctl;
    char ctl_path[600];
    uid_t uid;
    gid_t gid;
    int switch_user;
    backend **b;
    size_t n;
    ag_usage *usage; /* NULL: usage records are dropped unacknowledged */
};

int64_t ag_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ ports */

static int bindable(const char *addr, int port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        len = sizeof *a4;
    } else if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        len = sizeof *a6;
    } else {
        return 0;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int ok = bind(fd, (struct sockaddr *)&ss, len) == 0;
    close(fd);
    return ok;
}

int ag_ports_pick(int min, int max, const int *used, size_t n_used, const char *bind_addr)
{
    for (int p = min; p <= max; p++) {
        int taken = 0;
        for (size_t i = 0; i < n_used && !taken; i++)
            taken = used[i] == p;
        if (!taken && (!bind_addr || bindable(bind_addr, p)))
            return p;
    }
    return -1;
}

/* ------------------------------------------------------------------ grants file */

static void grants_path(const ag_supervisor *s, const char *project, char *out, size_t n)
{
    snprintf(out, n, "%s/grants/%s", s->cfg->state_dir, project);
}

static void grants_save(const ag_supervisor *s, const backend *b)
{
    char path[700], tmp[720];
    grants_path(s, b->project, path, sizeof path);
    if (!b->n_grants) {
        unlink(path);
        return;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        sl_log(SL_LOG_WARNING, COMPONENT, "grants file %s: %s (grants kept in memory only)", tmp,
               strerror(errno));
        return;
    }
    for (size_t i = 0; i < b->n_grants; i++)
        fprintf(f, "%s %s %lld\n", b->grants[i].uuid, b->grants[i].sha,
                (long long)b->grants[i].not_after);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        sl_log(SL_LOG_WARNING, COMPONENT, "grants file %s: %s", path, strerror(errno));
}

static int hex64(const char *s)
{
    if (strlen(s) != 64)
        return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return 0;
    return 1;
}

/* Every enrollment adds a grant (another user of the instance, a renewal); an instance keeps
 * at most this many, as its backend does (backend/control.c): expired ones go first, then the
 * one that ends first. */
#define GRANTS_PER_INSTANCE 8

static void add_grant(backend *b, const char *uuid, const char *sha, int64_t not_after)
{
    for (size_t i = 0; i < b->n_grants; i++)
        if (!strcmp(b->grants[i].uuid, uuid) && !strcmp(b->grants[i].sha, sha)) {
            b->grants[i].not_after = not_after;
            return;
        }
    int64_t now = time(NULL);
    size_t mine = 0, first = SIZE_MAX;
    for (size_t i = 0; i < b->n_grants;) {
        if (strcmp(b->grants[i].uuid, uuid)) {
            i++;
        } else if (b->grants[i].not_after && b->grants[i].not_after <= now) {
            b->grants[i] = b->grants[--b->n_grants]; /* expired */
        } else {
            if (first == SIZE_MAX || b->grants[i].not_after < b->grants[first].not_after)
                first = i;
            mine++;
            i++;
        }
    }
    if (mine >= GRANTS_PER_INSTANCE && first != SIZE_MAX)
        b->grants[first] = b->grants[--b->n_grants];
    if (b->n_grants == b->cap_grants) {
        size_t cap = b->cap_grants ? b->cap_grants * 2 : 8;
        grant *g = realloc(b->grants, cap * sizeof *g);
        if (!g)
            return;
        b->grants = g;
        b->cap_grants = cap;
    }
    grant *g = &b->grants[b->n_grants++];
    snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
    snprintf(g->sha, sizeof g->sha, "%s", sha);
    g->not_after = not_after;
}

static void grants_load(const ag_supervisor *s, backend *b)
{
    char path[700], line[256];
    grants_path(s, b->project, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    int64_t now = time(NULL);
    while (fgets(line, sizeof line, f)) {
        char uuid[40], sha[65];
        long long na;
        if (sscanf(line, "%39s %64s %lld", uuid, sha, &na) == 3 && hex64(sha) && na > now)
            add_grant(b, uuid, sha, na);
    }
    fclose(f);
    if (b->n_grants)
        sl_log(SL_LOG_INFO, COMPONENT, "project %s: %zu grants restored from %s", b->project,
               b->n_grants, path);
}

/* ------------------------------------------------------------------ backends */

static backend *find(ag_supervisor *s, const char *project)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->b[i]->project, project))
            return s->b[i];
    return NULL;
}

static backend *find_or_add(ag_supervisor *s, const char *project)
{
    backend *b = find(s, project);
    if (b || strlen(project) >= sizeof b->project)
        return b;
    backend **v = realloc(s->b, (s->n + 1) * sizeof *v);
    if (!v)
        return NULL;
    s->b = v;
    b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    snprintf(b->project, sizeof b->project, "%s", project);
    b->backoff_ms = 1000;
    grants_load(s, b);
    s->b[s->n++] = b;
    return b;
}

static void clear_pending(backend *b)
{
    for (size_t i = 0; i < b->n_pend; i++)
        free(b->pend[i].buf);
    b->n_pend = 0;
}

static void drop(ag_supervisor *s, backend *b)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->b[i] == b) {
            s->b[i] = s->b[--s->n];
            break;
        }
    clear_pending(b);
    free(b->pend);
    free(b->grants);
    free(b);
}

/* Sends msg (seq assigned here) and keeps it until acked. Not connected: nothing is sent (the
 * next hello replays the grants). */
static void send_ctl(ag_supervisor *s, backend *b, Sluice__Control__BackendControl *msg, int track)
{
    if (!b->connected)
        return;
    msg->seq = ++b->seq;
    size_t len;
    void *buf = ag_control_pack(msg, &len);
    if (!buf)
        return;
    sl_error e;
    if (ag_control_send(s->ctl, &b->peer, buf, len, &e) != SL_OK)
        sl_log(SL_LOG_WARNING, COMPONENT, "project %s: %s", b->project, e.msg);
    if (!track || b->n_pend >= 4096) {
        free(buf);
        return;
    }
    if (b->n_pend == b->cap_pend) {
        size_t cap = b->cap_pend ? b->cap_pend * 2 : 16;
        pending *p = realloc(b->pend, cap * sizeof *p);
        if (!p) {
            free(buf);
            return;
        }
        b->pend = p;
        b->cap_pend = cap;
    }
    b->pend[b->n_pend++] = (pending){msg->seq, buf, len, ag_now_ms()};
}

static void send_grant(ag_supervisor *s, backend *b, const grant *g)
{
    ag_instance in;
    if (!ag_instances_get(s->inst, g->uuid, &in) || !in.gpu) {
        sl_log(SL_LOG_INFO, COMPONENT, "instance %s: not a known GPU instance, grant not sent",
               g->uuid);
        return;
    }
    uint8_t sha[32];
    for (int i = 0; i < 32; i++) {
        unsigned v;
        sscanf(g->sha + 2 * i, "%2x", &v);
        sha[i] = (uint8_t)v;
    }
    char *gpus[32];
    size_t ng = 0;
    char gbuf[sizeof in.sla.gpus];
    memcpy(gbuf, in.sla.gpus, sizeof gbuf);
    if (strcmp(gbuf, "all")) {
        char *save;
        for (char *t = strtok_r(gbuf, ",", &save); t && ng < 32; t = strtok_r(NULL, ",", &save))
            gpus[ng++] = t;
    }
    Sluice__Control__Sla sla = SLUICE__CONTROL__SLA__INIT;
    sla.flavor = in.flavor;
    sla.tier = in.sla.tier;
    sla.gpu_share = in.sla.gpu_share;
    sla.memory_quota_bytes = in.sla.memory_quota;
    sla.max_sessions = in.sla.max_sessions;
    sla.gpu_uuids = gpus;
    sla.n_gpu_uuids = ng;
    Sluice__Control__Grant gr = SLUICE__CONTROL__GRANT__INIT;
    gr.instance_uuid = in.uuid;
    gr.project_id = in.project_id;
    gr.cert_sha256 = (ProtobufCBinaryData){32, sha};
    gr.not_after_unix = g->not_after;
    gr.sla = &sla;
    gr.domain_name = in.domain;
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT;
    m.grant = &gr;
    send_ctl(s, b, &m, 1);
}

static void send_revoke(ag_supervisor *s, backend *b, const char *uuid, const char *reason)
{
    Sluice__Control__Revoke r = SLUICE__CONTROL__REVOKE__INIT;
    r.instance_uuid = (char *)uuid;
    r.reason = (char *)reason;
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_REVOKE;
    m.revoke = &r;
    send_ctl(s, b, &m, 1);
}

static void send_shutdown(ag_supervisor *s, backend *b, const char *reason)
{
    Sluice__Control__Shutdown sd = SLUICE__CONTROL__SHUTDOWN__INIT;
    sd.reason = (char *)reason;
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_SHUTDOWN;
    m.shutdown = &sd;
    send_ctl(s, b, &m, 0);
}

static sl_code write_file(const char *path, const char *text, mode_t mode, gid_t gid, sl_error *e)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return sl_fail(e, SL_ERR_IO, "%s: %s", path, strerror(errno));
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int ok = w == (ssize_t)n && fchmod(fd, mode) == 0;
    if (ok && gid != (gid_t)-1 && fchown(fd, (uid_t)-1, gid) != 0)
        ok = 0;
    close(fd);
    return ok ? SL_OK : sl_fail(e, SL_ERR_IO, "%s: %s", path, strerror(errno));
}

static void free_secret(char *p)
{
    if (p)
        memset(p, 0, strlen(p));
    free(p);
}

static sl_code issue_cert(ag_supervisor *s, backend *b, const char *dir, sl_error *e);

/* RUN_DIR/backends/PROJECT with the server certificate, key and CA. */
static sl_code prepare_dir(ag_supervisor *s, backend *b, char *dir, size_t n, sl_error *e)
{
    gid_t gid = s->switch_user ? s->gid : (gid_t)-1;
    char base[600];
    snprintf(base, sizeof base, "%s/backends", s->cfg->run_dir);
    mkdir(base, 0755);
    snprintf(dir, n, "%s/%s", base, b->project);
    if (mkdir(dir, 0750) != 0 && errno != EEXIST)
        return sl_fail(e, SL_ERR_IO, "%s: %s", dir, strerror(errno));
    chmod(dir, 0750);
    if (gid != (gid_t)-1 && chown(dir, (uid_t)-1, gid) != 0)
        return sl_fail(e, SL_ERR_IO, "%s: chgrp: %s", dir, strerror(errno));
    char state[700];
    snprintf(state, sizeof state, "%s/backends", s->cfg->state_dir);
    mkdir(state, 0755);
    snprintf(state, sizeof state, "%s/backends/%s", s->cfg->state_dir, b->project);
    if (mkdir(state, 0750) == 0 && s->switch_user && chown(state, s->uid, s->gid) != 0)
        sl_log(SL_LOG_WARNING, COMPONENT, "%s: chown: %s", state, strerror(errno));
    return issue_cert(s, b, dir, e);
}

/* The backend's server certificate, key and CA into dir (RUN_DIR/backends/PROJECT). */
static sl_code issue_cert(ag_supervisor *s, backend *b, const char *dir, sl_error *e)
{
    gid_t gid = s->switch_user ? s->gid : (gid_t)-1;
    if (!s->issue)
        return SL_OK;
    char *cert = NULL, *key = NULL, *ca = NULL;
    char cn[128];
    snprintf(cn, sizeof cn, "sluice-backend %s", b->project);
    const char *sans[] = {s->cfg->advertise_address};
    sl_code rc = s->issue(s->issue_user, cn, sans, 1, &cert, &key, &ca, e);
    char p[800];
    if (rc == SL_OK) {
        snprintf(p, sizeof p, "%s/cert.pem", dir);
        rc = write_file(p, cert, 0644, gid, e);
    }
    if (rc == SL_OK) {
        snprintf(p, sizeof p, "%s/key.pem", dir);
        rc = write_file(p, key, gid != (gid_t)-1 ? 0640 : 0600, gid, e);
    }
    if (rc == SL_OK) {
        snprintf(p, sizeof p, "%s/ca.pem", dir);
        rc = write_file(p, ca, 0644, gid, e);
    }
    free(cert);
    free_secret(key);
    free(ca);
    if (rc == SL_OK)
        b->cert_issued_ms = ag_now_ms();
    return rc;
}

/* A running backend's certificate is renewed when a third of its lifetime is left: new files,
 * then SIGHUP, on which the backend loads them for the sessions it accepts from then on (live
 * sessions are not disturbed). */
static void renew_cert(ag_supervisor *s, backend *b, int64_t now)
{
    int64_t life_ms = (int64_t)s->cfg->server_cert_lifetime_s * 1000;
    if (!s->issue || !b->cert_issued_ms || life_ms <= 0 ||
        now - b->cert_issued_ms < life_ms * 2 / 3)
        return;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/backends/%s", s->cfg->run_dir, b->project);
    sl_error e = {0};
    if (issue_cert(s, b, dir, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "project %s: cannot renew the backend's certificate: %s",
               b->project, e.msg);
        b->cert_issued_ms = now - life_ms * 2 / 3 + 60000; /* try again in a minute */
        return;
    }
    kill(b->pid, SIGHUP);
    sl_log(SL_LOG_NOTICE, COMPONENT, "project %s: backend certificate renewed (pid %d reloads it)",
           b->project, (int)b->pid);
}

static void spawn(ag_supervisor *s, backend *b, int64_t now)
{
    sl_error e = {0};
    if (!b->port) {
        int used[256];
        size_t nu = 0;
        for (size_t i = 0; i < s->n && nu < 256; i++)
            if (s->b[i]->port)
                used[nu++] = s->b[i]->port;
        int p = ag_ports_pick(s->cfg->port_min, s->cfg->port_max, used, nu, s->cfg->backend_bind);
        if (p < 0) {
            sl_log(SL_LOG_ERR, COMPONENT, "project %s: no free port in %d..%d", b->project,
                   s->cfg->port_min, s->cfg->port_max);
            b->next_start_ms = now + 10000;
            return;
        }
        b->port = p;
    }
    char dir[700];
    if (prepare_dir(s, b, dir, sizeof dir, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "project %s: cannot prepare the backend: %s", b->project,
               e.msg);
        b->next_start_ms = now + b->backoff_ms;
        return;
    }
    char listen[128], control[700], cert[800], key[800], ca[800], state[700], spin[16];
    snprintf(spin, sizeof spin, "%d", s->cfg->backend_spin_us);
    const char *fmt = strchr(s->cfg->backend_bind, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d";
    snprintf(listen, sizeof listen, fmt, s->cfg->backend_bind, b->port);
    snprintf(control, sizeof control, "ipc://%s", s->ctl_path);
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(state, sizeof state, "%s/backends/%s", s->cfg->state_dir, b->project);
    char *argv[] = {(char *)s->cfg->backend_path,
                    "--project",
                    b->project,
                    "--listen",
                    listen,
                    "--control",
                    control,
                    "--cert",
                    cert,
                    "--key",
                    key,
                    "--ca",
                    ca,
                    "--driver",
                    (char *)s->cfg->driver_path,
                    "--state-dir",
                    state,
                    s->cfg->backend_spin_us >= 0 ? "--spin-us" : NULL,
                    spin,
                    NULL};
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        sl_log(SL_LOG_ERR, COMPONENT, "project %s: fork: %s", b->project, strerror(errno));
        b->next_start_ms = now + b->backoff_ms;
        return;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(126);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (s->switch_user && (setgroups(1, &s->gid) != 0 || setgid(s->gid) != 0 ||
                               setuid(s->uid) != 0 || (s->uid != 0 && setuid(0) == 0)))
            _exit(126);
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        execv(argv[0], argv);
        _exit(127);
    }
    b->pid = pid;
    b->started_ms = now;
    b->connected = 0;
    b->termed = 0;
    sl_log(SL_LOG_NOTICE, COMPONENT, "project %s: backend started (pid %d, %s)", b->project,
           (int)pid, listen);
}

static void describe_exit(int st, char *out, size_t n)
{
    if (WIFEXITED(st))
        snprintf(out, n, "exited with status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(out, n, "killed by signal %d (%s)%s", WTERMSIG(st), strsignal(WTERMSIG(st)),
                 WCOREDUMP(st) ? ", core dumped" : "");
    else
        snprintf(out, n, "ended (status 0x%x)", st);
}

static void kill_backend(backend *b, int sig, const char *why)
{
    if (b->pid <= 0)
        return;
    sl_log(SL_LOG_WARNING, COMPONENT, "project %s: backend pid %d: %s; sending %s", b->project,
           (int)b->pid, why, sig == SIGKILL ? "SIGKILL" : "SIGTERM");
    kill(b->pid, sig);
}

/* ------------------------------------------------------------------ reports */

static backend *by_peer(ag_supervisor *s, const ag_ctl_peer *p)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->b[i]->connected && s->b[i]->peer.len == p->len &&
            !memcmp(s->b[i]->peer.id, p->id, p->len))
            return s->b[i];
    return NULL;
}

static void on_hello(ag_supervisor *s, const ag_ctl_peer *p, const Sluice__Control__BackendHello *h)
{
    backend *b = h->project_id ? find(s, h->project_id) : NULL;
    if (!b || b->pid <= 0 || b->stopping) {
        sl_log(SL_LOG_WARNING, COMPONENT,
               "control: hello for project %.64s refused: no such "
               "backend running",
               h->project_id ? h->project_id : "");
        return;
    }
    if (h->pid != (uint32_t)b->pid) {
        sl_log(SL_LOG_WARNING, COMPONENT,
               "control: hello for project %s refused: pid %u, the "
               "backend started is %d",
               b->project, h->pid, (int)b->pid);
        return;
    }
    b->peer = *p;
    b->connected = 1;
    b->last_heard_ms = b->last_ping_ms = ag_now_ms();
    clear_pending(b);
    ag_usage_backend_reset(s->usage, b->project); /* a (re)started backend has no sessions */
    sl_log(SL_LOG_NOTICE, COMPONENT,
           "project %s: backend pid %d ready at %.128s (%.32s), "
           "replaying %zu grants",
           b->project, (int)b->pid, h->endpoint ? h->endpoint : "", h->version ? h->version : "",
           b->n_grants);
    for (size_t i = 0; i < b->n_grants; i++)
        send_grant(s, b, &b->grants[i]);
}

/* UsageAck for records now durable in the usage store (agent/usage_ingest.h). Not tracked for
 * retransmission: a backend resends the records it has no ack for, and gets an ack again. */
static void send_usage_ack(void *user, const char *project, char *const *ids, size_t n)
{
    ag_supervisor *s = user;
    backend *b = find(s, project);
    if (!b || !b->connected)
        return;
    Sluice__Control__UsageAck ua = SLUICE__CONTROL__USAGE_ACK__INIT;
    ua.record_ids = (char **)ids;
    ua.n_record_ids = n;
    Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
    m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_USAGE_ACK;
    m.usage_ack = &ua;
    send_ctl(s, b, &m, 0);
}

/* Returns 1 when r was handed over (to the usage queue) and must not be freed. */
static int on_report(ag_supervisor *s, const ag_ctl_peer *p, Sluice__Control__BackendReport *r)
{
    if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_HELLO) {
        on_hello(s, p, r->hello);
        return 0;
    }
    backend *b = by_peer(s, p);
    if (!b) {
        sl_log(SL_LOG_WARNING, COMPONENT, "control: report from a peer without hello dropped");
        return 0;
    }
    b->last_heard_ms = ag_now_ms();
    /* the journal's fields of what the backend reports */
    sl_log_set_thread_fields(
        &(sl_log_fields){.project = b->project,
                         .instance = r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION
                                         ? r->session->instance_uuid
                                         : NULL});
    int taken = 0;
    switch (r->kind_case) {
    case SLUICE__CONTROL__BACKEND_REPORT__KIND_ACK:
        for (size_t i = 0; i < b->n_pend; i++)
            if (b->pend[i].seq == r->ack->control_seq) {
                free(b->pend[i].buf);
                b->pend[i] = b->pend[--b->n_pend];
                break;
            }
        if (!r->ack->ok)
            sl_log(SL_LOG_WARNING, COMPONENT,
                   "project %s: backend refused control seq %llu: "
                   "%.200s",
                   b->project, (unsigned long long)r->ack->control_seq,
                   r->ack->detail ? r->ack->detail : "");
        break;
    case SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION:
        sl_log(SL_LOG_INFO, COMPONENT,
               "project %s: session %llu of instance %.40s: event %d "
               "%.200s",
               b->project, (unsigned long long)r->session->session_id,
               r->session->instance_uuid ? r->session->instance_uuid : "", r->session->kind,
               r->session->detail ? r->session->detail : "");
        ag_usage_session(s->usage, b->project, r->session);
        break;
    case SLUICE__CONTROL__BACKEND_REPORT__KIND_USAGE:
        /* queued; stored and acknowledged by ag_usage_commit after the drain */
        if (s->usage)
            taken = ag_usage_take(s->usage, b->project, r);
        else
            sl_log(SL_LOG_DEBUG, COMPONENT, "project %s: usage record dropped (no usage store)",
                   b->project);
        break;
    default:
        break;
    }
    sl_log_set_thread_fields(NULL);
    return taken;
}

/* ------------------------------------------------------------------ public */

sl_code ag_supervisor_new(const ag_supervisor_opts *o, ag_supervisor **out, sl_error *e)
{
    ag_supervisor *s = calloc(1, sizeof *s);
    if (!s)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    s->cfg = o->cfg;
    s->inst = o->instances;
    s->issue = o->issue;
    s->issue_user = o->issue_user;
    int gid = -1;
    if (o->cfg->backend_user[0]) {
        struct passwd *pw = getpwnam(o->cfg->backend_user);
        struct group *gr = getgrnam(o->cfg->backend_group);
        if (!pw || !gr) {
            ag_supervisor_free(s);
            return sl_fail(e, SL_ERR_CONFIG, "backend_user %s or backend_group %s does not exist",
                           o->cfg->backend_user, o->cfg->backend_group);
        }
        s->uid = pw->pw_uid;
        s->gid = gr->gr_gid;
        s->switch_user = getuid() == 0;
        gid = s->switch_user ? (int)s->gid : -1;
    } else if (getuid() == 0) {
        sl_log(SL_LOG_WARNING, COMPONENT, "no backend_user: backends run as root");
    }
    if (mkdir(o->cfg->run_dir, 0750) != 0 && errno != EEXIST) {
        ag_supervisor_free(s);
        return sl_fail(e, SL_ERR_IO, "run_dir %s: %s", o->cfg->run_dir, strerror(errno));
    }
    chmod(o->cfg->run_dir, 0750);
    if (gid >= 0 && chown(o->cfg->run_dir, (uid_t)-1, (gid_t)gid) != 0)
        sl_log(SL_LOG_WARNING, COMPONENT, "run_dir: chgrp: %s", strerror(errno));
    char gdir[600];
    /* Backends (the backend group) keep their state in state_dir/backends/ID: they must be able
     * to traverse state_dir, as they do run_dir; the grants and the CA stay the agent's (0700). */
    mkdir(o->cfg->state_dir, 0750);
    if (gid >= 0 && (chmod(o->cfg->state_dir, 0750) != 0 ||
                     chown(o->cfg->state_dir, (uid_t)-1, (gid_t)gid) != 0))
        sl_log(SL_LOG_WARNING, COMPONENT, "state_dir %s: chgrp: %s", o->cfg->state_dir,
               strerror(errno));
    snprintf(gdir, sizeof gdir, "%s/grants", o->cfg->state_dir);
    if (mkdir(gdir, 0700) != 0 && errno != EEXIST)
        sl_log(SL_LOG_WARNING, COMPONENT, "%s: %s (grants kept in memory only)", gdir,
               strerror(errno));
    snprintf(s->ctl_path, sizeof s->ctl_path, "%s/control.sock", o->cfg->run_dir);
    sl_code rc = ag_control_bind(s->ctl_path, gid, &s->ctl, e);
    if (rc != SL_OK) {
        ag_supervisor_free(s);
        return rc;
    }
    *out = s;
    return SL_OK;
}

int ag_supervisor_fd(ag_supervisor *s)
{
    return ag_control_fd(s->ctl);
}

void ag_supervisor_ensure(ag_supervisor *s, const char *project_id)
{
    pthread_mutex_lock(&s->mu);
    backend *b = find_or_add(s, project_id);
    if (b && !b->wanted) {
        b->wanted = 1;
        if (!b->stopping)
            b->next_start_ms = 0;
    }
    pthread_mutex_unlock(&s->mu);
}

void ag_supervisor_revoke(ag_supervisor *s, const char *project_id, const char *uuid,
                          const char *reason)
{
    pthread_mutex_lock(&s->mu);
    backend *b = find(s, project_id);
    if (b) {
        size_t before = b->n_grants;
        for (size_t i = 0; i < b->n_grants;)
            if (!strcmp(b->grants[i].uuid, uuid))
                b->grants[i] = b->grants[--b->n_grants];
            else
                i++;
        if (before != b->n_grants)
            grants_save(s, b);
        send_revoke(s, b, uuid, reason);
        sl_log(SL_LOG_NOTICE, COMPONENT, "instance %s (project %s): revoked (%s)%s", uuid,
               project_id, reason, b->connected ? "" : "; backend not connected");
    }
    pthread_mutex_unlock(&s->mu);
}

void ag_supervisor_release(ag_supervisor *s, const char *project_id)
{
    if (ag_instances_running_gpu(s->inst, project_id))
        return;
    pthread_mutex_lock(&s->mu);
    backend *b = find(s, project_id);
    if (b && b->wanted) {
        b->wanted = 0;
        if (b->pid > 0 && !b->stopping) {
            int64_t now = ag_now_ms();
            b->stopping = 1;
            b->term_at_ms = now + s->cfg->backend_stop_grace_s * 1000;
            b->kill_at_ms = b->term_at_ms + KILL_AFTER_TERM;
            send_shutdown(s, b, "no running GPU instance of the project on this host");
            if (!b->connected)
                b->term_at_ms = now;
            sl_log(SL_LOG_NOTICE, COMPONENT,
                   "project %s: last GPU instance gone, stopping the "
                   "backend",
                   project_id);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

void ag_supervisor_prune(ag_supervisor *s)
{
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n; i++) {
        backend *b = s->b[i];
        size_t before = b->n_grants;
        for (size_t j = 0; j < b->n_grants;) {
            ag_instance in;
            if (!ag_instances_get(s->inst, b->grants[j].uuid, &in) || !in.running)
                b->grants[j] = b->grants[--b->n_grants];
            else
                j++;
        }
        if (before != b->n_grants) {
            sl_log(SL_LOG_INFO, COMPONENT,
                   "project %s: %zu grants of instances not running "
                   "dropped",
                   b->project, before - b->n_grants);
            grants_save(s, b);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

static void tick_backend(ag_supervisor *s, backend *b, int64_t now)
{
    if (b->pid > 0) {
        int st;
        pid_t r = waitpid(b->pid, &st, WNOHANG);
        if (r == b->pid || (r < 0 && errno == ECHILD)) {
            char why[128] = "lost (not our child)";
            if (r == b->pid)
                describe_exit(st, why, sizeof why);
            b->pid = 0;
            b->connected = 0;
            clear_pending(b);
            ag_usage_backend_reset(s->usage, b->project);
            if (b->stopping) {
                sl_log(SL_LOG_NOTICE, COMPONENT, "project %s: backend stopped (%s)", b->project,
                       why);
                b->stopping = 0;
                b->next_start_ms = now;
            } else {
                if (now - b->started_ms > STABLE_MS)
                    b->backoff_ms = 1000;
                b->next_start_ms = now + b->backoff_ms;
                b->restarts++;
                ag_usage_backend_restarted(s->usage, b->project);
                sl_log(SL_LOG_ERR, COMPONENT,
                       "project %s: backend %s; restarting in %d ms (restart %d)", b->project, why,
                       b->backoff_ms, b->restarts);
                b->backoff_ms *= 2;
                if (b->backoff_ms > s->cfg->restart_backoff_max_s * 1000)
                    b->backoff_ms = s->cfg->restart_backoff_max_s * 1000;
            }
        }
    }
    if (b->pid > 0 && b->stopping) {
        if (now >= b->kill_at_ms)
            kill_backend(b, SIGKILL, "did not stop");
        else if (now >= b->term_at_ms && !b->termed) {
            b->termed = 1;
            kill(b->pid, SIGTERM);
        }
        return;
    }
    if (b->pid <= 0) {
        if (b->wanted && now >= b->next_start_ms)
            spawn(s, b, now);
        return;
    }
    if (!b->connected) {
        if (now - b->started_ms > HELLO_MS) {
            kill_backend(b, SIGKILL, "no hello on the control channel within 30 s");
            b->started_ms = now;
        }
        return;
    }
    if (now - b->last_heard_ms > SILENCE_MS) {
        kill_backend(b, SIGKILL, "silent on the control channel for 30 s");
        b->last_heard_ms = now;
        return;
    }
    renew_cert(s, b, now);
    for (size_t i = 0; i < b->n_pend; i++)
        if (now - b->pend[i].sent_ms >= RETRANSMIT_MS) {
            sl_error e;
            ag_control_send(s->ctl, &b->peer, b->pend[i].buf, b->pend[i].len, &e);
            b->pend[i].sent_ms = now;
        }
    if (now - b->last_ping_ms >= PING_MS) {
        Sluice__Control__Ping ping = SLUICE__CONTROL__PING__INIT;
        ping.nonce = (uint64_t)now;
        Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
        m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_PING;
        m.ping = &ping;
        send_ctl(s, b, &m, 0);
        b->last_ping_ms = now;
    }
}

int ag_supervisor_tick(ag_supervisor *s)
{
    pthread_mutex_lock(&s->mu);
    ag_ctl_peer p;
    Sluice__Control__BackendReport *r;
    int got;
    for (int i = 0; i < 1000 && (got = ag_control_recv(s->ctl, &p, &r)) != 0; i++)
        if (got > 0 && !on_report(s, &p, r))
            sluice__control__backend_report__free_unpacked(r, NULL);
    ag_usage_commit(s->usage, send_usage_ack, s); /* one durable transaction, then the acks */
    int64_t now = ag_now_ms();
    int wait = 1000;
    for (size_t i = 0; i < s->n;) {
        backend *b = s->b[i];
        tick_backend(s, b, now);
        if (!b->wanted && b->pid <= 0 && !b->stopping) {
            drop(s, b);
            continue;
        }
        if (b->stopping || (b->wanted && b->pid <= 0) || b->n_pend)
            wait = 100;
        i++;
    }
    pthread_mutex_unlock(&s->mu);
    return wait;
}

void ag_supervisor_stop_all(ag_supervisor *s)
{
    pthread_mutex_lock(&s->mu);
    int64_t now = ag_now_ms();
    for (size_t i = 0; i < s->n; i++) {
        backend *b = s->b[i];
        b->wanted = 0;
        if (b->pid > 0 && !b->stopping) {
            b->stopping = 1;
            b->term_at_ms = b->connected ? now + s->cfg->backend_stop_grace_s * 1000 : now;
            b->kill_at_ms = b->term_at_ms + KILL_AFTER_TERM;
            send_shutdown(s, b, "agent stopping");
        }
    }
    pthread_mutex_unlock(&s->mu);
    for (;;) {
        ag_supervisor_tick(s);
        pthread_mutex_lock(&s->mu);
        size_t n = s->n;
        pthread_mutex_unlock(&s->mu);
        if (!n)
            break;
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
    }
}

void ag_supervisor_free(ag_supervisor *s)
{
    if (!s)
        return;
    while (s->n) {
        backend *b = s->b[0];
        if (b->pid > 0) {
            kill(b->pid, SIGKILL);
            waitpid(b->pid, NULL, 0);
        }
        drop(s, b);
    }
    free(s->b);
    ag_control_close(s->ctl);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int ag_backend_endpoint(ag_supervisor *s, const char *project_id, char *out, size_t n)
{
    pthread_mutex_lock(&s->mu);
    backend *b = find(s, project_id);
    int ok = b && b->pid > 0 && b->connected && !b->stopping;
    if (ok) {
        const char *a = s->cfg->advertise_address;
        snprintf(out, n, strchr(a, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d", a, b->port);
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

void ag_backend_grant(ag_supervisor *s, const ag_instance *inst, const char *cert_sha256_hex,
                      int64_t not_after)
{
    if (!hex64(cert_sha256_hex)) {
        sl_log(SL_LOG_ERR, COMPONENT, "instance %s: grant with a malformed fingerprint ignored",
               inst->uuid);
        return;
    }
    pthread_mutex_lock(&s->mu);
    backend *b = find_or_add(s, inst->project_id);
    if (b) {
        add_grant(b, inst->uuid, cert_sha256_hex, not_after);
        grants_save(s, b);
        sl_log(SL_LOG_NOTICE, COMPONENT, "instance %s (project %s): granted certificate %.16s...",
               inst->uuid, inst->project_id, cert_sha256_hex);
        grant g;
        snprintf(g.uuid, sizeof g.uuid, "%s", inst->uuid);
        snprintf(g.sha, sizeof g.sha, "%s", cert_sha256_hex);
        g.not_after = not_after;
        send_grant(s, b, &g);
    }
    pthread_mutex_unlock(&s->mu);
}

void ag_supervisor_set_usage(ag_supervisor *s, ag_usage *u)
{
    pthread_mutex_lock(&s->mu);
    s->usage = u;
    pthread_mutex_unlock(&s->mu);
}

unsigned ag_supervisor_running(ag_supervisor *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += s->b[i]->pid > 0 && s->b[i]->connected && !s->b[i]->stopping;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int ag_backend_pid(ag_supervisor *s, const char *project_id)
{
    pthread_mutex_lock(&s->mu);
    backend *b = find(s, project_id);
    int pid = b && b->connected ? (int)b->pid : 0;
    pthread_mutex_unlock(&s->mu);
    return pid;
}

int ag_backend_restarts(ag_supervisor *s, const char *project_id)
{
    pthread_mutex_lock(&s->mu);
    backend *b = find(s, project_id);
    int n = b ? b->restarts : 0;
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t ag_backend_grants(ag_supervisor *s, const char *project_id)
{
    pthread_mutex_lock(&s->mu);
    backend *b = find(s, project_id);
    size_t n = b ? b->n_grants : 0;
    pthread_mutex_unlock(&s->mu);
    return n;
}
