// cudaMemcpyDefault (CU_MEMORYTYPE_UNIFIED) copies: the driver tells device memory from host
// memory by the address alone. 2D copies to and from pitched device memory for four kinds of
// host memory (pageable, page-locked, registered, mapped) in both directions, synchronous and
// async (16 cases), the same as 3D copies, host to host and device to device rectangles, and
// 1D cudaMemcpy/cudaMemcpyAsync with the default kind. Each case prints one line, the same
// natively and through Sluice.
#include "common.cuh"

#include <cstdint>
#include <cstring>

static const size_t W = 40, H = 24, HP = 64; // row bytes, rows, host pitch (bytes)

struct host_kind {
    const char *name;
    unsigned char *p;
};

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed * 31 + i * 7 + (i >> 8));
}

// The rectangle (W x H at pitch HP) of a and b are equal.
static bool same_rect(const unsigned char *a, const unsigned char *b)
{
    for (size_t y = 0; y < H; y++)
        if (std::memcmp(a + y * HP, b + y * HP, W))
            return false;
    return true;
}

static void case2d(const host_kind &k, void *dev, size_t dpitch, bool async, cudaStream_t s,
                   unsigned seed)
{
    static unsigned char want[HP * H];
    fill(k.p, HP * H, seed);
    std::memcpy(want, k.p, sizeof want);
    if (async) {
        CHECK(cudaMemcpy2DAsync(dev, dpitch, k.p, HP, W, H, cudaMemcpyDefault, s));
        CHECK(cudaStreamSynchronize(s));
    } else {
        CHECK(cudaMemcpy2D(dev, dpitch, k.p, HP, W, H, cudaMemcpyDefault));
    }
    std::memset(k.p, 0, HP * H);
    if (async) {
        CHECK(cudaMemcpy2DAsync(k.p, HP, dev, dpitch, W, H, cudaMemcpyDefault, s));
        CHECK(cudaStreamSynchronize(s));
    } else {
        CHECK(cudaMemcpy2D(k.p, HP, dev, dpitch, W, H, cudaMemcpyDefault));
    }
    if (!same_rect(k.p, want))
        FAIL("2D %s %s: the rectangle came back different", k.name, async ? "async" : "sync");
    std::printf("memcpy_default: 2D %s host->device->host %s ok\n", k.name,
                async ? "async" : "sync");
}

static void case3d(const host_kind &k, cudaPitchedPtr dev, bool async, cudaStream_t s,
                   unsigned seed)
{
    static unsigned char want[HP * H];
    fill(k.p, HP * H, seed);
    std::memcpy(want, k.p, sizeof want);
    // depth 2 of H / 2 rows each: the same bytes as the 2D rectangle
    cudaMemcpy3DParms p{};
    p.srcPtr = make_cudaPitchedPtr(k.p, HP, W, H / 2);
    p.dstPtr = dev;
    p.extent = make_cudaExtent(W, H / 2, 2);
    p.kind = cudaMemcpyDefault;
    if (async) {
        CHECK(cudaMemcpy3DAsync(&p, s));
        CHECK(cudaStreamSynchronize(s));
    } else {
        CHECK(cudaMemcpy3D(&p));
    }
    std::memset(k.p, 0, HP * H);
    p.srcPtr = dev;
    p.dstPtr = make_cudaPitchedPtr(k.p, HP, W, H / 2);
    if (async) {
        CHECK(cudaMemcpy3DAsync(&p, s));
        CHECK(cudaStreamSynchronize(s));
    } else {
        CHECK(cudaMemcpy3D(&p));
    }
    if (!same_rect(k.p, want))
        FAIL("3D %s %s: the box came back different", k.name, async ? "async" : "sync");
    std::printf("memcpy_default: 3D %s host->device->host %s ok\n", k.name,
                async ? "async" : "sync");
}

alignas(4096) static unsigned char registered[HP * H + 4096];

