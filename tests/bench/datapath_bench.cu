// sluice-bench-datapath: the figures of the data-path issue (docs/performance.md, "The data
// path"), a program, not a test. Run it natively and through Sluice on the same machine in the
// same call (tests/gpu/datapath.py alternates them and adds the channel floor); divide.
//
// Rows (medians; the driver API where the issue's probe used it):
//   launch + cuStreamSynchronize (tiny kernel)        one launch and a synchronize, per pair
//   64 B cuMemcpyHtoD                                 a synchronous copy from pageable memory
//   kernel + 4 B DtoH (.item())                       a launch, a 4-byte async DtoH, a sync
//   kernel + 4 KiB / 64 KiB cuMemcpyDtoH              a launch, a synchronous DtoH
//   kernel + 256 KiB / 1 MiB cuMemcpyDtoH             the same, mid-size (500 pairs)
//   256 KiB / 1 MiB cuMemcpyHtoD                      a synchronous copy from pageable memory
//   cuMemAlloc + cuMemFree 1 MiB                      per pair
//   256 MiB pageable / page-locked HtoD and DtoH      GB/s
//   async empty launch                                us per launch over 20,000 launches (and
//                                                     the launches alone, before their sync)
//   first launch of a kernel                          GPU time between events around it (its
//                                                     module loaded, and in a new module)
//   20 x 4096^2 fp32 matmul                           cuBLAS sgemm, ms for the 20 (and the GPU
//                                                     time between events around them)
//   head-of-line: while one thread waits in cuStreamSynchronize on a 300 ms kernel, another
//   thread times a sync of an idle stream, a copy on another stream, a launch + sync on
//   another stream and cuStreamQuery of the busy stream (its result must be
//   CUDA_ERROR_NOT_READY), each once ("first": a stream's first use) and then the median of
//   15 more, and a cuMemAlloc (freed after the wait)
// Output: an aligned table on stdout and, with --json FILE, one JSON object per figure.
// --only first,latency,copies,matmul,hol runs those parts alone (the context's warm-up always).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <thread>
#include <vector>

#define CU(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *n_ = "?";                                                                  \
            cuGetErrorName(r_, &n_);                                                               \
            std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call, n_);              \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)
#define RT(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call,                   \
                         cudaGetErrorName(e_));                                                    \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

static FILE *g_json;
static bool g_quick;

