// texture_objects: a 2D CUDA array filled and read back with 2D copies (host <-> array, and
// pitched device memory <-> array), texture and surface objects made on it and on linear and
// pitched device memory, then destroyed (the values are the driver's own, not ids).
#include "common.cuh"
#include <cstdlib>
#include <cstring>
#include <vector>

__global__ void fetch2d(cudaTextureObject_t t, float *out, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h)
        out[y * w + x] = tex2D<float>(t, x + 0.5f, y + 0.5f);
}

__global__ void surfwrite(cudaSurfaceObject_t s, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h)
        surf2Dwrite((float)(y * w + x) * 2.0f, s, x * (int)sizeof(float), y);
}

int main()
{
    g_test_name = "texture_objects";
    const int w = 64, h = 32;
    std::vector<float> in(w * h), out(w * h, -1.0f);
    for (int i = 0; i < w * h; i++)
        in[i] = (float)i * 0.5f;

    cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
    cudaArray_t arr;
    CHECK(cudaMallocArray(&arr, &cd, w, h, cudaArraySurfaceLoadStore));
    CHECK(cudaMemcpy2DToArray(arr, 0, 0, in.data(), w * sizeof(float), w * sizeof(float), h,
                              cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy2DFromArray(out.data(), w * sizeof(float), arr, 0, 0, w * sizeof(float), h,
                                cudaMemcpyDeviceToHost));
    for (int i = 0; i < w * h; i++)
        if (out[i] != in[i])
            FAIL("array round trip: element %d is %f, expected %f", i, out[i], in[i]);

    // pitched device memory <-> array, then back to the host
    float *pd;
    size_t pitch;
    CHECK(cudaMallocPitch((void **)&pd, &pitch, w * sizeof(float), h));
    CHECK(cudaMemcpy2DFromArray(pd, pitch, arr, 0, 0, w * sizeof(float), h,
                                cudaMemcpyDeviceToDevice));
    std::vector<float> out2(w * h, -1.0f);
    CHECK(cudaMemcpy2D(out2.data(), w * sizeof(float), pd, pitch, w * sizeof(float), h,
                       cudaMemcpyDeviceToHost));
    for (int i = 0; i < w * h; i++)
        if (out2[i] != in[i])
            FAIL("array -> pitched memory: element %d is %f, expected %f", i, out2[i], in[i]);

    cudaResourceDesc rd;
    std::memset(&rd, 0, sizeof rd);
    rd.resType = cudaResourceTypeArray;
    rd.res.array.array = arr;
    cudaTextureDesc td;
    std::memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
    td.filterMode = cudaFilterModePoint;
    td.readMode = cudaReadModeElementType;
    cudaTextureObject_t tex = 0, texl = 0, texp = 0;
    CHECK(cudaCreateTextureObject(&tex, &rd, &td, nullptr));
    cudaSurfaceObject_t surf = 0;
    CHECK(cudaCreateSurfaceObject(&surf, &rd));

    float *lin;
    CHECK(cudaMalloc(&lin, w * sizeof(float)));
    cudaResourceDesc rl;
    std::memset(&rl, 0, sizeof rl);
    rl.resType = cudaResourceTypeLinear;
    rl.res.linear.devPtr = lin;
    rl.res.linear.desc = cd;
    rl.res.linear.sizeInBytes = w * sizeof(float);
    CHECK(cudaCreateTextureObject(&texl, &rl, &td, nullptr));
    cudaResourceDesc rp;
    std::memset(&rp, 0, sizeof rp);
    rp.resType = cudaResourceTypePitch2D;
    rp.res.pitch2D.devPtr = pd;
    rp.res.pitch2D.desc = cd;
    rp.res.pitch2D.width = w;
    rp.res.pitch2D.height = h;
    rp.res.pitch2D.pitchInBytes = pitch;
    CHECK(cudaCreateTextureObject(&texp, &rp, &td, nullptr));
    if (!tex || !texl || !texp || !surf || tex == texl || tex == texp)
        FAIL("texture objects %llu %llu %llu, surface %llu", (unsigned long long)tex,
             (unsigned long long)texl, (unsigned long long)texp, (unsigned long long)surf);

    // the objects are the driver's values: kernels fetch through them
    float *fo;
    CHECK(cudaMalloc(&fo, w * h * sizeof(float)));
    dim3 blk(16, 16), grd((w + 15) / 16, (h + 15) / 16);
    fetch2d<<<grd, blk>>>(tex, fo, w, h);
    CHECK(cudaGetLastError());
    std::vector<float> fetched(w * h, -1.0f);
    CHECK(cudaMemcpy(fetched.data(), fo, w * h * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < w * h; i++)
        if (fetched[i] != in[i])
            FAIL("tex2D: element %d is %f, expected %f", i, fetched[i], in[i]);
    surfwrite<<<grd, blk>>>(surf, w, h);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy2DFromArray(out.data(), w * sizeof(float), arr, 0, 0, w * sizeof(float), h,
                                cudaMemcpyDeviceToHost));
    for (int i = 0; i < w * h; i++)
        if (out[i] != (float)i * 2.0f)
            FAIL("surf2Dwrite: element %d is %f, expected %f", i, out[i], (float)i * 2.0f);
    CHECK(cudaFree(fo));

    cudaTextureDesc back;
    std::memset(&back, 0x7f, sizeof back);
    CHECK(cudaGetTextureObjectTextureDesc(&back, tex));
    if (back.filterMode != cudaFilterModePoint || back.addressMode[0] != cudaAddressModeClamp)
        FAIL("texture descriptor read back: filter %d, address mode %d", (int)back.filterMode,
             (int)back.addressMode[0]);

    cudaResourceDesc rback;
    CHECK(cudaGetTextureObjectResourceDesc(&rback, tex));
    if (rback.resType != cudaResourceTypeArray || rback.res.array.array != arr)
        FAIL("texture resource read back: type %d, array %p (made on %p)", (int)rback.resType,
             (void *)rback.res.array.array, (void *)arr);
    CHECK(cudaGetSurfaceObjectResourceDesc(&rback, surf));
    if (rback.resType != cudaResourceTypeArray || rback.res.array.array != arr)
        FAIL("surface resource read back: array %p (made on %p)", (void *)rback.res.array.array,
             (void *)arr);

    // linear memory past the allocation is refused by Sluice (the driver itself accepts it)
    if (std::getenv("SLUICE_E2E_NATIVE") == nullptr) {
        cudaTextureObject_t bad = 0;
        rl.res.linear.sizeInBytes = 1 << 30;
        if (cudaCreateTextureObject(&bad, &rl, &td, nullptr) == cudaSuccess)
            FAIL("a texture over memory past the allocation was accepted through Sluice");
        (void)cudaGetLastError();
    }

    CHECK(cudaDestroyTextureObject(texp));
    CHECK(cudaDestroyTextureObject(texl));
    CHECK(cudaDestroySurfaceObject(surf));
    CHECK(cudaDestroyTextureObject(tex));
    CHECK(cudaFree(lin));
    CHECK(cudaFree(pd));
    CHECK(cudaFreeArray(arr));
    pass();
    return 0;
}
