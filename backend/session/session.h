/* A session's life (session.c): made bare (tables, primary context ids), its worker thread
 * started, jobs (frames of calls) queued to it, closed, freed. */
#ifndef SLUICE_BE_SESSION_SESSION_H
#define SLUICE_BE_SESSION_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "session/devices.h"
#include "session/state.h"
#include "sluice/error.h"
#include "sluice/wire.h"

struct be_job {
    struct be_job *next;
    Sluice__Wire__ClientMessage *msg; /* a CallFrame */
    uint8_t **bulk;                   /* per call, NULL when none */
    uint8_t *blob;                    /* when set, bulk[i] point into it (worker.c); malloc'd
                                       * or a slot of the session's pool (be_bulk_free) */
    size_t bytes;
    struct sl_lane_asm *lanes; /* where a call's lane pieces arrive (daemon/lanes.c) */
};

/* A bare session (tables, primary context ids, no thread): tests use it directly. */
sl_be_session *be_session_new(uint64_t id, const struct sl_driver_api *api,
                              const struct be_devices *devs);
/* Starts the worker thread. */
sl_code be_session_start(sl_be_session *s, sl_error *e);
/* Queues a job; SL_ERR_TOO_LARGE when the queue bounds would be exceeded. */
sl_code be_session_enqueue(sl_be_session *s, struct be_job *job, sl_error *e);
/* Asks the worker to finish (releases waiting callbacks); non-blocking. */
void be_session_close(sl_be_session *s);
/* A worker process's session whose channel session ended (its guest is gone): the session
 * thread stops between calls, sends the final usage record with what the GPU completed, and
 * neither waits for the work still queued (waits, contexts) nor frees anything: the process
 * exits next (_exit) and the driver frees its contexts with it. Waits up to wait_ms for the
 * session thread: 1 it finished (the final record is sent), 0 it is still in a driver call
 * (e.g. an interval's record waiting for the GPU's queue). */
int be_session_abandon(sl_be_session *s, int64_t wait_ms);
/* Joins the worker and frees everything. */
void be_session_free(sl_be_session *s);
void be_job_free(struct be_job *j);
/* Frees everything the session holds in the driver (contexts, libraries) and its tables;
 * called by the worker at its end (and by tests). */
void be_session_release_all(sl_be_session *s);

#endif
