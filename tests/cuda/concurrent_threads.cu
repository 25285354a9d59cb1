// A blocking call of one thread never delays another thread's calls (the driver's semantics,
// issue 18's head-of-line case): while thread A waits in cuStreamSynchronize on a long kernel,
// the main thread's query of that stream answers CUDA_ERROR_NOT_READY at once, and a sync of an
// idle stream, an allocation and a launch + sync on a third stream all return while A still
// waits, and so does destroying an event recorded behind A's kernel that the main thread polled
// (the driver frees an event destroyed before completion when it completes). Then two threads
// copy from a busy stream into pageable memory (8 bytes and 4 MiB: the worker's staging buffer
// and its page-locked slot), a third makes a synchronous host-to-device copy behind a kernel on
// the legacy stream and a fourth copies from the busy stream into page-locked memory, then
// synchronizes it, and three more make synchronous rectangle copies behind the legacy stream's
// kernel (cuMemcpy2D: 1 KiB and 2 MiB to the host, 1 KiB to the device): the main thread's query
// of the busy stream and its sync of an idle one return while they wait (natively too; the driver holds other threads' allocations and launches
// behind such copies, run 33, so those are not asked here), and the copies bring back what the
// kernel left. No timing thresholds: "while A still waits" is checked with a flag A sets when
// its synchronize returns (the kernel runs 1.5 s; on the driver double that is simulated time).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cuda.h>
#include <thread>
#include <vector>

#include "common.cuh"

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

__global__ void empty_kernel() {}

#define CU(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            std::printf("FAIL %s:%d: %s -> %d\n", __FILE__, __LINE__, #call, (int)r_);            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* A synchronous rectangle copy of height rows of width bytes between pitched device memory and
 * packed host memory (to_host: device to host), on the legacy stream. */
static CUresult rect(CUdeviceptr dev, size_t dev_pitch, void *host, size_t width, size_t height,
                     int to_host)
{
    CUDA_MEMCPY2D p = {};
    p.WidthInBytes = width;
    p.Height = height;
    if (to_host) {
        p.srcMemoryType = CU_MEMORYTYPE_DEVICE, p.srcDevice = dev, p.srcPitch = dev_pitch;
        p.dstMemoryType = CU_MEMORYTYPE_HOST, p.dstHost = host, p.dstPitch = width;
    } else {
        p.srcMemoryType = CU_MEMORYTYPE_HOST, p.srcHost = host, p.srcPitch = width;
        p.dstMemoryType = CU_MEMORYTYPE_DEVICE, p.dstDevice = dev, p.dstPitch = dev_pitch;
    }
    return cuMemcpy2D(&p);
}

/* Threads C and D copy from busy, behind a kernel of the given cycles, into pageable memory,
 * thread E to the device behind such a kernel on the legacy stream, thread F from busy into
 * page-locked memory and synchronizes busy, threads G, H and I make rectangle copies behind the
 * legacy stream's kernel; the main thread's query of busy and sync of idle return while all of
 * them still wait. 1: failed. */
