/* Managed memory in the guest: the page tracker (managed.h, docs/remoting.md "Managed memory").
 *
 * An allocation's pages are areas: one memfd each, mapped twice, at the device address with the
 * protection of each page's state (the program's view) and once read-write elsewhere (the alias,
 * the frontend's own view: filling a page, pushing one, never faults). Allocations need not be
 * page-aligned, so two may share an edge page: an area holds the pages no earlier area held and
 * counts the allocations that touch it; it goes when the last one is freed. Every transfer is
 * clipped to the live allocations' bytes, as the backend accepts no range outside them.
 *
 * Page states: ABSENT (PROT_NONE), CLEAN (read-only, equal to the device's copy when fetched),
 * DIRTY (writable, changed by the program). The fault handler (SIGSEGV; userfaultfd cannot make
 * the frontend's own thread wait for itself, and is often not allowed in a guest) fetches a
 * block on a fault of an ABSENT page, without the tracker's lock, then installs the pages still
 * ABSENT unless an invalidation came in between (then it fetches again). A fault outside managed
 * memory goes to the handler that was there before; a program that installs its own handler
 * later gets ours back in front of it at its next CUDA call (sync_out). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "call/managed.h"
#include "component.h"
#include "sluice/log.h"

enum { ABSENT = 0, CLEAN = 1, DIRTY = 2 };
#define PUSH_CHUNK  ((size_t)4 << 20)
#define FETCH_TRIES 4

struct area {
    struct area *next;
    uintptr_t start, end; /* page-aligned */
    uint8_t *alias;
    uint8_t *state; /* one per page */
    size_t present; /* pages not ABSENT */
    int refs;       /* allocations touching it */
};

struct alloc {
    struct alloc *next;
    uint64_t base;
    size_t len;
};

struct span {
    uint64_t lo, hi;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct area *g_areas;
static struct alloc *g_allocs;
static uint64_t g_gen;  /* invalidations so far */
static size_t g_ndirty; /* DIRTY pages */
static struct sl_fe_managed_stats g_stats;
static sl_fe_managed_fetch_fn g_fetch;
static struct sigaction g_prev; /* the handler before ours */
static int g_installed;

static size_t page(void)
{
    static size_t pg;
    if (!pg)
        pg = (size_t)sysconf(_SC_PAGESIZE);
    return pg;
}

void sl_fe_managed_set_fetch(sl_fe_managed_fetch_fn fetch)
{
    g_fetch = fetch;
}

static struct area *area_at(uintptr_t p)
{
    for (struct area *a = g_areas; a; a = a->next)
        if (p >= a->start && p < a->end)
            return a;
    return NULL;
}

static void set_prot(struct area *a, size_t first, size_t n, int prot)
{
    if (n)
        mprotect((void *)(a->start + first * page()), n * page(), prot);
}

/* The live allocations' bytes in [lo, hi), at most cap spans; their number. */
static size_t spans_in(uint64_t lo, uint64_t hi, struct span *out, size_t cap)
{
    size_t n = 0;
    for (struct alloc *m = g_allocs; m && n < cap; m = m->next) {
        uint64_t a = m->base > lo ? m->base : lo;
        uint64_t b = m->base + m->len < hi ? m->base + m->len : hi;
        if (a < b)
            out[n++] = (struct span){a, b};
    }
    return n;
}

/* ------------------------------------------------------------------ the fault handler */
static void chain(int sig, siginfo_t *si, void *uc)
{
    if ((g_prev.sa_flags & SA_SIGINFO) && g_prev.sa_sigaction) {
        g_prev.sa_sigaction(sig, si, uc);
    } else if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN) {
        g_prev.sa_handler(sig);
    } else {
        /* no handler of the program's: the access faults again and the default action ends
         * the process, as it would have without managed memory */
        signal(sig, SIG_DFL);
    }
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    int r = sl_fe_managed_fault(si->si_addr);
    errno = saved;
    if (r == 1)
        return;
    if (r < 0) {
        signal(sig, SIG_DFL);
        return;
    }
    chain(sig, si, uc);
}

