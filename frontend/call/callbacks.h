/* The host callbacks filter (callbacks.c): the (fn, userData) of host functions and stream
 * callbacks stay in the guest under a callback id; the call layer runs one when the backend
 * asks (ServerMessage{callback}). The CUDA calls that register them are api/callback.c's. */
#ifndef SLUICE_FRONTEND_CALL_CALLBACKS_H
#define SLUICE_FRONTEND_CALL_CALLBACKS_H

#include <stdint.h>

#include <cuda.h>

/* Registers a host function for a stream; returns its id (non-zero). kind 0: CUhostFn
 * fn(user), kind 1: CUstreamCallback fn(stream, status, user). One-shot. */
uint64_t sl_fe_callback_register(int kind, void (*fn)(void), void *user, CUstream stream);
/* Runs the callback registered under id (then forgets it); 0 if none. */
int sl_fe_callback_run(uint64_t id);
void sl_fe_callback_forget(uint64_t id);
/* The backend asks for the host function registered under id: runs it as sl_fe_callback_run,
 * the calling thread marked as running a host callback meanwhile. */
int sl_fe_callback_run_asked(uint64_t id);
/* Non-zero while the calling thread runs a host callback. */
int sl_fe_in_callback(void);

#endif
