/* The CUDA IPC handlers (backend/api/ipc.c) through the dispatch table, with the broker wired to
 * a registry in this process (the parent's side, daemon/ipc_tokens.c) and a driver of test
 * functions: the guest gets a token, never the real handle; a token opens the real handle only
 * for a session of the exporter's instance and as its kind; the opened memory joins the
 * importer's allocation table uncounted; a forged token or one whose exporter ended, another
 * instance's or another kind's is CUDA_ERROR_INVALID_VALUE and the driver never sees it; without
 * a broker (sessions on threads) the calls are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "session/bulk_pool.h"
#include "daemon/broker.h"
#include "daemon/ipc_tokens.h"
#include "session/devices.h"
#include "session/handles.h"
#include "session/ranges.h"
#include "session/session.h"
#include "session/state.h"
#include "sluice/backend_dispatch.h"

#define INST_A   "11111111-1111-1111-1111-111111111111"
#define INST_B   "22222222-2222-2222-2222-222222222222"
#define EXPORTED 0x300000001000ull
#define OPENED   0x7f0000000000ull

static struct be_devices no_devs;
static be_ipc_tokens *g_reg;
static be_broker *g_broker;
static const sl_be_session *g_asking; /* the session whose request the "parent" serves */
static uint8_t g_opened_with[64];     /* the handle the driver's open saw */
static int g_opens;

/* The worker's write to its parent, answered at once by the parent's registry. */
static int send_to_parent(const void *msg, size_t len, int fd)
{
    struct be_ipc_token_ans ans;
    int out = -1; /* SCM_RIGHTS would give the parent its own copy: a dup here */
    be_ipc_tokens_serve_fd(g_reg, g_asking->instance, g_asking->id, msg, len,
                           fd >= 0 ? dup(fd) : -1, &ans, &out);
    return be_broker_answer(g_broker, &ans, sizeof ans, out);
}

static CUresult get_mem(CUipcMemHandle *h, CUdeviceptr p)
{
    memset(h, 0xa1, sizeof *h);
    h->reserved[0] = (char)(p >> 12);
    return CUDA_SUCCESS;
}

static CUresult open_mem(CUdeviceptr *p, CUipcMemHandle h, unsigned flags)
{
    (void)flags;
    memcpy(g_opened_with, &h, sizeof h);
    g_opens++;
    *p = OPENED;
    return CUDA_SUCCESS;
}

static CUresult close_mem(CUdeviceptr p)
{
    return p == OPENED ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    *base = p;
    *size = 1 << 20;
    return CUDA_SUCCESS;
}

static CUresult get_event(CUipcEventHandle *h, CUevent e)
{
    (void)e;
    memset(h, 0xe1, sizeof *h);
    return CUDA_SUCCESS;
}

static CUresult open_event(CUevent *e, CUipcEventHandle h)
{
    (void)h;
    g_opens++;
    *e = (CUevent)0xe7e7;
    return CUDA_SUCCESS;
}

static CUresult destroy_event(CUevent e)
{
    (void)e;
    return CUDA_SUCCESS;
}

static struct sl_driver_api api = {
    .cuIpcGetMemHandle = get_mem,
    .cuIpcOpenMemHandle_v2 = open_mem,
    .cuIpcCloseMemHandle = close_mem,
    .cuMemGetAddressRange_v2 = range,
    .cuIpcGetEventHandle = get_event,
    .cuIpcOpenEventHandle = open_event,
    .cuEventDestroy_v2 = destroy_event,
};

static sl_be_session *session(uint64_t id, const char *instance, be_broker *b)
{
    sl_be_session *s = be_session_new(id, &api, &no_devs);
    assert_non_null(s);
    strcpy(s->instance, instance);
    s->broker = b;
    return s;
}