/* With g_lock held: ours in front of whatever the program installed since. */
static void install_locked(void)
{
    struct sigaction cur;
    if (sigaction(SIGSEGV, NULL, &cur) != 0)
        return;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_segv)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO; /* not SA_ONSTACK: an alternate signal stack (Rust, Go set one
                               * per thread) is too small for the call that fetches a page */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0)
        return;
    if (g_installed)
        sl_log(SL_LOG_INFO, SL_FE_COMPONENT,
               "managed memory: the program replaced the SIGSEGV handler; ours is back in front "
               "of it (faults outside managed memory still reach it)");
    g_prev = cur;
    g_installed = 1;
}

/* Fetches [lo, hi) of area a (ABSENT pages only are installed). 1 done, -1 failed. */
static int fetch_block(uintptr_t lo, uintptr_t hi)
{
    size_t len = hi - lo;
    uint8_t *tmp = malloc(len);
    struct span sp[64];
    if (!tmp)
        return -1;
    for (int tries = 0;; tries++) {
        pthread_mutex_lock(&g_lock);
        uint64_t gen = g_gen;
        size_t n = spans_in(lo, hi, sp, sizeof sp / sizeof *sp);
        pthread_mutex_unlock(&g_lock);
        memset(tmp, 0, len);
        for (size_t k = 0; k < n; k++) {
            CUresult rc = g_fetch ? g_fetch(tmp + (sp[k].lo - lo), sp[k].lo, sp[k].hi - sp[k].lo)
                                  : CUDA_ERROR_NOT_INITIALIZED;
            if (rc != CUDA_SUCCESS) {
                sl_log(SL_LOG_ERR, SL_FE_COMPONENT,
                       "managed memory at 0x%llx (%zu bytes) could not be fetched from the "
                       "device: CUresult %d; the access faults",
                       (unsigned long long)sp[k].lo, (size_t)(sp[k].hi - sp[k].lo), (int)rc);
                free(tmp);
                return -1;
            }
        }
        pthread_mutex_lock(&g_lock);
        struct area *a = area_at(lo);
        if (a && (gen == g_gen || tries + 1 >= FETCH_TRIES)) {
            size_t first = (lo - a->start) / page(), np = len / page();
            for (size_t i = 0; i < np; i++) {
                if (a->state[first + i] != ABSENT)
                    continue;
                memcpy(a->alias + (first + i) * page(), tmp + i * page(), page());
                a->state[first + i] = CLEAN;
                a->present++;
                set_prot(a, first + i, 1, PROT_READ);
            }
            g_stats.fetches++;
            g_stats.fetched_bytes += len;
        }
        int done = !a || gen == g_gen || tries + 1 >= FETCH_TRIES;
        pthread_mutex_unlock(&g_lock);
        if (done)
            break;
    }
    free(tmp);
    return 1;
}

int sl_fe_managed_fault(void *addr)
{
    uintptr_t p = (uintptr_t)addr;
    pthread_mutex_lock(&g_lock);
    struct area *a = area_at(p);
    if (!a) {
        pthread_mutex_unlock(&g_lock);
        return 0;
    }
    size_t idx = (p - a->start) / page();
    if (a->state[idx] == CLEAN) { /* a write to a present page */
        a->state[idx] = DIRTY;
        g_ndirty++;
        g_stats.write_faults++;
        set_prot(a, idx, 1, PROT_READ | PROT_WRITE);
    }
    if (a->state[idx] != ABSENT) {
        pthread_mutex_unlock(&g_lock);
        return 1;
    }
    uintptr_t lo = a->start + (p - a->start) / SL_FE_MANAGED_BLOCK * SL_FE_MANAGED_BLOCK;
    uintptr_t hi = lo + SL_FE_MANAGED_BLOCK < a->end ? lo + SL_FE_MANAGED_BLOCK : a->end;
    pthread_mutex_unlock(&g_lock);
    return fetch_block(lo, hi);
}

