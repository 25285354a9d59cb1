// large_copy: an H2D, D2D and D2H round trip of SLUICE_LARGE_COPY_MIB MiB (default 256) with a
// checksum.
#include "common.cuh"
#include <cstdint>
#include <cstring>
#include <vector>

static uint64_t checksum(const uint64_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int main()
{
    g_test_name = "large_copy";
    const char *env = std::getenv("SLUICE_LARGE_COPY_MIB");
    size_t mib = env ? std::strtoull(env, nullptr, 10) : 256;
    if (mib == 0)
        mib = 256;
    const size_t bytes = mib << 20, n = bytes / sizeof(uint64_t);
    std::vector<uint64_t> src(n), back(n, 0);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        src[i] = x;
    }
    const uint64_t want = checksum(src.data(), n);
    void *d1, *d2;
    CHECK(cudaMalloc(&d1, bytes));
    CHECK(cudaMalloc(&d2, bytes));
    CHECK(cudaMemcpy(d1, src.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d2, d1, bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpy(back.data(), d2, bytes, cudaMemcpyDeviceToHost));
    const uint64_t got = checksum(back.data(), n);
    if (got != want || std::memcmp(src.data(), back.data(), bytes) != 0)
        FAIL("checksum %016llx, expected %016llx", (unsigned long long)got,
             (unsigned long long)want);
    CHECK(cudaFree(d1));
    CHECK(cudaFree(d2));
    std::printf("large_copy: %zu MiB checksum %016llx\n", mib, (unsigned long long)got);
    pass();
    return 0;
}
