/* The backend's bounds on what one guest may make it hold (docs/backend.md, "Limits"), and the
 * component name its log lines carry. Header only: every folder of backend/ uses these. */
#ifndef SLUICE_BE_BOUNDS_H
#define SLUICE_BE_BOUNDS_H

#include <stddef.h>
#include <stdint.h>

#define BE_COMPONENT "sluice-backend"

#define BE_MAX_BULK_PER_CALL  ((uint64_t)64 << 20)  /* HtoD data, params, images, DtoH replies */
#define BE_MAX_BULK_PER_FRAME ((uint64_t)128 << 20) /* all calls of one CallFrame */
#define BE_MAX_REPLY_QUEUE    ((size_t)192 << 20)   /* replies waiting for one guest to read */
#define BE_MAX_QUEUED_CALLS   (16384u)              /* calls waiting in one session's queue */
#define BE_MAX_QUEUED_BYTES   ((size_t)320 << 20)   /* bulk waiting in one session's queue */
#define BE_MAX_HANDLES        (1u << 20)            /* live handles per session */
#define BE_MAX_ALLOCS         (1u << 20)            /* live device ranges per session */
#define BE_MAX_CONTEXTS       64u                   /* contexts per session */
#define BE_MAX_PARAMS         1024u                 /* kernel parameters per function */
#define BE_MAX_PARAM_BYTES    32768u                /* kernel parameter buffer */
#define BE_MAX_STDOUT         ((size_t)1 << 20)     /* printf bytes kept for one reply */
#define BE_IMAGE_CACHE_BYTES  ((size_t)512 << 20)   /* in-process image cache */
#define BE_IMAGE_CACHE_COUNT  1024u
#define BE_IMAGE_STORE_BYTES  ((uint64_t)1 << 30) /* images on disk (--state-dir), per tenant */
#define BE_IMAGE_TMP_STALE_S  600 /* an image store temporary file older than this is abandoned */
#define BE_IMAGE_WRITES_BYTES ((uint64_t)256 << 20) /* images waiting for the store's writer */
#define BE_IMAGE_SETTLE_MS    1000u                 /* a worker's wait for them at its end */

#endif