/* ------------------------------------------------------------------ allocations */
static struct area *area_new(uintptr_t start, uintptr_t end, const char **why)
{
    struct area *a = calloc(1, sizeof *a);
    uint8_t *state = calloc((end - start) / page(), 1);
    int fd = memfd_create("sluice-managed", MFD_CLOEXEC);
    void *view = MAP_FAILED, *alias = MAP_FAILED;
    if (!a || !state || fd < 0 || ftruncate(fd, (off_t)(end - start)) != 0) {
        *why = "out of memory in the guest (memfd)";
        goto fail;
    }
    view = mmap((void *)start, end - start, PROT_NONE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    if (view != (void *)start) {
        *why = "the address range is taken in the guest process";
        goto fail;
    }
    alias = mmap(NULL, end - start, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (alias == MAP_FAILED) {
        *why = "out of address space in the guest";
        goto fail;
    }
    close(fd);
    a->start = start, a->end = end, a->alias = alias, a->state = state;
    a->next = g_areas;
    g_areas = a;
    return a;
fail:
    if (view != MAP_FAILED)
        munmap(view, end - start);
    if (fd >= 0)
        close(fd);
    free(state);
    free(a);
    return NULL;
}

static void area_free(struct area *a)
{
    for (struct area **pp = &g_areas; *pp; pp = &(*pp)->next)
        if (*pp == a) {
            *pp = a->next;
            break;
        }
    for (size_t i = 0; i < (a->end - a->start) / page(); i++)
        if (a->state[i] == DIRTY)
            g_ndirty--;
    munmap((void *)a->start, a->end - a->start);
    munmap(a->alias, a->end - a->start);
    free(a->state);
    free(a);
}

/* Each area touching [lo, hi) changes its count by d (and goes at 0). */
static void ref_areas(uintptr_t lo, uintptr_t hi, int d)
{
    struct area *a = g_areas;
    while (a) {
        struct area *next = a->next;
        if (a->start < hi && lo < a->end && (a->refs += d) <= 0)
            area_free(a);
        a = next;
    }
}

int sl_fe_managed_map(uint64_t addr, size_t len, const char **why)
{
    *why = "invalid size";
    if (!len || addr + len < addr)
        return -1;
    struct alloc *m = calloc(1, sizeof *m);
    if (!m) {
        *why = "out of memory in the guest";
        return -1;
    }
    uintptr_t lo = addr / page() * page(), hi = (addr + len + page() - 1) / page() * page();
    pthread_mutex_lock(&g_lock);
    install_locked();
    struct area *made[64];
    size_t nmade = 0;
    int ok = 1;
    for (uintptr_t p = lo; p < hi && ok;) {
        struct area *a = area_at(p);
        if (a) { /* a page of an earlier area: its bytes of this allocation are fetched anew */
            size_t i = (p - a->start) / page();
            if (a->state[i] == CLEAN) {
                a->state[i] = ABSENT;
                a->present--;
                set_prot(a, i, 1, PROT_NONE);
            }
            p += page();
            continue;
        }
        uintptr_t q = p;
        while (q < hi && !area_at(q))
            q += page();
        if (nmade == sizeof made / sizeof *made || !(made[nmade] = area_new(p, q, why)))
            ok = 0;
        else
            nmade++;
        p = q;
    }
    if (!ok) {
        for (size_t i = 0; i < nmade; i++)
            area_free(made[i]);
        pthread_mutex_unlock(&g_lock);
        free(m);
        return -1;
    }
    ref_areas(lo, hi, 1);
    m->base = addr, m->len = len, m->next = g_allocs;
    g_allocs = m;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

int sl_fe_managed_unmap(uint64_t addr)
{
    pthread_mutex_lock(&g_lock);
    struct alloc *m = NULL;
    for (struct alloc **pp = &g_allocs; *pp; pp = &(*pp)->next)
        if ((*pp)->base == addr) {
            m = *pp;
            *pp = m->next;
            break;
        }
    if (m)
        ref_areas(m->base / page() * page(), (m->base + m->len + page() - 1) / page() * page(), -1);
    pthread_mutex_unlock(&g_lock);
    free(m);
    return m != NULL;
}

int sl_fe_managed_find(uint64_t p, uint64_t *base, size_t *len)
{
    pthread_mutex_lock(&g_lock);
    struct alloc *m = g_allocs;
    while (m && !(p >= m->base && p < m->base + m->len))
        m = m->next;
    if (m && base)
        *base = m->base;
    if (m && len)
        *len = m->len;
    pthread_mutex_unlock(&g_lock);
    return m != NULL;
}

CUresult sl_fe_managed_fetch_range(uint64_t p, size_t n)
{
    for (uint64_t q = p; q < p + n;) {
        pthread_mutex_lock(&g_lock);
        struct area *a = area_at(q);
        int absent = a && a->state[(q - a->start) / page()] == ABSENT;
        uintptr_t next = q / page() * page() + page();
        pthread_mutex_unlock(&g_lock);
        if (absent) {
            if (sl_fe_managed_fault((void *)(uintptr_t)q) < 0)
                return CUDA_ERROR_UNKNOWN;
            continue; /* the block is in: the next ABSENT page is further on */
        }
        q = next;
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ coherence */
static CUresult push_run(struct area *a, size_t first, size_t n, sl_fe_managed_push_fn push)
{
    uintptr_t lo = a->start + first * page(), hi = lo + n * page();
    struct span sp[64];
    CUresult rc = CUDA_SUCCESS;
    for (uintptr_t b = lo; b < hi && rc == CUDA_SUCCESS; b += PUSH_CHUNK) {
        uintptr_t e = b + PUSH_CHUNK < hi ? b + PUSH_CHUNK : hi;
        size_t ns = spans_in(b, e, sp, sizeof sp / sizeof *sp);
        for (size_t k = 0; k < ns && rc == CUDA_SUCCESS; k++) {
            rc = push(sp[k].lo, a->alias + (sp[k].lo - a->start), sp[k].hi - sp[k].lo);
            g_stats.pushed_bytes += sp[k].hi - sp[k].lo;
        }
    }
    return rc;
}

CUresult sl_fe_managed_sync_out(sl_fe_managed_push_fn push)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&g_lock);
    if (g_areas)
        install_locked();
    for (struct area *a = g_areas; a && g_ndirty && rc == CUDA_SUCCESS; a = a->next) {
        size_t np = (a->end - a->start) / page();
        for (size_t i = 0; i < np && rc == CUDA_SUCCESS;) {
            if (a->state[i] != DIRTY) {
                i++;
                continue;
            }
            size_t j = i;
            while (j < np && a->state[j] == DIRTY)
                j++;
            /* read-only first: a write from now on faults and marks the page again */
            set_prot(a, i, j - i, PROT_READ);
            memset(a->state + i, CLEAN, j - i);
            g_ndirty -= j - i;
            rc = push_run(a, i, j - i, push);
            i = j;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

void sl_fe_managed_invalidate(void)
{
    pthread_mutex_lock(&g_lock);
    if (g_areas) {
        g_gen++;
        g_stats.invalidations++;
    }
    for (struct area *a = g_areas; a; a = a->next) {
        size_t np = (a->end - a->start) / page();
        for (size_t i = 0; i < np && a->present;) {
            if (a->state[i] != CLEAN) { /* DIRTY ones keep the program's bytes: pushed next */
                i++;
                continue;
            }
            size_t j = i;
            while (j < np && a->state[j] == CLEAN)
                j++;
            set_prot(a, i, j - i, PROT_NONE);
            memset(a->state + i, ABSENT, j - i);
            a->present -= j - i;
            i = j;
        }
    }
    pthread_mutex_unlock(&g_lock);
}

void sl_fe_managed_stats(struct sl_fe_managed_stats *out)
{
    pthread_mutex_lock(&g_lock);
    *out = g_stats;
    pthread_mutex_unlock(&g_lock);
}

void sl_fe_managed_reset(void)
{
    pthread_mutex_lock(&g_lock);
    while (g_areas)
        area_free(g_areas);
    while (g_allocs) {
        struct alloc *m = g_allocs;
        g_allocs = m->next;
        free(m);
    }
    g_ndirty = 0;
    memset(&g_stats, 0, sizeof g_stats);
    pthread_mutex_unlock(&g_lock);
}

int sl_fe_managed_any(void)
{
    pthread_mutex_lock(&g_lock);
    int any = g_allocs != NULL;
    pthread_mutex_unlock(&g_lock);
    return any;
}
