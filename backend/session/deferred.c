/* Deferred (asynchronous) errors: the first failing async call of a session is reported by the
 * next reply (failed_seq + its result instead of the call's own success). Sticky errors are
 * also kept on the context (session.c), so every later call of that context returns them. */
#include "session/deferred.h"

int be_is_sticky(CUresult rc)
{
    switch (rc) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return 1;
    default:
        return 0;
    }
}

void be_deferred_async(struct be_deferred *d, uint64_t seq, CUresult rc)
{
    if (rc != CUDA_SUCCESS && d->failed_seq == 0) {
        d->failed_seq = seq;
        d->failed_rc = rc;
    }
}

void be_deferred_stamp(struct be_deferred *d, uint64_t seq, uint64_t *failed_seq, int32_t *result)
{
    if (d->failed_seq == 0 || d->failed_seq >= seq)
        return; /* a wait's late reply (waits.c) never names a call made after it */
    *failed_seq = d->failed_seq;
    if (*result == CUDA_SUCCESS)
        *result = (int32_t)d->failed_rc;
    d->failed_seq = 0;
    d->failed_rc = CUDA_SUCCESS;
}
