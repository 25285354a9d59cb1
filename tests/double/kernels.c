/* Host implementations of the kernels of tests/cuda/ *.cu, by mangled name, with their
 * parameter layouts (offset, size) as the real driver's cuFuncGetParamInfo reports them.
 * Each must compute exactly what the real kernel computes. TEST DOUBLE: never a GPU result. */
#include "kernels.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "double.h"
#include "graph_cond.h"
#include "launch.h"
#include "texture.h"

#define ARG(launch, type, i) (*(type *)(launch)->params[i])

/* Threads of the launch in the order the kernels index them: i = blockIdx.x * blockDim.x +
 * threadIdx.x (the test kernels are one-dimensional). */
static size_t threads_x(const struct dbl_launch *l)
{
    return (size_t)l->grid[0] * l->block[0];
}

static size_t touched(const struct dbl_launch *l, int n)
{
    size_t t = threads_x(l);
    return n <= 0 ? 0 : ((size_t)n < t ? (size_t)n : t);
}

/* __global__ void vadd(const float *a, const float *b, float *c, int n) */
static void k_vadd(struct dbl_launch *l)
{
    int n = ARG(l, int, 3);
    size_t m = touched(l, n);
    const float *a = dbl_dev(l, ARG(l, CUdeviceptr, 0), m * sizeof(float));
    const float *b = dbl_dev(l, ARG(l, CUdeviceptr, 1), m * sizeof(float));
    float *c = dbl_dev(l, ARG(l, CUdeviceptr, 2), m * sizeof(float));
    if (m == 0 || !a || !b || !c)
        return;
    for (size_t i = 0; i < m; i++)
        c[i] = a[i] + b[i];
}

/* __global__ void scale(float *x, float f, int n) */
static void k_scale(struct dbl_launch *l)
{
    float f = ARG(l, float, 1);
    size_t m = touched(l, ARG(l, int, 2));
    float *x = dbl_dev(l, ARG(l, CUdeviceptr, 0), m * sizeof(float));
    if (m == 0 || !x)
        return;
    for (size_t i = 0; i < m; i++)
        x[i] = x[i] * f;
}

/* __device__ int d_table[16]; __device__ int d_count;
 * __global__ void lookup(int *out, int n)
 * { out[i] = d_table[i % 16] * 2 + i; if (i == 0) d_count = n; } */
static void k_lookup(struct dbl_launch *l)
{
    int n = ARG(l, int, 1);
    size_t m = touched(l, n);
    int *out = dbl_dev(l, ARG(l, CUdeviceptr, 0), m * sizeof(int));
    const int *table = dbl_global_ptr(l, "d_table");
    int *count = dbl_global_ptr(l, "d_count");
    if (m == 0 || !out)
        return;
    for (size_t i = 0; i < m; i++)
        out[i] = table[i % 16] * 2 + (int)i;
    *count = n;
}

/* __global__ void fill(int *p, int v, int n) { p[i] = p[i] * 10 + v; } */
static void k_fill(struct dbl_launch *l)
{
    int v = ARG(l, int, 1);
    size_t m = touched(l, ARG(l, int, 2));
    int *p = dbl_dev(l, ARG(l, CUdeviceptr, 0), m * sizeof(int));
    if (m == 0 || !p)
        return;
    for (size_t i = 0; i < m; i++)
        p[i] = p[i] * 10 + v;
}

/* __global__ void hello(int base)
 * { printf("sluice-printf block %d thread %d value %d\n", blockIdx.x, threadIdx.x,
 *          base + (int)(blockIdx.x * blockDim.x + threadIdx.x)); } */
static void k_hello(struct dbl_launch *l)
{
    int base = ARG(l, int, 0);
    for (unsigned b = 0; b < l->grid[0]; b++)
        for (unsigned t = 0; t < l->block[0]; t++)
            dbl_printf("sluice-printf block %u thread %u value %d\n", b, t,
                       base + (int)(b * l->block[0] + t));
}

/* __global__ void inc(int *p, int n) { if (i < n) p[i] += 1; } */
static void k_inc(struct dbl_launch *l)
{
    size_t m = touched(l, ARG(l, int, 1));
    int *p = dbl_dev(l, ARG(l, CUdeviceptr, 0), m * sizeof(int));
    if (m == 0 || !p)
        return;
    for (size_t i = 0; i < m; i++)
        p[i] += 1;
}

/* __global__ void check_below(const int *p, int limit, int n)
 * { if (i < n) assert(p[i] < limit); } (tests/cuda/device_assert.cu): each failing thread's
 * message to fd 2 as the driver writes it (the file and line are the program's), and the launch
 * fails with CUDA_ERROR_ASSERT, sticky as on a GPU. */
