/* Unit tests (no GPU, no driver: a fake driver table) of the image checks made before the
 * driver parses anything a guest sent (backend/api/module.c): module images too short to hold the
 * magic they claim, and every input type of the JIT linker (cuLinkAddData_v2, backend/api/link.c),
 * which gets the same checks as a module load (docs/security.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session/bulk_pool.h"
#include "api/module.h"
#include "bounds.h"
#include "session/devices.h"
#include "session/session.h"
#include "session/state.h"
#include "sluice/backend_dispatch.h"

static struct be_devices no_devs = {13000, 0, NULL};

/* An image in a heap block of exactly its size: reading past it is an ASan report. */
static uint8_t *exact(const void *p, size_t n)
{
    uint8_t *b = malloc(n);
    memcpy(b, p, n);
    return b;
}

static void test_short_images(void **state)
{
    (void)state;
    uint8_t *elf3 = exact("\x7f"
                          "EL",
                          3); /* three bytes of an ELF magic of four */
    assert_int_equal(be_image_validate(elf3, 3, 3), CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(be_link_input_validate(elf3, 3, CU_JIT_INPUT_CUBIN), CUDA_ERROR_INVALID_IMAGE);
    free(elf3);
    uint8_t *one = exact("\x7f", 1);
    for (uint32_t f = 1; f <= 4; f++)
        assert_int_equal(be_image_validate(one, 1, f), CUDA_ERROR_INVALID_IMAGE);
    free(one);
}

/* A minimal ELF64 object: the header only, no sections, no segments. */
static void elf_header(uint8_t out[64])
{
    memset(out, 0, 64);
    memcpy(out, ELFMAG, SELFMAG);
    out[EI_CLASS] = ELFCLASS64;
}

/* An ar archive holding one member of n bytes (its size written as size_text). */
static size_t archive(uint8_t *out, const uint8_t *member, size_t n, const char *size_text)
{
    memcpy(out, "!<arch>\n", 8);
    char hdr[61];
    snprintf(hdr, sizeof hdr, "%-16s%-12s%-6s%-6s%-8s%-10s`\n", "kernel.o/", "0", "0", "0", "644",
             size_text);
    memcpy(out + 8, hdr, 60);
    memcpy(out + 68, member, n);
    return 68 + n;
}

static void test_link_input_checks(void **state)
{
    (void)state;
    uint8_t elf[64];
    elf_header(elf);
    assert_int_equal(be_link_input_validate(elf, 64, CU_JIT_INPUT_CUBIN), CUDA_SUCCESS);
    assert_int_equal(be_link_input_validate(elf, 64, CU_JIT_INPUT_OBJECT), CUDA_SUCCESS);
    /* a section table past the end */
    uint64_t shoff = 1u << 20;
    uint16_t shnum = 3, shent = sizeof(Elf64_Shdr);
    memcpy(elf + 0x28, &shoff, 8);
    memcpy(elf + 0x3a, &shent, 2);
    memcpy(elf + 0x3c, &shnum, 2);
    assert_int_equal(be_link_input_validate(elf, 64, CU_JIT_INPUT_CUBIN), CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(be_link_input_validate(elf, 64, CU_JIT_INPUT_OBJECT),
                     CUDA_ERROR_INVALID_IMAGE);
    /* a fatbin whose files do not add up */
    uint8_t fb[64] = {0};
    uint32_t magic = 0xba55ed50u;
    uint16_t ver = 1, hs = 16;
    uint64_t fs = 48;
    memcpy(fb, &magic, 4);
    memcpy(fb + 4, &ver, 2);
    memcpy(fb + 6, &hs, 2);
    memcpy(fb + 8, &fs, 8);
    assert_int_equal(be_link_input_validate(fb, 64, CU_JIT_INPUT_FATBINARY), CUDA_SUCCESS);
    fs = 1u << 30;
    memcpy(fb + 8, &fs, 8);
    assert_int_equal(be_link_input_validate(fb, 64, CU_JIT_INPUT_FATBINARY),
                     CUDA_ERROR_INVALID_IMAGE);
    /* PTX must end with its NUL */
    assert_int_equal(be_link_input_validate((const uint8_t *)".version 8.0", 12, CU_JIT_INPUT_PTX),
                     CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(be_link_input_validate((const uint8_t *)".version 8.0", 13, CU_JIT_INPUT_PTX),
                     CUDA_SUCCESS);
    /* a library: an archive of ELF objects, each member within it */
    uint8_t ok_elf[64], ar[256];
    elf_header(ok_elf);
    size_t n = archive(ar, ok_elf, 64, "64");
    assert_int_equal(be_link_input_validate(ar, n, CU_JIT_INPUT_LIBRARY), CUDA_SUCCESS);
    n = archive(ar, ok_elf, 64, "6400"); /* a member that says it is longer than the archive */
    assert_int_equal(be_link_input_validate(ar, n, CU_JIT_INPUT_LIBRARY), CUDA_ERROR_INVALID_IMAGE);
    n = archive(ar, (const uint8_t *)"not an object, just text.........", 32, "32");
    assert_int_equal(be_link_input_validate(ar, n, CU_JIT_INPUT_LIBRARY), CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(be_link_input_validate(ar, 7, CU_JIT_INPUT_LIBRARY), CUDA_ERROR_INVALID_IMAGE);
    /* NVVM IR cannot be checked: refused; an unknown type is a bad value */
    assert_int_equal(be_link_input_validate(elf, 64, CU_JIT_INPUT_NVVM), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(be_link_input_validate(elf, 64, 77), CUDA_ERROR_INVALID_VALUE);
}

/* ---------------------------------------------------------------- through the handler */

static int added; /* inputs that reached the fake driver */

static CUresult f_link_create(unsigned n, CUjit_option *o, void **v, CUlinkState *st)
{
    (void)n, (void)o, (void)v;
    *st = (CUlinkState)0x1234;
    return CUDA_SUCCESS;
}

static CUresult f_link_add(CUlinkState st, CUjitInputType t, void *data, size_t size,
                           const char *name, unsigned n, CUjit_option *o, void **v)
{
    (void)st, (void)t, (void)data, (void)size, (void)name, (void)n, (void)o, (void)v;
    added++;
    return CUDA_SUCCESS;
}

static CUresult f_link_destroy(CUlinkState st)
{
    (void)st;
    return CUDA_SUCCESS;
}

static CUresult run(sl_be_session *s, const struct sl_driver_api *api, Sluice__Wire__Call *call,
                    const void *bulk, size_t blen, uint64_t *state_out)
{
    Sluice__Wire__Reply reply = SLUICE__WIRE__REPLY__INIT;
    struct sl_be_call c = {
        .s = s, .api = api, .call = call, .reply = &reply, .in = bulk, .in_len = blen};
    CUresult rc = sl_be_dispatch(sl_be_table, &c);
    if (state_out && rc == CUDA_SUCCESS)
        *state_out = reply.cu_link_create_v2->state_out;
    if (rc != CUDA_SUCCESS)
        print_message("detail: %s\n", reply.detail ? reply.detail : "");
    be_bulk_free(c.out); /* a slot (session/bulk_pool.c) or malloc'd */
    sl_be_reply_clear(&reply);
    return rc;
}

static CUresult add(sl_be_session *s, const struct sl_driver_api *api, uint64_t st, uint32_t type,
                    const void *data, size_t n)
{
    Sluice__Cuda__CuLinkAddDataV2Request rq = SLUICE__CUDA__CU_LINK_ADD_DATA_V2_REQUEST__INIT;
    rq.state = st;
    rq.type = type;
    rq.data = n;
    rq.size = n;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuLinkAddData_v2;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_LINK_ADD_DATA_V2;
    call.cu_link_add_data_v2 = &rq;
    uint8_t *b = exact(data, n);
    CUresult rc = run(s, api, &call, b, n, NULL);
    free(b);
    return rc;
}

static void test_link_add_data_checked(void **state)
{
    (void)state;
    struct sl_driver_api api = {0};
    api.cuLinkCreate_v2 = f_link_create;
    api.cuLinkAddData_v2 = f_link_add;
    api.cuLinkDestroy = f_link_destroy;
    sl_be_session *s = be_session_new(1, &api, &no_devs);
    Sluice__Cuda__CuLinkCreateV2Request cr = SLUICE__CUDA__CU_LINK_CREATE_V2_REQUEST__INIT;
    Sluice__Wire__Call call = SLUICE__WIRE__CALL__INIT;
    call.call_id = SL_CALL_cuLinkCreate_v2;
    call.args_case = SLUICE__WIRE__CALL__ARGS_CU_LINK_CREATE_V2;
    call.cu_link_create_v2 = &cr;
    uint64_t st = 0;
    assert_int_equal(run(s, &api, &call, NULL, 0, &st), CUDA_SUCCESS);
    assert_true(st != 0);
    uint8_t elf[64];
    elf_header(elf);
    assert_int_equal(add(s, &api, st, CU_JIT_INPUT_CUBIN, elf, sizeof elf), CUDA_SUCCESS);
    assert_int_equal(added, 1);
    /* refused before the driver sees them */
    assert_int_equal(add(s, &api, st, CU_JIT_INPUT_CUBIN,
                         "\x7f"
                         "EL",
                         3),
                     CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(add(s, &api, st, CU_JIT_INPUT_FATBINARY, elf, sizeof elf),
                     CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(add(s, &api, st, CU_JIT_INPUT_LIBRARY, elf, sizeof elf),
                     CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(add(s, &api, st, CU_JIT_INPUT_NVVM, elf, sizeof elf),
                     CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(add(s, &api, st, CU_JIT_INPUT_PTX, ".version 8.0", 12),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(added, 1);
    be_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_images),
        cmocka_unit_test(test_link_input_checks),
        cmocka_unit_test(test_link_add_data_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
