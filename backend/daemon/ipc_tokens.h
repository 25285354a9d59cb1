/* IPC tokens (ipc_tokens.c): the parent's broker between the session workers of one tenant for
 * CUDA IPC and shareable handles. The guest never sees a real handle: it sees a random token of
 * the same size; the registry maps the token to the real handle, the exporting session and its
 * instance, and resolves it only for a session of the same instance (docs/security.md, "IPC
 * handles"). */
#ifndef SLUICE_BE_DAEMON_IPC_TOKENS_H
#define SLUICE_BE_DAEMON_IPC_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#define BE_IPC_TOKEN_BYTES 64 /* CUipcMemHandle, CUipcEventHandle, CUmemPoolPtrExportData */

/* What a token stands for: a token resolves only as the kind it was registered as. */
enum be_ipc_token_kind {
    BE_TOKEN_MEM = 1,      /* cuIpcGetMemHandle */
    BE_TOKEN_EVENT = 2,    /* cuIpcGetEventHandle */
    BE_TOKEN_POOL = 3,     /* cuMemPoolExportToShareableHandle */
    BE_TOKEN_POOL_PTR = 4, /* cuMemPoolExportPointer */
    BE_TOKEN_ALLOC = 5,    /* cuMemExportToShareableHandle */
};

/* Bounds: tokens held for one exporting session, and for the whole backend. */
#define BE_IPC_TOKENS_PER_SESSION 1024
#define BE_IPC_TOKENS_MAX         16384
/* ... and those that hold a descriptor (a shareable handle) */
#define BE_IPC_TOKEN_FDS_PER_SESSION 64
#define BE_IPC_TOKEN_FDS_MAX         256

typedef struct be_ipc_tokens be_ipc_tokens;

be_ipc_tokens *be_ipc_tokens_new(void);
void be_ipc_tokens_free(be_ipc_tokens *t);
/* Registers the real handle real[len] (len <= BE_IPC_TOKEN_BYTES) of kind exported by session sid
 * of instance; 0 and a fresh random token in token[BE_IPC_TOKEN_BYTES] (the token it already
 * has when sid registered the same handle as the same kind before), or -1 with why filled (bad
 * arguments, the session's or the backend's bound, no randomness). */
int be_ipc_tokens_register(be_ipc_tokens *t, enum be_ipc_token_kind kind, const uint8_t *real,
                           size_t len, const char *instance, uint64_t sid,
                           uint8_t token[BE_IPC_TOKEN_BYTES], char *why, size_t why_n);
/* As be_ipc_tokens_register, for a kind that holds a descriptor (be_ipc_token_kind_has_fd; fd,
 * which the registry takes in every case: kept with the token, or closed) or not (fd -1). real
 * names the exporter's object (its handle value), so that the same object exported again is the
 * same token. */
int be_ipc_tokens_register_fd(be_ipc_tokens *t, enum be_ipc_token_kind kind, const uint8_t *real,
                              size_t len, int fd, const char *instance, uint64_t sid,
                              uint8_t token[BE_IPC_TOKEN_BYTES], char *why, size_t why_n);
/* 1 when tokens of kind hold the exporter's descriptor (a POSIX file descriptor handle). */
int be_ipc_token_kind_has_fd(int kind);
/* Resolves token as kind for session sid of instance: 0 with the real handle copied to
 * real[BE_IPC_TOKEN_BYTES] (*len its length) and *exporter the exporting session; -1 with why
 * filled when the token is unknown (forged, or its exporter ended), of another kind, or of
 * another instance. The caller answers CUDA_ERROR_INVALID_VALUE, as the driver does for an
 * invalid handle, and logs why. */
int be_ipc_tokens_resolve(const be_ipc_tokens *t, enum be_ipc_token_kind kind,
                          const uint8_t token[BE_IPC_TOKEN_BYTES], const char *instance,
                          uint64_t sid, uint8_t real[BE_IPC_TOKEN_BYTES], size_t *len,
                          uint64_t *exporter, char *why, size_t why_n);
/* As be_ipc_tokens_resolve; *fd the registry's descriptor of the token (it keeps it; -1: none). */
int be_ipc_tokens_resolve_fd(const be_ipc_tokens *t, enum be_ipc_token_kind kind,
                             const uint8_t token[BE_IPC_TOKEN_BYTES], const char *instance,
                             uint64_t sid, uint8_t real[BE_IPC_TOKEN_BYTES], size_t *len,
                             uint64_t *exporter, int *fd, char *why, size_t why_n);
/* Forgets the token session sid registered for real[len] as kind (it released the object); 0,
 * or -1 when there is none. */
int be_ipc_tokens_forget(be_ipc_tokens *t, enum be_ipc_token_kind kind, const uint8_t *real,
                         size_t len, uint64_t sid);
/* Descriptors held (all sessions). */
size_t be_ipc_tokens_fds(const be_ipc_tokens *t);
/* Forgets one token of session sid (its allocation, event or pool is gone); 0, or -1 when sid
 * holds no such token. */
int be_ipc_tokens_drop(be_ipc_tokens *t, const uint8_t token[BE_IPC_TOKEN_BYTES], uint64_t sid);
/* Forgets every token session sid exported (the session ended); the number forgotten. */
size_t be_ipc_tokens_drop_session(be_ipc_tokens *t, uint64_t sid);
/* Tokens held (all sessions). */
size_t be_ipc_tokens_count(const be_ipc_tokens *t);
/* The worker's request (a BE_IPC_TOKEN record to the parent, ipc.h) and the parent's answer
 * (a BE_IPC_TOKEN record back). Fixed-size: the parent takes nothing else. */
enum {
    BE_TOKEN_OP_REGISTER = 1,
    BE_TOKEN_OP_RESOLVE = 2,
    BE_TOKEN_OP_DROP = 3,
    BE_TOKEN_OP_FORGET = 4, /* kind, len, real: the exporter released the object */
};
struct be_ipc_token_req {
    uint32_t op, kind, len, pad;       /* len: of real (REGISTER, FORGET) */
    uint8_t token[BE_IPC_TOKEN_BYTES]; /* RESOLVE, DROP */
    uint8_t real[BE_IPC_TOKEN_BYTES];  /* REGISTER, FORGET */
};
struct be_ipc_token_ans {
    int32_t result; /* 0, or -1: refused (why) */
    uint32_t len;   /* of real (RESOLVE) */
    uint64_t exporter;
    uint8_t token[BE_IPC_TOKEN_BYTES]; /* REGISTER */
    uint8_t real[BE_IPC_TOKEN_BYTES];  /* RESOLVE */
    char why[224];
};
/* Serves one request req[len] of session sid of instance (the parent's record from its worker):
 * fills ans. A request of the wrong size or an unknown op is refused in ans too. */
void be_ipc_tokens_serve(be_ipc_tokens *t, const char *instance, uint64_t sid, const void *req,
                         size_t len, struct be_ipc_token_ans *ans);
/* As be_ipc_tokens_serve, with the descriptor that came with the request (in_fd, -1: none; taken
 * in every case) and the one to send back with the answer (*out_fd, the caller's to close: a
 * copy of the registry's, for a resolved shareable handle; else -1). */
void be_ipc_tokens_serve_fd(be_ipc_tokens *t, const char *instance, uint64_t sid, const void *req,
                            size_t len, int in_fd, struct be_ipc_token_ans *ans, int *out_fd);
/* The name of a kind, for log lines ("mem", "event", ...); "?" for an unknown one. */
const char *be_ipc_token_kind_name(int kind);

#endif
