/* slLoadImageAs (backend/api/image_as.c), the load without a reply, against a fake driver table:
 * the guest's ids become the library's and its kernels' (a library and its kernels dropped
 * together), and every bad request leaves nothing behind: ids without the guest bit, of another
 * kind or already used, names that do not match the ids, a name the driver does not know, no
 * bytes (each undone load unloaded). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "session/devices.h"
#include "session/handles.h"
#include "session/session.h"
#include "session/state.h"
#include "sluice/backend_dispatch.h"
#include "sluice/backend_handlers.h"

static struct be_devices no_devs = {13000, 0, NULL};
static int loaded, unloaded;

static CUresult fake_load(CUlibrary *lib, const void *code, CUjit_option *jo, void **jv, unsigned n,
                          CUlibraryOption *lo, void **lv, unsigned nl)
{
    (void)code, (void)jo, (void)jv, (void)n, (void)lo, (void)lv, (void)nl;
    loaded++;
    *lib = (CUlibrary)(uintptr_t)0x1100;
    return CUDA_SUCCESS;
}

static CUresult fake_unload(CUlibrary lib)
{
    assert_ptr_equal(lib, (void *)0x1100);
    unloaded++;
    return CUDA_SUCCESS;
}

/* Kernels named k<digit> exist: native 0x2000 + the digit. */
static CUresult fake_get_kernel(CUkernel *k, CUlibrary lib, const char *name)
{
    (void)lib;
    if (name[0] != 'k' || name[1] < '0' || name[1] > '9' || name[2])
        return CUDA_ERROR_NOT_FOUND;
    *k = (CUkernel)(uintptr_t)(0x2000 + name[1] - '0');
    return CUDA_SUCCESS;
}

static const char image[] = ".version 8.0\n.target sm_90\n.address_size 64\n";

static uint64_t gid(enum sl_handle_kind kind, uint64_t n)
{
    return (uint64_t)kind << 56 | SL_WIRE_GUEST_ID | n;
}

/* One slLoadImageAs of the PTX image as a library: names (NUL-separated, names_len bytes) for
 * the n kernel ids. */
static CUresult load_as(sl_be_session *s, const struct sl_driver_api *api, uint64_t lib,
                        const char *names, size_t names_len, uint64_t *kids, size_t n,
                        int with_bytes)
{
    uint8_t sha[32];
    unsigned mdlen = 0;
    EVP_Digest(image, sizeof image, sha, &mdlen, EVP_sha256(), NULL);
    Sluice__Cuda__SlLoadImageAsRequest rq = SLUICE__CUDA__SL_LOAD_IMAGE_AS_REQUEST__INIT;
    rq.sha256 = (ProtobufCBinaryData){32, sha};
    rq.size = sizeof image;
    rq.target = 2;
    rq.format = 4;
    rq.handle = lib;
    rq.kernel_names = (ProtobufCBinaryData){names_len, (uint8_t *)names};
    rq.n_kernel_handles = n;
    rq.kernel_handles = kids;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_slLoadImageAs;
    call.args_case = SLUICE__WIRE__CALL__ARGS_SL_LOAD_IMAGE_AS;
    call.sl_load_image_as = &rq;
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    struct sl_be_call c = {.s = s,
                           .api = api,
                           .call = &call,
                           .reply = &reply,
                           .in = with_bytes ? (const uint8_t *)image : NULL,
                           .in_len = with_bytes ? sizeof image : 0};
    CUresult rc = be_h_slLoadImageAs(&c);
    sl_be_reply_clear(&reply);
    return rc;
}

static void test_guest_ids(void **state)
{
    (void)state;
    struct sl_driver_api api = {0};
    api.cuLibraryLoadData = fake_load;
    api.cuLibraryUnload = fake_unload;
    api.cuLibraryGetKernel = fake_get_kernel;
    sl_be_session *s = be_session_new(1, &api, &no_devs);
    assert_non_null(s);
    void *n = NULL;
    uint64_t lib = gid(SL_H_LIBRARY, 1);
    uint64_t kids[2] = {gid(SL_H_KERNEL, 2), gid(SL_H_KERNEL, 3)};
    assert_int_equal(load_as(s, &api, lib, "k1\0k2", 6, kids, 2, 1), CUDA_SUCCESS);
    assert_int_equal(sl_be_handle_get(s, SL_H_LIBRARY, lib, &n), CUDA_SUCCESS);
    assert_ptr_equal(n, (void *)0x1100);
    assert_int_equal(sl_be_handle_get(s, SL_H_KERNEL, kids[1], &n), CUDA_SUCCESS);
    assert_ptr_equal(n, (void *)0x2002);
    assert_int_equal(sl_be_handle_get(s, SL_H_FUNCTION, kids[0], &n), CUDA_SUCCESS);

    /* the same library id again: refused, the second load undone */
    uint64_t more[1] = {gid(SL_H_KERNEL, 4)};
    int before = unloaded;
    assert_int_equal(load_as(s, &api, lib, "k3", 3, more, 1, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(unloaded, before + 1);
    assert_int_equal(sl_be_handle_get(s, SL_H_KERNEL, more[0], &n), CUDA_ERROR_INVALID_HANDLE);

    /* a kernel id already used, of another kind, without the guest bit, or zero */
    uint64_t lib2 = gid(SL_H_LIBRARY, 5);
    uint64_t bad[4] = {kids[0], gid(SL_H_FUNCTION, 6), (uint64_t)SL_H_KERNEL << 56 | 7,
                       gid(SL_H_KERNEL, 0)};
    for (int i = 0; i < 4; i++) {
        before = unloaded;
        assert_int_equal(load_as(s, &api, lib2, "k4", 3, &bad[i], 1, 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(unloaded, before + 1);
        assert_int_equal(sl_be_handle_get(s, SL_H_LIBRARY, lib2, &n), CUDA_ERROR_INVALID_HANDLE);
    }
    /* the earlier library and its kernels are untouched */
    assert_int_equal(sl_be_handle_get(s, SL_H_KERNEL, kids[0], &n), CUDA_SUCCESS);

    /* a name the driver lacks: undone as a whole, the kernel found before it too */
    uint64_t two[2] = {gid(SL_H_KERNEL, 8), gid(SL_H_KERNEL, 9)};
    assert_int_equal(load_as(s, &api, lib2, "k5\0zz", 6, two, 2, 1), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(sl_be_handle_get(s, SL_H_KERNEL, two[0], &n), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(sl_be_handle_get(s, SL_H_LIBRARY, lib2, &n), CUDA_ERROR_INVALID_HANDLE);

    /* names that do not match the ids, and no bytes: refused before the driver */
    int loads = loaded;
    assert_int_equal(load_as(s, &api, lib2, "k5", 3, two, 2, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(load_as(s, &api, lib2, "k5\0\0k6", 7, two, 2, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(load_as(s, &api, lib2, "k5\0k6", 5, two, 2, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(load_as(s, &api, lib2, "k5\0k6", 6, two, 2, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(loaded, loads);

    /* dropping the library drops its kernels */
    sl_be_handle_drop(s, SL_H_LIBRARY, lib);
    assert_int_equal(sl_be_handle_get(s, SL_H_KERNEL, kids[0], &n), CUDA_ERROR_INVALID_HANDLE);
    be_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guest_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
