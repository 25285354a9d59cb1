/* IPC tokens: the backend parent's registry of the handles its session workers export (CUDA IPC
 * memory and event handles, pool and allocation shareable handles, pool pointer export data).
 * A worker that exports a handle registers the real handle here and gives the guest the random
 * token it gets back; a worker that imports asks to resolve the guest's token. The registry
 * answers only for a session of the exporter's instance and only as the kind registered, so a
 * token from another instance, a forged token or one whose exporter ended opens nothing. Tokens
 * are 64 random bytes (getrandom), compared in constant time; each exporting session holds at
 * most BE_IPC_TOKENS_PER_SESSION, the backend BE_IPC_TOKENS_MAX. Shareable handles (pool and
 * allocation, POSIX file descriptors) are held as the exporter's descriptor, which the registry
 * owns and closes when the token goes (at most BE_IPC_TOKEN_FDS_PER_SESSION and
 * BE_IPC_TOKEN_FDS_MAX of them: the parent's descriptors are for every session). Only the
 * channel thread uses it: no lock. */
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "daemon/ipc_tokens.h"

struct tok {
    uint8_t token[BE_IPC_TOKEN_BYTES];
    uint8_t real[BE_IPC_TOKEN_BYTES];
    size_t len;
    int kind;
    int fd; /* the exporter's shareable handle (BE_TOKEN_POOL, BE_TOKEN_ALLOC), else -1 */
    uint64_t sid;
    char instance[64];
};

struct be_ipc_tokens {
    struct tok *t;
    size_t n, cap;
};

be_ipc_tokens *be_ipc_tokens_new(void)
{
    return calloc(1, sizeof(be_ipc_tokens));
}

void be_ipc_tokens_free(be_ipc_tokens *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        if (t->t[i].fd >= 0)
            close(t->t[i].fd);
    if (t->t)
        OPENSSL_cleanse(t->t, t->cap * sizeof *t->t);
    free(t->t);
    free(t);
}

const char *be_ipc_token_kind_name(int kind)
{
    switch (kind) {
    case BE_TOKEN_MEM:
        return "mem";
    case BE_TOKEN_EVENT:
        return "event";
    case BE_TOKEN_POOL:
        return "pool";
    case BE_TOKEN_POOL_PTR:
        return "pool-ptr";
    case BE_TOKEN_ALLOC:
        return "alloc";
    default:
        return "?";
    }
}

static struct tok *find(const be_ipc_tokens *t, const uint8_t token[BE_IPC_TOKEN_BYTES])
{
    struct tok *hit = NULL;
    for (size_t i = 0; i < t->n; i++) /* every entry compared: the time says nothing */
        if (!CRYPTO_memcmp(t->t[i].token, token, BE_IPC_TOKEN_BYTES))
            hit = &t->t[i];
    return hit;
}

int be_ipc_token_kind_has_fd(int kind)
{
    return kind == BE_TOKEN_POOL || kind == BE_TOKEN_ALLOC;
}

int be_ipc_tokens_register(be_ipc_tokens *t, enum be_ipc_token_kind kind, const uint8_t *real,
                           size_t len, const char *instance, uint64_t sid,
                           uint8_t token[BE_IPC_TOKEN_BYTES], char *why, size_t why_n)
{
    return be_ipc_tokens_register_fd(t, kind, real, len, -1, instance, sid, token, why, why_n);
}

/* A refused registration (why filled already): its descriptor is closed. */
static int refuse(int fd)
{
    if (fd >= 0)
        close(fd);
    return -1;
}

