// Mapped host memory (cudaHostAllocMapped, cudaHostRegisterMapped): a kernel reads what the host
// wrote and writes what the host reads after synchronizing, through the device pointer the
// runtime gives, twice (so both directions are seen after a first exchange); then a small
// cudaMallocHost buffer (no mapped flag), which unified addressing makes reachable too; then
// copies from device memory into a large mapped range (synchronous, and async on four streams as
// the cuda-sample simpleStreams does), which the device reading the range must see as well. Under
// Sluice the memory has a twin in the backend kept coherent at call boundaries
// (docs/remoting.md).
#include "common.cuh"

#include <cstdint>
#include <cstdlib>

__global__ void mapflag(int *flag, int *out)
{
    if (blockIdx.x * blockDim.x + threadIdx.x == 0) {
        out[0] = flag[0] * 2;
        flag[1] = flag[0] + 1000;
    }
}

static void round_trip(int *host, int *dev, int *dout, int v)
{
    host[0] = v;
    mapflag<<<1, 32>>>(dev, dout);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    int out = 0;
    CHECK(cudaMemcpy(&out, dout, sizeof out, cudaMemcpyDeviceToHost));
    if (out != 2 * v || host[1] != v + 1000)
        FAIL("value %d: kernel saw %d (want %d), host sees %d (want %d)", v, out / 2, v, host[1],
             v + 1000);
}

alignas(4096) static int registered[1024];

static unsigned word(size_t i, unsigned salt)
{
    return (unsigned)i * 2654435761u + salt;
}

static void check_host(const unsigned *h, size_t n, unsigned salt, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (h[i] != word(i, salt))
            FAIL("%s: word %zu of the mapped range is 0x%x, want 0x%x", what, i, h[i],
                 word(i, salt));
}

