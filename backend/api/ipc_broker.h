/* The handlers' side of the IPC token broker (ipc_broker.c): a real handle or shareable
 * descriptor registered with the backend's parent for a token the guest gets, a guest's token
 * resolved back (docs/security.md, "IPC handles"). Used by api/ipc.c and api/shareable.c. */
#ifndef SLUICE_BE_API_IPC_BROKER_H
#define SLUICE_BE_API_IPC_BROKER_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/ipc_tokens.h"
#include "session/state.h"
#include "sluice/wire.h"

/* Registers the real handle real[len] as kind, with the exporter's descriptor fd for a kind that
 * holds one (-1: none; the caller keeps and closes it): the token in token[BE_IPC_TOKEN_BYTES].
 * CUDA_ERROR_NOT_SUPPORTED without a broker (sessions on threads), CUDA_ERROR_OUT_OF_MEMORY when
 * the parent refuses (a bound), CUDA_ERROR_UNKNOWN when it does not answer; the reply's detail
 * says why. */
CUresult be_ipc_export(sl_be_session *s, Sluice__Wire__Reply *reply, enum be_ipc_token_kind kind,
                       const void *real, size_t len, int fd, uint8_t token[BE_IPC_TOKEN_BYTES]);
/* Resolves the guest's token tok[tok_len] as kind: the real handle in real[want] and, for a kind
 * that holds one, the descriptor in *fd (the caller's to close; -1: none; fd may be NULL for a
 * kind without). CUDA_ERROR_INVALID_VALUE for a token that is not one of this instance's of that
 * kind (the parent logged why), as the driver answers an invalid handle. */
CUresult be_ipc_import(sl_be_session *s, Sluice__Wire__Reply *reply, enum be_ipc_token_kind kind,
                       const uint8_t *tok, size_t tok_len, void *real, size_t want, int *fd);
/* The exporter released the object registered as real[len] of kind: its token is forgotten (and
 * the parent's descriptor closed). Nothing without a broker; failures only logged. */
void be_ipc_forget(sl_be_session *s, enum be_ipc_token_kind kind, const void *real, size_t len);

#endif
