/* Vendordata answers without HTTP: known and unknown instances, project mismatch, malformed
 * bodies; the token verified with the public key the agents hold; latency of one answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nh_testdb.h"
#include "store.h"
#include "vendordata.h"

#define NOW  1800000000LL
#define INST "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60"
#define PROJ "f241e906010e4917ae8153f4fb8aa021"
#define CA   "-----BEGIN CERTIFICATE-----\nconfigured\n-----END CERTIFICATE-----\n"

typedef struct fx {
    nh_testdb db;
    nh_store *s;
    sl_token_key *pub;
    nh_signer *signer;
    nh_vendordata vd;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    nh_testdb_make(&f->db);
    sl_error e;
    assert_int_equal(nh_store_open(f->db.url, 0, &f->s, &e), SL_OK);
    sl_token_key *priv;
    assert_int_equal(sl_token_key_generate(&priv, &e), SL_OK);
    char *pem;
    assert_int_equal(sl_token_key_public_pem(priv, &pem, &e), SL_OK);
    assert_int_equal(sl_token_key_from_pem(pem, strlen(pem), &f->pub, &e), SL_OK);
    free(pem);
    nh_agent_in a = {"gpu1", "tcp://192.0.2.1:7400", 8, "[]", "0.1", NULL};
    assert_int_equal(nh_store_register(f->s, &a, NOW, &e), SL_OK);
    assert_int_equal(nh_store_place(f->s, INST, PROJ, "g1.small", "gpu1", NOW, &e), SL_OK);
    assert_int_equal(nh_signer_from_key(priv, &f->signer, &e), SL_OK); /* takes priv */
    f->vd = (nh_vendordata){f->s, f->signer, "controller-1", "sluice-nova-hook", 600, CA};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    nh_store_close(f->s);
    nh_signer_free(f->signer);
    sl_token_key_free(f->pub);
    nh_testdb_drop(&f->db);
    free(f);
    return 0;
}

static void answer(fx *f, const char *body, nh_vd_answer *a)
{
    nh_vendordata_answer(&f->vd, body, strlen(body), NOW, a);
}

/* As nova/api/metadata/vendordata_dynamic.py builds it. */
static const char *nova_body(const char *inst, const char *proj, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "{\"project-id\": \"%s\", \"instance-id\": \"%s\", \"image-id\": "
             "\"fe55c69a-8b2e-4bbc-811a-9ad2023a0426\", \"user-data\": \"I2Nsb3VkLWNvbmZpZw==\", "
             "\"hostname\": \"moonbuggy\", \"metadata\": {\"secret\": \"s3cr3t\"}, "
             "\"boot-roles\": \"member,reader\"}",
             proj, inst);
    return buf;
}

static void known_instance_gets_token(void **state)
{
    fx *f = *state;
    char body[1024];
    nh_vd_answer a;
    answer(f, nova_body(INST, PROJ, body, sizeof body), &a);
    assert_int_equal(a.status, 200);
    json_error_t je;
    json_t *j = json_loads(a.body, 0, &je);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "ca")), CA);
    assert_string_equal(json_string_value(json_object_get(j, "enroll_endpoint")),
                        "tcp://192.0.2.1:7400");
    assert_int_equal(json_integer_value(json_object_get(j, "expires")), NOW + 600);
    const char *token = json_string_value(json_object_get(j, "token"));
    assert_non_null(token);
    sl_token_claims c;
    sl_error e;
    sl_token_verify_opts o = {.now = NOW + 10, .skew = 60, .issuer = "sluice-nova-hook"};
    assert_int_equal(sl_token_verify(f->pub, token, &o, &c, &e), SL_OK);
    assert_string_equal(c.sub, INST);
    assert_string_equal(c.project_id, PROJ);
    assert_int_equal(c.exp - c.iat, 600);
    o.now = NOW + 700; /* expired */
    assert_int_equal(sl_token_verify(f->pub, token, &o, &c, &e), SL_ERR_CERT_EXPIRED);
    /* nothing of user-data or metadata in the answer or the log line */
    assert_null(strstr(a.body, "s3cr3t"));
    assert_null(strstr(a.why, "s3cr3t"));
    assert_null(strstr(a.why, "I2Nsb3Vk"));
    json_decref(j);
    free(a.body);
}

static void per_host_ca_wins(void **state)
{
    fx *f = *state;
    sl_error e;
    nh_agent_in a = {"gpu1", "tcp://192.0.2.1:7400", 8, "[]", "0.1", "PER-HOST-CA"};
    assert_int_equal(nh_store_register(f->s, &a, NOW, &e), SL_OK);
    char body[1024];
    nh_vd_answer ans;
    answer(f, nova_body(INST, PROJ, body, sizeof body), &ans);
    assert_int_equal(ans.status, 200);
    assert_non_null(strstr(ans.body, "PER-HOST-CA"));
    free(ans.body);
}

