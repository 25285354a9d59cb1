// Device output where the program's own goes: device printf lines come to stdout between the
// host lines printed before and after the synchronization, and the messages of failed
// device-side asserts come to stderr (simpleAssert), one per failing thread, with the
// synchronization answering cudaErrorAssert. The program catches its own fds 1 and 2 in files
// to check where each line went, then prints what it found, the same natively and through
// Sluice. The assert poisons the context: it comes last.
#include "common.cuh"

#include <cassert>
#include <cstring>
#include <string>
#include <unistd.h>

// line 19 is the assert's line (the driver double writes the same file:line)
__global__ void check_below(const int *p, int limit, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        assert(p[i] < limit);
}

__global__ void hello(int base)
{
    printf("sluice-printf block %d thread %d value %d\n", (int)blockIdx.x, (int)threadIdx.x,
           base + (int)(blockIdx.x * blockDim.x + threadIdx.x));
}

// fd (1 or 2) goes to a new temporary file until restore(); returns the saved fd.
static int divert(int fd, FILE *stream, char *path)
{
    std::fflush(stream);
    std::strcpy(path, "/tmp/sluice-device-assert-XXXXXX");
    int t = mkstemp(path);
    int saved = dup(fd);
    if (t < 0 || saved < 0 || dup2(t, fd) < 0)
        FAIL("cannot divert fd %d to a temporary file", fd);
    close(t);
    return saved;
}

static std::string restore(int fd, FILE *stream, int saved, const char *path)
{
    std::fflush(stream);
    dup2(saved, fd);
    close(saved);
    std::string text;
    FILE *f = std::fopen(path, "r");
    char buf[4096];
    size_t n;
    while (f && (n = std::fread(buf, 1, sizeof buf, f)) > 0)
        text.append(buf, n);
    if (f)
        std::fclose(f);
    unlink(path);
    return text;
}

static int count(const std::string &text, const char *what)
{
    int k = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
        k++;
    return k;
}

int main()
{
    g_test_name = "device_assert";
    const int n = 64;
    int *d = nullptr;
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    int h[n];
    for (int i = 0; i < n; i++)
        h[i] = i;
    CHECK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));

    // device printf keeps its place among the program's own lines
    char out_path[64];
    int saved = divert(STDOUT_FILENO, stdout, out_path);
    std::printf("host line before\n");
    hello<<<1, 2>>>(40);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::printf("host line after\n");
    std::string out = restore(STDOUT_FILENO, stdout, saved, out_path);
    size_t before = out.find("host line before"), dev = out.find("sluice-printf block 0 thread 1"),
           after = out.find("host line after");
    if (before == std::string::npos || dev == std::string::npos || after == std::string::npos ||
        !(before < dev && dev < after))
        FAIL("stdout out of order or incomplete: [%s]", out.c_str());
    std::printf("device_assert: device printf between the host lines on stdout\n");

    // a failed assert in 4 threads: 4 messages on stderr, the sync answers cudaErrorAssert
    char err_path[64];
    saved = divert(STDERR_FILENO, stderr, err_path);
    check_below<<<2, 32>>>(d, 60, n);
    cudaError_t launch = cudaGetLastError();
    cudaError_t sync = cudaDeviceSynchronize();
    std::string err = restore(STDERR_FILENO, stderr, saved, err_path);
    int k = count(err, "Assertion `p[i] < limit` failed.");
    std::printf("device_assert: launch -> %s, synchronize -> %s, %d assert messages on stderr\n",
                cudaGetErrorName(launch), cudaGetErrorName(sync), k);
    if (sync != cudaErrorAssert || k != 4)
        FAIL("expected cudaErrorAssert and 4 messages on stderr; stderr: [%s]", err.c_str());
    // the error is sticky: a small synchronous copy back answers it too (issue 18: the
    // backend's small device-to-host copies answer errors as the driver's copy does)
    int first = -1;
    cudaError_t copy = cudaMemcpy(&first, d, sizeof first, cudaMemcpyDeviceToHost);
    std::printf("device_assert: a 4-byte copy back after it -> %s\n", cudaGetErrorName(copy));
    if (copy != cudaErrorAssert)
        FAIL("expected cudaErrorAssert from the copy after the failed assert");
    std::fflush(stdout);
    pass();
    return 0;
}
