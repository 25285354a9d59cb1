/* The instance table: a small array under a mutex (a host runs tens of instances, not more). */
#include "instances.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct ag_instances {
    pthread_mutex_t mu;
    ag_instance *v;
    size_t n, cap;
};

ag_instances *ag_instances_new(void)
{
    ag_instances *t = calloc(1, sizeof *t);
    if (t)
        pthread_mutex_init(&t->mu, NULL);
    return t;
}

void ag_instances_free(ag_instances *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->mu);
    free(t->v);
    free(t);
}

static ssize_t find(const ag_instances *t, const char *uuid)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].uuid, uuid))
            return (ssize_t)i;
    return -1;
}

int ag_instances_get(ag_instances *t, const char *uuid, ag_instance *out)
{
    pthread_mutex_lock(&t->mu);
    ssize_t i = find(t, uuid);
    if (i >= 0 && out)
        *out = t->v[i];
    pthread_mutex_unlock(&t->mu);
    return i >= 0;
}

int ag_instances_put(ag_instances *t, const ag_instance *in)
{
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    ssize_t i = find(t, in->uuid);
    if (i >= 0) {
        t->v[i] = *in;
    } else {
        if (t->n == t->cap) {
            size_t cap = t->cap ? t->cap * 2 : 16;
            ag_instance *v = realloc(t->v, cap * sizeof *v);
            if (!v) {
                rc = -1;
                goto out;
            }
            t->v = v;
            t->cap = cap;
        }
        t->v[t->n++] = *in;
    }
out:
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int ag_instances_remove(ag_instances *t, const char *uuid)
{
    pthread_mutex_lock(&t->mu);
    ssize_t i = find(t, uuid);
    if (i >= 0)
        t->v[i] = t->v[--t->n];
    pthread_mutex_unlock(&t->mu);
    return i >= 0;
}

size_t ag_instances_running_gpu(ag_instances *t, const char *project_id)
{
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].gpu && t->v[i].running && !strcmp(t->v[i].project_id, project_id))
            n++;
    pthread_mutex_unlock(&t->mu);
    return n;
}

ag_instance *ag_instances_snapshot(ag_instances *t, size_t *n)
{
    pthread_mutex_lock(&t->mu);
    ag_instance *v = t->n ? malloc(t->n * sizeof *v) : NULL;
    *n = v ? t->n : 0;
    if (v)
        memcpy(v, t->v, t->n * sizeof *v);
    pthread_mutex_unlock(&t->mu);
    return v;
}
