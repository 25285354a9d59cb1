/* Session worker processes, the parent's side (workers.c). */
#ifndef SLUICE_BE_DAEMON_WORKERS_H
#define SLUICE_BE_DAEMON_WORKERS_H

#include <stddef.h>

#include "daemon/state.h"
#include "sluice/error.h"
#include "sluice/wire.h"

/* Starts `worker_exe --session-worker FD ...` for n. */
sl_code be_workers_spawn(struct be_server *srv, struct be_sess_node *n, sl_error *e);
/* Queues one message (and, f not NULL, the calls' bulk, taken from the channel as it arrives)
 * for n's worker. */
sl_code be_workers_send(struct be_server *srv, struct be_sess_node *n, const void *msg, size_t len,
                        const Sluice__Wire__CallFrame *f, sl_error *e);
/* Puts t (whole: its bytes all there) at the end of what goes to n's worker. */
void be_workers_queue(struct be_sess_node *n, struct be_tx *t);
/* Writes what the worker's socket takes now. */
void be_workers_flush(struct be_sess_node *n);
/* Reads what n's worker sent, at most budget bytes (and BE_READ_TURN_NS) this turn; 0: all. */
void be_workers_read(struct be_server *srv, struct be_sess_node *n, size_t budget);
/* Reaps exited workers, kills those past their grace and frees ended sessions; wait: until every
 * ended session is gone. */
void be_workers_reap(struct be_server *srv, int wait);

#endif
