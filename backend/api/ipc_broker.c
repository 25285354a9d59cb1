/* The handlers' side of the IPC token broker: the requests of api/ipc.c and api/shareable.c to
 * the backend's parent (daemon/broker.c to daemon/ipc_tokens.c), and what their answers mean for
 * the guest. Real handles and descriptors are wiped or closed on every path. */
#include "api/ipc_broker.h"

#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "api/reply.h"
#include "daemon/broker.h"
#include "sluice/backend_dispatch.h"
#include "sluice/backend_hooks.h"
#include "sluice/log.h"

#define BROKER_TIMEOUT_MS 10000

CUresult be_ipc_export(sl_be_session *s, Sluice__Wire__Reply *reply, enum be_ipc_token_kind kind,
                       const void *real, size_t len, int fd, uint8_t token[BE_IPC_TOKEN_BYTES])
{
    if (!s->broker) {
        sl_be_detail(reply, "IPC handles need the backend's session worker processes");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (len > BE_IPC_TOKEN_BYTES)
        return CUDA_ERROR_INVALID_VALUE;
    struct be_ipc_token_req rq = {.op = BE_TOKEN_OP_REGISTER, .kind = kind, .len = (uint32_t)len};
    memcpy(rq.real, real, len);
    struct be_ipc_token_ans ans;
    int back = -1;
    int asked = be_broker_ask_fd(s->broker, &rq, fd, &ans, &back, BROKER_TIMEOUT_MS);
    if (back >= 0)
        close(back); /* a registration's answer carries none */
    OPENSSL_cleanse(&rq, sizeof rq);
    CUresult rc = CUDA_SUCCESS;
    if (asked != 0 || ans.result != 0) {
        sl_be_detail(reply, "%s", ans.why);
        rc = asked != 0 ? CUDA_ERROR_UNKNOWN : CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        memcpy(token, ans.token, BE_IPC_TOKEN_BYTES);
    }
    OPENSSL_cleanse(&ans, sizeof ans);
    return rc;
}

CUresult be_ipc_import(sl_be_session *s, Sluice__Wire__Reply *reply, enum be_ipc_token_kind kind,
                       const uint8_t *tok, size_t tok_len, void *real, size_t want, int *fd)
{
    if (fd)
        *fd = -1;
    if (tok_len != BE_IPC_TOKEN_BYTES || !tok) {
        sl_be_detail(reply, "an IPC handle of %zu bytes", tok_len);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!s->broker) {
        sl_be_detail(reply, "IPC handles need the backend's session worker processes");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    struct be_ipc_token_req rq = {.op = BE_TOKEN_OP_RESOLVE, .kind = kind};
    memcpy(rq.token, tok, BE_IPC_TOKEN_BYTES);
    struct be_ipc_token_ans ans;
    int got = -1;
    int asked = be_broker_ask_fd(s->broker, &rq, -1, &ans, &got, BROKER_TIMEOUT_MS);
    int needs_fd = be_ipc_token_kind_has_fd((int)kind);
    CUresult rc = CUDA_SUCCESS;
    if (asked != 0) {
        sl_be_detail(reply, "%s", ans.why);
        rc = CUDA_ERROR_UNKNOWN;
    } else if (ans.result != 0 || ans.len != want) {
        /* the parent logged why (its warning names the session and the token's owner) */
        sl_be_detail(reply, "%s", ans.result ? ans.why : "an IPC handle of another size");
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (needs_fd != (got >= 0) || (needs_fd && !fd)) {
        sl_be_detail(reply, "the backend's server answered a %s handle %s a descriptor",
                     be_ipc_token_kind_name((int)kind), got >= 0 ? "with" : "without");
        rc = CUDA_ERROR_UNKNOWN;
    } else {
        memcpy(real, ans.real, want);
        if (fd) {
            *fd = got;
            got = -1;
        }
    }
    if (got >= 0)
        close(got);
    OPENSSL_cleanse(&rq, sizeof rq);
    OPENSSL_cleanse(&ans, sizeof ans);
    return rc;
}

void be_ipc_forget(sl_be_session *s, enum be_ipc_token_kind kind, const void *real, size_t len)
{
    if (!s->broker || len > BE_IPC_TOKEN_BYTES)
        return;
    struct be_ipc_token_req rq = {.op = BE_TOKEN_OP_FORGET, .kind = kind, .len = (uint32_t)len};
    memcpy(rq.real, real, len);
    struct be_ipc_token_ans ans;
    if (be_broker_ask(s->broker, &rq, &ans, BROKER_TIMEOUT_MS) != 0 || ans.result != 0)
        sl_log(SL_LOG_WARNING, "backend", "session %llu: a released %s handle's token: %s",
               (unsigned long long)s->id, be_ipc_token_kind_name((int)kind), ans.why);
    OPENSSL_cleanse(&rq, sizeof rq);
    OPENSSL_cleanse(&ans, sizeof ans);
}
