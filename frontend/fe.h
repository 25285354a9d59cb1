/* Internals of the guest libcuda.so.1 runtime (config, connection, rpc, device, context,
 * memory, modules, launches, callbacks). Everything here has hidden visibility: the library
 * exports only the driver API names (frontend/libcuda.map). */
#ifndef SLUICE_FRONTEND_FE_H
#define SLUICE_FRONTEND_FE_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <cuda.h>

#include "sluice/error.h"
#include "sluice/wire.h"
#include "sluice_session.pb-c.h"

#define SL_FE_COMPONENT "frontend"

/* ------------------------------------------------------------------ config.c */
struct sl_fe_config {
    char dir[512];
    char endpoint[512];
    char ca[600], cert[600], key[600];
};

/* Reads <dir>/backend.conf and checks that the three credential files are readable.
 * dir NULL: $SLUICE_CONFIG_DIR, else /etc/sluice. The error names the missing file. */
sl_code sl_fe_config_load(const char *dir, struct sl_fe_config *cfg, sl_error *err);
/* SL_ERR_CERT_EXPIRED (saying since when) when cfg->cert is not valid at now (unix time). */
sl_code sl_fe_config_check_cert(const struct sl_fe_config *cfg, int64_t now, sl_error *err);
/* What the tenant should do after a failure of this kind (advice.c): one sentence. */
const char *sl_fe_advice(sl_code code);
/* Parses backend.conf text ("endpoint = tcp://HOST:PORT", '#' comments, blank lines). */
sl_code sl_fe_config_parse(const char *text, struct sl_fe_config *cfg, sl_error *err);
/* The environment variable name as a whole number 0..max; unset or empty gives dflt, anything
 * else (not a number, negative, over max) is logged with its name and gives dflt. */
unsigned sl_fe_env_uint(const char *name, unsigned dflt, unsigned max);

/* ------------------------------------------------------------------ connection.c */
struct sl_fe_device {
    int ordinal;
    char name[256];
    CUuuid uuid;
    int has_uuid;
    uint64_t total_mem;
    int *attrs;
    size_t nattrs;
    unsigned char luid[8];
    int has_luid;
    unsigned luid_mask;
    uint64_t primary_context;
};

/* Connects and opens the session once (thread-safe); later calls return the first outcome.
 * CUDA_SUCCESS, CUDA_ERROR_NO_DEVICE (no config, nothing reachable) or
 * CUDA_ERROR_DEVICE_UNAVAILABLE (the session was lost). */
CUresult sl_fe_ensure_session(void);
/* The driver version the backend reported (>= 13000), 0 before a session exists. */
int sl_fe_session_driver_version(void);
int sl_fe_session_device_count(void);
const struct sl_fe_device *sl_fe_session_device(int ordinal);

/* ------------------------------------------------------------------ frame.c */
struct sl_fe_transport;
/* Calls encoded as the CallFrame of a ClientMessage, with the copied bulk of async calls. */
struct sl_fe_frame {
    uint8_t *buf; /* room for the ClientMessage header, then the CallFrame elements */
    size_t len;   /* bytes of CallFrame elements */
    size_t cap;
    size_t calls;
    uint8_t *bulk; /* copied bulk of the async calls, in call order */
    size_t bulk_len, bulk_cap;
};
/* Room for more bytes of bulk (0, or -1: out of memory). */
int sl_fe_frame_reserve_bulk(struct sl_fe_frame *f, size_t more);
/* Copies len bytes of bulk behind the frame's (room reserved before). */
void sl_fe_frame_add_bulk(struct sl_fe_frame *f, const void *data, size_t len);
/* Appends call, checked before (0, or -1: out of memory). */
int sl_fe_frame_append(struct sl_fe_frame *f, const Sluice__Wire__Call *call);
/* Sends the frame, its bulk and then extra (at most 7 segments in all), and empties it. */
sl_code sl_fe_frame_send(struct sl_fe_frame *f, const struct sl_fe_transport *tr,
                         const struct iovec *extra, size_t n_extra, sl_error *e);
void sl_fe_frame_clear(struct sl_fe_frame *f);
void sl_fe_frame_free(struct sl_fe_frame *f);

