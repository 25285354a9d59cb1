/* The session worker's side of the IPC token broker. The session thread that exports or imports
 * an IPC or shareable handle asks the parent's registry (ipc_tokens.c) with a BE_IPC_TOKEN record
 * and waits; the worker's main thread, which reads every record of the parent, hands the answer
 * over. One request is in flight at a time (the parent answers in order); a request waits at most
 * its timeout, and none waits once the parent is gone. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/broker.h"

struct be_broker {
    be_broker_send_fn send;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int busy;     /* a request is in flight */
    int answered; /* its answer is in ans */
    int gone;
    struct be_ipc_token_ans ans;
    int ans_fd; /* the descriptor that came with ans, -1: none */
};

be_broker *be_broker_new(be_broker_send_fn send)
{
    be_broker *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->send = send;
    b->ans_fd = -1;
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    return b;
}

void be_broker_free(be_broker *b)
{
    if (!b)
        return;
    if (b->ans_fd >= 0)
        close(b->ans_fd);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b);
}

static struct timespec deadline(int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

int be_broker_ask(be_broker *b, const struct be_ipc_token_req *req, struct be_ipc_token_ans *ans,
                  int timeout_ms)
{
    int fd = -1;
    int rc = be_broker_ask_fd(b, req, -1, ans, &fd, timeout_ms);
    if (fd >= 0)
        close(fd);
    return rc;
}

int be_broker_ask_fd(be_broker *b, const struct be_ipc_token_req *req, int send_fd,
                     struct be_ipc_token_ans *ans, int *recv_fd, int timeout_ms)
{
    *recv_fd = -1;
    memset(ans, 0, sizeof *ans);
    ans->result = -1;
    struct timespec until = deadline(timeout_ms);
    int rc = -1, timed_out = 0;
    pthread_mutex_lock(&b->mu);
    while (b->busy && !b->gone && !timed_out)
        timed_out = pthread_cond_timedwait(&b->cv, &b->mu, &until) == ETIMEDOUT;
    if (b->gone || timed_out) {
        snprintf(ans->why, sizeof ans->why, "%s",
                 b->gone ? "the backend's server is gone" : "no answer from the backend's server");
        pthread_mutex_unlock(&b->mu);
        return -1;
    }
    b->busy = 1;
    b->answered = 0;
    pthread_mutex_unlock(&b->mu);
    if (b->send(req, sizeof *req, send_fd) != 0) {
        snprintf(ans->why, sizeof ans->why, "the request to the backend's server failed");
        pthread_mutex_lock(&b->mu);
        b->busy = 0;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        return -1;
    }
    pthread_mutex_lock(&b->mu);
    while (!b->answered && !b->gone && !timed_out)
        timed_out = pthread_cond_timedwait(&b->cv, &b->mu, &until) == ETIMEDOUT;
    if (b->answered) {
        *ans = b->ans;
        memset(&b->ans, 0, sizeof b->ans);
        *recv_fd = b->ans_fd;
        b->ans_fd = -1;
        rc = 0;
    } else {
        snprintf(ans->why, sizeof ans->why, "%s",
                 b->gone ? "the backend's server is gone" : "no answer from the backend's server");
        if (timed_out)
            b->gone = 1; /* a late answer would pair with the next request: none is sent again */
    }
    b->busy = 0;
    b->answered = 0;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return rc;
}

int be_broker_answer(be_broker *b, const void *msg, size_t len, int fd)
{
    pthread_mutex_lock(&b->mu);
    int ok = len == sizeof b->ans && b->busy && !b->answered && !b->gone;
    if (!ok && fd >= 0)
        close(fd);
    if (ok) {
        memcpy(&b->ans, msg, sizeof b->ans);
        b->ans_fd = fd;
        b->ans.why[sizeof b->ans.why - 1] = '\0';
        if (b->ans.len > BE_IPC_TOKEN_BYTES)
            b->ans.len = BE_IPC_TOKEN_BYTES;
        b->answered = 1;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return ok ? 0 : -1;
}

void be_broker_gone(be_broker *b)
{
    pthread_mutex_lock(&b->mu);
    b->gone = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}