static void others_get_empty_object(void **state)
{
    fx *f = *state;
    char body[1024];
    nh_vd_answer a;
    answer(f, nova_body("99999999-9a1c-4e27-8f34-1b2c3d4e5f60", PROJ, body, sizeof body), &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.body, "{}");
    free(a.body);
    /* the right instance claimed by another project */
    answer(f, nova_body(INST, "0000000000000000000000000000beef", body, sizeof body), &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.body, "{}");
    free(a.body);
}

static void malformed_bodies(void **state)
{
    fx *f = *state;
    const char *bad[] = {
        "",
        "{",
        "not json",
        "[1,2]",
        "\"a string\"",
        "{\"project-id\": \"" PROJ "\"}",
        "{\"instance-id\": \"" INST "\"}",
        "{\"instance-id\": 12, \"project-id\": \"" PROJ "\"}",
        "{\"instance-id\": \"../../etc\", \"project-id\": \"" PROJ "\"}",
        "{\"instance-id\": \"" INST "\", \"instance-id\": \"" INST "\", \"project-id\": \"" PROJ
        "\"}",
        NULL,
    };
    for (int i = 0; bad[i]; i++) {
        nh_vd_answer a;
        answer(f, bad[i], &a);
        assert_int_equal(a.status, 400);
        json_error_t je;
        json_t *j = json_loads(a.body, 0, &je);
        assert_true(json_is_object(j));
        json_decref(j);
        free(a.body);
    }
    /* an embedded NUL is not JSON */
    nh_vd_answer a;
    nh_vendordata_answer(&f->vd, "{\"a\":1}\0xx", 10, NOW, &a);
    assert_int_equal(a.status, 400);
    free(a.body);
}

/* A metadata value holding U+0000 (Nova passes it on as "\u0000") gets the token; an id
 * holding one is refused. */
static void nul_characters(void **state)
{
    fx *f = *state;
    char body[1024];
    nh_vd_answer a;
    snprintf(body, sizeof body,
             "{\"project-id\": \"%s\", \"instance-id\": \"%s\", \"metadata\": "
             "{\"note\": \"a\\u0000b\"}, \"hostname\": \"x\\u0000y\"}",
             PROJ, INST);
    answer(f, body, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.body, "\"token\""));
    free(a.body);
    snprintf(body, sizeof body, "{\"project-id\": \"%s\", \"instance-id\": \"%s\\u0000x\"}", PROJ,
             INST);
    answer(f, body, &a);
    assert_int_equal(a.status, 400);
    assert_non_null(strstr(a.why, "instance-id"));
    free(a.body);
}

static void answers_fast(void **state)
{
    fx *f = *state;
    char body[1024];
    nova_body(INST, PROJ, body, sizeof body);
    struct timespec t0, t1;
    enum { N = 200 };
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < N; i++) {
        nh_vd_answer a;
        answer(f, body, &a);
        assert_int_equal(a.status, 200);
        free(a.body);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us =
        ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3 / N;
    printf("vendordata answer on %s (lookup + Ed25519 token + its id stored durably): %.1f us "
           "per request\n",
           nh_testdb_engine(&f->db), us);
    assert_true(us < 50000.0); /* Nova waits 5 s (vendordata_dynamic_read_timeout) */
    /* every token issued is in the database, under its own id */
    int64_t n;
    sl_error e;
    assert_int_equal(nh_store_token_count(f->s, &n, &e), SL_OK);
    assert_int_equal(n, N);
}

/* A token id the database holds already is refused by its key, whichever nova-hook wrote it:
 * the store says "not unique" and writes nothing. */
static void token_ids_unique(void **state)
{
    fx *f = *state;
    nh_token_rec t = {
        "6f1e0f44-2f7a-4d4e-9d4c-0c1b2a3f4e5d", INST, PROJ, "controller-1", "kid", NOW, NOW + 600};
    int unique = -1;
    sl_error e;
    assert_int_equal(nh_store_token_issued(f->s, &t, &unique, &e), SL_OK);
    assert_int_equal(unique, 1);
    t.issuer_node = "controller-2";
    assert_int_equal(nh_store_token_issued(f->s, &t, &unique, &e), SL_OK);
    assert_int_equal(unique, 0);
    int64_t n;
    assert_int_equal(nh_store_token_count(f->s, &n, &e), SL_OK);
    assert_int_equal(n, 1);
    /* retention: expired tokens go (a day after expiry in the daemon) */
    nh_pruned p;
    assert_int_equal(nh_store_prune(f->s, 0, NOW + 601, &p, &e), SL_OK);
    assert_int_equal(p.tokens, 1);
    assert_int_equal(nh_store_token_count(f->s, &n, &e), SL_OK);
    assert_int_equal(n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(known_instance_gets_token, setup, teardown),
        cmocka_unit_test_setup_teardown(per_host_ca_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(others_get_empty_object, setup, teardown),
        cmocka_unit_test_setup_teardown(malformed_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(nul_characters, setup, teardown),
        cmocka_unit_test_setup_teardown(answers_fast, setup, teardown),
        cmocka_unit_test_setup_teardown(token_ids_unique, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