static void k_check_below(struct dbl_launch *l)
{
    int limit = ARG(l, int, 1);
    size_t m = touched(l, ARG(l, int, 2));
    const int *p = dbl_dev(l, ARG(l, CUdeviceptr, 0), m * sizeof(int));
    for (size_t i = 0; p && i < m; i++)
        if (p[i] >= limit) {
            dprintf(STDERR_FILENO,
                    "device_assert.cu:19: void check_below(const int *, int, int): block: "
                    "[%zu,0,0], thread: [%zu,0,0] Assertion `p[i] < limit` failed.\n",
                    i / l->block[0], i % l->block[0]);
            l->status = CUDA_ERROR_ASSERT;
        }
}

/* tests/bench/cuda_bench.cu's kernels: empty_kernel() and matmul(a, b, c, n) (plumbing only) */
static void k_nothing(struct dbl_launch *l)
{
    (void)l;
}

/* tests/cuda/texture_objects.cu: 2D launches over a w x h float array (point sampling at texel
 * centres reads texel (x, y); clamp addressing never matters inside the array). */
static void k_fetch2d(struct dbl_launch *l)
{
    size_t pitch, aw, ah, elem;
    int w = ARG(l, int, 2), h = ARG(l, int, 3);
    unsigned char *a = dbl_object_array(ARG(l, unsigned long long, 0), &pitch, &aw, &ah, &elem);
    if (!a || elem != sizeof(float) || w <= 0 || h <= 0 || (size_t)w > aw || (size_t)h > ah)
        return;
    size_t tw = (size_t)l->grid[0] * l->block[0], th = (size_t)l->grid[1] * l->block[1];
    size_t mw = (size_t)w < tw ? (size_t)w : tw, mh = (size_t)h < th ? (size_t)h : th;
    float *out = dbl_dev(l, ARG(l, CUdeviceptr, 1), (size_t)w * mh * sizeof(float));
    if (!out)
        return;
    for (size_t y = 0; y < mh; y++)
        for (size_t x = 0; x < mw; x++)
            memcpy(&out[y * (size_t)w + x], a + y * pitch + x * sizeof(float), sizeof(float));
}

static void k_surfwrite(struct dbl_launch *l)
{
    size_t pitch, aw, ah, elem;
    int w = ARG(l, int, 1), h = ARG(l, int, 2);
    unsigned char *a = dbl_object_array(ARG(l, unsigned long long, 0), &pitch, &aw, &ah, &elem);
    if (!a || elem != sizeof(float) || w <= 0 || h <= 0 || (size_t)w > aw || (size_t)h > ah)
        return;
    size_t tw = (size_t)l->grid[0] * l->block[0], th = (size_t)l->grid[1] * l->block[1];
    size_t mw = (size_t)w < tw ? (size_t)w : tw, mh = (size_t)h < th ? (size_t)h : th;
    for (size_t y = 0; y < mh; y++)
        for (size_t x = 0; x < mw; x++) {
            float v = (float)(y * (size_t)w + x) * 2.0f;
            memcpy(a + y * pitch + x * sizeof(float), &v, sizeof v);
        }
}

/* __global__ void mapflag(int *flag, int *out)
 * { if (i == 0) { out[0] = flag[0] * 2; flag[1] = flag[0] + 1000; } } */
static void k_mapflag(struct dbl_launch *l)
{
    int *flag = dbl_dev(l, ARG(l, CUdeviceptr, 0), 2 * sizeof(int));
    int *out = dbl_dev(l, ARG(l, CUdeviceptr, 1), sizeof(int));
    if (!flag || !out || threads_x(l) == 0)
        return;
    out[0] = flag[0] * 2;
    flag[1] = flag[0] + 1000;
}

/* tests/cuda/gpu_time.cu and share_loop.cu:
 * __global__ void spin(long long cycles, unsigned long long *ns)
 * { thread 0 of block 0 spins for `cycles` clock64() cycles, then adds the %globaltimer
 *   nanoseconds it took to *ns }
 * Its simulated duration is cycles at the double's clock rate (timing.c), and *ns gets exactly
 * that: TEST DOUBLE figures, never a GPU result. */
static double spin_us(const struct dbl_launch *l)
{
    long long cycles = ARG(l, long long, 0);
    return cycles > 0 ? (double)cycles * 1000.0 / (double)DBL_CLOCK_RATE_KHZ : 0.0;
}

