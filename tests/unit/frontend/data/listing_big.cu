// A kernel with a parameter beyond 4 KiB: nvcc describes it otherwise (KPARAM_INFO_V2), so the
// guest's reader refuses the image and the backend lists it (test_image_listing.c).
struct Big {
    char b[5000];
};

extern "C" __global__ void k_small(int *o) { o[0] = 1; }

extern "C" __global__ void k_big(Big b, int *o) { o[0] = b.b[4999]; }
