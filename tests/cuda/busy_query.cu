// Queries of a busy stream (docs/remoting.md "Busy streams"): a program polling cuStreamQuery
// while a long kernel runs gets CUDA_ERROR_NOT_READY until the kernel is done, then
// CUDA_SUCCESS and the kernel's result; the guest answers the repeated queries itself once the
// worker watches the stream (SLUICE_STATS counts them), and never longer than the driver would:
// - after another thread's cuEventSynchronize of an event recorded after the kernel returned,
//   the stream's query answers CUDA_SUCCESS (the worker's StreamDone went before that reply);
// - new work on a stream known busy is not hidden by the watch of the older work;
// - a polling loop with no other thread ends (nobody else reads the worker's messages);
// - an event polled with cuEventQuery likewise; recorded again, it is not done any more.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cuda.h>
#include <thread>

#include "common.cuh"

/* The kernel the driver double knows (tests/double/kernels.c): thread 0 spins for cycles, then
 * adds the nanoseconds it took to *ns. */
__global__ void spin(long long cycles, unsigned long long *ns)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        unsigned long long t0, t1;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        long long start = clock64();
        while (clock64() - start < cycles) {
        }
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
        *ns += t1 - t0;
    }
}

#define CU(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            std::printf("FAIL %s:%d: %s -> %d\n", __FILE__, __LINE__, #call, (int)r_);            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* Polls s until it is done; the number of NOT_READY answers, -1 on another answer. */
static long poll_until_done(cudaStream_t s)
{
    long polls = 0;
    for (;;) {
        CUresult r = cuStreamQuery((CUstream)s);
        if (r == CUDA_SUCCESS)
            return polls;
        if (r != CUDA_ERROR_NOT_READY) {
            std::printf("FAIL the busy stream's query answered %d\n", (int)r);
            return -1;
        }
        polls++;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

int main()
{
    g_test_name = "busy_query";
    int khz = 0;
    CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    const long long cycles = (long long)khz * 300; /* 0.3 s */
    cudaStream_t busy;
    CHECK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
    unsigned long long *d, h = 0, before;
    CHECK(cudaMalloc(&d, sizeof *d));
    CHECK(cudaMemset(d, 0, sizeof *d));
    CHECK(cudaDeviceSynchronize());

    /* 1: a polling loop, alone */
    spin<<<1, 1, 0, busy>>>(cycles, d);
    long polls = poll_until_done(busy);
    if (polls < 0)
        return 1;
    CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    if (polls < 2 || h < 200000000ull)
        FAIL("%ld polls of a 0.3 s kernel, which ran %llu ns", polls, h);

    /* 2: another thread's event synchronize, then a query: done, as the driver says */
    CUevent ev;
    CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    spin<<<1, 1, 0, busy>>>(cycles, d);
    CU(cuEventRecord(ev, (CUstream)busy));
    if (cuStreamQuery((CUstream)busy) != CUDA_ERROR_NOT_READY)
        FAIL("the query of a stream just given a 0.3 s kernel was not NOT_READY");
    std::atomic<int> synced{0};
    std::thread b([&] {
        cuEventSynchronize(ev);
        synced = 1;
    });
    while (!synced.load()) {
        CUresult r = cuStreamQuery((CUstream)busy);
        if (r != CUDA_ERROR_NOT_READY && r != CUDA_SUCCESS)
            FAIL("the busy stream's query answered %d", (int)r);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    b.join();
    CUresult after = cuStreamQuery((CUstream)busy);
    if (after != CUDA_SUCCESS)
        FAIL("after another thread's cuEventSynchronize of the stream's last event its query "
             "answered %d, not CUDA_SUCCESS",
             (int)after);

    /* 3: new work on a stream known busy */
    spin<<<1, 1, 0, busy>>>(cycles / 3, d);
    if (cuStreamQuery((CUstream)busy) != CUDA_ERROR_NOT_READY)
        FAIL("the first query of a busy stream was not NOT_READY");
    CHECK(cudaStreamSynchronize(busy)); /* the watched work done, the StreamDone on its way */
    spin<<<1, 1, 0, busy>>>(cycles, d);
    if (cuStreamQuery((CUstream)busy) != CUDA_ERROR_NOT_READY)
        FAIL("a query after new work on a stream known busy was not NOT_READY");
    before = h;
    polls = poll_until_done(busy);
    if (polls < 0)
        return 1;
    CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    if (h - before < 500000000ull)
        FAIL("the last three kernels ran %llu ns, not 0.7 s", h - before);
    /* 4: an event polled until done; recorded again, it is not done any more */
    spin<<<1, 1, 0, busy>>>(cycles, d);
    CU(cuEventRecord(ev, (CUstream)busy));
    long epolls = 0;
    CUresult er;
    while ((er = cuEventQuery(ev)) == CUDA_ERROR_NOT_READY) {
        epolls++;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (er != CUDA_SUCCESS || epolls < 2)
        FAIL("polling an event recorded after a 0.3 s kernel: %ld polls, then %d", epolls,
             (int)er);
    spin<<<1, 1, 0, busy>>>(cycles, d);
    if (cuEventQuery(ev) != CUDA_SUCCESS) /* still the completed record */
        FAIL("an event's query after work queued behind its record was not CUDA_SUCCESS");
    CU(cuEventRecord(ev, (CUstream)busy));
    if (cuEventQuery(ev) != CUDA_ERROR_NOT_READY)
        FAIL("an event recorded again after a 0.3 s kernel was not NOT_READY");
    CU(cuEventSynchronize(ev));
    if (cuEventQuery(ev) != CUDA_SUCCESS)
        FAIL("an event's query after its cuEventSynchronize was not CUDA_SUCCESS");
    CU(cuEventDestroy(ev));
    CHECK(cudaFree(d));
    CHECK(cudaStreamDestroy(busy));
    std::printf("busy_query: polling loops end with the kernels' results; a query after another "
                "thread's event synchronize is done; an event polled until done\n");
    pass();
    return 0;
}
