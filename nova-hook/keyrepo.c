/* The token signing key repository (keyrepo.h). */
#include "keyrepo.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct nh_keyrepo {
    sl_token_key *keys[NH_KEYREPO_MAX];
    int index[NH_KEYREPO_MAX];
    size_t n; /* sorted by index */
};

void nh_keyrepo_free(nh_keyrepo *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        sl_token_key_free(r->keys[i]);
    free(r);
}

const sl_token_key *nh_keyrepo_primary(const nh_keyrepo *r)
{
    return r->keys[r->n - 1];
}

int nh_keyrepo_primary_index(const nh_keyrepo *r)
{
    return r->index[r->n - 1];
}

size_t nh_keyrepo_count(const nh_keyrepo *r)
{
    return r->n;
}

const sl_token_key *nh_keyrepo_key(const nh_keyrepo *r, size_t i, int *index)
{
    if (i >= r->n)
        return NULL;
    if (index)
        *index = r->index[i];
    return r->keys[i];
}

/* A key file name: "0" or a decimal number without leading zeros, at most 9 digits. */
static int key_index(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 9 || strspn(name, "0123456789") != n || (n > 1 && name[0] == '0'))
        return -1;
    return atoi(name);
}

/* The indexes of the repository's key files, sorted; names starting with '.' are skipped
 * (temporary files of a rotation in progress). */
static sl_code list(const char *dir, int *idx, size_t *n, sl_error *e)
{
    *n = 0;
    struct stat st;
    if (stat(dir, &st) != 0)
        return sl_fail(e, SL_ERR_CONFIG, "token key repository %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return sl_fail(e, SL_ERR_CONFIG, "token key repository %s: not a directory", dir);
    if (st.st_mode & 077)
        return sl_fail(e, SL_ERR_CONFIG,
                       "token key repository %s: mode %03o lets others in; chmod 0700 it", dir,
                       (unsigned)(st.st_mode & 0777));
    DIR *d = opendir(dir);
    if (!d)
        return sl_fail(e, SL_ERR_CONFIG, "token key repository %s: %s", dir, strerror(errno));
    sl_code rc = SL_OK;
    struct dirent *de;
    while (rc == SL_OK && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        int i = key_index(de->d_name);
        if (i < 0)
            rc = sl_fail(e, SL_ERR_CONFIG,
                         "token key repository %s: '%.64s' is not a key (files are named 0, "
                         "1, 2, ...)",
                         dir, de->d_name);
        else if (*n == NH_KEYREPO_MAX)
            rc = sl_fail(e, SL_ERR_CONFIG, "token key repository %s: more than %d keys", dir,
                         NH_KEYREPO_MAX);
        else
            idx[(*n)++] = i;
    }
    closedir(d);
    for (size_t a = 1; a < *n; a++) /* insertion sort: a handful of keys */
        for (size_t b = a; b > 0 && idx[b - 1] > idx[b]; b--) {
            int t = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = t;
        }
    return rc;
}

static sl_code load_key(const char *dir, int index, sl_token_key **out, sl_error *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%d", dir, index);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return sl_fail(e, SL_ERR_CONFIG, "token key %s: not a regular file", path);
    if (st.st_mode & 077)
        return sl_fail(e, SL_ERR_CONFIG, "token key %s: mode %03o lets others read it; chmod 0600",
                       path, (unsigned)(st.st_mode & 0777));
    sl_code rc = sl_token_key_load(path, out, e);
    if (rc == SL_OK && !sl_token_key_is_private(*out)) {
        sl_token_key_free(*out);
        *out = NULL;
        return sl_fail(e, SL_ERR_CONFIG,
                       "token key %s: a public key; the repository holds "
                       "private keys",
                       path);
    }
    return rc;
}

sl_code nh_keyrepo_load(const char *dir, nh_keyrepo **out, sl_error *e)
{
    *out = NULL;
    int idx[NH_KEYREPO_MAX];
    size_t n;
    sl_code rc = list(dir, idx, &n, e);
    if (rc != SL_OK)
        return rc;
    if (n < NH_KEYREPO_MIN_ACTIVE || idx[0] != 0)
        return sl_fail(e, SL_ERR_CONFIG,
                       "token key repository %s: needs a staged key 0 and a primary key "
                       "(sluice-registry token-keys setup)",
                       dir);
    nh_keyrepo *r = calloc(1, sizeof *r);
    if (!r)
        return sl_fail(e, SL_ERR_NOMEM, "token key repository: out of memory");
    for (size_t i = 0; rc == SL_OK && i < n; i++) {
        rc = load_key(dir, idx[i], &r->keys[i], e);
        if (rc == SL_OK) {
            r->index[i] = idx[i];
            r->n++;
        }
    }
    if (rc != SL_OK) {
        nh_keyrepo_free(r);
        return rc;
    }
    *out = r;
    return SL_OK;
}

sl_code nh_keyrepo_public_pem(const nh_keyrepo *r, char **pem, sl_error *e)
{
    size_t cap = 1, len = 0;
    char *out = malloc(cap);
    if (!out)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    out[0] = '\0';
    for (size_t i = 0; i < r->n; i++) {
        char *one;
        sl_code rc = sl_token_key_public_pem(r->keys[i], &one, e);
        if (rc != SL_OK) {
            free(out);
            return rc;
        }
        size_t m = strlen(one);
        char *grown = realloc(out, cap + m);
        if (!grown) {
            free(one);
            free(out);
            return sl_fail(e, SL_ERR_NOMEM, "out of memory");
        }
        out = grown;
        memcpy(out + len, one, m + 1);
        len += m;
        cap += m;
        free(one);
    }
    *pem = out;
    return SL_OK;
}

/* A fresh key written to DIR/.tmp-NAME (0600), then renamed to DIR/NAME. */
static sl_code write_new_key(const char *dir, int index, sl_error *e)
{
    sl_token_key *k;
    sl_code rc = sl_token_key_generate(&k, e);
    if (rc != SL_OK)
        return rc;
    char *pem = NULL;
    rc = sl_token_key_private_pem(k, &pem, e);
    sl_token_key_free(k);
    if (rc != SL_OK)
        return rc;
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%d", dir, index);
    snprintf(path, sizeof path, "%s/%d", dir, index);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t n = strlen(pem);
    int ok = fd >= 0 && write(fd, pem, n) == (ssize_t)n && fsync(fd) == 0;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    memset(pem, 0, n);
    free(pem);
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return sl_fail(e, SL_ERR_IO, "token key %s: cannot write: %s", path, strerror(err));
    }
    return SL_OK;
}

