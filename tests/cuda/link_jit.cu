// link_jit: the JIT linker as ptxjit uses it. cuLinkCreate with wall time and info/error log
// options, cuLinkAddData of PTX (link_jit_kernel.cu compiled with nvcc -ptx, embedded), cuLinkComplete,
// cuModuleLoadData of the linked image, a launch of its kernel; cuLinkAddFile of the same PTX
// written to a file; and PTX that does not compile: an error with the error log filled.
#include "driver.cuh"
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "link_jit_ptx.h" // link_jit_ptx[]: link_jit_kernel.cu as PTX

static void run(const void *image, float f)
{
    CUmodule mod;
    CUfunction fn;
    CU(cuModuleLoadData(&mod, image));
    CU(cuModuleGetFunction(&fn, mod, "_Z5scalePffi"));
    const int n = 1000;
    std::vector<float> h(n);
    for (int i = 0; i < n; i++)
        h[i] = (float)i;
    CUdeviceptr d;
    CU(cuMemAlloc(&d, n * sizeof(float)));
    CU(cuMemcpyHtoD(d, h.data(), n * sizeof(float)));
    int nn = n;
    void *args[] = {&d, &f, &nn};
    CU(cuLaunchKernel(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
    CU(cuMemcpyDtoH(h.data(), d, n * sizeof(float)));
    for (int i = 0; i < n; i++)
        if (h[i] != (float)i * f)
            FAIL("element %d is %g, expected %g", i, h[i], (float)i * f);
    CU(cuMemFree(d));
    CU(cuModuleUnload(mod));
}

int main()
{
    g_test_name = "link_jit";
    CHECK(cudaFree(0)); // the primary context, current
    std::string ptx(reinterpret_cast<const char *>(link_jit_ptx), sizeof link_jit_ptx);

    // as ptxjit: wall time, both logs, verbose
    float walltime = -1.0f;
    char info[8192], error[8192];
    info[0] = error[0] = '\0';
    CUjit_option opts[6] = {CU_JIT_WALL_TIME,
                            CU_JIT_INFO_LOG_BUFFER,
                            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_LOG_VERBOSE};
    void *vals[6] = {&walltime, info, (void *)(long)sizeof info, error, (void *)(long)sizeof error,
                     (void *)1};
    CUlinkState st;
    CU(cuLinkCreate(6, opts, vals, &st));
    CU(cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)ptx.c_str(), ptx.size() + 1, "link_jit", 0,
                     nullptr, nullptr));
    void *cubin = nullptr;
    size_t size = 0;
    CU(cuLinkComplete(st, &cubin, &size));
    if (!cubin || !size)
        FAIL("cuLinkComplete gave no image");
    if (!info[0] || (size_t)vals[2] == 0 || (size_t)vals[2] > sizeof info)
        FAIL("the info log is empty (size option %zu)", (size_t)vals[2]);
    std::printf("link_jit: linked %zu bytes; info log: %.60s\n", size, info);
    run(cubin, 2.0f);
    CU(cuLinkDestroy(st));

    // the same PTX from a file
    char path[] = "/tmp/sluice-link-jit-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, ptx.c_str(), ptx.size()) != (ssize_t)ptx.size())
        FAIL("cannot write %s", path);
    close(fd);
    CU(cuLinkCreate(0, nullptr, nullptr, &st));
    CUresult rc = cuLinkAddFile(st, CU_JIT_INPUT_PTX, path, 0, nullptr, nullptr);
    unlink(path);
    CU(rc);
    CU(cuLinkComplete(st, &cubin, &size));
    run(cubin, 3.0f);
    CU(cuLinkDestroy(st));

    // PTX that does not compile: an error and the error log
    error[0] = '\0';
    CUjit_option eopts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *evals[2] = {error, (void *)(long)sizeof error};
    CU(cuLinkCreate(2, eopts, evals, &st));
    const char bad[] = "this is not PTX";
    rc = cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)bad, sizeof bad, "bad", 0, nullptr, nullptr);
    if (rc == CUDA_SUCCESS)
        FAIL("PTX that does not compile was accepted");
    if (!error[0])
        FAIL("no error log for PTX that does not compile (%d)", (int)rc);
    std::printf("link_jit: bad PTX -> %d, error log: %.60s\n", (int)rc, error);
    CU(cuLinkDestroy(st));
    pass();
    return 0;
}
