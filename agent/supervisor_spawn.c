/* Backend processes: ports kept per project, run directories, server certificates and control
 * keys, fork/exec as the backend user, signals, liveness, and adopting the backends an earlier
 * agent started (STATE_DIR/backends.state, docs/agent.md "When the agent restarts"). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "sluice/log.h"
#include "supervisor_internal.h"

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

static ag_bstate *row(ag_supervisor *s, const char *project)
{
    for (size_t i = 0; i < s->n_st; i++)
        if (!strcmp(s->st[i].project, project))
            return &s->st[i];
    return NULL;
}

static void state_save(ag_supervisor *s)
{
    sl_error e;
    if (ag_bstate_save(s->state_path, s->st, s->n_st, &e) != SL_OK)
        sl_log(SL_LOG_WARNING, COMPONENT,
               "backend state: %s (ports and running backends are not kept across an agent "
               "restart)",
               e.msg);
}

/* The state file's line of b: its port, and its process while it runs. */
void sv_state_update(ag_supervisor *s, const backend *b)
{
    ag_bstate *r = row(s, b->project);
    if (!r) {
        ag_bstate *v = realloc(s->st, (s->n_st + 1) * sizeof *v);
        if (!v)
            return;
        s->st = v;
        r = &s->st[s->n_st++];
        memset(r, 0, sizeof *r);
        snprintf(r->project, sizeof r->project, "%s", b->project);
    }
    r->port = b->port;
    r->pid = b->pid > 0 ? (int)b->pid : 0;
    r->start = b->pid > 0 ? b->start : 0;
    r->used = time(NULL);
    state_save(s);
}

/* Is port p another project's (its backend's or kept for it)? */
static int others(ag_supervisor *s, const backend *b, int p)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->b[i] != b && s->b[i]->port == p)
            return 1;
    for (size_t i = 0; i < s->n_st; i++)
        if (strcmp(s->st[i].project, b->project) && s->st[i].port == p)
            return 1;
    return 0;
}

/* The project's kept port if it is free; else the lowest port kept for nobody; else the port
 * of the project whose backend ran longest ago (its line goes). -1 if none can be bound. */
static int pick_port(ag_supervisor *s, backend *b)
{
    const ag_config *c = s->cfg;
    ag_bstate *mine = row(s, b->project);
    if (mine && mine->port >= c->port_min && mine->port <= c->port_max &&
        !others(s, b, mine->port)) {
        if (bindable(c->backend_bind, mine->port))
            return mine->port;
        sl_log(SL_LOG_WARNING, COMPONENT,
               "project %s: its port %d is taken by another process; the backend moves to "
               "another port (its guests find it with sluice-enroll, docs/enrollment.md)",
               b->project, mine->port);
    }
    for (int p = c->port_min; p <= c->port_max; p++)
        if (!others(s, b, p) && !(mine && mine->port == p) && bindable(c->backend_bind, p))
            return p;
    ag_bstate *lru = NULL;
    for (size_t i = 0; i < s->n_st; i++) {
        ag_bstate *r = &s->st[i];
        if (r == mine || r->pid || sv_find(s, r->project) || r->port < c->port_min ||
            r->port > c->port_max || !bindable(c->backend_bind, r->port))
            continue;
        if (!lru || r->used < lru->used)
            lru = r;
    }
    if (!lru)
        return -1;
    int p = lru->port;
    sl_log(SL_LOG_NOTICE, COMPONENT,
           "project %s: port %d, kept for project %s (no backend since %lld), goes to it",
           b->project, p, lru->project, (long long)lru->used);
    *lru = s->st[--s->n_st];
    return p;
}

/* ------------------------------------------------------------------ files */

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
        OPENSSL_cleanse(p, strlen(p));
    free(p);
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

/* A fresh control key, into dir/control.key (64 hex digits; the backend's --control-key). */
static sl_code make_key(ag_supervisor *s, backend *b, const char *dir, sl_error *e)
{
    if (RAND_bytes(b->key, sizeof b->key) != 1)
        return sl_fail(e, SL_ERR_IO, "no random bytes for the control key");
    char hex[2 * AG_CONTROL_KEY_LEN + 2], p[800];
    for (size_t i = 0; i < sizeof b->key; i++)
        snprintf(hex + 2 * i, 3, "%02x", b->key[i]);
    hex[2 * AG_CONTROL_KEY_LEN] = '\n';
    hex[2 * AG_CONTROL_KEY_LEN + 1] = '\0';
    snprintf(p, sizeof p, "%s/control.key", dir);
    gid_t gid = s->switch_user ? s->gid : (gid_t)-1;
    sl_code rc = write_file(p, hex, gid != (gid_t)-1 ? 0640 : 0600, gid, e);
    OPENSSL_cleanse(hex, sizeof hex);
    return rc;
}