static CUresult run(sl_be_session *s, Sluice__Wire__Call *call, Sluice__Wire__Reply *reply)
{
    g_asking = s;
    struct sl_be_call c = {.s = s, .api = &api, .call = call, .reply = reply};
    CUresult rc = sl_be_dispatch(sl_be_table, &c);
    be_bulk_free(c.out); /* a slot (session/bulk_pool.c) or malloc'd */
    return rc;
}

/* cuIpcGetMemHandle of p in s: the token (64 bytes) in tok. */
static CUresult export_mem(sl_be_session *s, uint64_t p, uint8_t tok[64])
{
    Sluice__Cuda__CuIpcGetMemHandleRequest rq = SLUICE__CUDA__CU_IPC_GET_MEM_HANDLE_REQUEST__INIT;
    rq.dptr = p;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuIpcGetMemHandle;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_IPC_GET_MEM_HANDLE;
    call.cu_ipc_get_mem_handle = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    CUresult rc = run(s, &call, &reply);
    if (rc == CUDA_SUCCESS) {
        assert_int_equal(reply.cu_ipc_get_mem_handle->p_handle.len, 64);
        memcpy(tok, reply.cu_ipc_get_mem_handle->p_handle.data, 64);
    }
    sl_be_reply_clear(&reply);
    return rc;
}

static CUresult open_token(sl_be_session *s, const uint8_t tok[64], uint64_t *p)
{
    Sluice__Cuda__CuIpcOpenMemHandleV2Request rq =
        SLUICE__CUDA__CU_IPC_OPEN_MEM_HANDLE_V2_REQUEST__INIT;
    rq.handle.data = (uint8_t *)tok;
    rq.handle.len = 64;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuIpcOpenMemHandle_v2;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_IPC_OPEN_MEM_HANDLE_V2;
    call.cu_ipc_open_mem_handle_v2 = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    CUresult rc = run(s, &call, &reply);
    if (rc == CUDA_SUCCESS)
        *p = reply.cu_ipc_open_mem_handle_v2->pdptr;
    sl_be_reply_clear(&reply);
    return rc;
}

static CUresult open_event_token(sl_be_session *s, const uint8_t tok[64], uint64_t *id)
{
    Sluice__Cuda__CuIpcOpenEventHandleRequest rq =
        SLUICE__CUDA__CU_IPC_OPEN_EVENT_HANDLE_REQUEST__INIT;
    rq.handle.data = (uint8_t *)tok;
    rq.handle.len = 64;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuIpcOpenEventHandle;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_IPC_OPEN_EVENT_HANDLE;
    call.cu_ipc_open_event_handle = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    CUresult rc = run(s, &call, &reply);
    if (rc == CUDA_SUCCESS)
        *id = reply.cu_ipc_open_event_handle->ph_event;
    sl_be_reply_clear(&reply);
    return rc;
}