/* ------------------------------------------------------------------ rpc.c */
/* The transport the rpc layer talks through (tests replace it). */
struct sl_fe_transport {
    sl_code (*send)(void *t, const void *msg, size_t len, const struct iovec *bulk, size_t n,
                    sl_error *e);
    sl_code (*recv)(void *t, const void **msg, size_t *len, uint64_t *bulk_len, int timeout_ms,
                    sl_error *e);
    sl_code (*recv_bulk)(void *t, void *dst, size_t len, sl_error *e);
    void *t;
    /* Waiting for input without holding the transport (sluice/channel.h sl_client_fds and
     * sl_client_has_input); NULL: the reading thread blocks in recv instead (tests). */
    int (*fds)(void *t, int *fds, int n);
    int (*has_input)(void *t);
};

/* Installs the transport of a fresh session (seq restarts at 1). */
void sl_fe_rpc_attach(const struct sl_fe_transport *tr);
/* Forgets the transport (the session is gone): every later call fails with
 * CUDA_ERROR_DEVICE_UNAVAILABLE. */
void sl_fe_rpc_detach(void);
/* Back to the initial state (tests). */
void sl_fe_rpc_reset(void);

struct sl_fe_rpc_limits {
    size_t frame_calls;      /* pending calls that force a flush (256) */
    size_t frame_bulk;       /* pending bulk that forces a flush (4 MiB) */
    size_t inflight_calls;   /* unanswered async calls before an slFence (4096) */
    uint64_t inflight_bulk;  /* unanswered async bulk before an slFence (256 MiB) */
    unsigned flush_us;       /* longest wait of a queued async call before it is sent; 0: none */
    unsigned start_us;       /* after a reply: the first async call goes at once, the next frames
                                wait start_us, twice that, ... up to flush_us; 0: flush_us always */
    int sender;              /* frames of async calls go out from a thread of their own */
    unsigned sender_spin_us; /* that thread polls this long after a send before it sleeps; a
                                thread waiting for a reply polls as long before it sleeps */
};
#define SL_FE_FLUSH_US_DEFAULT 200u
#define SL_FE_FLUSH_US_MAX     1000000u
#define SL_FE_START_US_DEFAULT 100u
/* With the sender thread a frame costs the program only its hand-over: a constant 50 us window
 * (measured on an H200, docs/pytorch.md seventh session). */
#define SL_FE_FLUSH_US_SENDER 50u
#define SL_FE_START_US_SENDER 0u
/* A thread waiting for a reply polls without sleeping this long first ($SLUICE_SPIN_US; the
 * default is 0 on a machine of fewer than 4 CPUs). */
#define SL_FE_SPIN_US_DEFAULT 300u
#define SL_FE_SPIN_US_MAX     100000u
void sl_fe_rpc_set_limits(const struct sl_fe_rpc_limits *l);
/* $SLUICE_SENDER (0 or 1; dflt when unset or bad). */
int sl_fe_rpc_sender_from_env(int dflt);
/* $SLUICE_FLUSH_US and $SLUICE_FLUSH_START_US checked (a bad value is logged and the default
 * used); the defaults depend on whether frames go out from the sender thread. */
unsigned sl_fe_rpc_flush_us_from_env(int sender);
unsigned sl_fe_rpc_start_us_from_env(int sender);

/* Statistics for tests. */
struct sl_fe_rpc_stats {
    uint64_t frames_sent, calls_sent, fences, callbacks_run, deferred_errors, memo_hits;
    uint64_t sync_calls, async_calls, wait_ns; /* wait_ns: time sync calls waited for replies */
    uint64_t frames_handed;                    /* frames sent by the sender thread */
};
void sl_fe_rpc_stats(struct sl_fe_rpc_stats *st);
/* The max call ids made most often as synchronous calls, with their counts, most first;
 * returns how many there are (at most max). */
size_t sl_fe_rpc_top_sync(uint32_t *ids, uint64_t *counts, size_t max);
/* The same for the calls that emptied the memo (unmemo calls, and answers with an error). */
size_t sl_fe_rpc_top_forget(uint32_t *ids, uint64_t *counts, size_t max);
/* The same for the calls that made the frontend forget that the context was idle (work whose
 * stream it cannot tell, in another context, on too many streams, or an error). */
size_t sl_fe_rpc_top_unclean(uint32_t *ids, uint64_t *counts, size_t max);

