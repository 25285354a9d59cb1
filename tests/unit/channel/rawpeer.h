/* A hostile channel client for tests: it completes the TLS handshake as a real client does,
 * then writes whatever records it is told to (a MESSAGE announcing bulk it never sends, a bulk
 * a byte at a time, ...), one record per frame. Built on the channel's own internals
 * (proto/channel/internal.h); a test tool, never linked into the product. */
#ifndef SLUICE_TEST_RAWPEER_H
#define SLUICE_TEST_RAWPEER_H

#include "sluice/channel.h"

#include <stdint.h>

typedef struct rawpeer rawpeer;

enum { RAW_MESSAGE = 1, RAW_BULK = 2, RAW_SEALED = 5 }; /* record kinds (docs/channel.md) */

/* Connects to endpoint (from the source address src, NULL: any), runs the handshake with cfg
 * and waits for READY. SL_OK or the error (its text in err). */
sl_code raw_connect(const char *endpoint, const char *src, const sl_tls_config *cfg, int timeout_ms,
                    rawpeer **out, sl_error *err);
/* One record (kind, aux, payload of at most 1 KiB) in a frame of its own. */
sl_code raw_record(rawpeer *r, int kind, uint64_t aux, const void *payload, size_t len,
                   sl_error *err);
/* A record's header alone (its length says what would follow) in a frame of its own. */
sl_code raw_header(rawpeer *r, int kind, uint32_t length, uint64_t aux, sl_error *err);
/* From now on the session's bulk is sealed (sl_client_seal_bulk's agreement, docs/channel.md). */
sl_code raw_seal(rawpeer *r, sl_error *err);
/* Reads records until a MESSAGE (SL_OK; msg and len stay valid until the next call, and its bulk is
 * skipped by the next call) or the end of the session (the CLOSE code and text, or how the
 * session was lost); SL_ERR_TIMEOUT after timeout_ms. */
sl_code raw_recv(rawpeer *r, int timeout_ms, const void **msg, size_t *len, sl_error *err);
/* Whether the last raw_recv ended with the server's CLOSE (its code may be SL_ERR_TIMEOUT). */
int raw_peer_closed(const rawpeer *r);
void raw_close(rawpeer *r);

#endif
