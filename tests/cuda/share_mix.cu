// share_mix: one session of the GPU-sharing load (tests/gpu/sharing_bench.py, docs/accounting.md),
// in one of four roles, for SLUICE_MIX_SECONDS (default 10) starting at SLUICE_MIX_START_NS
// (CLOCK_REALTIME nanoseconds; default: at once), so that many processes measure one window:
//   heavy  spin kernels of SLUICE_MIX_KERNEL_US (default 1000) at the rated clock, at most 8
//          launches ahead of the device (a training loop's shape);
//   light  every 5 ms a tiny kernel and a stream synchronize, its latency recorded (an
//          interactive or inference client);
//   copy   64 MiB page-locked host to device then device to host, in a loop;
//   idle   a context and nothing else.
// It prints one line:
//   SHARE_MIX role=R seconds=S ops=N device_ns=D bytes=B lat_p50_us=. lat_p99_us=. lat_max_us=.
// ops: kernels completed (heavy, light) or copies (copy); device_ns: the kernels' own
// %globaltimer durations (heavy); the latencies are the light role's launch + synchronize.
#include "spin.cuh"
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

// the light role's kernel (named as the driver double's table has it: tests/double/kernels.c)
__global__ void inc(int *p, int n)
{
    if (threadIdx.x == 0)
        *p += n;
}

static long long now_ns(void)
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

static double percentile(std::vector<double> &v, double p)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    size_t i = (size_t)(p * (double)(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

int main(int argc, char **argv)
{
    g_test_name = "share_mix";
    if (argc != 2)
        FAIL("usage: share_mix heavy|light|copy|idle");
    const char *role = argv[1];
    double seconds = env_num("SLUICE_MIX_SECONDS", 10, 0.1, 86400);
    double kernel_us = env_num("SLUICE_MIX_KERNEL_US", 1000, 1, 1e7);
    double start_ns = env_num("SLUICE_MIX_START_NS", 0, 0, 1e20);
    int clock_khz = 0;
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    long long cycles = (long long)(kernel_us * clock_khz / 1000.0);
    unsigned long long *d_ns;
    int *d_count;
    CHECK(cudaMalloc(&d_ns, sizeof *d_ns));
    CHECK(cudaMalloc(&d_count, sizeof *d_count));
    CHECK(cudaMemset(d_ns, 0, sizeof *d_ns));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    const size_t copy_bytes = 64u << 20;
    void *h = nullptr, *d = nullptr;
    if (!std::strcmp(role, "copy")) {
        CHECK(cudaMallocHost(&h, copy_bytes));
        CHECK(cudaMalloc(&d, copy_bytes));
        std::memset(h, 0x5a, copy_bytes);
    } else if (std::strcmp(role, "heavy") && std::strcmp(role, "light") &&
               std::strcmp(role, "idle")) {
        FAIL("unknown role %s", role);
    }
    inc<<<1, 32, 0, s>>>(d_count, 1); // the module is loaded before the window
    CHECK(cudaStreamSynchronize(s));
    long long wait = (long long)start_ns - now_ns();
    if (wait > 0)
        std::this_thread::sleep_for(std::chrono::nanoseconds(wait));

    long ops = 0;
    unsigned long long device_ns = 0;
    double bytes = 0;
    std::vector<double> lat;
    auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    if (!std::strcmp(role, "heavy")) {
        const int ahead = 8;
        cudaEvent_t ev[ahead];
        for (int i = 0; i < ahead; i++)
            CHECK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
        long total = 0;
        while (elapsed() < seconds) {
            int k = (int)(total % ahead);
            if (total >= ahead)
                CHECK(cudaEventSynchronize(ev[k]));
            spin<<<1, 1, 0, s>>>(cycles, d_ns);
            CHECK(cudaGetLastError());
            CHECK(cudaEventRecord(ev[k], s));
            total++;
        }
        // only what completed inside the window counts: the queued rest is drained, not counted
        for (int i = 0; i < ahead && i < total; i++)
            if (cudaEventQuery(ev[(total - 1 - i) % ahead]) == cudaSuccess) {
                ops = total - i;
                break;
            }
        if (ops == 0 && total > 0)
            ops = std::max(0L, total - ahead);
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemcpy(&device_ns, d_ns, sizeof device_ns, cudaMemcpyDeviceToHost));
        for (int i = 0; i < ahead; i++)
            CHECK(cudaEventDestroy(ev[i]));
    } else if (!std::strcmp(role, "light")) {
        double next = 0;
        while (elapsed() < seconds) {
            double t = elapsed();
            if (t < next) {
                std::this_thread::sleep_for(std::chrono::duration<double>(next - t));
                continue;
            }
            next = t + 0.005;
            auto a = std::chrono::steady_clock::now();
            inc<<<1, 32, 0, s>>>(d_count, 1);
            CHECK(cudaGetLastError());
            CHECK(cudaStreamSynchronize(s));
            lat.push_back(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a)
                    .count());
            ops++;
        }
    } else if (!std::strcmp(role, "copy")) {
        while (elapsed() < seconds) {
            CHECK(cudaMemcpy(d, h, copy_bytes, cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(h, d, copy_bytes, cudaMemcpyDeviceToHost));
            ops += 2;
            bytes += 2.0 * (double)copy_bytes;
        }
    } else {
        while (elapsed() < seconds)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    double wall = elapsed();
    std::printf("SHARE_MIX role=%s seconds=%.3f ops=%ld device_ns=%llu bytes=%.0f "
                "lat_p50_us=%.1f lat_p99_us=%.1f lat_max_us=%.1f\n",
                role, wall, ops, device_ns, bytes, percentile(lat, 0.5), percentile(lat, 0.99),
                lat.empty() ? 0.0 : *std::max_element(lat.begin(), lat.end()));
    if (h)
        CHECK(cudaFreeHost(h));
    if (d)
        CHECK(cudaFree(d));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d_ns));
    CHECK(cudaFree(d_count));
    pass();
    return 0;
}