/* The key an earlier agent gave the backend (RUN_DIR/backends/PROJECT/control.key). */
static int read_key(ag_supervisor *s, backend *b)
{
    char p[800], hex[2 * AG_CONTROL_KEY_LEN + 2] = "";
    snprintf(p, sizeof p, "%s/backends/%s/control.key", s->cfg->run_dir, b->project);
    FILE *f = fopen(p, "re");
    size_t n = f ? fread(hex, 1, sizeof hex - 1, f) : 0;
    if (f)
        fclose(f);
    int ok = n >= 2 * AG_CONTROL_KEY_LEN;
    for (size_t i = 0; ok && i < sizeof b->key; i++) {
        unsigned v = 0;
        ok = sscanf(hex + 2 * i, "%2x", &v) == 1;
        b->key[i] = (uint8_t)v;
    }
    OPENSSL_cleanse(hex, sizeof hex);
    return ok;
}

/* RUN_DIR/backends/PROJECT with the server certificate, key, CA and control key. */
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
    sl_code rc = issue_cert(s, b, dir, e);
    return rc == SL_OK ? make_key(s, b, dir, e) : rc;
}

/* A running backend's certificate is renewed when a third of its lifetime is left: new files,
 * then SIGHUP, on which the backend loads them for the sessions it accepts from then on (live
 * sessions are not disturbed). */
void sv_renew_cert(ag_supervisor *s, backend *b, int64_t now)
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
    sv_kill(b, SIGHUP, NULL);
    sl_log(SL_LOG_NOTICE, COMPONENT, "project %s: backend certificate renewed (pid %d reloads it)",
           b->project, (int)b->pid);
}

/* ------------------------------------------------------------------ processes */