static void tokens_open_only_in_the_exporters_instance(void **state)
{
    (void)state;
    g_reg = be_ipc_tokens_new();
    g_broker = be_broker_new(send_to_parent);
    sl_be_session *a = session(1, INST_A, g_broker), *a2 = session(2, INST_A, g_broker),
                  *b = session(3, INST_B, g_broker);
    assert_int_equal(be_mem_add(&a->mem, EXPORTED, 4096, BE_R_ALLOC, 0, 0), CUDA_SUCCESS);
    uint8_t tok[64], again[64], real[64];
    /* not the session's memory: refused before the driver */
    assert_int_equal(export_mem(a, EXPORTED + 8192, tok), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(export_mem(a, EXPORTED, tok), CUDA_SUCCESS);
    CUipcMemHandle h;
    get_mem(&h, EXPORTED);
    memcpy(real, &h, sizeof real);
    assert_memory_not_equal(tok, real, 64); /* the guest never sees the real handle */
    assert_int_equal(export_mem(a, EXPORTED, again), CUDA_SUCCESS);
    assert_memory_equal(tok, again, 64); /* the same handle is the same token */
    assert_int_equal(be_ipc_tokens_count(g_reg), 1);

    /* another session of the instance opens the real handle; uncounted in its table */
    uint64_t p = 0;
    assert_int_equal(open_token(a2, tok, &p), CUDA_SUCCESS);
    assert_int_equal(p, OPENED);
    assert_memory_equal(g_opened_with, real, 64);
    assert_true(be_mem_contains(&a2->mem, OPENED, 1 << 20));
    assert_int_equal(a2->mem.counted, 0);

    /* another instance, a forged token, another kind: refused, the driver never asked */
    g_opens = 0;
    assert_int_equal(open_token(b, tok, &p), CUDA_ERROR_INVALID_VALUE);
    assert_false(be_mem_contains(&b->mem, OPENED, 1));
    uint8_t forged[64];
    memcpy(forged, tok, 64);
    forged[17] ^= 1;
    assert_int_equal(open_token(a2, forged, &p), CUDA_ERROR_INVALID_VALUE);
    uint64_t ev = 0;
    assert_int_equal(open_event_token(a2, tok, &ev), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(g_opens, 0);

    /* the exporter ended: its tokens are gone */
    assert_int_equal(be_ipc_tokens_drop_session(g_reg, a->id), 1);
    assert_int_equal(open_token(a2, tok, &p), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(g_opens, 0);

    be_session_free(a);
    be_session_free(a2);
    be_session_free(b);
    be_broker_free(g_broker);
    be_ipc_tokens_free(g_reg);
}

static void event_tokens(void **state)
{
    (void)state;
    g_reg = be_ipc_tokens_new();
    g_broker = be_broker_new(send_to_parent);
    sl_be_session *a = session(1, INST_A, g_broker), *a2 = session(2, INST_A, g_broker);
    uint64_t eid;
    assert_int_equal(be_handles_put(&a->h, SL_H_EVENT, (void *)0xe0e0, 0, 0, &eid), CUDA_SUCCESS);
    Sluice__Cuda__CuIpcGetEventHandleRequest rq =
        SLUICE__CUDA__CU_IPC_GET_EVENT_HANDLE_REQUEST__INIT;
    rq.event = eid + 1000; /* not a handle of the session */
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuIpcGetEventHandle;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_IPC_GET_EVENT_HANDLE;
    call.cu_ipc_get_event_handle = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    assert_int_equal(run(a, &call, &reply), CUDA_ERROR_INVALID_HANDLE);
    sl_be_reply_clear(&reply);
    rq.event = eid;
    reply = (Sluice__Wire__Reply)SLUICE__WIRE__REPLY__INIT;
    assert_int_equal(run(a, &call, &reply), CUDA_SUCCESS);
    uint8_t tok[64];
    memcpy(tok, reply.cu_ipc_get_event_handle->p_handle.data, 64);
    sl_be_reply_clear(&reply);
    uint64_t p = 0, id = 0;
    assert_int_equal(open_token(a2, tok, &p), CUDA_ERROR_INVALID_VALUE); /* not memory */
    assert_int_equal(open_event_token(a2, tok, &id), CUDA_SUCCESS);
    void *native = NULL;
    assert_int_equal(sl_be_handle_get(a2, SL_H_EVENT, id, &native), CUDA_SUCCESS);
    assert_ptr_equal(native, (void *)0xe7e7);
    be_session_free(a);
    be_session_free(a2);
    be_broker_free(g_broker);
    be_ipc_tokens_free(g_reg);
}

static void without_a_broker_refused(void **state)
{
    (void)state;
    sl_be_session *s = session(1, INST_A, NULL);
    assert_int_equal(be_mem_add(&s->mem, EXPORTED, 4096, BE_R_ALLOC, 0, 0), CUDA_SUCCESS);
    uint8_t tok[64] = {0};
    uint64_t p = 0;
    assert_int_equal(export_mem(s, EXPORTED, tok), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(open_token(s, tok, &p), CUDA_ERROR_NOT_SUPPORTED);
    be_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tokens_open_only_in_the_exporters_instance),
        cmocka_unit_test(event_tokens),
        cmocka_unit_test(without_a_broker_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
