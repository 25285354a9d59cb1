// sluice-bench-cuda: the remote-CUDA benchmark (a program, not a test).
//
// Run it natively and through Sluice on the same machine in the same call; divide. It measures
// what docs/performance.md reports for issue 3:
//   - async empty-kernel launch cost (many launches, one synchronize)
//   - launch + synchronize
//   - a synchronous null round trip (cudaEventQuery of a completed event: p50/p99), and
//     cudaStreamQuery of an idle stream (Sluice answers that one in the guest)
//   - cudaMalloc + cudaFree of 1 MiB
//   - H2D and D2H copies 4 KiB..256 MiB, pageable and pinned (cudaMallocHost)
//   - a compute-bound kernel (tiled matrix multiply, 2048^3), time per product
// Output: an aligned table on stdout and, with --json FILE, one JSON object per figure.
// --quick: fewer repetitions; --latency: the launch, round-trip and allocation figures only;
// --copies: the copy figures only; --copy-sizes KIB[,KIB...]: those sizes, not 4 KiB..256 MiB;
// --copy-reps N: N timed copies per size and direction, the median reported; --no-warmup: without
// the untimed copy before them (for a guest whose 256 MiB copy takes tens of seconds).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <vector>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call,                   \
                         cudaGetErrorName(err_));                                                  \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

static FILE *g_json;
static bool g_quick, g_latency, g_copies;
static std::vector<size_t> g_copy_sizes; // bytes; empty: 4 KiB..256 MiB (64 MiB with --quick)
static int g_copy_reps;                  // 0: by size
static bool g_no_warmup;

static double now_us()
{
    using namespace std::chrono;
    return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

static void emit(const char *name, const char *unit, double value)
{
    std::printf("%-40s %12.3f %s\n", name, value, unit);
    if (g_json)
        std::fprintf(g_json, "{\"figure\":\"%s\",\"unit\":\"%s\",\"value\":%.6f}\n", name, unit,
                     value);
}

__global__ void empty_kernel() {}

static void launches()
{
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    const int n = g_quick ? 2000 : 20000;
    for (int i = 0; i < 100; i++)
        empty_kernel<<<1, 1, 0, s>>>();
    CHECK(cudaStreamSynchronize(s));
    double t0 = now_us();
    for (int i = 0; i < n; i++)
        empty_kernel<<<1, 1, 0, s>>>();
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(s));
    emit("async empty launch", "us/launch", (now_us() - t0) / n);

    const int m = g_quick ? 200 : 2000;
    t0 = now_us();
    for (int i = 0; i < m; i++) {
        empty_kernel<<<1, 1, 0, s>>>();
        CHECK(cudaStreamSynchronize(s));
    }
    emit("launch + synchronize", "us", (now_us() - t0) / m);

    std::vector<double> rt(g_quick ? 1000 : 10000);
    for (double &v : rt) {
        double a = now_us();
        CHECK(cudaStreamQuery(s));
        v = now_us() - a;
    }
    std::sort(rt.begin(), rt.end());
    emit("idle stream query p50", "us", rt[rt.size() / 2]);
    emit("idle stream query p99", "us", rt[rt.size() * 99 / 100]);

    cudaEvent_t ev;
    CHECK(cudaEventCreate(&ev));
    CHECK(cudaEventRecord(ev, s));
    CHECK(cudaEventSynchronize(ev));
    for (double &v : rt) {
        double a = now_us();
        CHECK(cudaEventQuery(ev));
        v = now_us() - a;
    }
    std::sort(rt.begin(), rt.end());
    emit("null round trip (event query) p50", "us", rt[rt.size() / 2]);
    emit("null round trip (event query) p99", "us", rt[rt.size() * 99 / 100]);
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaStreamDestroy(s));
}

static void alloc_free()
{
    const int n = g_quick ? 50 : 500;
    void *p;
    CHECK(cudaMalloc(&p, 1 << 20));
    CHECK(cudaFree(p));
    double t0 = now_us();
    for (int i = 0; i < n; i++) {
        CHECK(cudaMalloc(&p, 1 << 20));
        CHECK(cudaFree(p));
    }
    emit("cudaMalloc + cudaFree 1 MiB", "us", (now_us() - t0) / n);
}

static double copy_gbps(void *dst, const void *src, size_t size, cudaMemcpyKind kind)
{
    int reps = size <= (1u << 20) ? 200 : size <= (16u << 20) ? 20 : 5;
    if (g_quick)
        reps = std::max(2, reps / 5);
    if (g_copy_reps > 0)
        reps = g_copy_reps;
    if (!g_no_warmup)
        CHECK(cudaMemcpy(dst, src, size, kind));
    std::vector<double> t(reps);
    for (double &v : t) {
        double a = now_us();
        CHECK(cudaMemcpy(dst, src, size, kind));
        v = now_us() - a;
    }
    std::sort(t.begin(), t.end());
    return (double)size / (t[reps / 2] * 1e3);
}