void sv_spawn(ag_supervisor *s, backend *b, int64_t now)
{
    sl_error e = {0};
    int p = pick_port(s, b);
    if (p < 0) {
        sl_log(SL_LOG_ERR, COMPONENT, "project %s: no free port in %d..%d", b->project,
               s->cfg->port_min, s->cfg->port_max);
        b->next_start_ms = now + 10000;
        return;
    }
    b->port = p;
    char dir[700];
    if (prepare_dir(s, b, dir, sizeof dir, &e) != SL_OK) {
        sl_log(SL_LOG_ERR, COMPONENT, "project %s: cannot prepare the backend: %s", b->project,
               e.msg);
        b->next_start_ms = now + b->backoff_ms;
        return;
    }
    char listen[128], control[700], cert[800], key[800], ca[800], ckey[800], state[700], spin[16];
    char direct[32], slots[16], budget[16];
    snprintf(spin, sizeof spin, "%d", s->cfg->backend_spin_us);
    snprintf(slots, sizeof slots, "%d", s->cfg->backend_staging_slots);
    snprintf(budget, sizeof budget, "%d", s->cfg->backend_staging_budget);
    snprintf(direct, sizeof direct, "%d-%d", s->cfg->direct_port_min, s->cfg->direct_port_max);
    const char *fmt = strchr(s->cfg->backend_bind, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d";
    snprintf(listen, sizeof listen, fmt, s->cfg->backend_bind, b->port);
    snprintf(control, sizeof control, "ipc://%s", s->ctl_path);
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(ckey, sizeof ckey, "%s/control.key", dir);
    snprintf(state, sizeof state, "%s/backends/%s", s->cfg->state_dir, b->project);
    char *argv[] = {(char *)s->cfg->backend_path,
                    "--project",
                    b->project,
                    "--listen",
                    listen,
                    "--control",
                    control,
                    "--control-key",
                    ckey,
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
                    "--direct-ports",
                    direct,
                    NULL, /* the optional flags below */
                    NULL,
                    NULL,
                    NULL,
                    NULL,
                    NULL,
                    NULL};
    size_t k = 21;
    if (s->cfg->backend_spin_us >= 0) {
        argv[k++] = "--spin-us";
        argv[k++] = spin;
    }
    if (s->cfg->backend_staging_slots >= 0) {
        argv[k++] = "--staging-slots";
        argv[k++] = slots;
    }
    if (s->cfg->backend_staging_budget >= 0) {
        argv[k++] = "--staging-budget";
        argv[k++] = budget;
    }
    /* No PR_SET_PDEATHSIG: a backend outlives an agent that crashed, and the next agent adopts
     * it; without an agent it ends itself (its --control-key, backend/control.c). */
    pid_t pid = fork();
    if (pid < 0) {
        sl_log(SL_LOG_ERR, COMPONENT, "project %s: fork: %s", b->project, strerror(errno));
        b->next_start_ms = now + b->backoff_ms;
        return;
    }
    if (pid == 0) {
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
    b->start = ag_proc_start(pid);
    b->adopted = 0;
    b->started_ms = now;
    b->connected = 0;
    b->synced = 0;
    b->termed = 0;
    sv_state_update(s, b);
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

/* Is b's process still the one we know (same pid and start time)? */
static int same_process(const backend *b)
{
    return b->pid > 0 && b->start && ag_proc_start(b->pid) == b->start;
}

int sv_ended(backend *b, char *why, size_t n)
{
    if (b->pid <= 0)
        return 0;
    if (b->adopted) {
        if (same_process(b))
            return 0;
        snprintf(why, n, "ended (started by an earlier agent: its exit status is not known)");
        return 1;
    }
    int st;
    pid_t r = waitpid(b->pid, &st, WNOHANG);
    if (r == b->pid) {
        describe_exit(st, why, n);
        return 1;
    }
    if (r < 0 && errno == ECHILD) {
        snprintf(why, n, "lost (not our child)");
        return 1;
    }
    return 0;
}

void sv_kill(backend *b, int sig, const char *why)
{
    if (b->pid <= 0 || (b->start && !same_process(b)))
        return; /* never a signal to a process that reused the pid */
    if (why)
        sl_log(SL_LOG_WARNING, COMPONENT, "project %s: backend pid %d: %s; sending %s", b->project,
               (int)b->pid, why,
               sig == SIGKILL   ? "SIGKILL"
               : sig == SIGTERM ? "SIGTERM"
                                : "a signal");
    kill(b->pid, sig);
}

/* ------------------------------------------------------------------ an earlier agent's backends */

/* Is pid's real uid the backend user's (when the agent switches users)? */
static int owned(const ag_supervisor *s, pid_t pid)
{
    if (!s->switch_user)
        return 1;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    int ok = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned uid;
        if (sscanf(line, "Uid: %u", &uid) == 1) {
            ok = uid == s->uid;
            break;
        }
    }
    if (f)
        fclose(f);
    return ok;
}

/* Loads STATE_DIR/backends.state: the ports kept for projects, and the backends an earlier
 * agent left running. Such a backend (same pid and start time, the backend user's) is adopted:
 * its control socket reconnects to ours by itself and says hello; its grants are the ones the
 * resync with libvirt leaves (a grant set); a project without a running GPU instance then has
 * its backend stopped. One whose control key is unreadable cannot be told anything: it is
 * stopped and started anew. */
void sv_state_load(ag_supervisor *s)
{
    sl_error e;
    if (ag_bstate_load(s->state_path, &s->st, &s->n_st, &e) != SL_OK) {
        sl_log(SL_LOG_WARNING, COMPONENT, "backend state: %s (starting without it)", e.msg);
        return;
    }
    int64_t now = ag_now_ms();
    for (size_t i = 0; i < s->n_st; i++) {
        ag_bstate *r = &s->st[i];
        if (!r->pid)
            continue;
        if (ag_proc_start(r->pid) != r->start || !owned(s, r->pid)) {
            sl_log(SL_LOG_NOTICE, COMPONENT,
                   "project %s: the backend pid %d an earlier agent started is gone", r->project,
                   r->pid);
            r->pid = 0;
            r->start = 0;
            continue;
        }
        backend *b = sv_find_or_add(s, r->project);
        if (!b)
            continue;
        b->pid = r->pid;
        b->start = r->start;
        b->port = r->port;
        b->adopted = 1;
        b->started_ms = now;
        if (read_key(s, b)) {
            sl_log(SL_LOG_NOTICE, COMPONENT,
                   "project %s: adopting the backend pid %d (port %d) an earlier agent started",
                   b->project, r->pid, r->port);
            continue;
        }
        sl_log(SL_LOG_WARNING, COMPONENT,
               "project %s: the backend pid %d an earlier agent started has no readable control "
               "key; stopping it",
               b->project, r->pid);
        b->stopping = 1;
        b->term_at_ms = now;
        b->kill_at_ms = now + KILL_AFTER_TERM;
    }
    state_save(s);
}