/* A synchronous call with bulk in (n segments, sent after the call) and bulk out (the reply's
 * bulk is decrypted into out, at most out_cap bytes; the rest is discarded and the call fails).
 * *out_len (may be NULL) receives the number of bytes written. */
CUresult sl_fe_call_bulk(Sluice__Wire__Call *call, const struct iovec *in, size_t n, void *out,
                         size_t out_cap, size_t *out_len, Sluice__Wire__Reply **reply);
/* n (at most SL_FE_BATCH_MAX) synchronous calls without bulk in, sent in one frame so that the
 * backend works on the next while the guest receives the reply before (the pieces of a large
 * copy). Reply i's bulk goes into out[i] (out_cap[i] bytes; out_len[i] says how many), replies[i]
 * gets the reply (NULL where the call was not made). A failure to make the calls is returned;
 * the calls' own results are in their replies. */
#define SL_FE_BATCH_MAX 8
CUresult sl_fe_call_batch(Sluice__Wire__Call *const *calls, size_t n, void *const *out,
                          const size_t *out_cap, size_t *out_len, Sluice__Wire__Reply **replies);
/* A call's out-parameter that travels as a struct's bytes: pod is the reply's bytes field, NULL
 * when the reply carries another member. When rc is success, copies exactly size bytes into
 * dst, or answers CUDA_ERROR_UNKNOWN for a reply of the wrong shape; else returns rc. */
CUresult sl_fe_pod_out(CUresult rc, const ProtobufCBinaryData *pod, void *dst, size_t size);
/* An async call with bulk in (copied or sent before returning: the caller may reuse it). */
CUresult sl_fe_enqueue_async_bulk(Sluice__Wire__Call *call, const struct iovec *in, size_t n);
/* Sends slFence and waits: every earlier call executed. Returns the deferred error if any. */
CUresult sl_fe_fence(void);
/* Non-zero while the calling thread runs a host callback. */
int sl_fe_in_callback(void);

/* ------------------------------------------------------------------ idle.c */
/* With the rpc lock held. A call appended to the pending frame (its table entry; NULL: none). */
void sl_fe_idle_note(const Sluice__Wire__Call *c, const struct sl_call_info *ci);
/* 1 if c (a synchronization or a stream query) can be answered with success here. */
int sl_fe_idle_can_answer(const Sluice__Wire__Call *c);
/* c was answered with success (here or by the backend): what it synchronized is idle. */
void sl_fe_idle_answered(const Sluice__Wire__Call *c);
/* An answer with an error: nothing is known idle any more. */
void sl_fe_idle_after_error(uint32_t call_id);
/* The session is new or gone: nothing is known idle. */
void sl_fe_idle_forget(void);
/* Back to the initial state, counts included (tests). */
void sl_fe_idle_reset(void);
/* Per call id, how often a call made the frontend forget that the context was idle. */
const uint32_t *sl_fe_idle_unclean_counts(void);

/* ------------------------------------------------------------------ memo.c */
/* With the rpc lock held: 1 and a copy of the answer if a memo call was answered before;
 * put keeps a clean answer; clear forgets every answer (an unmemo call, a new session). */
int sl_fe_memo_get(const Sluice__Wire__Call *call, Sluice__Wire__Reply **reply);
void sl_fe_memo_put(const Sluice__Wire__Call *call, const Sluice__Wire__Reply *reply);
void sl_fe_memo_clear(void);
/* Forgets the capture-status answers (after a call flagged uncapture). */
void sl_fe_memo_uncapture(void);

/* ------------------------------------------------------------------ callback.c */
/* Registers a host function for a stream; returns its id (non-zero). kind 0: CUhostFn
 * fn(user), kind 1: CUstreamCallback fn(stream, status, user). One-shot. */
uint64_t sl_fe_callback_register(int kind, void (*fn)(void), void *user, CUstream stream);
/* Runs the callback registered under id (then forgets it); 0 if none. */
int sl_fe_callback_run(uint64_t id);
void sl_fe_callback_forget(uint64_t id);