int be_ipc_tokens_register_fd(be_ipc_tokens *t, enum be_ipc_token_kind kind, const uint8_t *real,
                              size_t len, int fd, const char *instance, uint64_t sid,
                              uint8_t token[BE_IPC_TOKEN_BYTES], char *why, size_t why_n)
{
    const char *k = be_ipc_token_kind_name((int)kind);
    if (!t || !real || !len || len > BE_IPC_TOKEN_BYTES || !instance || !*instance ||
        strlen(instance) >= sizeof t->t->instance || !token || !strcmp(k, "?") ||
        be_ipc_token_kind_has_fd((int)kind) != (fd >= 0)) {
        snprintf(why, why_n, "invalid IPC token registration (%s handle, %s descriptor)", k,
                 fd >= 0 ? "with a" : "without a");
        return refuse(fd);
    }
    size_t mine = 0, mine_fds = 0, fds = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct tok *e = &t->t[i];
        if (e->sid == sid && e->kind == (int)kind && e->len == len && !memcmp(e->real, real, len)) {
            /* the same handle again (a program asks for it per use): the same token; the
             * registry keeps the descriptor it has for it */
            if (fd >= 0)
                close(fd);
            memcpy(token, e->token, BE_IPC_TOKEN_BYTES);
            return 0;
        }
        mine += e->sid == sid;
        mine_fds += e->sid == sid && e->fd >= 0;
        fds += e->fd >= 0;
    }
    if (mine >= BE_IPC_TOKENS_PER_SESSION || t->n >= BE_IPC_TOKENS_MAX) {
        snprintf(why, why_n, "%s handle not exported: %s (%zu of session %llu, %zu in all)", k,
                 mine >= BE_IPC_TOKENS_PER_SESSION ? "the session's IPC handle limit"
                                                   : "the backend's IPC handle limit",
                 mine, (unsigned long long)sid, t->n);
        return refuse(fd);
    }
    if (fd >= 0 && (mine_fds >= BE_IPC_TOKEN_FDS_PER_SESSION || fds >= BE_IPC_TOKEN_FDS_MAX)) {
        snprintf(why, why_n, "%s handle not exported: %s (%zu of session %llu, %zu in all)", k,
                 mine_fds >= BE_IPC_TOKEN_FDS_PER_SESSION ? "the session's shareable handle limit"
                                                          : "the backend's shareable handle limit",
                 mine_fds, (unsigned long long)sid, fds);
        return refuse(fd);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct tok *nt = calloc(cap, sizeof *nt);
        if (!nt) {
            snprintf(why, why_n, "out of memory for IPC tokens");
            return refuse(fd);
        }
        if (t->n)
            memcpy(nt, t->t, t->n * sizeof *nt);
        if (t->t)
            OPENSSL_cleanse(t->t, t->cap * sizeof *t->t);
        free(t->t);
        t->t = nt;
        t->cap = cap;
    }
    struct tok *e = &t->t[t->n];
    do {
        if (getrandom(e->token, sizeof e->token, 0) != (ssize_t)sizeof e->token) {
            OPENSSL_cleanse(e, sizeof *e);
            snprintf(why, why_n, "no randomness for an IPC token");
            return refuse(fd);
        }
    } while (find(t, e->token)); /* never two alike (2^-512: for the form) */
    memcpy(e->real, real, len);
    e->len = len;
    e->kind = (int)kind;
    e->fd = fd;
    e->sid = sid;
    snprintf(e->instance, sizeof e->instance, "%s", instance);
    memcpy(token, e->token, BE_IPC_TOKEN_BYTES);
    t->n++;
    return 0;
}

int be_ipc_tokens_resolve(const be_ipc_tokens *t, enum be_ipc_token_kind kind,
                          const uint8_t token[BE_IPC_TOKEN_BYTES], const char *instance,
                          uint64_t sid, uint8_t real[BE_IPC_TOKEN_BYTES], size_t *len,
                          uint64_t *exporter, char *why, size_t why_n)
{
    int fd = -1;
    return be_ipc_tokens_resolve_fd(t, kind, token, instance, sid, real, len, exporter, &fd, why,
                                    why_n);
}

int be_ipc_tokens_resolve_fd(const be_ipc_tokens *t, enum be_ipc_token_kind kind,
                             const uint8_t token[BE_IPC_TOKEN_BYTES], const char *instance,
                             uint64_t sid, uint8_t real[BE_IPC_TOKEN_BYTES], size_t *len,
                             uint64_t *exporter, int *fd, char *why, size_t why_n)
{
    *fd = -1;
    const struct tok *e = t && token ? find(t, token) : NULL;
    const char *k = be_ipc_token_kind_name((int)kind);
    if (!e) {
        snprintf(why, why_n,
                 "%s handle refused for session %llu: unknown token (forged, or its exporter "
                 "ended)",
                 k, (unsigned long long)sid);
        return -1;
    }
    if (!instance || strcmp(e->instance, instance)) {
        snprintf(why, why_n,
                 "%s handle refused for session %llu: the token is another instance's (the "
                 "exporter is session %llu)",
                 k, (unsigned long long)sid, (unsigned long long)e->sid);
        return -1;
    }
    if (e->kind != (int)kind) {
        snprintf(why, why_n, "%s handle refused for session %llu: the token is a %s handle", k,
                 (unsigned long long)sid, be_ipc_token_kind_name(e->kind));
        return -1;
    }
    memset(real, 0, BE_IPC_TOKEN_BYTES);
    memcpy(real, e->real, e->len);
    *len = e->len;
    *exporter = e->sid;
    *fd = e->fd;
    return 0;
}

static void remove_at(be_ipc_tokens *t, size_t i)
{
    if (t->t[i].fd >= 0)
        close(t->t[i].fd);
    t->t[i] = t->t[t->n - 1];
    OPENSSL_cleanse(&t->t[t->n - 1], sizeof *t->t);
    t->n--;
}

