/* The daemon's token signing key (signer.h). */
#include "signer.h"

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "keyrepo.h"

struct nh_signer {
    pthread_mutex_t mu;
    char *repo_dir; /* NULL: one key file */
    char *key_file;
    sl_token_key *key; /* one key file */
    nh_keyrepo *repo;
    uint64_t stamp; /* the repository's state when it was loaded */
};

/* A digest of what a rotation (or a copy, or a chmod) changes: every entry's name, inode,
 * size, mode and change times. */
static uint64_t repo_stamp(const char *dir)
{
    uint64_t h = 1469598103934665603ULL;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &st) != 0)
            continue;
        uint64_t v = (uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec;
        v = v * 31 + (uint64_t)st.st_ctim.tv_sec * 1000000000ULL + (uint64_t)st.st_ctim.tv_nsec;
        v = v * 31 + ((uint64_t)st.st_size << 20) + (uint64_t)st.st_ino + st.st_mode;
        for (const char *p = de->d_name; *p; p++)
            v = v * 31 + (unsigned char)*p;
        h ^= v * 1099511628211ULL; /* order-independent: readdir's order is arbitrary */
    }
    closedir(d);
    return h;
}

static sl_code alloc(nh_signer **out, sl_error *e)
{
    nh_signer *s = calloc(1, sizeof *s);
    if (!s)
        return sl_fail(e, SL_ERR_NOMEM, "token signer: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return SL_OK;
}

sl_code nh_signer_open(const char *key_file, const char *repo_dir, nh_signer **out, sl_error *e)
{
    *out = NULL;
    if (!!(key_file && *key_file) == !!(repo_dir && *repo_dir))
        return sl_fail(e, SL_ERR_CONFIG,
                       "token signing: set exactly one of token_key and token_key_repository");
    nh_signer *s = NULL;
    sl_code rc = alloc(&s, e);
    if (rc != SL_OK)
        return rc;
    if (key_file && *key_file) {
        s->key_file = strdup(key_file);
        rc = sl_token_key_load(key_file, &s->key, e);
        if (rc == SL_OK && !sl_token_key_is_private(s->key))
            rc = sl_fail(e, SL_ERR_CONFIG, "token_key %s: a public key; the private key is needed",
                         key_file);
    } else {
        s->repo_dir = strdup(repo_dir);
        s->stamp = repo_stamp(repo_dir);
        rc = nh_keyrepo_load(repo_dir, &s->repo, e);
    }
    if (rc == SL_OK && !s->key_file && !s->repo_dir)
        rc = sl_fail(e, SL_ERR_NOMEM, "token signer: out of memory");
    if (rc != SL_OK) {
        nh_signer_free(s);
        return rc;
    }
    *out = s;
    return SL_OK;
}

sl_code nh_signer_from_key(sl_token_key *key, nh_signer **out, sl_error *e)
{
    sl_code rc = alloc(out, e);
    if (rc != SL_OK) {
        sl_token_key_free(key);
        return rc;
    }
    (*out)->key = key;
    return SL_OK;
}

void nh_signer_free(nh_signer *s)
{
    if (!s)
        return;
    sl_token_key_free(s->key);
    nh_keyrepo_free(s->repo);
    free(s->repo_dir);
    free(s->key_file);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

sl_code nh_signer_sign(nh_signer *s, const sl_token_claims *c, char **token, char *kid,
                       size_t kid_cap, sl_error *e)
{
    pthread_mutex_lock(&s->mu);
    const sl_token_key *k = s->repo ? nh_keyrepo_primary(s->repo) : s->key;
    sl_code rc = sl_token_sign(k, c, token, e);
    if (rc == SL_OK && kid)
        snprintf(kid, kid_cap, "%s", sl_token_key_id(k));
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int nh_signer_refresh(nh_signer *s, sl_error *e)
{
    if (!s->repo_dir)
        return 0;
    uint64_t now = repo_stamp(s->repo_dir);
    pthread_mutex_lock(&s->mu);
    int changed = now != s->stamp;
    pthread_mutex_unlock(&s->mu);
    if (!changed)
        return 0;
    nh_keyrepo *fresh;
    sl_code rc = nh_keyrepo_load(s->repo_dir, &fresh, e);
    pthread_mutex_lock(&s->mu);
    s->stamp = now; /* a broken state is reported once, not at every look */
    if (rc == SL_OK) {
        nh_keyrepo_free(s->repo);
        s->repo = fresh;
    }
    pthread_mutex_unlock(&s->mu);
    return rc == SL_OK ? 1 : -1;
}

void nh_signer_describe(nh_signer *s, char *out, size_t cap)
{
    pthread_mutex_lock(&s->mu);
    if (s->repo)
        snprintf(out, cap, "repository %s: primary key %d (kid %s), %zu keys", s->repo_dir,
                 nh_keyrepo_primary_index(s->repo), sl_token_key_id(nh_keyrepo_primary(s->repo)),
                 nh_keyrepo_count(s->repo));
    else
        snprintf(out, cap, "key %s (kid %s)", s->key_file ? s->key_file : "(in memory)",
                 sl_token_key_id(s->key));
    pthread_mutex_unlock(&s->mu);
}