/* ------------------------------------------------------------------ context.c */
/* The calling thread's current context id (0 = none), what goes into Call.context. */
uint64_t sl_fe_current_ctx_id(void);
/* Pushes ctx (a context just created) on the calling thread's stack. */
void sl_fe_ctx_push(CUcontext ctx);
/* The device of a context handle; -1 if unknown. */
int sl_fe_ctx_device(CUcontext ctx);
void sl_fe_ctx_remember(CUcontext ctx, int device);
void sl_fe_ctx_forget(CUcontext ctx);
/* Test helper: clears the calling thread's stack and the tables. */
void sl_fe_ctx_reset(void);

/* ------------------------------------------------------------------ hostmem.c */
/* 1 if [p, p+len) lies in guest host memory we know of (cuMemAllocHost/HostAlloc/Register)
 * or is mapped in this process; used by cuMemcpy with unified addresses. */
int sl_fe_is_host_pointer(const void *p);

/* ------------------------------------------------------------------ mapped.c */
/* Gives the guest range *pp (len bytes) a mapped twin in the backend; *dptr is the twin's
 * device address. movable: the frontend owns the range (an anonymous mapping of len bytes) and
 * may move it to the twin's address, updating *pp. */
CUresult sl_fe_mapped_add(void **pp, size_t len, int movable, uint64_t *dptr);
/* 1 while len more bytes fit the process's mapped memory bound. */
int sl_fe_mapped_room(size_t len);
void sl_fe_mapped_remove(void *p);
/* 1 and the device address of p if p lies in mapped memory. */
int sl_fe_mapped_dptr(const void *p, uint64_t *dptr);
/* With the rpc lock held: emit(...) for each span the program changed since the last
 * exchange, before a call leaves; apply(...) for each Reply.mapped entry. */
typedef CUresult (*sl_fe_mapped_emit)(uint64_t dptr, uint64_t offset, const void *data, size_t len);
CUresult sl_fe_mapped_sync_out(sl_fe_mapped_emit emit);
void sl_fe_mapped_apply(uint64_t dptr, uint64_t offset, const void *data, size_t len);

/* ------------------------------------------------------------------ module.c */
enum sl_fe_image_format {
    SL_FE_IMAGE_INVALID = 0,
    SL_FE_IMAGE_WRAPPER = 1,
    SL_FE_IMAGE_FATBIN = 2,
    SL_FE_IMAGE_ELF = 3,
    SL_FE_IMAGE_PTX = 4,
};
/* Measures an image: its format, the pointer to the bytes to ship (the fatbin for a wrapper)
 * and their length. max bounds how far we read for PTX (0: 1 GiB). */
enum sl_fe_image_format sl_fe_image_measure(const void *image, const void **bytes, size_t *len);
/* SHA-256 of len bytes. */
void sl_fe_sha256(const void *data, size_t len, uint8_t out[32]);
/* slLoadImage: target 1 module, 2 library. */
CUresult sl_fe_load_image(const void *image, uint32_t target, const uint32_t *jit_opts,
                          const uint64_t *jit_vals, size_t njit, uint64_t *handle);

/* ------------------------------------------------------------------ launch.c */
struct sl_fe_param_layout {
    uint32_t count;
    size_t *offsets, *sizes;
    size_t total; /* max(offset + size) */
};
/* Packs params[i] at their offsets into buf (capacity cap); returns bytes used or 0 and sets
 * *rc on failure. */
size_t sl_fe_pack_params(const struct sl_fe_param_layout *l, void **params, uint8_t *buf,
                         size_t cap);
/* The extra-array buffer (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE); 0 on success. */
int sl_fe_parse_extra(void **extra, const void **buf, size_t *len);
/* Test helper: drops the layout cache. */
void sl_fe_layout_cache_clear(void);
/* The parameter bytes of function/kernel id f as a launch packs them: kernelParams packed at
 * the layout's offsets (into stackbuf, or *heap when larger: the caller frees it), or the extra
 * buffer as given (same layout). */
CUresult sl_fe_param_bytes(uint64_t f, void **kernelParams, void **extra, uint8_t *stackbuf,
                           size_t stackcap, uint8_t **heap, const void **bytes, size_t *len);

/* ------------------------------------------------------------------ misc */
/* The largest piece of a copy with a host side: one call each, bounding the backend's staging. */
#define SL_FE_MAX_COPY_CHUNK ((size_t)16 << 20)

#endif
