/* What a session gives the call layer: its transport (attached when the session opens,
 * detached or lost when it goes) and its limits; the reset of the tests. */
#include <pthread.h>

#include "call/filters.h"
#include "call/rpc_replies.h"
#include "call/rpc_sender.h"
#include "call/rpc_session.h"
#include "call/rpc_state.h"
#include "component.h"
#include "sluice/log.h"

void sl_fe_rpc_set_limits(const struct sl_fe_rpc_limits *l)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    pthread_mutex_lock(&rs->io);
    rs->lim = *l;
    if (rs->sender_started)
        pthread_cond_signal(&rs->sender_cv);
    pthread_mutex_unlock(&rs->io);
}

void sl_fe_rpc_attach(const struct sl_fe_transport *tr)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    pthread_mutex_lock(&rs->io);
    sl_fe_outbox_settle();
    rs->tr = *tr;
    rs->attached = 1;
    rs->dead = 0;
    rs->seq = 0;
    rs->inflight_calls = 0;
    rs->inflight_bulk = 0;
    rs->inflight_seq = 0;
    rs->win_ns = 0;
    sl_fe_filters_session();
    sl_fe_pending_clear();
    pthread_mutex_unlock(&rs->io);
}

void sl_fe_rpc_detach(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    pthread_mutex_lock(&rs->io);
    sl_fe_outbox_settle(); /* the caller closes the transport next */
    rs->dead = 1;
    sl_fe_pending_clear();
    sl_fe_waiters_fail();
    while (rs->reader_polling) { /* the reader waits on the transport's descriptors */
        sl_fe_wake_reader();
        pthread_cond_wait(&rs->sent_cv, &rs->io);
    }
    pthread_mutex_unlock(&rs->io);
}

void sl_fe_rpc_reset(void)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    pthread_mutex_lock(&rs->io);
    sl_fe_outbox_settle();
    rs->attached = 0;
    rs->dead = 0;
    rs->seq = 0;
    rs->inflight_calls = 0;
    rs->inflight_bulk = 0;
    rs->inflight_seq = 0;
    rs->win_ns = 0;
    sl_fe_rpc_stats_reset();
    sl_fe_filters_reset();
    sl_fe_pending_clear();
    sl_fe_frame_free(&rs->pf);
    sl_fe_frame_free(&rs->ob);
    pthread_mutex_unlock(&rs->io);
}

/* The transport failed or the backend closed the session. */
CUresult sl_fe_rpc_lost(const char *what, const sl_error *e)
{
    struct sl_fe_rpc_state *rs = sl_fe_rpc_state();
    if (!rs->dead)
        sl_log(SL_LOG_ERR, SL_FE_COMPONENT,
               "connection to the backend lost (%s: %s); CUDA calls now fail with "
               "CUDA_ERROR_DEVICE_UNAVAILABLE",
               what, e ? e->msg : "closed");
    rs->dead = 1;
    sl_fe_filters_session();
    sl_fe_pending_clear();
    sl_fe_waiters_fail();
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
}
