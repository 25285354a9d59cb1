// mem_free: cuMemFree as the driver has it, whether or not Sluice sends it without waiting
// (docs/remoting.md "Frees without a round trip"). Checks that
//   - 1000 cuMemAlloc + cuMemFree pairs of 1 MiB succeed, from one thread and from two at once,
//     and memory freed by another thread than the one that allocated it;
//   - cuMemGetInfo right after a free sees the memory back, and a new allocation of the same
//     size after a free works (its memory is usable);
//   - a second free of an address, a free of an address inside an allocation, of one never
//     allocated, and of one whose context was destroyed fail with CUDA_ERROR_INVALID_VALUE at
//     once, and the allocation an inner free named is still live;
//   - the next synchronizing call reports no error after all this.
#include "driver.cuh"
#include <pthread.h>

static const size_t MIB = (size_t)1 << 20;

static void expect_invalid(CUresult r, const char *what)
{
    if (r != CUDA_ERROR_INVALID_VALUE)
        FAIL("%s gave %d, not CUDA_ERROR_INVALID_VALUE", what, (int)r);
}

static void *pairs(void *arg)
{
    (void)arg;
    CHECK(cudaSetDevice(0)); // the primary context, current in this thread
    CHECK(cudaFree(0));
    for (int i = 0; i < 200; i++) {
        CUdeviceptr p = 0;
        CU(cuMemAlloc(&p, MIB));
        CU(cuMemFree(p));
    }
    return nullptr;
}

static void *alloc_one(void *arg)
{
    CUdeviceptr *p = (CUdeviceptr *)arg;
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    CU(cuMemAlloc(p, MIB));
    return nullptr;
}

int main()
{
    g_test_name = "mem_free";
    CHECK(cudaFree(0)); // the primary context, current
    CUcontext ctx = nullptr;
    CU(cuCtxGetCurrent(&ctx));

    for (int i = 0; i < 1000; i++) {
        CUdeviceptr p = 0;
        CU(cuMemAlloc(&p, MIB));
        CU(cuMemFree(p));
    }

    size_t f0 = 0, f1 = 0, f2 = 0, total = 0;
    CU(cuMemGetInfo(&f0, &total));
    CUdeviceptr big = 0;
    CU(cuMemAlloc(&big, 64 * MIB));
    CU(cuMemGetInfo(&f1, &total));
    if (f1 + 64 * MIB > f0)
        FAIL("free %zu after allocating 64 MiB of %zu free", f1, f0);
    CU(cuMemFree(big));
    CU(cuMemGetInfo(&f2, &total));
    if (f2 < f1 + 64 * MIB)
        FAIL("free %zu right after freeing 64 MiB (%zu before)", f2, f1);

    CUdeviceptr a = 0, b = 0;
    CU(cuMemAlloc(&a, MIB));
    CU(cuMemFree(a));
    expect_invalid(cuMemFree(a), "a second cuMemFree");
    CU(cuMemAlloc(&b, MIB)); // may be the same address again
    CU(cuMemsetD8(b, 7, MIB));
    unsigned char host[16] = {0};
    CU(cuMemcpyDtoH(host, b + MIB - sizeof host, sizeof host));
    for (size_t i = 0; i < sizeof host; i++)
        if (host[i] != 7)
            FAIL("byte %zu of a reused allocation is %u, not 7", i, host[i]);
    expect_invalid(cuMemFree(b + 256), "cuMemFree inside an allocation");
    CU(cuMemsetD8(b, 1, MIB)); // still live
    CU(cuMemFree(b));
    expect_invalid(cuMemFree((CUdeviceptr)0x10000), "cuMemFree of an address never allocated");

    pthread_t t[2];
    for (auto &th : t)
        if (pthread_create(&th, nullptr, pairs, nullptr))
            FAIL("pthread_create");
    for (auto &th : t)
        pthread_join(th, nullptr);
    CUdeviceptr other = 0;
    pthread_t th;
    if (pthread_create(&th, nullptr, alloc_one, &other))
        FAIL("pthread_create");
    pthread_join(th, nullptr);
    CU(cuMemFree(other)); // allocated by another thread

    CUcontext own = nullptr;
    CUdevice dev = 0;
    CU(cuDeviceGet(&dev, 0));
    CU(cuCtxCreate(&own, nullptr, 0, dev));
    CUdeviceptr gone = 0;
    CU(cuMemAlloc(&gone, MIB));
    CU(cuCtxDestroy(own));
    CU(cuCtxSetCurrent(ctx));
    expect_invalid(cuMemFree(gone), "cuMemFree after its context was destroyed");

    CU(cuCtxSynchronize());
    pass();
    return 0;
}
