/* The guest's reader of kernels and parameter layouts (frontend/api/image_listing.c) on images
 * nvcc built from data/listing_kernels.cu and data/listing_big.cu (argv: the fatbin, the
 * relocatable cubin, the big-parameter fatbin): the layouts the C ABI gives each signature, no
 * device function listed, refusals (an architecture the image lacks, a parameter described
 * otherwise, a PTX image), and every truncation and every flipped byte read without a fault
 * (ASan in CI). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/image_listing.h"
#include "api/module.h"

static const char *paths[3];

struct blob {
    uint8_t *p;
    size_t len;
};

static struct blob load(const char *path)
{
    struct blob b = {0};
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    b.p = malloc((size_t)n);
    assert_non_null(b.p);
    assert_int_equal(fread(b.p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    b.len = (size_t)n;
    return b;
}

/* The index of kernel name in l, -1 when absent; *first its first parameter's index. */
static int find(const struct sl_fe_image_listing *l, const char *name, size_t *first)
{
    const char *n = (const char *)l->names;
    size_t at = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (strcmp(n, name) == 0) {
            *first = at;
            return (int)i;
        }
        at += l->counts[i];
        n += strlen(n) + 1;
    }
    return -1;
}

static void expect(const struct sl_fe_image_listing *l, const char *name, uint32_t k,
                   const uint64_t *offs, const uint64_t *sizes)
{
    size_t first = 0;
    int i = find(l, name, &first);
    if (i < 0)
        fail_msg("kernel %s not listed", name);
    assert_int_equal(l->counts[i], k);
    for (uint32_t j = 0; j < k; j++) {
        assert_int_equal(l->offsets[first + j], offs[j]);
        assert_int_equal(l->sizes[first + j], sizes[j]);
    }
}

static void check_kernels(const struct sl_fe_image_listing *l)
{
    assert_int_equal(l->n, 4); /* helper is a device function, not a kernel */
    expect(l, "k_none", 0, NULL, NULL);
    expect(l, "k_mixed", 5, (const uint64_t[]){0, 8, 16, 48, 56},
           (const uint64_t[]){8, 4, 32, 1, 8});
    expect(l, "k_char", 2, (const uint64_t[]){0, 8}, (const uint64_t[]){1, 8});
    expect(l, "_Z6k_tmplIsEvPT_S0_", 2, (const uint64_t[]){0, 8}, (const uint64_t[]){8, 2});
    size_t first;
    assert_int_equal(find(l, "_Z6helperi", &first), -1);
}

static void fatbin_lists_every_kernel(void **state)
{
    (void)state;
    struct blob b = load(paths[0]);
    struct sl_fe_image_listing l;
    const unsigned sm90[] = {90};
    assert_int_equal(sl_fe_image_list(b.p, b.len, SL_FE_IMAGE_FATBIN, sm90, 1, &l), 0);
    check_kernels(&l);
    sl_fe_image_listing_free(&l);
    /* two GPUs of the same kind: the same cubin serves both */
    const unsigned two[] = {90, 90};
    assert_int_equal(sl_fe_image_list(b.p, b.len, SL_FE_IMAGE_FATBIN, two, 2, &l), 0);
    sl_fe_image_listing_free(&l);
    free(b.p);
}

static void cubin_lists_every_kernel(void **state)
{
    (void)state;
    struct blob b = load(paths[1]);
    struct sl_fe_image_listing l;
    const unsigned sm90[] = {90};
    assert_int_equal(sl_fe_image_list(b.p, b.len, SL_FE_IMAGE_ELF, sm90, 1, &l), 0);
    check_kernels(&l);
    sl_fe_image_listing_free(&l);
    free(b.p);
}

static void refusals(void **state)
{
    (void)state;
    struct blob b = load(paths[0]), c = load(paths[1]), big = load(paths[2]);
    struct sl_fe_image_listing l;
    const unsigned sm80[] = {80}, mixed[] = {90, 80}, sm90[] = {90};
    /* no cubin for the GPU: the driver would compile the PTX, the backend decides */
    assert_int_equal(sl_fe_image_list(b.p, b.len, SL_FE_IMAGE_FATBIN, sm80, 1, &l), -1);
    assert_int_equal(sl_fe_image_list(b.p, b.len, SL_FE_IMAGE_FATBIN, mixed, 2, &l), -1);
    assert_int_equal(sl_fe_image_list(c.p, c.len, SL_FE_IMAGE_ELF, sm80, 1, &l), -1);
    /* a parameter over 4 KiB is described otherwise: the whole image is refused */
    assert_int_equal(sl_fe_image_list(big.p, big.len, SL_FE_IMAGE_FATBIN, sm90, 1, &l), -1);
    /* PTX, no GPU, no image */
    const char *ptx = ".version 8.0\n.target sm_90\n";
    assert_int_equal(sl_fe_image_list(ptx, strlen(ptx) + 1, SL_FE_IMAGE_PTX, sm90, 1, &l), -1);
    assert_int_equal(sl_fe_image_list(b.p, b.len, SL_FE_IMAGE_FATBIN, sm90, 0, &l), -1);
    assert_int_equal(sl_fe_image_list(NULL, 0, SL_FE_IMAGE_FATBIN, sm90, 1, &l), -1);
    free(b.p);
    free(c.p);
    free(big.p);
}

/* Every prefix and every byte flipped: an answer or a refusal, never a read outside (each copy
 * is exactly its length, so ASan sees any). */
static void damaged_images(void **state)
{
    (void)state;
    const unsigned sm90[] = {90};
    for (int which = 0; which < 2; which++) {
        struct blob b = load(paths[which]);
        enum sl_fe_image_format fmt = which ? SL_FE_IMAGE_ELF : SL_FE_IMAGE_FATBIN;
        struct sl_fe_image_listing l;
        for (size_t n = 0; n < b.len; n++) {
            uint8_t *cut = malloc(n ? n : 1);
            assert_non_null(cut);
            memcpy(cut, b.p, n);
            if (sl_fe_image_list(cut, n, fmt, sm90, 1, &l) == 0)
                sl_fe_image_listing_free(&l);
            free(cut);
        }
        uint8_t *flip = malloc(b.len);
        assert_non_null(flip);
        for (size_t i = 0; i < b.len; i++) {
            memcpy(flip, b.p, b.len);
            flip[i] ^= 0xff;
            if (sl_fe_image_list(flip, b.len, fmt, sm90, 1, &l) == 0)
                sl_fe_image_listing_free(&l);
        }
        free(flip);
        free(b.p);
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s FATBIN RDC_CUBIN BIG_FATBIN\n", argv[0]);
        return 2;
    }
    for (int i = 0; i < 3; i++)
        paths[i] = argv[i + 1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fatbin_lists_every_kernel),
        cmocka_unit_test(cubin_lists_every_kernel),
        cmocka_unit_test(refusals),
        cmocka_unit_test(damaged_images),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
