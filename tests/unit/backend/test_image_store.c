/* The tenant's image store on disk (backend/session/image_store.c): an image comes back only as it
 * was stored, a damaged file is removed, the least recently used go beyond the bound, temporary
 * files no write will finish go, and without a folder nothing is kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "bounds.h"
#include "session/image_store.h"
#include "session/image_writer.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/sl-images-XXXXXX");
    assert_non_null(mkdtemp(dir));
    be_image_store_set_dir(dir);
    be_image_store_set_limit(BE_IMAGE_STORE_BYTES);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    be_image_store_set_dir(NULL);
    return 0;
}

static void image(uint8_t *p, size_t n, int seed, uint8_t sha[32])
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + i * 7);
    unsigned len = 0;
    assert_true(EVP_Digest(p, n, sha, &len, EVP_sha256(), NULL));
}

static void path_of(const uint8_t sha[32], char *out, size_t n)
{
    int k = snprintf(out, n, "%s/", dir);
    for (int i = 0; i < 32; i++)
        k += snprintf(out + k, n - (size_t)k, "%02x", sha[i]);
}

static void stored_image_comes_back(void **state)
{
    (void)state;
    uint8_t a[1000], sha[32];
    image(a, sizeof a, 1, sha);
    assert_null(be_image_store_get(sha, sizeof a)); /* not yet */
    be_image_store_put(sha, a, sizeof a);
    uint8_t *got = be_image_store_get(sha, sizeof a);
    assert_non_null(got);
    assert_memory_equal(got, a, sizeof a);
    free(got);
    assert_null(be_image_store_get(sha, sizeof a - 1)); /* another size: another image */
    char p[256];
    path_of(sha, p, sizeof p);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    be_image_store_put(sha, a, sizeof a); /* again: nothing changes */
    got = be_image_store_get(sha, sizeof a);
    assert_non_null(got);
    free(got);
}

/* An image handed to the writer thread is in the store once the writer settled, and the
 * caller's bytes may go at once (the writer has its own copy). */
static void image_stored_later(void **state)
{
    (void)state;
    uint8_t sha[32], *a = malloc(3000);
    assert_non_null(a);
    image(a, 3000, 5, sha);
    uint8_t keep[3000];
    memcpy(keep, a, sizeof keep);
    be_image_store_put_later(sha, a, 3000);
    free(a);
    assert_true(be_image_store_settle(10000));
    uint8_t *got = be_image_store_get(sha, 3000);
    assert_non_null(got);
    assert_memory_equal(got, keep, sizeof keep);
    free(got);
    assert_true(be_image_store_settle(0)); /* nothing left: at once */
}

static void damaged_file_is_removed(void **state)
{
    (void)state;
    uint8_t a[512], sha[32];
    image(a, sizeof a, 2, sha);
    be_image_store_put(sha, a, sizeof a);
    char p[256];
    path_of(sha, p, sizeof p);
    FILE *f = fopen(p, "r+b");
    assert_non_null(f);
    fseek(f, 100, SEEK_SET);
    fputc(a[100] ^ 0xff, f);
    fclose(f);
    assert_null(be_image_store_get(sha, sizeof a));
    assert_int_not_equal(access(p, F_OK), 0);
}

static void least_recently_used_go_first(void **state)
{
    (void)state;
    be_image_store_set_limit(2500);
    uint8_t a[1000], b[1000], c[1000], sa[32], sb[32], sc[32];
    image(a, sizeof a, 3, sa);
    image(b, sizeof b, 4, sb);
    image(c, sizeof c, 5, sc);
    be_image_store_put(sa, a, sizeof a);
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    be_image_store_put(sb, b, sizeof b);
    nanosleep(&pause, NULL);
    uint8_t *got = be_image_store_get(sa, sizeof a); /* a is used again: b is now the oldest */
    assert_non_null(got);
    free(got);
    nanosleep(&pause, NULL);
    be_image_store_put(sc, c, sizeof c);
    assert_null(be_image_store_get(sb, sizeof b));
    got = be_image_store_get(sa, sizeof a);
    assert_non_null(got);
    free(got);
    got = be_image_store_get(sc, sizeof c);
    assert_non_null(got);
    free(got);
    uint8_t big[3000], sbig[32]; /* larger than the bound: not kept */
    image(big, sizeof big, 6, sbig);
    be_image_store_put(sbig, big, sizeof big);
    assert_null(be_image_store_get(sbig, sizeof big));
}

/* A temporary file no write will finish goes with the next store's eviction scan: its writer is
 * gone (a worker killed mid-write), or it was last written long ago; one being written stays. */
static void abandoned_temporary_files_go(void **state)
{
    (void)state;
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    assert_true(child > 0);
    int status;
    assert_int_equal(waitpid(child, &status, 0), child); /* its pid is now no process's */
    char gone[128], stale[128], busy[128];
    snprintf(gone, sizeof gone, "%s/.tmp-%ld-0", dir, (long)child);
    snprintf(stale, sizeof stale, "%s/.tmp-%ld-1", dir, (long)getpid());
    snprintf(busy, sizeof busy, "%s/.tmp-%ld-2", dir, (long)getpid());
    const char *all[] = {gone, stale, busy};
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(all[i], "w");
        assert_non_null(f);
        fputs("half an image", f);
        fclose(f);
    }
    struct timespec old[2] = {{time(NULL) - BE_IMAGE_TMP_STALE_S - 60, 0},
                              {time(NULL) - BE_IMAGE_TMP_STALE_S - 60, 0}};
    assert_int_equal(utimensat(AT_FDCWD, stale, old, 0), 0);
    uint8_t a[100], sa[32];
    image(a, sizeof a, 9, sa);
    be_image_store_put(sa, a, sizeof a); /* a store, then its eviction scan */
    struct stat st;
    assert_int_not_equal(stat(gone, &st), 0);
    assert_int_not_equal(stat(stale, &st), 0);
    assert_int_equal(stat(busy, &st), 0);
}

static void without_a_folder_nothing_is_kept(void **state)
{
    (void)state;
    be_image_store_set_dir(NULL);
    uint8_t a[64], sha[32];
    image(a, sizeof a, 7, sha);
    be_image_store_put(sha, a, sizeof a);
    assert_null(be_image_store_get(sha, sizeof a));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(stored_image_comes_back, setup, teardown),
        cmocka_unit_test_setup_teardown(image_stored_later, setup, teardown),
        cmocka_unit_test_setup_teardown(damaged_file_is_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(least_recently_used_go_first, setup, teardown),
        cmocka_unit_test_setup_teardown(abandoned_temporary_files_go, setup, teardown),
        cmocka_unit_test_setup_teardown(without_a_folder_nothing_is_kept, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
