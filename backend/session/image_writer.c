/* Images stored for later sessions off the call path. A library sent with its bytes is written to
 * the tenant's image store for the sessions after this one (image_store.c); the write (a file,
 * a rename, the folder's eviction scan) took 80-220 us of slLoadImage's answer on the GPU
 * machine (run 28), time the guest waited for a kernel's first launch. The copy goes to one
 * thread of the process (started with the worker, else at the first image: its start took
 * 100 us of that call), which writes the images in order; the worker waits for it
 * (be_image_store_settle) before it exits. */
#include "session/image_writer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bounds.h"
#include "session/image_store.h"
#include "sluice/log.h"

struct pending {
    struct pending *next;
    uint8_t sha[32];
    uint64_t size;
    uint8_t bytes[];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;   /* work for the writer */
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER; /* the writer has nothing left */
static struct pending *head, **tail = &head;
static uint64_t waiting_bytes;
static int writing, started;

static void *writer_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "sluice-images");
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!head)
            pthread_cond_wait(&cv, &mu);
        struct pending *p = head;
        head = p->next;
        if (!head)
            tail = &head;
        writing = 1;
        pthread_mutex_unlock(&mu);
        be_image_store_put(p->sha, p->bytes, p->size);
        pthread_mutex_lock(&mu);
        waiting_bytes -= p->size;
        writing = 0;
        free(p);
        if (!head)
            pthread_cond_broadcast(&idle);
    }
    return NULL;
}

/* Starts the writer (mu held): 0 when it runs. */
static int start(void)
{
    if (started)
        return started > 0 ? 0 : -1;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int err = pthread_create(&t, &at, writer_main, NULL);
    pthread_attr_destroy(&at);
    started = err ? -1 : 1;
    if (err)
        sl_log(SL_LOG_INFO, BE_COMPONENT,
               "image store: no writer thread (%s): images are stored as they arrive",
               strerror(err));
    return err ? -1 : 0;
}

void be_image_writer_start(void)
{
    pthread_mutex_lock(&mu);
    start();
    pthread_mutex_unlock(&mu);
}

void be_image_store_put_later(const uint8_t sha[32], const uint8_t *bytes, uint64_t size)
{
    struct pending *p = NULL;
    pthread_mutex_lock(&mu);
    if (start() == 0 && waiting_bytes + size <= BE_IMAGE_WRITES_BYTES)
        p = malloc(sizeof *p + size);
    if (p) {
        memcpy(p->sha, sha, sizeof p->sha);
        p->size = size;
        memcpy(p->bytes, bytes, size);
        p->next = NULL;
        *tail = p;
        tail = &p->next;
        waiting_bytes += size;
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&mu);
    if (!p)
        be_image_store_put(sha, bytes, size);
}

int be_image_store_settle(unsigned timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000u;
    until.tv_nsec += (long)(timeout_ms % 1000u) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&mu);
    int rc = 0;
    while ((head || writing) && rc == 0)
        rc = pthread_cond_timedwait(&idle, &mu, &until);
    int done = !head && !writing;
    pthread_mutex_unlock(&mu);
    return done;
}
