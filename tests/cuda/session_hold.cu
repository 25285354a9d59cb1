// session_hold: opens a session (cudaMalloc), then keeps it busy with synchronizing calls
// (cudaMemset + cudaDeviceSynchronize every 100 ms) until one fails. Used by
// agent.revocation_e2e (tests/unit/agent/test_revocation_e2e.c), which ends the session from
// the host side (the domain stops, the agent revokes the instance) and times how long the guest
// takes to notice. Not one of tests/e2e/run.py's programs: it is meant to fail.
//   stdout: "SESSION OPEN" once the allocation worked, "TICK n" every 10 iterations,
//           "SESSION ENDED <cudaError name>" when a call fails.
//   exit: 0 the session ended (a call failed), 1 it never opened, 2 it never failed within
//         SLUICE_HOLD_SECONDS (default 60).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <thread>

static int ended(cudaError_t err)
{
    std::printf("SESSION ENDED %s\n", cudaGetErrorName(err));
    std::fflush(stdout);
    return 0;
}

int main()
{
    double limit = 60;
    if (const char *s = std::getenv("SLUICE_HOLD_SECONDS"))
        limit = std::atof(s);
    void *p = nullptr;
    cudaError_t err = cudaMalloc(&p, 1 << 20);
    if (err != cudaSuccess) {
        std::printf("SESSION NOT OPENED %s (%s)\n", cudaGetErrorName(err),
                    cudaGetErrorString(err));
        return 1;
    }
    std::printf("SESSION OPEN\n");
    std::fflush(stdout);
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 1;; i++) {
        if ((err = cudaMemset(p, static_cast<int>(i & 0xff), 1 << 20)) != cudaSuccess)
            return ended(err);
        if ((err = cudaDeviceSynchronize()) != cudaSuccess)
            return ended(err);
        if (i % 10 == 0) {
            std::printf("TICK %ld\n", i);
            std::fflush(stdout);
        }
        std::chrono::duration<double> el = std::chrono::steady_clock::now() - t0;
        if (el.count() >= limit)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::printf("SESSION NEVER ENDED\n");
    return 2;
}