int be_ipc_tokens_drop(be_ipc_tokens *t, const uint8_t token[BE_IPC_TOKEN_BYTES], uint64_t sid)
{
    struct tok *e = t && token ? find(t, token) : NULL;
    if (!e || e->sid != sid)
        return -1;
    remove_at(t, (size_t)(e - t->t));
    return 0;
}

int be_ipc_tokens_forget(be_ipc_tokens *t, enum be_ipc_token_kind kind, const uint8_t *real,
                         size_t len, uint64_t sid)
{
    for (size_t i = 0; t && real && i < t->n; i++) {
        const struct tok *e = &t->t[i];
        if (e->sid == sid && e->kind == (int)kind && e->len == len && !memcmp(e->real, real, len)) {
            remove_at(t, i);
            return 0;
        }
    }
    return -1;
}

size_t be_ipc_tokens_fds(const be_ipc_tokens *t)
{
    size_t n = 0;
    for (size_t i = 0; t && i < t->n; i++)
        n += t->t[i].fd >= 0;
    return n;
}

size_t be_ipc_tokens_drop_session(be_ipc_tokens *t, uint64_t sid)
{
    size_t gone = 0;
    for (size_t i = 0; t && i < t->n;) {
        if (t->t[i].sid == sid) {
            remove_at(t, i);
            gone++;
        } else {
            i++;
        }
    }
    return gone;
}

size_t be_ipc_tokens_count(const be_ipc_tokens *t)
{
    return t ? t->n : 0;
}

void be_ipc_tokens_serve(be_ipc_tokens *t, const char *instance, uint64_t sid, const void *req,
                         size_t len, struct be_ipc_token_ans *ans)
{
    int out = -1;
    be_ipc_tokens_serve_fd(t, instance, sid, req, len, -1, ans, &out);
    if (out >= 0)
        close(out);
}

void be_ipc_tokens_serve_fd(be_ipc_tokens *t, const char *instance, uint64_t sid, const void *req,
                            size_t len, int in_fd, struct be_ipc_token_ans *ans, int *out_fd)
{
    memset(ans, 0, sizeof *ans);
    ans->result = -1;
    *out_fd = -1;
    struct be_ipc_token_req r;
    if (len != sizeof r) {
        snprintf(ans->why, sizeof ans->why, "IPC token request of %zu bytes (expected %zu)", len,
                 sizeof r);
        if (in_fd >= 0)
            close(in_fd);
        return;
    }
    memcpy(&r, req, sizeof r);
    if (in_fd >= 0 && r.op != BE_TOKEN_OP_REGISTER) {
        close(in_fd); /* a descriptor comes with a registration only */
        in_fd = -1;
    }
    size_t got = 0;
    int held = -1;
    switch (r.op) {
    case BE_TOKEN_OP_REGISTER:
        ans->result =
            be_ipc_tokens_register_fd(t, (enum be_ipc_token_kind)r.kind, r.real, r.len, in_fd,
                                      instance, sid, ans->token, ans->why, sizeof ans->why);
        break;
    case BE_TOKEN_OP_RESOLVE:
        ans->result = be_ipc_tokens_resolve_fd(t, (enum be_ipc_token_kind)r.kind, r.token, instance,
                                               sid, ans->real, &got, &ans->exporter, &held,
                                               ans->why, sizeof ans->why);
        ans->len = (uint32_t)got;
        if (ans->result == 0 && held >= 0 && (*out_fd = fcntl(held, F_DUPFD_CLOEXEC, 0)) < 0) {
            ans->result = -1;
            snprintf(ans->why, sizeof ans->why,
                     "%s handle for session %llu: no descriptor left "
                     "in the backend's server",
                     be_ipc_token_kind_name((int)r.kind), (unsigned long long)sid);
        }
        break;
    case BE_TOKEN_OP_FORGET:
        ans->result = be_ipc_tokens_forget(t, (enum be_ipc_token_kind)r.kind, r.real,
                                           r.len <= BE_IPC_TOKEN_BYTES ? r.len : 0, sid);
        if (ans->result)
            snprintf(ans->why, sizeof ans->why, "session %llu exported no such %s handle",
                     (unsigned long long)sid, be_ipc_token_kind_name((int)r.kind));
        break;
    case BE_TOKEN_OP_DROP:
        ans->result = be_ipc_tokens_drop(t, r.token, sid);
        if (ans->result)
            snprintf(ans->why, sizeof ans->why, "session %llu holds no such IPC token",
                     (unsigned long long)sid);
        break;
    default:
        snprintf(ans->why, sizeof ans->why, "IPC token request with unknown op %u", r.op);
    }
    OPENSSL_cleanse(&r, sizeof r);
}
