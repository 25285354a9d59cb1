/* The session worker's side of the IPC token broker (broker.c): a session thread's request to the
 * parent's registry (ipc_tokens.c), answered through the worker's main thread. */
#ifndef SLUICE_BE_DAEMON_BROKER_H
#define SLUICE_BE_DAEMON_BROKER_H

#include <stddef.h>

#include "daemon/ipc_tokens.h"

/* Writes one BE_IPC_TOKEN record (msg[len]) to the parent, with the descriptor fd attached
 * unless it is -1 (the sender keeps it); 0 or -1. The worker's writer, which serializes it with
 * its other records. */
typedef int (*be_broker_send_fn)(const void *msg, size_t len, int fd);

typedef struct be_broker be_broker;

be_broker *be_broker_new(be_broker_send_fn send);
void be_broker_free(be_broker *b);
/* A session thread's request: sends it and waits (at most timeout_ms) for the parent's answer.
 * 0: answered (ans filled; ans->result -1 is the parent's refusal, ans->why says why); -1: no
 * answer (the parent is gone, the send failed or the time ran out; ans->why says which). One
 * request at a time: later callers wait for the earlier ones. */
int be_broker_ask(be_broker *b, const struct be_ipc_token_req *req, struct be_ipc_token_ans *ans,
                  int timeout_ms);
/* As be_broker_ask, with send_fd attached to the request (-1: none; the caller keeps it) and the
 * descriptor that came with the answer in *recv_fd (the caller's to close; -1: none). */
int be_broker_ask_fd(be_broker *b, const struct be_ipc_token_req *req, int send_fd,
                     struct be_ipc_token_ans *ans, int *recv_fd, int timeout_ms);
/* The worker's main thread: a BE_IPC_TOKEN record from the parent, with the descriptor that came
 * with it (fd, -1: none; taken in every case). -1 when it is not an answer (wrong size, nobody
 * asked): a protocol violation of the parent's side. */
int be_broker_answer(be_broker *b, const void *msg, size_t len, int fd);
/* The worker's main thread: the parent is gone; every waiting and later request gets no answer. */
void be_broker_gone(be_broker *b);

#endif
