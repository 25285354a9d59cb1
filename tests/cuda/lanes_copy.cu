// lanes_copy: large host-to-device and device-to-host copies whose sizes are not multiples of
// the copy's pieces (16 MiB calls, 2 MiB lane pieces, 4 KiB alignment), from pageable and from
// page-locked memory, checked byte for byte, the same from two threads at once, then many short
// round trips from six threads (e2e.lanes runs it with SLUICE_LANES=4, docs/remoting.md "Lanes";
// without lanes it checks the same copies on the direct channel).
#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "common.cuh"

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

/* One round trip of n bytes through device memory; 0 when the bytes came back unchanged. */
static int round_trip(size_t n, bool pinned, uint64_t seed)
{
    uint8_t *src, *back;
    std::vector<uint8_t> vs, vb;
    if (pinned) {
        CHECK(cudaMallocHost((void **)&src, n));
        CHECK(cudaMallocHost((void **)&back, n));
    } else {
        vs.resize(n);
        vb.resize(n);
        src = vs.data();
        back = vb.data();
    }
    fill(src, n, seed);
    std::memset(back, 0, n);
    void *d;
    CHECK(cudaMalloc(&d, n));
    CHECK(cudaMemcpy(d, src, n, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost));
    int bad = std::memcmp(src, back, n) != 0;
    if (bad) {
        size_t at = 0;
        while (at < n && src[at] == back[at])
            at++;
        std::printf("lanes_copy: %zu bytes (%s) differ first at byte %zu\n", n,
                    pinned ? "page-locked" : "pageable", at);
    }
    CHECK(cudaFree(d));
    if (pinned) {
        CHECK(cudaFreeHost(src));
        CHECK(cudaFreeHost(back));
    }
    return bad;
}

int main()
{
    g_test_name = "lanes_copy";
    const size_t sizes[] = {(1u << 20) + 7, (16u << 20) + 4097, (40u << 20) + 123, 3u << 20};
    int bad = 0;
    for (bool pinned : {false, true})
        for (size_t n : sizes)
            bad += round_trip(n, pinned, n);
    int tbad[2] = {0, 0};
    std::thread a([&] { tbad[0] = round_trip((24u << 20) + 11, false, 1); });
    std::thread b([&] { tbad[1] = round_trip((20u << 20) + 4095, true, 2); });
    a.join();
    b.join();
    /* many threads, many short round trips: each thread's reply may be read by another thread
     * while this one's lane pieces still go (a reply read before its waiter was registered
     * once left a thread waiting forever) */
    enum { THREADS = 6, ROUNDS = 12 };
    std::atomic<int> mbad{0};
    std::vector<std::thread> many;
    for (int t = 0; t < THREADS; t++)
        many.emplace_back([t, &mbad] {
            for (int r = 0; r < ROUNDS; r++)
                mbad += round_trip((1u << 20) + 4096u * (unsigned)(r % 4) + 1u + (unsigned)t,
                                   (r + t) % 2 == 1, 100u * (unsigned)t + (unsigned)r);
        });
    for (auto &th : many)
        th.join();
    if (bad || tbad[0] || tbad[1] || mbad)
        FAIL("%d single-thread, %d two-thread and %d many-thread copies came back different",
             bad, tbad[0] + tbad[1], mbad.load());
    std::printf("lanes_copy: 10 round trips of 1-40 MiB checked, 2 of them concurrent, then "
                "%d threads x %d round trips of 1 MiB and more\n",
                THREADS, ROUNDS);
    pass();
    return 0;
}
