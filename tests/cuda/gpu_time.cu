// gpu_time: the accuracy check of Sluice's GPU-time accounting (docs/accounting.md).
// A kernel that spins for a known number of clock cycles is launched N times (default 1000) on
// one stream, then synchronized. The program prints, machine-readable on one line:
//   GPU_TIME launches=N cycles=C clock_khz=K expected_ns=E device_ns=D event_ns=V
// expected_ns = N * C / K (the cycles converted with the device's rated clock),
// device_ns   = the sum of each launch's own %globaltimer nanoseconds (what the spin took),
// event_ns    = cudaEventElapsedTime around all launches (includes launch gaps).
// Through Sluice the backend's usage records for the session must add up to device_ns
// (kernel_ns within 2% on a GPU; exactly on the driver test double, whose simulated kernel
// durations stand in for GPU time). Environment: SLUICE_GPU_TIME_LAUNCHES (1000),
// SLUICE_GPU_TIME_US (1000: microseconds per launch at the rated clock).
#include "spin.cuh"
#include <cstdlib>

static long env_long(const char *name, long def, long lo, long hi)
{
    const char *s = std::getenv(name);
    if (!s)
        return def;
    char *end;
    long v = std::strtol(s, &end, 10);
    if (*end || v < lo || v > hi)
        FAIL("%s=%s: must be %ld..%ld", name, s, lo, hi);
    return v;
}

int main()
{
    g_test_name = "gpu_time";
    long launches = env_long("SLUICE_GPU_TIME_LAUNCHES", 1000, 1, 10000000);
    long us = env_long("SLUICE_GPU_TIME_US", 1000, 1, 10000000);
    int clock_khz = 0;
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    if (clock_khz <= 0)
        FAIL("clock rate %d kHz", clock_khz);
    long long cycles = (long long)us * clock_khz / 1000;
    unsigned long long *d_ns;
    CHECK(cudaMalloc(&d_ns, sizeof *d_ns));
    CHECK(cudaMemset(d_ns, 0, sizeof *d_ns));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaEventRecord(a, s));
    for (long i = 0; i < launches; i++)
        spin<<<1, 1, 0, s>>>(cycles, d_ns);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaStreamSynchronize(s));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    unsigned long long device_ns = 0;
    CHECK(cudaMemcpy(&device_ns, d_ns, sizeof device_ns, cudaMemcpyDeviceToHost));
    double expected_ns = (double)launches * (double)cycles * 1e6 / (double)clock_khz;
    std::printf("GPU_TIME launches=%ld cycles=%lld clock_khz=%d expected_ns=%.0f device_ns=%llu "
                "event_ns=%.0f\n",
                launches, cycles, clock_khz, expected_ns, device_ns, (double)ms * 1e6);
    if (device_ns == 0)
        FAIL("the spin kernel measured no time");
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d_ns));
    pass();
    return 0;
}
