/* Module images kept on disk across sessions. Each session runs in a worker process of its own
 * (worker.c), so the in-process image cache (image_cache.c) dies with the session; without this a
 * program started again sent every image again (PyTorch: tens of MiB per start). The tenant's
 * backend keeps them in STATE_DIR/images (its --state-dir; the agent gives each project its
 * own), one file per image named by its SHA-256 in hex, mode 0600. A file is read back only
 * when its size and SHA-256 are those asked for (a damaged or altered file is removed), it is
 * written under a temporary name and renamed, so readers never see half an image, and the
 * least recently used files go when the folder holds more than its bound. */
#include "session/image_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bounds.h"
#include "sluice/log.h"

static char store_dir[4096];
static uint64_t store_limit = BE_IMAGE_STORE_BYTES;

void be_image_store_set_dir(const char *dir)
{
    snprintf(store_dir, sizeof store_dir, "%s", dir ? dir : "");
}

void be_image_store_set_limit(uint64_t bytes)
{
    store_limit = bytes;
}

static int path_of(const uint8_t sha[32], char *out, size_t n)
{
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", sha[i]);
    return snprintf(out, n, "%s/%s", store_dir, hex) < (int)n;
}

static int sha_ok(const uint8_t *p, uint64_t size, const uint8_t sha[32])
{
    uint8_t md[32];
    unsigned len = 0;
    return EVP_Digest(p, size, md, &len, EVP_sha256(), NULL) && len == 32 &&
           memcmp(md, sha, 32) == 0;
}

static int read_all(int fd, uint8_t *p, uint64_t size)
{
    for (uint64_t got = 0; got < size;) {
        ssize_t r = read(fd, p + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (uint64_t)r;
    }
    return 0;
}

static int write_all(int fd, const uint8_t *p, uint64_t size)
{
    for (uint64_t put = 0; put < size;) {
        ssize_t w = write(fd, p + put, size - put);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        put += (uint64_t)w;
    }
    return 0;
}

uint8_t *be_image_store_get(const uint8_t sha[32], uint64_t size)
{
    char path[4200];
    if (!store_dir[0] || size == 0 || !path_of(sha, path, sizeof path))
        return NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    uint8_t *p = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size ||
        !(p = malloc(size))) {
        close(fd); /* not the image asked for (a guest's wrong size is no reason to drop it) */
        return NULL;
    }
    if (read_all(fd, p, size) == 0 && sha_ok(p, size, sha)) {
        futimens(fd, NULL); /* used now: the last to be evicted */
        close(fd);
        return p;
    }
    close(fd);
    free(p);
    sl_log(SL_LOG_WARNING, BE_COMPONENT,
           "image store: %s does not hold the image it is named after; removed", path);
    unlink(path);
    return NULL;
}

struct entry {
    char name[65];
    uint64_t size;
    struct timespec used;
};

static int older(const void *a, const void *b)
{
    const struct timespec *x = &((const struct entry *)a)->used;
    const struct timespec *y = &((const struct entry *)b)->used;
    if (x->tv_sec != y->tv_sec)
        return x->tv_sec < y->tv_sec ? -1 : 1;
    return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

static int is_image_name(const char *n)
{
    size_t i = 0;
    for (; n[i]; i++)
        if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f')))
            return 0;
    return i == 64;
}

/* Whether a temporary file (".tmp-PID-N", name) is one no write will finish: its writer is gone
 * (a worker killed mid-write) or it was last written more than BE_IMAGE_TMP_STALE_S ago (a
 * number used again by another process). Such files were never removed, and the bound, which
 * counts images only, did not see them. */
static int stale_tmp(const char *name, const struct stat *st)
{
    char *end;
    long pid = strtol(name + 5, &end, 10);
    if (end == name + 5 || *end != '-' || pid <= 0)
        return 0;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return 1;
    return time(NULL) - st->st_mtim.tv_sec > BE_IMAGE_TMP_STALE_S;
}

/* Removes the temporary files no write will finish, then the least recently used images until
 * the folder is within its bound. */
static void evict(void)
{
    DIR *d = opendir(store_dir);
    if (!d)
        return;
    struct entry *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        int image = is_image_name(de->d_name);
        int tmp = !image && strncmp(de->d_name, ".tmp-", 5) == 0;
        if (!(image || tmp) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        if (tmp) {
            if (stale_tmp(de->d_name, &st))
                unlinkat(dirfd(d), de->d_name, 0);
            continue;
        }
        if (n == cap) {
            size_t c = cap ? 2 * cap : 64;
            struct entry *m = realloc(v, c * sizeof *v);
            if (!m)
                break;
            v = m;
            cap = c;
        }
        memcpy(v[n].name, de->d_name, sizeof v[n].name); /* 64 hex digits and the NUL */
        v[n].size = (uint64_t)st.st_size;
        v[n].used = st.st_mtim;
        total += v[n++].size;
    }
    if (total > store_limit) {
        qsort(v, n, sizeof *v, older);
        for (size_t i = 0; i < n && total > store_limit; i++)
            if (unlinkat(dirfd(d), v[i].name, 0) == 0)
                total -= v[i].size;
    }
    closedir(d);
    free(v);
}

void be_image_store_put(const uint8_t sha[32], const uint8_t *bytes, uint64_t size)
{
    char path[4200], tmp[4300];
    if (!store_dir[0] || size == 0 || size > store_limit || !path_of(sha, path, sizeof path))
        return;
    struct stat st;
    if (stat(path, &st) == 0 && (uint64_t)st.st_size == size)
        return; /* another session stored it */
    static atomic_uint counter;
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-%u", store_dir, (long)getpid(),
             atomic_fetch_add(&counter, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        sl_log(SL_LOG_WARNING, BE_COMPONENT, "image store: %s: %s", tmp, strerror(errno));
        return;
    }
    int bad = write_all(fd, bytes, size) != 0;
    bad |= close(fd) != 0;
    if (bad || rename(tmp, path) != 0) {
        sl_log(SL_LOG_WARNING, BE_COMPONENT, "image store: %s: %s", path, strerror(errno));
        unlink(tmp);
        return;
    }
    evict();
}

/* The first 16 hex digits of an image file's name as the hint's 64 bits. */
static uint64_t hint_of_name(const char *name)
{
    uint64_t h = 0;
    for (int i = 0; i < 16; i++)
        h = h << 4 | (uint64_t)(name[i] <= '9' ? name[i] - '0' : name[i] - 'a' + 10);
    return h;
}

size_t be_image_store_hints(uint64_t *out, size_t max)
{
    DIR *d = store_dir[0] ? opendir(store_dir) : NULL;
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *de;
    while (n < max && (de = readdir(d)) != NULL)
        if (is_image_name(de->d_name))
            out[n++] = hint_of_name(de->d_name);
    closedir(d);
    return n;
}
