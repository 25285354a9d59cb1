/* Test helper of tests/packages: loads "libcuda.so.1" by its soname, as a CUDA program does
 * (the dynamic loader's search, ld.so.cache included), prints the file it got and calls
 * cuDriverGetVersion through it (its CUresult is printed: without enrollment it may be an
 * error). Runs inside the package test's container.
 * Exit status: 0 loaded and called, 1 not. */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>

typedef int (*get_version_fn)(int *);

int main(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "load_cuda: dlopen libcuda.so.1: %s\n", dlerror());
        return 1;
    }
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm) {
        fprintf(stderr, "load_cuda: dlinfo: %s\n", dlerror());
        return 1;
    }
    get_version_fn get = (get_version_fn)dlsym(h, "cuDriverGetVersion");
    if (!get) {
        fprintf(stderr, "load_cuda: %s has no cuDriverGetVersion\n", lm->l_name);
        return 1;
    }
    int v = 0;
    int rc = get(&v);
    printf("path=%s cuDriverGetVersion=%d version=%d\n", lm->l_name, rc, v);
    return 0;
}