static double now_us()
{
    using namespace std::chrono;
    return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

static void emit(const char *name, const char *unit, double value)
{
    std::printf("%-52s %12.3f %s\n", name, value, unit);
    if (g_json)
        std::fprintf(g_json, "{\"figure\":\"%s\",\"unit\":\"%s\",\"value\":%.6f}\n", name, unit,
                     value);
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

__global__ void tiny(int *p)
{
    if (p)
        *p = 42;
}
__global__ void first_time(int *p)
{
    if (p)
        *p += 1;
}
void launch_in_other_module(cudaStream_t s, int *p); /* datapath_module.cu: a module of its own */
__global__ void spin(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

static int reps(int full)
{
    return g_quick ? std::max(5, full / 10) : full;
}

static void latency(cudaStream_t s, int *dev)
{
    std::vector<double> t(reps(2000));
    for (int i = 0; i < 50; i++)
        tiny<<<1, 1, 0, s>>>(dev);
    RT(cudaStreamSynchronize(s));
    for (double &v : t) {
        double a = now_us();
        tiny<<<1, 1, 0, s>>>(dev);
        CU(cuStreamSynchronize((CUstream)s));
        v = now_us() - a;
    }
    emit("launch + cuStreamSynchronize (tiny kernel)", "us", median(t));

    char host[64] = {1};
    for (double &v : t) {
        double a = now_us();
        CU(cuMemcpyHtoD((CUdeviceptr)dev, host, sizeof host));
        v = now_us() - a;
    }
    emit("64 B cuMemcpyHtoD", "us", median(t));

    int value = 0;
    for (double &v : t) {
        double a = now_us();
        tiny<<<1, 1, 0, s>>>(dev);
        CU(cuMemcpyDtoHAsync(&value, (CUdeviceptr)dev, sizeof value, (CUstream)s));
        CU(cuStreamSynchronize((CUstream)s));
        v = now_us() - a;
    }
    if (value != 42)
        std::fprintf(stderr, "kernel + 4 B DtoH read %d, not 42\n", value);
    emit("kernel + 4 B DtoH (.item())", "us", median(t));

    /* a synchronous cudaMemcpy / cuMemcpyDtoH of a result after a kernel, at the size limit of
     * the backend's page-locked staging (64 KiB: docs/remoting.md) and below it, then mid-size
     * ones (and their way to the device) */
    static char small[1 << 20];
    const size_t sizes[] = {4 << 10, 64 << 10, 256 << 10, 1 << 20};
    const char *names[] = {"kernel + 4 KiB cuMemcpyDtoH", "kernel + 64 KiB cuMemcpyDtoH",
                           "kernel + 256 KiB cuMemcpyDtoH", "kernel + 1 MiB cuMemcpyDtoH"};
    std::vector<double> mid(reps(500));
    for (int k = 0; k < 4; k++) {
        std::vector<double> &u = k < 2 ? t : mid;
        for (double &v : u) {
            double a = now_us();
            tiny<<<1, 1, 0, s>>>(dev);
            CU(cuMemcpyDtoH(small, (CUdeviceptr)dev, sizes[k]));
            v = now_us() - a;
        }
        emit(names[k], "us", median(u));
    }
    const char *up[] = {"256 KiB cuMemcpyHtoD", "1 MiB cuMemcpyHtoD"};
    for (int k = 0; k < 2; k++) {
        for (double &v : mid) {
            double a = now_us();
            CU(cuMemcpyHtoD((CUdeviceptr)dev, small, sizes[2 + k]));
            v = now_us() - a;
        }
        emit(up[k], "us", median(mid));
    }

    std::vector<double> al(reps(500));
    for (double &v : al) {
        CUdeviceptr p;
        double a = now_us();
        CU(cuMemAlloc(&p, 1 << 20));
        CU(cuMemFree(p));
        v = now_us() - a;
    }
    emit("cuMemAlloc + cuMemFree 1 MiB", "us", median(al));

    const int n = reps(20000);
    for (int i = 0; i < 100; i++)
        tiny<<<1, 1, 0, s>>>(nullptr);
    RT(cudaStreamSynchronize(s));
    double a = now_us();
    for (int i = 0; i < n; i++)
        tiny<<<1, 1, 0, s>>>(nullptr);
    RT(cudaGetLastError());
    double queued = now_us();
    RT(cudaStreamSynchronize(s));
    emit("async empty launch", "us/launch", (now_us() - a) / n);
    emit("async empty launch, the launches alone", "us/launch", (queued - a) / n);
}

static double gbps(size_t bytes, double us)
{
    return (double)bytes / (us * 1e3);
}

static void copies()
{
    const size_t size = g_quick ? (64u << 20) : (256u << 20);
    CUdeviceptr dev;
    CU(cuMemAlloc(&dev, size));
    char *pageable = static_cast<char *>(std::malloc(size));
    void *locked;
    CU(cuMemAllocHost(&locked, size));
    for (size_t i = 0; i < size; i++)
        pageable[i] = static_cast<char *>(locked)[i] = (char)(i * 131);
    char label[96];
    for (int pin = 0; pin < 2; pin++) {
        char *host = pin ? static_cast<char *>(locked) : pageable;
        const char *how = pin ? "page-locked" : "pageable";
        std::vector<double> h2d(reps(7)), d2h(reps(7));
        CU(cuMemcpyHtoD(dev, host, size)); /* warm */
        for (double &v : h2d) {
            double a = now_us();
            CU(cuMemcpyHtoD(dev, host, size));
            v = now_us() - a;
        }
        CU(cuMemcpyDtoH(host, dev, size));
        for (double &v : d2h) {
            double a = now_us();
            CU(cuMemcpyDtoH(host, dev, size));
            v = now_us() - a;
        }
        std::snprintf(label, sizeof label, "%zu MiB %s HtoD", size >> 20, how);
        emit(label, "GB/s", gbps(size, median(h2d)));
        std::snprintf(label, sizeof label, "%zu MiB %s DtoH", size >> 20, how);
        emit(label, "GB/s", gbps(size, median(d2h)));
    }
    for (size_t i = 0; i < size; i += 4099) /* what came back is what went */
        if (pageable[i] != (char)(i * 131) || static_cast<char *>(locked)[i] != (char)(i * 131)) {
            std::fprintf(stderr, "copies: byte %zu differs\n", i);
            std::exit(1);
        }
    CU(cuMemFree(dev));
    CU(cuMemFreeHost(locked));
    std::free(pageable);
}

static void first_launch(cudaStream_t s, int *dev)
{
    cudaEvent_t a, b;
    RT(cudaEventCreate(&a));
    RT(cudaEventCreate(&b));
    RT(cudaEventRecord(a, s));
    first_time<<<1, 1, 0, s>>>(dev);
    RT(cudaEventRecord(b, s));
    RT(cudaEventSynchronize(b));
    float ms = 0;
    RT(cudaEventElapsedTime(&ms, a, b));
    emit("first launch of a kernel, GPU time between events", "ms", ms);
    RT(cudaEventRecord(a, s));
    launch_in_other_module(s, dev); /* its module is loaded at this first launch */
    RT(cudaEventRecord(b, s));
    RT(cudaEventSynchronize(b));
    RT(cudaEventElapsedTime(&ms, a, b));
    emit("first launch of a kernel in a new module, GPU time", "ms", ms);
    RT(cudaEventDestroy(a));
    RT(cudaEventDestroy(b));
}

static void matmul()
{
    const int n = 4096, reps = g_quick ? 4 : 20;
    size_t bytes = (size_t)n * n * sizeof(float);
    std::vector<float> h((size_t)n * n);
    for (size_t i = 0; i < h.size(); i++)
        h[i] = (float)((i * 2654435761u) % 1000) / 1000.f - 0.5f;
    float *a, *b, *c;
    RT(cudaMalloc(&a, bytes));
    RT(cudaMalloc(&b, bytes));
    RT(cudaMalloc(&c, bytes));
    RT(cudaMemcpy(a, h.data(), bytes, cudaMemcpyHostToDevice));
    RT(cudaMemcpy(b, h.data(), bytes, cudaMemcpyHostToDevice));
    cublasHandle_t hd;
    if (cublasCreate(&hd) != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "cublasCreate failed\n");
        std::exit(1);
    }
    const float one = 1.f, zero = 0.f;
    cublasSgemm(hd, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n); /* warm */
    RT(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    RT(cudaEventCreate(&e0));
    RT(cudaEventCreate(&e1));
    double t0 = now_us();
    RT(cudaEventRecord(e0, 0));
    for (int i = 0; i < reps; i++)
        cublasSgemm(hd, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
    RT(cudaEventRecord(e1, 0));
    double queued = now_us();
    RT(cudaDeviceSynchronize());
    char label[96];
    std::snprintf(label, sizeof label, "%d x 4096^2 fp32 matmul", reps);
    emit(label, "ms", (now_us() - t0) / 1e3);
    float gpu_ms = 0;
    RT(cudaEventElapsedTime(&gpu_ms, e0, e1));
    std::snprintf(label, sizeof label, "%d x 4096^2 fp32 matmul, GPU time between events", reps);
    emit(label, "ms", gpu_ms);
    std::snprintf(label, sizeof label, "%d x 4096^2 fp32 matmul, the calls alone", reps);
    emit(label, "ms", (queued - t0) / 1e3);
    RT(cudaEventDestroy(e0));
    RT(cudaEventDestroy(e1));
    float probe;
    RT(cudaMemcpy(&probe, c + 12345, sizeof probe, cudaMemcpyDeviceToHost));
    emit("matmul checksum element", "value", probe);
    cublasDestroy(hd);
    RT(cudaFree(a));
    RT(cudaFree(b));
    RT(cudaFree(c));
}

/* One thread waits on a long kernel; this one times its calls meanwhile. */
static void head_of_line(int *dev)
{
    int khz = 0;
    RT(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    const long long cycles = (long long)khz * 300; /* 300 ms */
    cudaStream_t busy, idle, other;
    RT(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
    RT(cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking));
    RT(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    char host[4096] = {0};
    tiny<<<1, 1, 0, other>>>(dev); /* every function loaded before the clock runs */
    RT(cudaDeviceSynchronize());
    std::atomic<int> waiting{0};
    double waited = 0;
    CUcontext ctx;
    CU(cuCtxGetCurrent(&ctx));
    std::thread a([&] {
        CU(cuCtxSetCurrent(ctx));
        spin<<<1, 1, 0, busy>>>(cycles);
        waiting = 1;
        double t = now_us();
        CU(cuStreamSynchronize((CUstream)busy));
        waited = now_us() - t;
        waiting = 2;
    });
    while (waiting.load() == 0)
        std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    /* each call first once (a stream's first use costs more: reported apart), then the median
     * of HOL_REPS while the other thread still waits */
    const int HOL_REPS = 15;
    std::vector<double> tq, ts, tc, tl;
    CUresult q = CUDA_SUCCESS;
    for (int rep = 0; rep <= HOL_REPS; rep++) {
        double t = now_us();
        CUresult r = cuStreamQuery((CUstream)busy);
        tq.push_back(now_us() - t);
        if (rep == 0 || r != CUDA_ERROR_NOT_READY)
            q = r;
        t = now_us();
        CU(cuStreamSynchronize((CUstream)idle));
        ts.push_back(now_us() - t);
        t = now_us();
        CU(cuMemcpyHtoDAsync((CUdeviceptr)dev, host, sizeof host, (CUstream)other));
        CU(cuStreamSynchronize((CUstream)other));
        tc.push_back(now_us() - t);
        t = now_us();
        tiny<<<1, 1, 0, other>>>(dev);
        CU(cuStreamSynchronize((CUstream)other));
        tl.push_back(now_us() - t);
    }
    emit("HOL: first cuStreamQuery of the busy stream", "us", tq[0]);
    emit("HOL: first sync of an idle stream", "us", ts[0]);
    emit("HOL: first 4 KiB copy + sync on another stream", "us", tc[0]);
    emit("HOL: first launch + sync on another stream", "us", tl[0]);
    tq.erase(tq.begin());
    ts.erase(ts.begin());
    tc.erase(tc.begin());
    tl.erase(tl.begin());
    emit("HOL: cuStreamQuery of the busy stream", "us", median(tq));
    emit("HOL: that query answered NOT_READY", "bool", q == CUDA_ERROR_NOT_READY ? 1 : 0);
    emit("HOL: sync of an idle stream", "us", median(ts));
    emit("HOL: 4 KiB copy + sync on another stream", "us", median(tc));
    emit("HOL: launch + sync on another stream", "us", median(tl));
    double t = now_us();
    CUdeviceptr p; /* freed after the wait: natively cuMemFree waits for the device */
    CU(cuMemAlloc(&p, 1 << 20));
    emit("HOL: cuMemAlloc 1 MiB", "us", now_us() - t);
    int still = waiting.load() == 1;
    a.join();
    CU(cuMemFree(p));
    emit("HOL: the other thread was still waiting", "bool", still);
    emit("HOL: the waiting thread's cuStreamSynchronize", "ms", waited / 1e3);
    RT(cudaStreamDestroy(busy));
    RT(cudaStreamDestroy(idle));
    RT(cudaStreamDestroy(other));
}

/* Whether PART is in the comma-separated list (every part without one). */
static bool wanted(const char *only, const char *part)
{
    if (!only)
        return true;
    size_t n = std::strlen(part);
    for (const char *p = only; *p;) {
        const char *end = std::strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : std::strlen(p);
        if (len == n && !std::strncmp(p, part, n))
            return true;
        p += len + (end ? 1 : 0);
    }
    return false;
}

int main(int argc, char **argv)
{
    const char *only = nullptr; /* every part */
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--quick")) {
            g_quick = true;
        } else if (!std::strcmp(argv[i], "--hol")) {
            only = "hol";
        } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
            g_json = std::fopen(argv[++i], "w");
            if (!g_json) {
                std::perror(argv[i]);
                return 2;
            }
        } else {
            std::printf("usage: %s [--quick] [--hol] [--only PART,...] [--json FILE]\n"
                        "parts: first, latency, copies, matmul, hol\n",
                        argv[0]);
            return std::strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    cudaDeviceProp prop;
    RT(cudaGetDeviceProperties(&prop, 0));
    std::printf("sluice-bench-datapath on %s\n", prop.name);
    cudaStream_t s;
    int *dev;
    RT(cudaStreamCreate(&s));
    RT(cudaMalloc(&dev, 1 << 20)); /* latency(): copies of up to 1 MiB */
    tiny<<<1, 1, 0, s>>>(dev);      /* the context and the stream warm */
    RT(cudaStreamSynchronize(s));
    if (wanted(only, "first"))
        first_launch(s, dev); /* first_time was never launched before */
    if (wanted(only, "latency"))
        latency(s, dev);
    if (wanted(only, "copies"))
        copies();
    if (wanted(only, "matmul"))
        matmul();
    if (wanted(only, "hol"))
        head_of_line(dev);
    RT(cudaFree(dev));
    RT(cudaStreamDestroy(s));
    if (g_json)
        std::fclose(g_json);
    return 0;
}
