/* Several token verification keys at once (sluice/token.h): a PEM bundle or a directory of
 * keys, a lookup by key id, verification with the key the token names. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sluice/token.h"

#define FILE_MAX (256 * 1024)

struct sl_token_keyset {
    sl_token_key *keys[SL_TOKEN_KEYSET_MAX];
    size_t n;
};

size_t sl_token_keyset_count(const sl_token_keyset *ks)
{
    return ks ? ks->n : 0;
}

const sl_token_key *sl_token_keyset_key(const sl_token_keyset *ks, size_t i)
{
    return ks && i < ks->n ? ks->keys[i] : NULL;
}

const sl_token_key *sl_token_keyset_find(const sl_token_keyset *ks, const char *kid)
{
    for (size_t i = 0; ks && kid && i < ks->n; i++)
        if (!strcmp(sl_token_key_id(ks->keys[i]), kid))
            return ks->keys[i];
    return NULL;
}

void sl_token_keyset_free(sl_token_keyset *ks)
{
    if (!ks)
        return;
    for (size_t i = 0; i < ks->n; i++)
        sl_token_key_free(ks->keys[i]);
    free(ks);
}

/* Adds the keys of every PEM block of [pem, pem + len). */
static sl_code add_pem(sl_token_keyset *ks, const char *pem, size_t len, const char *what,
                       sl_error *e)
{
    static const char begin[] = "-----BEGIN ", end[] = "-----END ";
    size_t found = 0;
    const char *p = pem, *stop = pem + len;
    while (p < stop) {
        const char *b = memmem(p, (size_t)(stop - p), begin, sizeof begin - 1);
        if (!b)
            break;
        const char *x = memmem(b, (size_t)(stop - b), end, sizeof end - 1);
        const char *eol = x ? memchr(x, '\n', (size_t)(stop - x)) : NULL;
        const char *block_end = eol ? eol + 1 : stop;
        if (!x)
            return sl_fail(e, SL_ERR_CONFIG, "token keys %s: a PEM block without its END line",
                           what);
        sl_token_key *k;
        sl_code rc = sl_token_key_from_pem(b, (size_t)(block_end - b), &k, e);
        if (rc != SL_OK)
            return sl_fail(e, rc, "token keys %s: PEM block %zu is not an Ed25519 key", what,
                           found + 1);
        found++;
        if (sl_token_keyset_find(ks, sl_token_key_id(k))) {
            sl_token_key_free(k);
        } else if (ks->n == SL_TOKEN_KEYSET_MAX) {
            sl_token_key_free(k);
            return sl_fail(e, SL_ERR_CONFIG, "token keys %s: more than %d keys", what,
                           SL_TOKEN_KEYSET_MAX);
        } else {
            ks->keys[ks->n++] = k;
        }
        p = block_end;
    }
    if (!found)
        return sl_fail(e, SL_ERR_CONFIG, "token keys %s: no PEM key in it", what);
    return SL_OK;
}

static sl_code add_file(sl_token_keyset *ks, const char *path, sl_error *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return sl_fail(e, SL_ERR_CONFIG, "token keys %s: cannot open: %s", path, strerror(errno));
    char *buf = malloc(FILE_MAX);
    size_t n = buf ? fread(buf, 1, FILE_MAX, f) : 0;
    fclose(f);
    if (!buf)
        return sl_fail(e, SL_ERR_NOMEM, "token keys: out of memory");
    sl_code rc = n == FILE_MAX ? sl_fail(e, SL_ERR_CONFIG, "token keys %s: larger than %d bytes",
                                         path, FILE_MAX)
                               : add_pem(ks, buf, n, path, e);
    memset(buf, 0, n);
    free(buf);
    return rc;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static sl_code add_dir(sl_token_keyset *ks, const char *path, sl_error *e)
{
    DIR *d = opendir(path);
    if (!d)
        return sl_fail(e, SL_ERR_CONFIG, "token keys %s: cannot open: %s", path, strerror(errno));
    char *names[SL_TOKEN_KEYSET_MAX + 1];
    size_t n = 0;
    sl_code rc = SL_OK;
    struct dirent *de;
    while (rc == SL_OK && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char full[4096];
        struct stat st;
        snprintf(full, sizeof full, "%s/%s", path, de->d_name);
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == SL_TOKEN_KEYSET_MAX)
            rc = sl_fail(e, SL_ERR_CONFIG, "token keys %s: more than %d files", path,
                         SL_TOKEN_KEYSET_MAX);
        else if (!(names[n++] = strdup(full)))
            rc = sl_fail(e, SL_ERR_NOMEM, "token keys: out of memory");
    }
    closedir(d);
    if (rc == SL_OK && n == 0)
        rc = sl_fail(e, SL_ERR_CONFIG, "token keys %s: an empty directory", path);
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        if (rc == SL_OK && names[i])
            rc = add_file(ks, names[i], e);
        free(names[i]);
    }
    return rc;
}

sl_code sl_token_keyset_load(const char *path, sl_token_keyset **out, sl_error *e)
{
    *out = NULL;
    struct stat st;
    if (!path || stat(path, &st) != 0)
        return sl_fail(e, SL_ERR_CONFIG, "token keys %s: %s", path ? path : "(null)",
                       path ? strerror(errno) : "no path");
    sl_token_keyset *ks = calloc(1, sizeof *ks);
    if (!ks)
        return sl_fail(e, SL_ERR_NOMEM, "token keys: out of memory");
    sl_code rc = S_ISDIR(st.st_mode) ? add_dir(ks, path, e) : add_file(ks, path, e);
    if (rc != SL_OK) {
        sl_token_keyset_free(ks);
        return rc;
    }
    *out = ks;
    return SL_OK;
}

sl_code sl_token_keyset_from_pem(const char *pem, size_t len, const char *what,
                                 sl_token_keyset **out, sl_error *e)
{
    *out = NULL;
    sl_token_keyset *ks = calloc(1, sizeof *ks);
    if (!ks)
        return sl_fail(e, SL_ERR_NOMEM, "token keys: out of memory");
    sl_code rc = add_pem(ks, pem, len, what ? what : "(PEM)", e);
    if (rc != SL_OK) {
        sl_token_keyset_free(ks);
        return rc;
    }
    *out = ks;
    return SL_OK;
}

sl_code sl_token_verify_keyset(const sl_token_keyset *ks, const char *token,
                               const sl_token_verify_opts *opts, sl_token_claims *out, sl_error *e)
{
    if (!ks || !ks->n || !out)
        return sl_fail(e, SL_ERR_INVALID, "token verify: no keys");
    char kid[64];
    sl_code rc = sl_token_header_kid(token, kid, sizeof kid, e);
    if (rc != SL_OK)
        return rc;
    if (kid[0]) {
        const sl_token_key *k = sl_token_keyset_find(ks, kid);
        if (!k)
            return sl_fail(e, SL_ERR_TAMPERED,
                           "token signed by key %s, which is not among this host's %zu "
                           "verification keys",
                           kid, ks->n);
        return sl_token_verify(k, token, opts, out, e);
    }
    for (size_t i = 0; i < ks->n; i++) {
        rc = sl_token_verify(ks->keys[i], token, opts, out, e);
        if (rc != SL_ERR_TAMPERED)
            return rc;
    }
    return rc;
}