int main()
{
    g_test_name = "memcpy_default";
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    void *dev = nullptr, *dev2 = nullptr;
    size_t dpitch = 0, dpitch2 = 0;
    CHECK(cudaMallocPitch(&dev, &dpitch, W, H));
    CHECK(cudaMallocPitch(&dev2, &dpitch2, W, H));

    host_kind kinds[4];
    kinds[0] = {"pageable", (unsigned char *)std::malloc(HP * H)};
    if (!kinds[0].p)
        FAIL("malloc");
    kinds[1] = {"page-locked", nullptr};
    CHECK(cudaMallocHost((void **)&kinds[1].p, HP * H));
    kinds[2] = {"registered", registered};
    CHECK(cudaHostRegister(registered, sizeof registered, cudaHostRegisterDefault));
    kinds[3] = {"mapped", nullptr};
    CHECK(cudaHostAlloc((void **)&kinds[3].p, HP * H, cudaHostAllocMapped));

    unsigned seed = 1;
    for (const host_kind &k : kinds)
        for (int async = 0; async < 2; async++)
            case2d(k, dev, dpitch, async, s, seed++);
    cudaPitchedPtr d3 = make_cudaPitchedPtr(dev, dpitch, W, H / 2);
    for (const host_kind &k : kinds)
        for (int async = 0; async < 2; async++)
            case3d(k, d3, async, s, seed++);

    // host to host and device to device rectangles, default kind
    fill(kinds[0].p, HP * H, 99);
    std::memset(kinds[1].p, 0, HP * H);
    CHECK(cudaMemcpy2D(kinds[1].p, HP, kinds[0].p, HP, W, H, cudaMemcpyDefault));
    CHECK(cudaMemcpy2DAsync(kinds[2].p, HP, kinds[1].p, HP, W, H, cudaMemcpyDefault, s));
    CHECK(cudaStreamSynchronize(s));
    if (!same_rect(kinds[2].p, kinds[0].p))
        FAIL("host to host rectangles differ");
    std::printf("memcpy_default: 2D host->host sync and async ok\n");
    CHECK(cudaMemcpy2D(dev, dpitch, kinds[0].p, HP, W, H, cudaMemcpyDefault));
    CHECK(cudaMemcpy2D(dev2, dpitch2, dev, dpitch, W, H, cudaMemcpyDefault));
    std::memset(kinds[1].p, 0, HP * H);
    CHECK(cudaMemcpy2D(kinds[1].p, HP, dev2, dpitch2, W, H, cudaMemcpyDefault));
    if (!same_rect(kinds[1].p, kinds[0].p))
        FAIL("device to device rectangle differs");
    std::printf("memcpy_default: 2D device->device ok\n");

    // 1D, default kind, every host kind both ways, sync and async
    for (const host_kind &k : kinds) {
        for (int async = 0; async < 2; async++) {
            fill(k.p, HP * H, seed);
            unsigned char want[HP * H];
            std::memcpy(want, k.p, sizeof want);
            if (async) {
                CHECK(cudaMemcpyAsync(dev, k.p, HP * H, cudaMemcpyDefault, s));
                CHECK(cudaMemsetAsync(dev2, 0, HP * H, s));
                CHECK(cudaMemcpyAsync(dev2, dev, HP * H, cudaMemcpyDefault, s));
                std::memset(k.p, 0, HP * H);
                CHECK(cudaMemcpyAsync(k.p, dev2, HP * H, cudaMemcpyDefault, s));
                CHECK(cudaStreamSynchronize(s));
            } else {
                CHECK(cudaMemcpy(dev, k.p, HP * H, cudaMemcpyDefault));
                CHECK(cudaMemset(dev2, 0, HP * H));
                CHECK(cudaMemcpy(dev2, dev, HP * H, cudaMemcpyDefault));
                std::memset(k.p, 0, HP * H);
                CHECK(cudaMemcpy(k.p, dev2, HP * H, cudaMemcpyDefault));
            }
            if (std::memcmp(k.p, want, sizeof want))
                FAIL("1D %s %s: the bytes came back different", k.name, async ? "async" : "sync");
            std::printf("memcpy_default: 1D %s %s ok\n", k.name, async ? "async" : "sync");
            seed++;
        }
    }

    CHECK(cudaHostUnregister(registered));
    CHECK(cudaFreeHost(kinds[1].p));
    CHECK(cudaFreeHost(kinds[3].p));
    std::free(kinds[0].p);
    CHECK(cudaFree(dev));
    CHECK(cudaFree(dev2));
    CHECK(cudaStreamDestroy(s));
    pass();
    return 0;
}