static void copies()
{
    std::vector<size_t> sizes = g_copy_sizes;
    if (sizes.empty())
        for (size_t size = 4u << 10; size <= (g_quick ? (64u << 20) : (256u << 20)); size *= 16)
            sizes.push_back(size);
    const size_t max = *std::max_element(sizes.begin(), sizes.end());
    char *dev, *pageable, *pinned;
    CHECK(cudaMalloc(&dev, max));
    pageable = static_cast<char *>(std::malloc(max));
    CHECK(cudaMallocHost(&pinned, max));
    for (size_t i = 0; i < max; i++)
        pageable[i] = pinned[i] = (char)(i * 131);
    for (size_t size : sizes) {
        char label[64];
        for (int pin = 0; pin < 2; pin++) {
            char *host = pin ? pinned : pageable;
            const char *how = pin ? "pinned" : "pageable";
            std::snprintf(label, sizeof label, "H2D %s %zu KiB", how, size >> 10);
            emit(label, "GB/s", copy_gbps(dev, host, size, cudaMemcpyHostToDevice));
            std::snprintf(label, sizeof label, "D2H %s %zu KiB", how, size >> 10);
            emit(label, "GB/s", copy_gbps(host, dev, size, cudaMemcpyDeviceToHost));
        }
    }
    CHECK(cudaFree(dev));
    CHECK(cudaFreeHost(pinned));
    std::free(pageable);
}

#define TILE 32
__global__ void matmul(const float *a, const float *b, float *c, int n)
{
    __shared__ float as[TILE][TILE], bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < n; k0 += TILE) {
        as[threadIdx.y][threadIdx.x] = a[row * n + k0 + threadIdx.x];
        bs[threadIdx.y][threadIdx.x] = b[(k0 + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    c[row * n + col] = acc;
}

static void compute()
{
    const int n = 2048, reps = g_quick ? 3 : 20;
    size_t bytes = (size_t)n * n * sizeof(float);
    std::vector<float> h(n * (size_t)n);
    for (size_t i = 0; i < h.size(); i++)
        h[i] = (float)((i * 2654435761u) % 1000) / 1000.f;
    float *a, *b, *c;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMalloc(&c, bytes));
    CHECK(cudaMemcpy(a, h.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, h.data(), bytes, cudaMemcpyHostToDevice));
    dim3 grid(n / TILE, n / TILE), block(TILE, TILE);
    matmul<<<grid, block>>>(a, b, c, n);
    CHECK(cudaDeviceSynchronize());
    double t0 = now_us();
    for (int i = 0; i < reps; i++)
        matmul<<<grid, block>>>(a, b, c, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    emit("matmul 2048^3 fp32 (tiled)", "ms", (now_us() - t0) / reps / 1e3);
    float probe;
    CHECK(cudaMemcpy(&probe, c + 12345, sizeof probe, cudaMemcpyDeviceToHost));
    emit("matmul checksum element", "value", probe);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(c));
}

// "4,262144": sizes in KiB, each from 1 KiB to 4 GiB
static bool parse_sizes(const char *list)
{
    g_copy_sizes.clear();
    for (const char *p = list;;) {
        char *end;
        unsigned long long kib = std::strtoull(p, &end, 10);
        if (end == p || (*end && *end != ',') || kib < 1 || kib > (4ull << 20)) {
            std::fprintf(stderr, "--copy-sizes %s: not a list of sizes in KiB (1 to 4194304)\n",
                         list);
            return false;
        }
        g_copy_sizes.push_back((size_t)kib << 10);
        if (!*end)
            return true;
        p = end + 1;
    }
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--quick")) {
            g_quick = true;
        } else if (!std::strcmp(argv[i], "--latency")) {
            g_latency = true;
        } else if (!std::strcmp(argv[i], "--copies")) {
            g_copies = true;
        } else if (!std::strcmp(argv[i], "--no-warmup")) {
            g_no_warmup = true;
        } else if (!std::strcmp(argv[i], "--copy-sizes") && i + 1 < argc) {
            if (!parse_sizes(argv[++i]))
                return 2;
        } else if (!std::strcmp(argv[i], "--copy-reps") && i + 1 < argc) {
            char *end;
            long n = std::strtol(argv[++i], &end, 10);
            if (*end || n < 1 || n > 100000) {
                std::fprintf(stderr, "--copy-reps %s: not a count from 1 to 100000\n", argv[i]);
                return 2;
            }
            g_copy_reps = (int)n;
        } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
            g_json = std::fopen(argv[++i], "w");
            if (!g_json) {
                std::perror(argv[i]);
                return 2;
            }
        } else {
            std::printf("usage: %s [--quick] [--latency | --copies] [--copy-sizes KIB[,KIB...]] "
                        "[--copy-reps N] [--no-warmup] [--json FILE]\n",
                        argv[0]);
            return std::strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (g_latency && g_copies) {
        std::fprintf(stderr, "--latency and --copies exclude each other\n");
        return 2;
    }
    int dev = 0;
    cudaDeviceProp prop;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaGetDeviceProperties(&prop, dev));
    std::printf("sluice-bench-cuda on %s\n", prop.name);
    if (!g_copies) {
        launches();
        alloc_free();
    }
    if (!g_latency) // --latency: launches, round trips and allocation only
        copies();
    if (!g_latency && !g_copies)
        compute();
    if (g_json)
        std::fclose(g_json);
    return 0;
}
