/* The token signing key repository (keyrepo.h) and the daemon's signer (signer.h): setup,
 * rotation as Keystone's fernet rotation (staged 0 becomes the primary, a new staged key, the
 * oldest secondaries go), the public bundle agents verify with (tokens signed before and after
 * a rotation both verify; the staged key is known before it signs), permissions and names
 * refused, a running signer picking up a rotation and keeping its keys when the repository is
 * broken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keyrepo.h"
#include "signer.h"

#define NOW 1800000000LL

typedef struct fx {
    char dir[64];
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/nh-keys-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    strcat(f->dir, "/repo");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    char p[128];
    for (int i = 0; i < 16; i++) {
        snprintf(p, sizeof p, "%s/%d", f->dir, i);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/junk", f->dir);
    unlink(p);
    rmdir(f->dir);
    *strrchr(f->dir, '/') = '\0';
    rmdir(f->dir);
    free(f);
    return 0;
}

/* The indexes present, as "0,1,2". */
static void present(const char *dir, char *out, size_t cap)
{
    out[0] = '\0';
    for (int i = 0; i < 16; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%d", dir, i);
        if (access(p, F_OK) == 0)
            snprintf(out + strlen(out), cap - strlen(out), "%s%d", out[0] ? "," : "", i);
    }
}

static char *token(nh_signer *s, char *kid)
{
    sl_token_claims c;
    memset(&c, 0, sizeof c);
    strcpy(c.iss, "sluice-nova-hook");
    strcpy(c.aud, SL_TOKEN_AUDIENCE);
    strcpy(c.sub, "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60");
    strcpy(c.project_id, "f241e906010e4917ae8153f4fb8aa021");
    sl_error e;
    assert_int_equal(sl_token_claims_stamp(&c, NOW, 600, &e), SL_OK);
    char *t = NULL;
    assert_int_equal(nh_signer_sign(s, &c, &t, kid, 32, &e), SL_OK);
    return t;
}

static sl_token_keyset *public_set(const char *dir)
{
    nh_keyrepo *r;
    sl_error e;
    assert_int_equal(nh_keyrepo_load(dir, &r, &e), SL_OK);
    char *pem;
    assert_int_equal(nh_keyrepo_public_pem(r, &pem, &e), SL_OK);
    assert_null(strstr(pem, "PRIVATE"));
    nh_keyrepo_free(r);
    sl_token_keyset *ks;
    assert_int_equal(sl_token_keyset_from_pem(pem, strlen(pem), "bundle", &ks, &e), SL_OK);
    free(pem);
    return ks;
}

static int verifies(const sl_token_keyset *ks, const char *t)
{
    sl_token_verify_opts o = {.now = NOW + 1, .skew = 30};
    sl_token_claims c;
    sl_error e;
    return sl_token_verify_keyset(ks, t, &o, &c, &e) == SL_OK;
}