// What the device sees through the mapped range's device pointer (copied out by the device).
static void check_device(const unsigned *dmap, unsigned *dtmp, unsigned *plain, size_t n,
                         unsigned salt, const char *what)
{
    CHECK(cudaMemcpy(dtmp, dmap, n * sizeof *dtmp, cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpy(plain, dtmp, n * sizeof *plain, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (plain[i] != word(i, salt))
            FAIL("%s: the device reads word %zu of the mapped range as 0x%x, want 0x%x", what, i,
                 plain[i], word(i, salt));
}

// Device-to-host copies into a 20 MiB mapped range (more than one message of bytes): the host
// sees them after the copy (or the stream's synchronization), and so do kernels.
static void copies_into_mapped(void)
{
    const size_t n = (20u << 20) / sizeof(unsigned), quarter = n / 4;
    unsigned *h = nullptr, *dmap = nullptr, *src = nullptr, *dtmp = nullptr;
    unsigned *plain = (unsigned *)std::malloc(n * sizeof *plain);
    if (!plain)
        FAIL("out of memory");
    CHECK(cudaHostAlloc(&h, n * sizeof *h, cudaHostAllocMapped));
    CHECK(cudaHostGetDevicePointer((void **)&dmap, h, 0));
    CHECK(cudaMalloc(&src, n * sizeof *src));
    CHECK(cudaMalloc(&dtmp, n * sizeof *dtmp));

    for (size_t i = 0; i < n; i++)
        plain[i] = word(i, 1);
    CHECK(cudaMemcpy(src, plain, n * sizeof *src, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(h, src, n * sizeof *h, cudaMemcpyDeviceToHost));
    check_host(h, n, 1, "cudaMemcpy into mapped memory");
    check_device(dmap, dtmp, plain, n, 1, "cudaMemcpy into mapped memory");

    cudaStream_t st[4];
    for (auto &x : st)
        CHECK(cudaStreamCreate(&x));
    for (size_t i = 0; i < n; i++)
        plain[i] = word(i, 2);
    CHECK(cudaMemcpy(src, plain, n * sizeof *src, cudaMemcpyHostToDevice));
    for (int i = 0; i < 4; i++)
        CHECK(cudaMemcpyAsync(h + i * quarter, src + i * quarter, quarter * sizeof *h,
                              cudaMemcpyDeviceToHost, st[i]));
    for (auto &x : st)
        CHECK(cudaStreamSynchronize(x));
    check_host(h, n, 2, "cudaMemcpyAsync into mapped memory");
    check_device(dmap, dtmp, plain, n, 2, "cudaMemcpyAsync into mapped memory");

    // The program's own writes at both ends reach the device (two small spans, not the range).
    h[0] = 0xdead;
    h[n - 1] = 0xbeef;
    unsigned ends[2] = {0, 0};
    CHECK(cudaMemcpy(&ends[0], dmap, sizeof(unsigned), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&ends[1], dmap + n - 1, sizeof(unsigned), cudaMemcpyDeviceToHost));
    if (ends[0] != 0xdead || ends[1] != 0xbeef)
        FAIL("the host's writes to mapped memory: the device sees 0x%x and 0x%x", ends[0], ends[1]);
    h[0] = word(0, 2);
    h[n - 1] = word(n - 1, 2);
    check_device(dmap, dtmp, plain, n, 2, "the host's writes at both ends, undone");
    for (auto &x : st)
        CHECK(cudaStreamDestroy(x));
    CHECK(cudaFree(dtmp));
    CHECK(cudaFree(src));
    CHECK(cudaFreeHost(h));
    std::free(plain);
    std::printf("mapped_memory: 20 MiB copied into mapped memory (synchronous and on 4 streams), "
                "seen by the host and by the device\n");
}

int main()
{
    g_test_name = "mapped_memory";
    int *dout = nullptr;
    CHECK(cudaMalloc(&dout, sizeof(int)));

    int *h = nullptr, *d = nullptr;
    CHECK(cudaHostAlloc(&h, 4096, cudaHostAllocMapped));
    CHECK(cudaHostGetDevicePointer((void **)&d, h, 0));
    unsigned int flags = 0;
    CHECK(cudaHostGetFlags(&flags, h));
    if (!(flags & cudaHostAllocMapped))
        FAIL("cudaHostGetFlags = 0x%x, mapped flag missing", flags);
    round_trip(h, d, dout, 21);
    round_trip(h, d, dout, 50);
    std::printf("mapped_memory: allocated, device pointer %s the host pointer\n",
                (void *)d == (void *)h ? "equals" : "differs from");

    int *d2 = nullptr;
    CHECK(cudaHostRegister(registered, sizeof registered, cudaHostRegisterMapped));
    CHECK(cudaHostGetDevicePointer((void **)&d2, registered, 0));
    round_trip(registered, d2, dout, 7);
    round_trip(registered, d2, dout, -3);
    CHECK(cudaHostUnregister(registered));

    // Under unified addressing page-locked memory is reachable by kernels whatever its flags:
    // MAGMA hands small cudaMallocHost buffers to its kernels directly.
    int *small = nullptr;
    CHECK(cudaMallocHost(&small, 2 * sizeof(int)));
    cudaPointerAttributes pa{};
    CHECK(cudaPointerGetAttributes(&pa, small));
    if (!pa.devicePointer)
        FAIL("cudaMallocHost memory has no device pointer");
    void *dsmall = nullptr;
    cudaError_t gdp = cudaHostGetDevicePointer(&dsmall, small, 0);
    cudaGetLastError();
    round_trip(small, (int *)pa.devicePointer, dout, 11);
    round_trip(small, (int *)pa.devicePointer, dout, 12);
    std::printf("mapped_memory: cudaMallocHost(8) used by a kernel, device pointer %s the host "
                "pointer; cudaHostGetDevicePointer -> %s\n",
                pa.devicePointer == (void *)small ? "equals" : "differs from",
                cudaGetErrorName(gdp));
    CHECK(cudaFreeHost(small));

    int plain = 0;
    void *none = nullptr;
    if (cudaHostGetDevicePointer(&none, &plain, 0) == cudaSuccess)
        FAIL("cudaHostGetDevicePointer of unregistered memory succeeded");
    cudaGetLastError();
    CHECK(cudaFreeHost(h));
    CHECK(cudaFree(dout));
    copies_into_mapped();
    pass();
    return 0;
}