static int copies_behind(cudaStream_t busy, cudaStream_t idle, unsigned long long *ns,
                         long long cycles)
{
    const size_t big_bytes = 4u << 20;
    unsigned char *big;
    std::vector<unsigned char> big_host(big_bytes);
    CHECK(cudaMalloc(&big, big_bytes));
    CHECK(cudaMemset(big, 0x5a, big_bytes));
    CHECK(cudaDeviceSynchronize());
    CUcontext ctx;
    CU(cuCtxGetCurrent(&ctx));
    unsigned long long *ns2; /* the legacy stream's kernel's own counter */
    unsigned char *e_dev;
    std::vector<unsigned char> e_host(4096, 0xa7);
    CHECK(cudaMalloc(&ns2, sizeof *ns2));
    CHECK(cudaMalloc(&e_dev, e_host.size()));
    CHECK(cudaMemset(e_dev, 0, e_host.size()));
    /* page-locked: Sluice's mapped memory, settled after the copy; allocated before the kernels
     * (natively a page-locked allocation may wait for the device) */
    unsigned long long *f_val;
    CHECK(cudaMallocHost(&f_val, sizeof *f_val));
    *f_val = 0;
    /* the rectangles: 64 x 16 bytes of rows 256 apart (G from r_dev, I into i_dev), and
     * 4096 x 512 bytes of big (H) */
    unsigned char *r_dev, *i_dev;
    CHECK(cudaMalloc(&r_dev, 256 * 16));
    CHECK(cudaMalloc(&i_dev, 256 * 16));
    CHECK(cudaMemset(r_dev, 0x3c, 256 * 16));
    CHECK(cudaMemset(i_dev, 0, 256 * 16));
    std::vector<unsigned char> g_host(64 * 16), h_host(4096 * 512), i_host(64 * 16, 0x77);
    CHECK(cudaDeviceSynchronize());
    spin<<<1, 1, 0, busy>>>(cycles, ns);
    spin<<<1, 1>>>(cycles, ns2); /* the legacy stream, behind which a synchronous copy waits */
    std::atomic<int> done{0};
    unsigned long long c_val = 0;
    CUresult c_rc = CUDA_ERROR_UNKNOWN, d_rc = CUDA_ERROR_UNKNOWN;
    std::thread c([&] {
        cuCtxSetCurrent(ctx);
        c_rc = cuMemcpyDtoHAsync(&c_val, (CUdeviceptr)ns, sizeof c_val, (CUstream)busy);
        done++;
    });
    std::thread d([&] {
        cuCtxSetCurrent(ctx);
        d_rc = cuMemcpyDtoHAsync(big_host.data(), (CUdeviceptr)big, big_bytes, (CUstream)busy);
        done++;
    });
    CUresult f_rc = CUDA_ERROR_UNKNOWN;
    std::thread f([&] {
        cuCtxSetCurrent(ctx);
        f_rc = cuMemcpyDtoHAsync(f_val, (CUdeviceptr)ns, sizeof *f_val, (CUstream)busy);
        if (f_rc == CUDA_SUCCESS)
            f_rc = cuStreamSynchronize((CUstream)busy);
        done++;
    });
    CUresult e_rc = CUDA_ERROR_UNKNOWN;
    std::thread e([&] {
        cuCtxSetCurrent(ctx);
        e_rc = cuMemcpyHtoD((CUdeviceptr)e_dev, e_host.data(), e_host.size());
        done++;
    });
    CUresult g_rc = CUDA_ERROR_UNKNOWN, h_rc = CUDA_ERROR_UNKNOWN, i_rc = CUDA_ERROR_UNKNOWN;
    std::thread g([&] {
        cuCtxSetCurrent(ctx);
        g_rc = rect((CUdeviceptr)r_dev, 256, g_host.data(), 64, 16, 1);
        done++;
    });
    std::thread h([&] {
        cuCtxSetCurrent(ctx);
        h_rc = rect((CUdeviceptr)big, 8192, h_host.data(), 4096, 512, 1);
        done++;
    });
    std::thread i([&] {
        cuCtxSetCurrent(ctx);
        i_rc = rect((CUdeviceptr)i_dev, 256, i_host.data(), 64, 16, 0);
        done++;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100)); /* all inside their copies */
    CUresult q = cuStreamQuery((CUstream)busy);
    int query_during = done.load() == 0;
    CU(cuStreamSynchronize((CUstream)idle));
    int idle_during = done.load() == 0;
    c.join();
    d.join();
    e.join();
    f.join();
    g.join();
    h.join();
    i.join();
    std::vector<unsigned char> i_back(256 * 16);
    CHECK(cudaMemcpy(i_back.data(), i_dev, i_back.size(), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(r_dev));
    CHECK(cudaFree(i_dev));
    unsigned long long f_got = *f_val;
    CHECK(cudaFreeHost(f_val));
    std::vector<unsigned char> e_back(e_host.size());
    CHECK(cudaMemcpy(e_back.data(), e_dev, e_back.size(), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(e_dev));
    CHECK(cudaFree(ns2));
    unsigned long long after = 0;
    CHECK(cudaMemcpy(&after, ns, sizeof after, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(big));
    int bad = 0;
    if (q != CUDA_ERROR_NOT_READY || !query_during || !idle_during) {
        std::printf("FAIL beside copies behind a busy kernel: the query answered %d%s%s\n", (int)q,
                    query_during ? "" : ", after the copies",
                    idle_during ? "" : "; the idle stream's sync waited for the copies");
        bad = 1;
    }
    if (c_rc != CUDA_SUCCESS || c_val == 0 || c_val != after) {
        std::printf("FAIL the small copy behind the kernel answered %d with %llu, not %llu\n",
                    (int)c_rc, c_val, after);
        bad = 1;
    }
    if (e_rc != CUDA_SUCCESS || e_back != e_host) {
        std::printf("FAIL the host-to-device copy behind the legacy stream's kernel answered %d%s\n",
                    (int)e_rc, e_back != e_host ? ", wrong bytes on the device" : "");
        bad = 1;
    }
    if (f_rc != CUDA_SUCCESS || f_got != after) {
        std::printf("FAIL the copy into page-locked memory behind the kernel answered %d with "
                    "%llu, not %llu\n",
                    (int)f_rc, f_got, after);
        bad = 1;
    }
    size_t g_wrong = 0, h_wrong = 0, i_wrong = 0;
    for (unsigned char b : g_host)
        g_wrong += b != 0x3c;
    for (unsigned char b : h_host)
        h_wrong += b != 0x5a;
    for (size_t k = 0; k < i_back.size(); k++) /* 64 bytes of each 256-byte row written */
        i_wrong += i_back[k] != (k % 256 < 64 ? 0x77 : 0);
    if (g_rc != CUDA_SUCCESS || h_rc != CUDA_SUCCESS || i_rc != CUDA_SUCCESS || g_wrong ||
        h_wrong || i_wrong) {
        std::printf("FAIL the rectangle copies behind the legacy stream's kernel answered %d, %d, "
                    "%d; %zu, %zu, %zu bytes wrong\n",
                    (int)g_rc, (int)h_rc, (int)i_rc, g_wrong, h_wrong, i_wrong);
        bad = 1;
    }
    size_t wrong = 0;
    for (unsigned char b : big_host)
        wrong += b != 0x5a;
    if (d_rc != CUDA_SUCCESS || wrong) {
        std::printf("FAIL the 4 MiB copy behind the kernel answered %d, %zu bytes wrong\n",
                    (int)d_rc, wrong);
        bad = 1;
    }
    return bad;
}

int main()
{
    int khz = 0;
    CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    const long long cycles = (long long)khz * 1500; /* 1.5 s */
    cudaStream_t busy, idle, other;
    CHECK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    unsigned long long *ns;
    CHECK(cudaMalloc(&ns, sizeof *ns));
    CHECK(cudaMemset(ns, 0, sizeof *ns));
    empty_kernel<<<1, 1, 0, other>>>(); /* modules loaded before the clock matters */
    CHECK(cudaDeviceSynchronize());
    CUcontext ctx;
    CU(cuCtxGetCurrent(&ctx));

    std::atomic<int> state{0}; /* 1: A is about to wait, 2: its synchronize returned */
    CUresult a_rc = CUDA_ERROR_UNKNOWN;
    std::thread a([&] {
        cuCtxSetCurrent(ctx);
        spin<<<1, 1, 0, busy>>>(cycles, ns);
        state = 1;
        a_rc = cuStreamSynchronize((CUstream)busy);
        state = 2;
    });
    while (state.load() == 0)
        std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(100)); /* A is inside its wait */

    CUresult q = cuStreamQuery((CUstream)busy);
    int query_during = state.load() == 1;
    CU(cuStreamSynchronize((CUstream)idle));
    int idle_during = state.load() == 1;
    CUdeviceptr p;
    CU(cuMemAlloc(&p, 1 << 20));
    int alloc_during = state.load() == 1;
    empty_kernel<<<1, 1, 0, other>>>();
    CU(cuStreamSynchronize((CUstream)other));
    int launch_during = state.load() == 1;
    CUevent ev;
    CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CU(cuEventRecord(ev, (CUstream)busy));
    CUresult eq = cuEventQuery(ev); /* busy: Sluice's worker watches it from now on */
    CU(cuEventDestroy(ev));
    int destroy_during = state.load() == 1;
    a.join();
    CU(cuMemFree(p));

    int bad = 0;
    if (q != CUDA_ERROR_NOT_READY) {
        std::printf("FAIL the busy stream's query answered %d, not CUDA_ERROR_NOT_READY\n", (int)q);
        bad = 1;
    }
    if (eq != CUDA_ERROR_NOT_READY) {
        std::printf("FAIL the query of an event behind the busy kernel answered %d\n", (int)eq);
        bad = 1;
    }
    const char *what[] = {"the query", "the idle stream's sync", "the allocation",
                          "the launch + sync on another stream", "destroying a polled event"};
    int during[] = {query_during, idle_during, alloc_during, launch_during, destroy_during};
    for (int i = 0; i < 5; i++)
        if (!during[i]) {
            std::printf("FAIL %s waited for the other thread's synchronize\n", what[i]);
            bad = 1;
        }
    if (a_rc != CUDA_SUCCESS) {
        std::printf("FAIL the waiting thread's synchronize answered %d\n", (int)a_rc);
        bad = 1;
    }
    bad |= copies_behind(busy, idle, ns, cycles / 3);
    CHECK(cudaFree(ns));
    CHECK(cudaStreamDestroy(busy));
    CHECK(cudaStreamDestroy(idle));
    CHECK(cudaStreamDestroy(other));
    if (bad)
        return 1;
    std::printf("PASS concurrent_threads: a blocking call of one thread delays no other thread\n");
    return 0;
}