static void setup_and_rotate(void **state)
{
    fx *f = *state;
    sl_error e;
    char have[64];
    assert_int_equal(nh_keyrepo_setup(f->dir, &e), SL_OK);
    present(f->dir, have, sizeof have);
    assert_string_equal(have, "0,1");
    struct stat st;
    assert_int_equal(stat(f->dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    char p[128];
    snprintf(p, sizeof p, "%s/1", f->dir);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(nh_keyrepo_setup(f->dir, &e), SL_ERR_CONFIG); /* holds keys already */

    nh_signer *s;
    assert_int_equal(nh_signer_open(NULL, f->dir, &s, &e), SL_OK);
    char kid1[32], kid2[32], kid3[32];
    char *t1 = token(s, kid1);
    sl_token_keyset *before = public_set(f->dir); /* what agents got before the rotation */
    assert_int_equal(sl_token_keyset_count(before), 2);
    assert_true(verifies(before, t1));

    int primary = 0, removed = -1;
    assert_int_equal(nh_keyrepo_rotate(f->dir, 3, &primary, &removed, &e), SL_OK);
    assert_int_equal(primary, 2);
    assert_int_equal(removed, 0);
    present(f->dir, have, sizeof have);
    assert_string_equal(have, "0,1,2");
    assert_int_equal(nh_signer_refresh(s, &e), 1);
    assert_int_equal(nh_signer_refresh(s, &e), 0); /* nothing changed since */
    char *t2 = token(s, kid2);
    assert_string_not_equal(kid1, kid2);
    /* the new primary was the staged key: agents with the old bundle verify its tokens */
    assert_true(verifies(before, t2));

    assert_int_equal(nh_keyrepo_rotate(f->dir, 3, &primary, &removed, &e), SL_OK);
    assert_int_equal(primary, 3);
    assert_int_equal(removed, 1); /* 1, the oldest secondary */
    present(f->dir, have, sizeof have);
    assert_string_equal(have, "0,2,3");
    assert_int_equal(nh_signer_refresh(s, &e), 1);
    char *t3 = token(s, kid3);
    sl_token_keyset *after = public_set(f->dir);
    assert_int_equal(sl_token_keyset_count(after), 3);
    assert_false(verifies(after, t1)); /* its key is gone */
    assert_true(verifies(after, t2));  /* a secondary now */
    assert_true(verifies(after, t3));
    char desc[256];
    nh_signer_describe(s, desc, sizeof desc);
    assert_non_null(strstr(desc, "primary key 3"));
    assert_non_null(strstr(desc, kid3));

    /* a broken repository (a key file others can read): the signer keeps its keys */
    snprintf(p, sizeof p, "%s/3", f->dir);
    assert_int_equal(chmod(p, 0644), 0);
    assert_int_equal(nh_signer_refresh(s, &e), -1);
    assert_non_null(strstr(e.msg, "chmod 0600"));
    char kid[32];
    free(token(s, kid));
    assert_string_equal(kid, kid3);
    assert_int_equal(nh_keyrepo_rotate(f->dir, 3, &primary, &removed, &e), SL_ERR_CONFIG);
    assert_int_equal(chmod(p, 0600), 0);
    assert_int_equal(nh_keyrepo_rotate(f->dir, 1, &primary, &removed, &e), SL_ERR_INVALID);

    free(t1);
    free(t2);
    free(t3);
    sl_token_keyset_free(before);
    sl_token_keyset_free(after);
    nh_signer_free(s);
}

static void refusals(void **state)
{
    fx *f = *state;
    sl_error e;
    nh_keyrepo *r;
    assert_int_equal(nh_keyrepo_load(f->dir, &r, &e), SL_ERR_CONFIG); /* missing */
    assert_int_equal(nh_keyrepo_setup(f->dir, &e), SL_OK);
    assert_int_equal(chmod(f->dir, 0755), 0);
    assert_int_equal(nh_keyrepo_load(f->dir, &r, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "chmod 0700"));
    assert_int_equal(chmod(f->dir, 0700), 0);
    char p[128];
    snprintf(p, sizeof p, "%s/junk", f->dir);
    FILE *j = fopen(p, "w");
    fclose(j);
    assert_int_equal(nh_keyrepo_load(f->dir, &r, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "junk"));
    unlink(p);
    snprintf(p, sizeof p, "%s/0", f->dir);
    unlink(p);
    assert_int_equal(nh_keyrepo_load(f->dir, &r, &e), SL_ERR_CONFIG); /* no staged key */
    assert_non_null(strstr(e.msg, "staged key 0"));
    nh_signer *s;
    assert_int_equal(nh_signer_open(NULL, NULL, &s, &e), SL_ERR_CONFIG);
    assert_int_equal(nh_signer_open("/etc/k", f->dir, &s, &e), SL_ERR_CONFIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(setup_and_rotate, setup, teardown),
        cmocka_unit_test_setup_teardown(refusals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
