/* The series behind agent/metrics.h, shared by metrics.c (bookkeeping) and metrics_text.c (the
 * exposition). Private to those two files. */
#ifndef AG_METRICS_INTERNAL_H
#define AG_METRICS_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "metrics.h"

enum { AG_REFUSE_CERTIFICATE, AG_REFUSE_GRANT, AG_REFUSE_LIMIT, AG_REFUSE_OTHER, AG_REFUSE_N };
extern const char *const ag_refuse_names[AG_REFUSE_N];

typedef struct useries {
    char project[65], instance[65], domain[256], gpu[65];
    uint64_t busy_ns, kernel_ns, kernels, htod, dtoh, throttled_ns, refusals, records, mem_hw;
    uint64_t shared_ns;   /* apportioned GPU time (docs/accounting.md, "Shared GPU time") */
    uint64_t mem_last;    /* memory high-water of the latest record */
    int64_t last_end_ns;  /* that record's end */
    int64_t absent_since; /* monotonic ms the instance was first missed, 0 = present */
} useries;

typedef struct sseries {
    char project[65], instance[65], domain[256]; /* instance "": refusals before it was known */
    int64_t open;
    uint64_t opened, refused[AG_REFUSE_N];
    uint64_t killed; /* session workers killed after the grace period */
    int64_t absent_since;
} sseries;

typedef struct iseries {
    char project[65], instance[65], domain[256], flavor[256], tier[32];
    double share;
    uint64_t quota;
} iseries;

typedef struct kseries { /* a counter with one label */
    char label[65];
    uint64_t n;
} kseries;

struct ag_metrics {
    pthread_mutex_t mu;
    char version[32];
    useries *u;
    size_t nu, capu;
    sseries *s;
    size_t ns, caps;
    iseries *i; /* running GPU instances, replaced by ag_metrics_instances */
    size_t ni, capi;
    kseries *enroll, *restarts;
    size_t nenroll, capenroll, nrestarts, caprestarts;
    uint64_t rejected, store_failed, pending;
    int libvirt;
    unsigned backends;
    int64_t last_forward;
};

#endif
