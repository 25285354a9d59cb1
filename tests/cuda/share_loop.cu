// share_loop: a saturating GPU loop for the GPU-share test of Sluice's accounting
// (docs/accounting.md). It keeps one stream busy with spin kernels of SLUICE_SHARE_KERNEL_US
// microseconds each (default 1000, at the rated clock), never more than 8 launches ahead of the
// device: first for SLUICE_SHARE_WARMUP seconds (default 1: a capped tenant's burst allowance is
// spent), then for SLUICE_SHARE_SECONDS (default 5), the measured period. It prints one line:
//   SHARE_LOOP seconds=S launches=N wall_ns=W device_ns=D share=D/W t0_ns=A t1_ns=B
// for the measured period: device_ns is the sum of the kernels' own %globaltimer durations,
// [t0_ns, t1_ns] the period in CLOCK_REALTIME nanoseconds (to pick the usage records inside it).
// Run alone the share is close to 1; run by a tenant capped at a GPU share through Sluice it must
// come out close to the cap (docs/accounting.md: two tenants at 30% and 70%).
#include "spin.cuh"
#include <chrono>
#include <cstdlib>

int main()
{
    g_test_name = "share_loop";
    double seconds = env_num("SLUICE_SHARE_SECONDS", 5, 0.1, 86400);
    double warmup = env_num("SLUICE_SHARE_WARMUP", 1, 0, 3600);
    double kernel_us = env_num("SLUICE_SHARE_KERNEL_US", 1000, 1, 1e7);
    int clock_khz = 0;
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    if (clock_khz <= 0)
        FAIL("clock rate %d kHz", clock_khz);
    long long cycles = (long long)(kernel_us * clock_khz / 1000.0);
    unsigned long long *d_ns;
    CHECK(cudaMalloc(&d_ns, sizeof *d_ns));
    CHECK(cudaMemset(d_ns, 0, sizeof *d_ns));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    const int ahead = 8;
    cudaEvent_t ev[ahead];
    for (int i = 0; i < ahead; i++)
        CHECK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
    CHECK(cudaDeviceSynchronize());
    long launches = 0, total = 0;
    auto loop = [&](double secs) {
        auto start = std::chrono::steady_clock::now();
        for (;;) {
            std::chrono::duration<double> el = std::chrono::steady_clock::now() - start;
            if (el.count() >= secs)
                break;
            int k = (int)(total % ahead);
            if (total >= ahead)
                CHECK(cudaEventSynchronize(ev[k])); // at most `ahead` launches queued
            spin<<<1, 1, 0, s>>>(cycles, d_ns);
            CHECK(cudaGetLastError());
            CHECK(cudaEventRecord(ev[k], s));
            total++;
        }
        CHECK(cudaStreamSynchronize(s));
    };
    loop(warmup);
    unsigned long long before = 0, device_ns = 0;
    CHECK(cudaMemcpy(&before, d_ns, sizeof before, cudaMemcpyDeviceToHost));
    auto r0 = std::chrono::system_clock::now();
    auto t0 = std::chrono::steady_clock::now();
    long first = total;
    loop(seconds);
    std::chrono::duration<double> wall = std::chrono::steady_clock::now() - t0;
    auto r1 = std::chrono::system_clock::now();
    launches = total - first;
    CHECK(cudaMemcpy(&device_ns, d_ns, sizeof device_ns, cudaMemcpyDeviceToHost));
    device_ns -= before;
    double wall_ns = wall.count() * 1e9;
    long long t0_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(r0.time_since_epoch())
                          .count();
    long long t1_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(r1.time_since_epoch())
                          .count();
    std::printf("SHARE_LOOP seconds=%g launches=%ld wall_ns=%.0f device_ns=%llu share=%.4f "
                "t0_ns=%lld t1_ns=%lld\n",
                seconds, launches, wall_ns, device_ns, (double)device_ns / wall_ns, t0_ns, t1_ns);
    for (int i = 0; i < ahead; i++)
        CHECK(cudaEventDestroy(ev[i]));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d_ns));
    pass();
    return 0;
}
