/* This host's GPUs, for the registry (AgentInfo.gpus; `sluice-registry hosts` counts them). The
 * agent never loads the driver: it runs `backend_path --list-gpus --driver driver_path` as
 * backend_user and reads one line per GPU, "GPU-uuid<TAB>memory bytes<TAB>name". */
#ifndef AG_GPUS_H
#define AG_GPUS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "sluice/error.h"

#define AG_MAX_GPUS       64
#define AG_GPUS_TIMEOUT_S 30

typedef struct ag_gpu {
    char uuid[48];
    char name[256];
    uint64_t memory_bytes;
} ag_gpu;

/* Runs the backend's listing (at most AG_GPUS_TIMEOUT_S) and parses it. */
sl_code ag_gpus_probe(const ag_config *c, ag_gpu *out, size_t cap, size_t *n, sl_error *e);

/* The listing's text, every line checked (pure). */
sl_code ag_gpus_parse(const char *text, ag_gpu *out, size_t cap, size_t *n, sl_error *e);

#endif