static void k_spin(struct dbl_launch *l)
{
    unsigned long long *ns = dbl_dev(l, ARG(l, CUdeviceptr, 1), sizeof *ns);
    if (ns)
        *ns += (unsigned long long)(spin_us(l) * 1000.0 + 0.5);
}

/* tests/cuda/graph_cond.cu: __global__ void set_cond(cudaGraphConditionalHandle h, const int *f)
 * { cudaGraphSetConditional(h, *f); } (one thread) */
static void k_set_cond(struct dbl_launch *l)
{
    const int *f = dbl_dev(l, ARG(l, CUdeviceptr, 1), sizeof(int));
    if (f)
        dbl_cond_set(l, ARG(l, unsigned long long, 0), (unsigned)*f);
}

/* __global__ void count_down(cudaGraphConditionalHandle h, int *counter)
 * { if (--*counter <= 0) cudaGraphSetConditional(h, 0); } (one thread) */
static void k_count_down(struct dbl_launch *l)
{
    int *c = dbl_dev(l, ARG(l, CUdeviceptr, 1), sizeof(int));
    if (c && --*c <= 0)
        dbl_cond_set(l, ARG(l, unsigned long long, 0), 0);
}

/* tests/cuda/managed_memory.cu: struct List { int n; int *data; };
 * __global__ void sum_list(const List *l, int *out) { thread 0: *out = sum of l->data[0..n) }
 * (the list and its data are managed memory: a pointer read from device memory) */
static void k_sum_list(struct dbl_launch *l)
{
    struct list {
        int n;
        CUdeviceptr data;
    };
    const struct list *li = dbl_dev(l, ARG(l, CUdeviceptr, 0), sizeof *li);
    int *out = dbl_dev(l, ARG(l, CUdeviceptr, 1), sizeof(int));
    if (!li || !out || threads_x(l) == 0 || li->n < 0)
        return;
    const int *data = dbl_dev(l, li->data, (size_t)li->n * sizeof(int));
    if (li->n && !data)
        return;
    int s = 0;
    for (int i = 0; i < li->n; i++)
        s += data[i];
    *out = s;
}

const struct dbl_kernel dbl_kernels[] = {
    {"_Z4vaddPKfS0_Pfi", 4, {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, 5.0, k_vadd, NULL},
    {"_Z5scalePffi", 3, {{0, 8}, {8, 4}, {12, 4}}, 4.0, k_scale, NULL},
    {"_Z6lookupPii", 2, {{0, 8}, {8, 4}}, 3.0, k_lookup, NULL},
    {"_Z4fillPiii", 3, {{0, 8}, {8, 4}, {12, 4}}, 2.0, k_fill, NULL},
    {"_Z5helloi", 1, {{0, 4}}, 10.0, k_hello, NULL},
    {"_Z3incPii", 2, {{0, 8}, {8, 4}}, 1.5, k_inc, NULL},
    {"_Z12empty_kernelv", 0, {{0, 0}}, 1.0, k_nothing, NULL},
    {"_Z6matmulPKfS0_Pfi", 4, {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, 50.0, k_nothing, NULL},
    {"_Z7fetch2dyPfii", 4, {{0, 8}, {8, 8}, {16, 4}, {20, 4}}, 3.0, k_fetch2d, NULL},
    {"_Z9surfwriteyii", 3, {{0, 8}, {8, 4}, {12, 4}}, 3.0, k_surfwrite, NULL},
    {"_Z8set_condyPKi", 2, {{0, 8}, {8, 8}}, 1.0, k_set_cond, NULL},
    {"_Z10count_downyPi", 2, {{0, 8}, {8, 8}}, 1.0, k_count_down, NULL},
    {"_Z4spinxPy", 2, {{0, 8}, {8, 8}}, 0.0, k_spin, spin_us},
    {"_Z7mapflagPiS_", 2, {{0, 8}, {8, 8}}, 1.0, k_mapflag, NULL},
    {"_Z8sum_listPK4ListPi", 2, {{0, 8}, {8, 8}}, 2.0, k_sum_list, NULL},
    {"_Z11check_belowPKiii", 3, {{0, 8}, {8, 4}, {12, 4}}, 1.0, k_check_below, NULL},
};
const size_t dbl_kernel_count = sizeof dbl_kernels / sizeof dbl_kernels[0];

const struct dbl_global dbl_globals[] = {
    {"d_table", 16 * sizeof(int)},
    {"d_count", sizeof(int)},
};
const size_t dbl_global_count = sizeof dbl_globals / sizeof dbl_globals[0];

void dbl_printf(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(STDOUT_FILENO, buf + off, len - off);
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}
