/* Deferred and sticky errors (deferred.c): the first failing asynchronous call of a session is
 * reported by the next synchronous reply. */
#ifndef SLUICE_BE_SESSION_DEFERRED_H
#define SLUICE_BE_SESSION_DEFERRED_H

#include <cuda.h>
#include <stdint.h>

struct be_deferred {
    uint64_t failed_seq; /* first failed async call not yet reported, 0 = none */
    CUresult failed_rc;
};

int be_is_sticky(CUresult rc);
/* An async call finished with rc. */
void be_deferred_async(struct be_deferred *d, uint64_t seq, CUresult rc);
/* Stamps a synchronous reply: failed_seq and, if the call itself succeeded, the deferred result
 * instead of its success. Clears the recorded failure. */
void be_deferred_stamp(struct be_deferred *d, uint64_t seq, uint64_t *failed_seq, int32_t *result);

#endif