sl_code nh_keyrepo_setup(const char *dir, sl_error *e)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return sl_fail(e, SL_ERR_IO, "token key repository %s: cannot create: %s", dir,
                       strerror(errno));
    int idx[NH_KEYREPO_MAX];
    size_t n;
    sl_code rc = list(dir, idx, &n, e);
    if (rc != SL_OK)
        return rc;
    if (n > 0)
        return sl_fail(e, SL_ERR_CONFIG,
                       "token key repository %s: holds %zu keys already (rotate it instead)", dir,
                       n);
    if ((rc = write_new_key(dir, 0, e)) == SL_OK)
        rc = write_new_key(dir, 1, e);
    return rc;
}

sl_code nh_keyrepo_rotate(const char *dir, int max_active, int *primary, int *removed, sl_error *e)
{
    if (max_active < NH_KEYREPO_MIN_ACTIVE || max_active > NH_KEYREPO_MAX - 1)
        return sl_fail(e, SL_ERR_INVALID, "token keys: max active keys %d outside %d..%d",
                       max_active, NH_KEYREPO_MIN_ACTIVE, NH_KEYREPO_MAX - 1);
    nh_keyrepo *r;
    sl_code rc = nh_keyrepo_load(dir, &r, e); /* every key must be sound before we touch any */
    if (rc != SL_OK)
        return rc;
    int next = nh_keyrepo_primary_index(r) + 1;
    int idx[NH_KEYREPO_MAX];
    size_t n = r->n;
    memcpy(idx, r->index, sizeof idx[0] * n);
    nh_keyrepo_free(r);
    char from[4096], to[4096];
    snprintf(from, sizeof from, "%s/0", dir);
    snprintf(to, sizeof to, "%s/%d", dir, next);
    if (rename(from, to) != 0)
        return sl_fail(e, SL_ERR_IO, "token keys: cannot promote %s to %s: %s", from, to,
                       strerror(errno));
    if ((rc = write_new_key(dir, 0, e)) != SL_OK)
        return rc;
    /* keys now: 0, idx[1..n-1], next; drop the oldest secondaries beyond max_active */
    int gone = 0;
    size_t total = n + 1;
    for (size_t i = 1; i < n && total > (size_t)max_active; i++, total--, gone++) {
        snprintf(from, sizeof from, "%s/%d", dir, idx[i]);
        if (unlink(from) != 0)
            return sl_fail(e, SL_ERR_IO, "token keys: cannot remove %s: %s", from, strerror(errno));
    }
    if (primary)
        *primary = next;
    if (removed)
        *removed = gone;
    return SL_OK;
}
