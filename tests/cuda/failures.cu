// failures: bad requests must give clean CUDA errors, never a crash, and leave the context
// usable. Each case prints what it returned. With SLUICE_E2E_NATIVE=1 (the harness's --native
// mode) the bogus stream handle is skipped: the real driver may dereference it.
#include "common.cuh"
#include <cstdint>
#include <cstring>

static int failures_seen;

static void expect_error(const char *what, cudaError_t got, cudaError_t preferred)
{
    std::printf("failures: %s -> %s%s\n", what, cudaGetErrorName(got),
                got == preferred ? "" : " (accepted: any clean error)");
    if (got == cudaSuccess)
        FAIL("%s succeeded, expected an error", what);
    cudaGetLastError(); // clear cudart's last error
    failures_seen++;
}

int main()
{
    g_test_name = "failures";
    char host[4096];
    std::memset(host, 0x5a, sizeof host);

    // 1. a device pointer nobody allocated
    void *bogus = reinterpret_cast<void *>(static_cast<uintptr_t>(0x7a0000001000ull));
    expect_error("copy to an unallocated device pointer",
                 cudaMemcpy(bogus, host, sizeof host, cudaMemcpyHostToDevice),
                 cudaErrorInvalidValue);
    expect_error("copy from an unallocated device pointer",
                 cudaMemcpy(host, bogus, sizeof host, cudaMemcpyDeviceToHost),
                 cudaErrorInvalidValue);

    // 2. use after free
    void *p;
    CHECK(cudaMalloc(&p, 1 << 20));
    CHECK(cudaFree(p));
    expect_error("copy to a freed pointer",
                 cudaMemcpy(p, host, sizeof host, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    expect_error("memset of a freed pointer", cudaMemset(p, 0, 4096), cudaErrorInvalidValue);
    expect_error("free of a freed pointer", cudaFree(p), cudaErrorInvalidValue);

    // 3. a copy running past the end of an allocation
    void *q;
    CHECK(cudaMalloc(&q, 4096));
    expect_error("copy past the end of an allocation",
                 cudaMemcpy(static_cast<char *>(q) + 2048, host, sizeof host,
                            cudaMemcpyHostToDevice),
                 cudaErrorInvalidValue);

    // 4. a bogus stream handle
    const char *native = std::getenv("SLUICE_E2E_NATIVE");
    if (native && native[0] == '1') {
        std::printf("failures: bogus stream handle -> SKIP (native driver)\n");
    } else {
        cudaStream_t bad = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(0xdeadbeef));
        expect_error("synchronize a bogus stream handle", cudaStreamSynchronize(bad),
                     cudaErrorInvalidResourceHandle);
        // An asynchronous call may report its error at the call or at the next synchronizing
        // call (CUDA: "may also return error codes from previous, asynchronous launches");
        // Sluice queues async calls, so the backend's refusal arrives with the next reply.
        cudaError_t err = cudaMemcpyAsync(q, host, 64, cudaMemcpyHostToDevice, bad);
        if (err == cudaSuccess)
            err = cudaDeviceSynchronize();
        expect_error("async copy on a bogus stream handle (at the call or the next sync)", err,
                     cudaErrorInvalidResourceHandle);
    }

    // 5. more memory than there is
    void *huge = nullptr;
    expect_error("cudaMalloc of 1 PiB", cudaMalloc(&huge, size_t(1) << 50),
                 cudaErrorMemoryAllocation);

    // The errors were not sticky: the context still works.
    char back[4096];
    CHECK(cudaMemcpy(q, host, sizeof host, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(back, q, sizeof back, cudaMemcpyDeviceToHost));
    if (std::memcmp(host, back, sizeof host) != 0)
        FAIL("round trip after the errors differs");
    CHECK(cudaFree(q));
    CHECK(cudaDeviceSynchronize());
    std::printf("failures: %d clean errors, context still usable\n", failures_seen);
    pass();
    return 0;
}
