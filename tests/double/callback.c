/* Host functions (cuLaunchHostFunc): run on the calling thread when the stream reaches them.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "core.h"

#include "stream.h"

EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    dbl_lock();
    CUresult rc = dbl_capture_of(hStream) ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED /* capture.c */
                                          : stream_sync(hStream);
    if (!rc && !fn)
        rc = CUDA_ERROR_INVALID_VALUE;
    dbl_unlock();
    if (rc)
        return rc;
    fn(userData); /* synchronous execution: the stream has reached this point */
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void *userData)
{
    return cuLaunchHostFunc(h, fn, userData);
}
