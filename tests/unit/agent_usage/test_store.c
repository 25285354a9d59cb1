/* The agent's side of usage records: field checks, the wire encoding, the SQLite store
 * (duplicates stored once, forwarded marks, lifetimes, reopen), the metrics exposition and the
 * new configuration keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "metrics.h"
#include "usage_query.h"
#include "usage_record.h"
#include "usage_store.h"

#define PROJ "f241e906010e4917ae8153f4fb8aa021"
#define INST "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60"
#define NS   1000000000LL

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

static char ids[64][40];

static Sluice__Control__UsageRecord rec(int i)
{
    Sluice__Control__UsageRecord r = SLUICE__CONTROL__USAGE_RECORD__INIT;
    snprintf(ids[i], sizeof ids[i], "0000%04d-1111-4222-8333-444455556666", i);
    r.record_id = ids[i];
    r.instance_uuid = INST;
    r.project_id = PROJ;
    r.flavor = "g1.small";
    r.gpu_uuid = "GPU-00000000-0000-0000-0000-000000000001";
    r.session_id = 0xfffffffffffffff0ULL + (uint64_t)i; /* above INT64_MAX: two's complement */
    int64_t end = now_ns() - 60 * NS;
    r.interval_start_ns = end - 10 * NS;
    r.interval_end_ns = end;
    r.gpu_busy_ns = 5 * NS + (uint64_t)i;
    r.kernel_ns = 7 * NS;
    r.kernels = 100 + (uint64_t)i;
    r.bytes_htod = 1ULL << 30;
    r.bytes_dtoh = 1ULL << 20;
    r.memory_high_water = 3ULL << 30;
    r.calls = 1000;
    r.errors = 1;
    r.throttled_ns = NS;
    r.quota_refusals = 2;
    r.measurement = "events";
    r.final = i % 2;
    return r;
}

/* ------------------------------------------------------------------------------ checks */

static void test_record_check(void **st)
{
    (void)st;
    char why[160];
    int64_t now = now_ns();
    Sluice__Control__UsageRecord r = rec(1);
    assert_int_equal(ag_usage_record_check(&r, PROJ, now, why, sizeof why), 0);
    assert_int_equal(ag_usage_record_check(&r, NULL, now, why, sizeof why), 0);
    /* one field wrong at a time; the message names it */
    const char *fields[] = {
        "record_id",         "record_id",       "instance_uuid",   "project_id",
        "project_id",        "flavor",          "gpu_uuid",        "interval_start_ns",
        "interval_end_ns",   "interval_end_ns", "interval_end_ns", "gpu_busy_ns",
        "throttled_ns",      "kernel_ns",       "kernels",         "bytes_htod",
        "memory_high_water", "gpu_share",       "gpu_share",       "measurement",
        "domain_name",       "closed_by_agent", "shared"};
    Sluice__Control__SharedTime sh = SLUICE__CONTROL__SHARED_TIME__INIT;
    char longs[300];
    memset(longs, 'x', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    for (size_t k = 0; k < sizeof fields / sizeof *fields; k++) {
        r = rec(1);
        switch (k) {
        case 0:
            r.record_id = "not-a-uuid";
            break;
        case 1:
            r.record_id = "";
            break;
        case 2:
            r.instance_uuid = "3d6b0f5e9a1c4e278f341b2c3d4e5f60xxxx";
            break;
        case 3:
            r.project_id = "zzz";
            break;
        case 4:
            r.project_id = "abcdef";
            break; /* another project's */
        case 5:
            r.flavor = "bad\nflavor";
            break;
        case 6:
            r.gpu_uuid = longs;
            break;
        case 7:
            r.interval_start_ns = 1000;
            break;
        case 8:
            r.interval_end_ns = r.interval_start_ns - 1;
            break;
        case 9:
            r.interval_start_ns = r.interval_end_ns - 86401 * NS;
            break;
        case 10:
            r.interval_end_ns = now + 3600 * NS;
            r.interval_start_ns = now;
            break;
        case 11:
            r.gpu_busy_ns = 12 * NS;
            break;
        case 12:
            r.throttled_ns = 20 * NS;
            break;
        case 13:
            r.kernel_ns = 10 * NS * 200;
            break;
        case 14:
            r.kernels = (1ULL << 40) + 1;
            break;
        case 15:
            r.bytes_htod = UINT64_MAX;
            break;
        case 16:
            r.memory_high_water = (1ULL << 50) + 1;
            break;
        case 17:
            r.gpu_share = 1.5;
            break;
        case 18:
            r.gpu_share = NAN;
            break;
        case 19:
            r.measurement = "a-very-long-measurement-name";
            break;
        case 20:
            r.domain_name = longs;
            break;
        case 21:
            r.closed_by_agent = 1; /* the agent's own mark: never from a backend */
            break;
        case 22:
            r.shared = &sh; /* the agent's figure, written when it forwards: never from a backend */
            break;
        }
        if (ag_usage_record_check(&r, PROJ, now, why, sizeof why) == 0)
            fail_msg("case %zu (%s) accepted", k, fields[k]);
        if (strncmp(why, fields[k], strlen(fields[k])))
            fail_msg("case %zu: '%s' does not name %s", k, why, fields[k]);
    }
    /* the boundaries are accepted */
    r = rec(1);
    r.gpu_busy_ns = 10 * NS; /* the whole interval */
    r.gpu_share = 1;
    r.interval_start_ns = r.interval_end_ns; /* zero-length */
    r.gpu_busy_ns = 0;
    r.throttled_ns = 0;
    r.kernel_ns = 0;
    assert_int_equal(ag_usage_record_check(&r, PROJ, now, why, sizeof why), 0);
    assert_true(ag_usage_is_uuid("3D6B0F5E-9A1C-4E27-8F34-1B2C3D4E5F60"));
    assert_false(ag_usage_is_uuid("3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f6"));
    assert_false(ag_usage_is_uuid(NULL));
}

/* The record survives the wire (BackendReport) and the store bit for bit. */
static void test_encoding(void **st)
{
    (void)st;
    Sluice__Control__UsageRecord r = rec(3);
    r.instance_name = "web \"1\"";
    r.domain_name = "instance-00000001";
    r.sla_tier = "gold";
    r.gpu_share = 0.3;
    Sluice__Control__BackendReport br = SLUICE__CONTROL__BACKEND_REPORT__INIT;
    br.seq = 9;
    br.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_USAGE;
    br.usage = &r;
    size_t n = sluice__control__backend_report__get_packed_size(&br);
    uint8_t *buf = malloc(n);
    sluice__control__backend_report__pack(&br, buf);
    Sluice__Control__BackendReport *back = sluice__control__backend_report__unpack(NULL, n, buf);
    assert_non_null(back);
    assert_int_equal(back->kind_case, SLUICE__CONTROL__BACKEND_REPORT__KIND_USAGE);
    const Sluice__Control__UsageRecord *u = back->usage;
    assert_string_equal(u->record_id, r.record_id);
    assert_int_equal(u->session_id, r.session_id);
    assert_int_equal(u->interval_end_ns, r.interval_end_ns);
    assert_int_equal(u->memory_high_water, r.memory_high_water);
    assert_string_equal(u->instance_name, "web \"1\"");
    assert_true(u->gpu_share == 0.3);

    char dir[] = "/tmp/ag-usage-enc-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/usage.db", dir);
    ag_usage_store *s;
    sl_error e;
    assert_int_equal(ag_usage_store_open(path, 0, &s, &e), SL_OK);
    const Sluice__Control__UsageRecord *one[] = {u};
    assert_int_equal(ag_usage_store_put(s, one, 1, 1800000000, NULL, &e), SL_OK);
    ag_usage_batch b;
    assert_int_equal(ag_usage_store_unforwarded(s, 10, &b, &e), SL_OK);
    assert_int_equal(b.n, 1);
    /* the agent adds the record's shared time (none: it has no busy intervals) */
    assert_non_null(b.recs[0]->shared);
    assert_int_equal(b.recs[0]->shared->gpu_shared_ns, 0);
    b.recs[0]->shared = NULL;
    /* packed again, the stored copy is otherwise the same message */
    size_t n2 = sluice__control__usage_record__get_packed_size(b.recs[0]);
    size_t n1 = sluice__control__usage_record__get_packed_size(u);
    assert_int_equal(n1, n2);
    uint8_t *p1 = malloc(n1), *p2 = malloc(n2);
    sluice__control__usage_record__pack(u, p1);
    sluice__control__usage_record__pack(b.recs[0], p2);
    assert_memory_equal(p1, p2, n1);
    free(p1);
    free(p2);
    ag_usage_batch_free(&b);
    ag_usage_store_close(s);
    sluice__control__backend_report__free_unpacked(back, NULL);
    free(buf);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ------------------------------------------------------------------------------ the store */

typedef struct fx {
    char dir[64], path[96];
    ag_usage_store *s;
} fx;

static int setup(void **st)
{
    fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/ag-usage-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/usage.db", f->dir);
    sl_error e;
    assert_int_equal(ag_usage_store_open(f->path, 0, &f->s, &e), SL_OK);
    *st = f;
    return 0;
}

static int teardown(void **st)
{
    fx *f = *st;
    ag_usage_store_close(f->s);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    int rc = system(cmd);
    free(f);
    return rc;
}

typedef struct tot {
    uint64_t series, records, busy, kernels, mem;
} tot;

static int sum_totals(const sl_usage_rec *s, uint64_t records, void *ud)
{
    tot *t = ud;
    t->series++;
    t->records += records;
    t->busy += s->gpu_busy_ns;
    t->kernels += s->kernels;
    t->mem = s->memory_high_water;
    return 0;
}

typedef struct opens {
    uint64_t sid[8];
    int64_t last_end[8];
    char instance[8][40];
    int n;
} opens;

static int collect_open(const ag_usage_open *o, void *ud)
{
    opens *x = ud;
    if (x->n < 8) {
        x->sid[x->n] = o->session_id;
        x->last_end[x->n] = o->last_end_ns;
        snprintf(x->instance[x->n], sizeof x->instance[0], "%s", o->instance);
        x->n++;
    }
    return 0;
}

static opens open_sessions(ag_usage_store *s)
{
    opens x;
    memset(&x, 0, sizeof x);
    sl_error e;
    assert_int_equal(ag_usage_store_open_sessions(s, PROJ, collect_open, &x, &e), SL_OK);
    return x;
}

/* The sessions the store holds open: opened by an event or a record, updated by records, gone
 * with the final record; a late copy of an earlier record does not open the session again, a
 * later backend's session of the same id (the counter starts again) does; closing records. */
static void test_open_sessions(void **st)
{
    fx *f = *st;
    sl_error e;
    int64_t t = now_ns() - 600 * NS;
    assert_int_equal(ag_usage_store_session_opened(f->s, PROJ, 7, INST, t, &e), SL_OK);
    assert_int_equal(ag_usage_store_session_opened(f->s, PROJ, 7, INST, t + NS, &e), SL_OK);
    opens o = open_sessions(f->s);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.sid[0], 7);
    assert_int_equal(o.last_end[0], 0);
    /* its records: the row follows the last one; the final one removes it */
    Sluice__Control__UsageRecord r1 = rec(40), r2 = rec(41), fin = rec(42), late = rec(43);
    r1.session_id = r2.session_id = fin.session_id = late.session_id = 7;
    r1.final = r2.final = 0;
    r1.interval_start_ns = t;
    r1.interval_end_ns = t + 10 * NS;
    r2.interval_start_ns = t + 10 * NS;
    r2.interval_end_ns = t + 20 * NS;
    fin.interval_start_ns = t + 20 * NS;
    fin.interval_end_ns = t + 25 * NS;
    fin.final = 1;
    late = r1;
    late.record_id = ids[43];
    const Sluice__Control__UsageRecord *b1[] = {&r1, &r2};
    assert_int_equal(ag_usage_store_put(f->s, b1, 2, 1800000000, NULL, &e), SL_OK);
    o = open_sessions(f->s);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.last_end[0], t + 20 * NS);
    const Sluice__Control__UsageRecord *b2[] = {&fin, &late};
    assert_int_equal(ag_usage_store_put(f->s, b2, 2, 1800000001, NULL, &e), SL_OK);
    assert_int_equal(open_sessions(f->s).n, 0);
    /* a later backend numbers its sessions from 1 again: session 7 of it is tracked */
    Sluice__Control__UsageRecord again = rec(44);
    again.session_id = 7;
    again.final = 0;
    again.interval_start_ns = t + 100 * NS;
    again.interval_end_ns = t + 110 * NS;
    const Sluice__Control__UsageRecord *b3[] = {&again};
    assert_int_equal(ag_usage_store_put(f->s, b3, 1, 1800000002, NULL, &e), SL_OK);
    o = open_sessions(f->s);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.last_end[0], t + 110 * NS);
    assert_string_equal(o.instance[0], INST);
    /* the agent's closing record ends it, and is kept with its mark */
    Sluice__Control__UsageRecord close = rec(45);
    close.session_id = 7;
    close.interval_start_ns = close.interval_end_ns = t + 110 * NS;
    close.final = close.closed_by_agent = 1;
    close.measurement = "none";
    const Sluice__Control__UsageRecord *b4[] = {&close};
    assert_int_equal(ag_usage_store_put(f->s, b4, 1, 1800000003, NULL, &e), SL_OK);
    assert_int_equal(open_sessions(f->s).n, 0);
    ag_usage_batch b;
    assert_int_equal(ag_usage_store_unforwarded(f->s, 100, &b, &e), SL_OK);
    int marked = 0;
    for (size_t i = 0; i < b.n; i++)
        if (!strcmp(b.recs[i]->record_id, ids[45]))
            marked = b.recs[i]->closed_by_agent && b.recs[i]->final;
        else
            assert_false(b.recs[i]->closed_by_agent);
    assert_true(marked);
    ag_usage_batch_free(&b);
}

static void test_duplicates_once(void **st)
{
    fx *f = *st;
    sl_error e;
    Sluice__Control__UsageRecord r[6];
    for (int i = 0; i < 6; i++)
        r[i] = rec(i);
    /* 0 1 2 1 0 in one batch: three new, two duplicates of this very batch */
    const Sluice__Control__UsageRecord *b1[] = {&r[0], &r[1], &r[2], &r[1], &r[0]};
    unsigned char fresh[5];
    assert_int_equal(ag_usage_store_put(f->s, b1, 5, 1800000000, fresh, &e), SL_OK);
    const unsigned char want1[] = {1, 1, 1, 0, 0};
    assert_memory_equal(fresh, want1, 5);
    /* resent later (lost ack), plus new ones */
    const Sluice__Control__UsageRecord *b2[] = {&r[2], &r[3], &r[4], &r[5], &r[3]};
    assert_int_equal(ag_usage_store_put(f->s, b2, 5, 1800000001, fresh, &e), SL_OK);
    const unsigned char want2[] = {0, 1, 1, 1, 0};
    assert_memory_equal(fresh, want2, 5);
    uint64_t n, pending;
    assert_int_equal(ag_usage_store_count(f->s, &n, &e), SL_OK);
    assert_int_equal(n, 6);
    /* reopened: still there, still once */
    ag_usage_store_close(f->s);
    assert_int_equal(ag_usage_store_open(f->path, 0, &f->s, &e), SL_OK);
    assert_int_equal(ag_usage_store_put(f->s, b1, 5, 1800000002, fresh, &e), SL_OK);
    assert_int_equal(fresh[0] | fresh[1] | fresh[2], 0);
    assert_int_equal(ag_usage_store_count(f->s, &n, &e), SL_OK);
    assert_int_equal(n, 6);
    assert_int_equal(ag_usage_store_pending(f->s, &pending, &e), SL_OK);
    assert_int_equal(pending, 6);
    /* the running sums count each record once */
    tot t = {0};
    assert_int_equal(ag_usage_store_totals(f->s, sum_totals, &t, &e), SL_OK);
    assert_int_equal(t.series, 1);
    assert_int_equal(t.records, 6);
    assert_int_equal(t.busy, 6 * 5 * NS + (0 + 1 + 2 + 3 + 4 + 5));
    assert_int_equal(t.kernels, 6 * 100 + 15);
    assert_int_equal(t.mem, 3ULL << 30);

    /* forwarding: oldest first, batches, marks */
    ag_usage_batch b;
    assert_int_equal(ag_usage_store_unforwarded(f->s, 4, &b, &e), SL_OK);
    assert_int_equal(b.n, 4);
    assert_string_equal(b.recs[0]->record_id, ids[0]);
    char *acked[] = {b.recs[0]->record_id, b.recs[1]->record_id, b.recs[1]->record_id,
                     "ffffffff-ffff-4fff-8fff-ffffffffffff"};
    size_t marked;
    assert_int_equal(ag_usage_store_mark_forwarded(f->s, acked, 4, 1800000003, &marked, &e), SL_OK);
    assert_int_equal(marked, 2);
    ag_usage_batch_free(&b);
    assert_int_equal(ag_usage_store_pending(f->s, &pending, &e), SL_OK);
    assert_int_equal(pending, 4);
    assert_int_equal(ag_usage_store_unforwarded(f->s, 100, &b, &e), SL_OK);
    assert_int_equal(b.n, 4);
    for (size_t i = 0; i < b.n; i++)
        assert_string_not_equal(b.recs[i]->record_id, ids[0]);
    ag_usage_batch_free(&b);

    /* a read-only open of the same file (sluice-usage) sees everything */
    ag_usage_store *ro;
    assert_int_equal(ag_usage_store_open(f->path, 1, &ro, &e), SL_OK);
    assert_int_equal(ag_usage_store_count(ro, &n, &e), SL_OK);
    assert_int_equal(n, 6);
    assert_int_not_equal(ag_usage_store_put(ro, b1, 1, 1, NULL, &e), SL_OK);
    ag_usage_store_close(ro);
}

static int sum_busy(const sl_usage_rec *r, void *ud)
{
    *(uint64_t *)ud += r->gpu_busy_ns;
    return 0;
}

static int count_lives(const sl_usage_life *l, void *ud)
{
    int *n = ud;
    n[0]++;
    n[1] += l->open;
    return 0;
}

typedef struct span_of {
    const char *instance;
    int64_t start, end;
    int open, n;
} span_of;

static int find_life(const sl_usage_life *l, void *ud)
{
    span_of *s = ud;
    if (!strcmp(l->instance, s->instance)) {
        s->start = l->start_ns;
        s->end = l->end_ns;
        s->open = l->open;
        s->n++;
    }
    return 0;
}

static void test_lifetimes_and_query(void **st)
{
    fx *f = *st;
    sl_error e;
    int64_t t0 = now_ns() - 3600 * NS;
    const char *u2 = "3d6b0f5e-9a1c-4e27-8f34-000000000002",
               *u3 = "3d6b0f5e-9a1c-4e27-8f34-000000000003";
    ag_usage_alive a[] = {{INST, PROJ, "web-1", "instance-1", "g1.small", "gold", 0.5},
                          {u2, PROJ, "b", "instance-2", "g1.small", "gold", 0.5},
                          {u3, PROJ, "c", "instance-3", "g1.small", "gold", 0.5}};
    assert_int_equal(ag_usage_store_heartbeat(f->s, a, 3, t0, &e), SL_OK);
    /* u3 is gone by the next beat, 200 s later: closed at its last heartbeat */
    assert_int_equal(ag_usage_store_heartbeat(f->s, a, 2, t0 + 200 * NS, &e), SL_OK);
    /* u2 stops 30 s later (it was beating until then): closed now */
    assert_int_equal(ag_usage_store_heartbeat(f->s, a, 1, t0 + 230 * NS, &e), SL_OK);
    assert_int_equal(ag_usage_store_heartbeat(f->s, a, 1, t0 + 400 * NS, &e), SL_OK);
    int n[2] = {0, 0};
    assert_int_equal(ag_usage_store_lives(f->s, t0 - NS, t0 + 3600 * NS, NULL, count_lives, n, &e),
                     SL_OK);
    assert_int_equal(n[0], 3);
    assert_int_equal(n[1], 1);
    span_of sp = {u3, 0, 0, 0, 0};
    assert_int_equal(ag_usage_store_lives(f->s, t0 - NS, t0 + 3600 * NS, NULL, find_life, &sp, &e),
                     SL_OK);
    assert_int_equal(sp.end, t0);
    assert_int_equal(sp.open, 0);
    sp = (span_of){u2, 0, 0, 0, 0};
    assert_int_equal(ag_usage_store_lives(f->s, t0 - NS, t0 + 3600 * NS, NULL, find_life, &sp, &e),
                     SL_OK);
    assert_int_equal(sp.start, t0);
    assert_int_equal(sp.end, t0 + 230 * NS);
    sp = (span_of){INST, 0, 0, 0, 0};
    assert_int_equal(ag_usage_store_lives(f->s, t0 - NS, t0 + 3600 * NS, NULL, find_life, &sp, &e),
                     SL_OK);
    assert_int_equal(sp.end, t0 + 400 * NS);
    assert_int_equal(sp.open, 1);
    /* a beat after a gap longer than AG_USAGE_LIFE_GAP_S starts a new lifetime */
    assert_int_equal(
        ag_usage_store_heartbeat(f->s, a, 1, t0 + (400 + AG_USAGE_LIFE_GAP_S + 10) * NS, &e),
        SL_OK);
    n[0] = n[1] = 0;
    assert_int_equal(ag_usage_store_lives(f->s, t0 - NS, t0 + 3600 * NS, PROJ, count_lives, n, &e),
                     SL_OK);
    assert_int_equal(n[0], 4);
    ag_usage_info info;
    int found;
    assert_int_equal(ag_usage_store_info(f->s, INST, &info, &found, &e), SL_OK);
    assert_int_equal(found, 1);
    assert_string_equal(info.domain, "instance-1");
    assert_true(info.gpu_share == 0.5);
    assert_int_equal(ag_usage_store_info(f->s, "nope", &info, &found, &e), SL_OK);
    assert_int_equal(found, 0);

    /* records through the report query */
    Sluice__Control__UsageRecord r0 = rec(0), r1 = rec(1);
    const Sluice__Control__UsageRecord *b[] = {&r0, &r1};
    assert_int_equal(ag_usage_store_put(f->s, b, 2, 1800000000, NULL, &e), SL_OK);
    uint64_t busy = 0;
    assert_int_equal(ag_usage_store_records(f->s, t0, now_ns(), PROJ, sum_busy, &busy, &e), SL_OK);
    assert_int_equal(busy, r0.gpu_busy_ns + r1.gpu_busy_ns);
    busy = 0;
    assert_int_equal(ag_usage_store_records(f->s, t0, now_ns(), "abc", sum_busy, &busy, &e), SL_OK);
    assert_int_equal(busy, 0);
    sl_usage_report *rep;
    assert_int_equal(ag_usage_query(f->s, t0, now_ns(), NULL, &rep, &e), SL_OK);
    const sl_usage_view *v = sl_usage_report_view(rep);
    assert_int_equal(v->n_tenants, 1);
    /* u2 and u3 existed and used nothing (u3 for no time at all) */
    assert_int_equal(v->tenants[0].n_servers, 3);
    assert_int_equal(v->tenants[0].total.records, 2);
    assert_string_equal(v->tenants[0].servers[2].instance, INST);
    assert_string_equal(v->tenants[0].servers[2].domain, "instance-1");
    assert_string_equal(v->tenants[0].servers[2].state, "active"); /* the new, open lifetime */
    assert_true(v->tenants[0].servers[1].wall_s == 0);
    assert_string_equal(v->tenants[0].servers[0].state, "terminated");
    sl_usage_report_free(rep);
}

/* ------------------------------------------------------------------------------ metrics */

static void test_metrics_exposition(void **st)
{
    (void)st;
    ag_metrics *m = ag_metrics_new("0.1.0");
    sl_usage_rec r = {0};
    r.project = PROJ;
    r.instance = INST;
    r.domain = "evil\"dom\\ain\nx";
    r.gpu_uuid = "GPU-1";
    r.gpu_busy_ns = 1500000000ULL;
    r.kernel_ns = 2 * NS;
    r.kernels = 3;
    r.bytes_htod = 4;
    r.bytes_dtoh = 5;
    r.memory_high_water = 6;
    r.throttled_ns = 7;
    r.quota_refusals = 8;
    ag_metrics_record(m, &r);
    ag_metrics_record(m, &r);
    ag_metrics_session(m, PROJ, INST, "d", AG_SESSION_OPENED, "grant");
    ag_metrics_session(m, PROJ, INST, "d", AG_SESSION_OPENED, "grant");
    ag_metrics_session(m, PROJ, INST, "d", AG_SESSION_CLOSED, "grant");
    ag_metrics_session(m, PROJ, INST, "d", AG_SESSION_REFUSED, "grant");
    ag_metrics_session(m, PROJ, INST, "d", AG_SESSION_REFUSED, "limit");
    ag_metrics_session(m, PROJ, "", "", AG_SESSION_REFUSED, "certificate");
    ag_metrics_session(m, PROJ, "", "", AG_SESSION_REFUSED, "certificate");
    ag_metrics_session(m, PROJ, "", "", AG_SESSION_OPENED, NULL); /* no instance: ignored */
    ag_metrics_backend_restarted(m, PROJ);
    ag_metrics_enrollments(m, "OK", 3);
    ag_metrics_enrollments(m, "BAD_TOKEN", 2);
    ag_metrics_enrollments(m, "REPLAYED", 0); /* none yet: no series */
    ag_metrics_instance iv[] = {
        {PROJ, INST, "d", "g1.small", "silver", 1, 0.5, 8ULL << 30},
        {PROJ, "22222222-0000-4000-8000-000000000002", "e", "g1.small", "silver", 0, 1, 0}};
    ag_metrics_instances(m, iv, 2, 1000);
    ag_metrics_health(m, 1, 2);
    ag_metrics_pending(m, 11);
    ag_metrics_forwarded(m, 1800000000);
    ag_metrics_rejected(m, 2);
    size_t len;
    char *t = ag_metrics_render(m, &len);
    assert_non_null(t);
    assert_int_equal(strlen(t), len);
    const char *want[] = {
        "# HELP sluice_gpu_busy_seconds_total ",
        "# TYPE sluice_gpu_busy_seconds_total counter\n",
        "sluice_gpu_busy_seconds_total{project_id=\"" PROJ "\",instance_id=\"" INST
        "\",domain=\"evil\\\"dom\\\\ain\\nx\",gpu_uuid=\"GPU-1\"} 3.000000000\n",
        "sluice_kernel_seconds_total{",
        "} 4.000000000\n",
        "sluice_kernels_total{",
        "} 6\n",
        "sluice_htod_bytes_total{",
        "} 8\n",
        "sluice_dtoh_bytes_total{",
        "} 10\n",
        "# TYPE sluice_memory_high_water_bytes gauge\n",
        "# TYPE sluice_memory_interval_high_water_bytes gauge\n",
        "sluice_memory_interval_high_water_bytes{",
        "} 6\n",
        "sluice_throttled_seconds_total{",
        "} 0.000000014\n",
        "sluice_quota_refusals_total{",
        "} 16\n",
        "sluice_usage_records_total{",
        "} 2\n",
        "sluice_sessions_open{project_id=\"" PROJ "\",instance_id=\"" INST "\",domain=\"d\"} 1\n",
        "sluice_sessions_opened_total{",
        "} 2\n",
        "sluice_sessions_refused_total{project_id=\"" PROJ "\",instance_id=\"" INST
        "\",domain=\"d\",reason=\"grant\"} 1\n",
        "sluice_sessions_refused_total{project_id=\"" PROJ "\",instance_id=\"" INST
        "\",domain=\"d\",reason=\"limit\"} 1\n",
        "sluice_sessions_refused_total{project_id=\"" PROJ
        "\",instance_id=\"\",domain=\"\",reason=\"certificate\"} 2\n",
        "sluice_sla_gpu_share{project_id=\"" PROJ "\",instance_id=\"" INST
        "\",domain=\"d\",flavor=\"g1.small\",sla_tier=\"silver\"} 0.5\n",
        "sluice_sla_memory_quota_bytes{project_id=\"" PROJ "\",instance_id=\"" INST
        "\",domain=\"d\"} 8589934592\n",
        "sluice_agent_build_info{version=\"0.1.0\"} 1\n",
        "sluice_agent_enrollments_total{result=\"OK\"} 3\n",
        "sluice_agent_enrollments_total{result=\"BAD_TOKEN\"} 2\n",
        "sluice_agent_backend_restarts_total{project_id=\"" PROJ "\"} 1\n",
        "sluice_agent_libvirt_connected 1\n",
        "sluice_agent_backends_running 2\n",
        "sluice_agent_last_forward_timestamp_seconds 1800000000\n",
        "sluice_agent_usage_records_pending_forward 11\n",
        "# TYPE sluice_agent_usage_records_rejected_total counter\n",
        "sluice_agent_usage_records_rejected_total 2\n",
    };
    const char *at = t;
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const char *p = strstr(at, want[i]);
        if (!p)
            fail_msg("missing (in order): %s\n--- exposition:\n%s", want[i], t);
        at = p + strlen(want[i]);
    }
    /* every line: a comment (HELP/TYPE) or NAME{...} VALUE / NAME VALUE; ends with \n */
    assert_int_equal(t[len - 1], '\n');
    for (char *line = t; *line;) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        if (line[0] == '#')
            assert_true(!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7));
        else
            assert_true(!strncmp(line, "sluice_", 7));
        line = nl + 1;
    }
    assert_null(strstr(t, "result=\"REPLAYED\""));
    assert_null(strstr(t, "sluice_sessions_open{project_id=\"" PROJ "\",instance_id=\"\""));
    assert_null(strstr(t, "sluice_sla_gpu_share{project_id=\"" PROJ
                          "\",instance_id=\"22222222")); /* not running: no SLA gauge */
    free(t);
    ag_metrics_sessions_reset(m, PROJ);
    t = ag_metrics_render(m, &len);
    assert_non_null(strstr(t, "domain=\"d\"} 0\n"));
    free(t);
    /* the instance leaves the host: its series stay for the grace period, then go; the
     * project's refusals before any instance was known stay */
    ag_metrics_instances(m, NULL, 0, 2000);
    t = ag_metrics_render(m, &len);
    assert_non_null(strstr(t, "sluice_gpu_busy_seconds_total{project_id"));
    assert_null(strstr(t, "sluice_sla_gpu_share{"));
    free(t);
    ag_metrics_instances(m, NULL, 0, 2000 + AG_METRICS_DEPART_GRACE_S * 1000 + 1);
    t = ag_metrics_render(m, &len);
    assert_null(strstr(t, "instance_id=\"" INST "\""));
    assert_non_null(strstr(t, "instance_id=\"\",domain=\"\",reason=\"certificate\"} 2\n"));
    free(t);
    /* a late record of the departed instance starts its series again */
    ag_metrics_record(m, &r);
    t = ag_metrics_render(m, &len);
    assert_non_null(strstr(t, "sluice_kernels_total{project_id=\"" PROJ "\",instance_id=\"" INST));
    free(t);
    ag_metrics_free(m);
}

/* ------------------------------------------------------------------------------ config */

static const char *base = "advertise_address = 192.0.2.10\n"
                          "token_public_key = /etc/sluice/t.pub\n"
                          "state_dir = /var/lib/sl\n";

static sl_code parse(const char *extra, ag_config *c, sl_error *e)
{
    char text[1024];
    snprintf(text, sizeof text, "%s%s", base, extra);
    ag_config_defaults(c);
    return ag_config_parse("t.conf", text, c, e);
}

static int count_totals(const sl_usage_rec *sum, uint64_t records, void *ud)
{
    (void)sum;
    *(uint64_t *)ud += records;
    return 0;
}

static void test_config_keys(void **st)
{
    (void)st;
    static ag_config c;
    sl_error e;
    assert_int_equal(parse("", &c, &e), SL_OK);
    assert_string_equal(c.usage_db, "/var/lib/sl/usage.db");
    assert_string_equal(c.metrics_addr, "");
    assert_int_equal(parse("usage_db = /srv/u.db\nmetrics_listen = 127.0.0.1:9464\n", &c, &e),
                     SL_OK);
    assert_string_equal(c.usage_db, "/srv/u.db");
    assert_string_equal(c.metrics_addr, "127.0.0.1");
    assert_int_equal(c.metrics_port, 9464);
    assert_int_equal(parse("metrics_listen = [::1]:9000\n", &c, &e), SL_OK);
    assert_string_equal(c.metrics_addr, "::1");
    assert_int_equal(parse("metrics_listen =\n", &c, &e), SL_OK);
    assert_string_equal(c.metrics_addr, "");
    assert_int_equal(parse("metrics_listen = off\n", &c, &e), SL_OK);
    assert_int_equal(parse("metrics_listen = localhost:9464\n", &c, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "t.conf:4: metrics_listen:"));
    assert_int_equal(parse("metrics_listen = 127.0.0.1:99999\n", &c, &e), SL_ERR_CONFIG);
    assert_int_equal(parse("usage_db = relative.db\n", &c, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "usage_db: must be an absolute path"));
    assert_int_equal(parse("usage_db =\n", &c, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "usage_db: empty value"));
    /* retention */
    assert_int_equal(c.usage_retention_days, 0);
    assert_int_equal(parse("usage_retention_days = 400\n", &c, &e), SL_OK);
    assert_int_equal(c.usage_retention_days, 400);
    assert_int_equal(parse("usage_retention_days = -1\n", &c, &e), SL_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "usage_retention_days"));
    /* several registry endpoints (several nova-hooks) */
    const char reg[] = "registry_ca = /c\nregistry_cert = /c\nregistry_key = /k\n";
    char text[512];
    snprintf(text, sizeof text, "%sregistry_endpoint = tcp://10.0.0.1:7410, tcp://10.0.0.2:7410\n",
             reg);
    assert_int_equal(parse(text, &c, &e), SL_OK);
    assert_string_equal(c.registry_endpoint, "tcp://10.0.0.1:7410, tcp://10.0.0.2:7410");
    const char *bad[] = {"tcp://10.0.0.1:7410,", "tcp://10.0.0.1:7410,,tcp://b:1", "tcp://10.0.0.1",
                         "http://x:1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(text, sizeof text, "%sregistry_endpoint = %s\n", reg, bad[i]);
        assert_int_equal(parse(text, &c, &e), SL_ERR_CONFIG);
        assert_non_null(strstr(e.msg, "registry_endpoint"));
    }
}

/* Retention: records older than the cut go, unless the registry has not acknowledged them yet
 * (with a registry); closed lifetimes older than the cut go, open ones stay; the running totals
 * (the metrics' counters) never go down. */
static void test_retention(void **st)
{
    fx *f = *st;
    sl_error e;
    Sluice__Control__UsageRecord r[3];
    for (int i = 0; i < 3; i++)
        r[i] = rec(i);
    int64_t now = now_ns();
    r[0].interval_start_ns = now - 50 * 86400 * NS; /* old, forwarded below */
    r[0].interval_end_ns = r[0].interval_start_ns + 10 * NS;
    r[1].interval_start_ns = now - 40 * 86400 * NS; /* old, never acknowledged */
    r[1].interval_end_ns = r[1].interval_start_ns + 10 * NS;
    const Sluice__Control__UsageRecord *b[] = {&r[0], &r[1], &r[2]};
    assert_int_equal(ag_usage_store_put(f->s, b, 3, 1800000000, NULL, &e), SL_OK);
    char *fwd[] = {ids[0]};
    assert_int_equal(ag_usage_store_mark_forwarded(f->s, fwd, 1, 1800000001, NULL, &e), SL_OK);
    ag_usage_alive a = {INST, PROJ, "web-1", "instance-00000001", "g1.small", "gold", 0.5};
    assert_int_equal(ag_usage_store_heartbeat(f->s, &a, 1, now - 45 * 86400 * NS, &e), SL_OK);
    assert_int_equal(ag_usage_store_heartbeat(f->s, NULL, 0, now - 44 * 86400 * NS, &e), SL_OK);
    assert_int_equal(ag_usage_store_heartbeat(f->s, &a, 1, now, &e), SL_OK);

    ag_usage_pruned p;
    int64_t cut = now - 30 * 86400 * NS;
    assert_int_equal(ag_usage_store_prune(f->s, cut, 1, &p, &e), SL_OK);
    assert_int_equal(p.records, 1);   /* r[0]; r[1] is still owed to the registry */
    assert_int_equal(p.lifetimes, 1); /* the closed one; the open one stays */
    uint64_t n;
    assert_int_equal(ag_usage_store_count(f->s, &n, &e), SL_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ag_usage_store_prune(f->s, cut, 0, &p, &e), SL_OK); /* no registry */
    assert_int_equal(p.records, 1);
    assert_int_equal(ag_usage_store_count(f->s, &n, &e), SL_OK);
    assert_int_equal(n, 1);
    uint64_t total_records = 0;
    assert_int_equal(ag_usage_store_totals(f->s, count_totals, &total_records, &e), SL_OK);
    assert_int_equal(total_records, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_check),
        cmocka_unit_test(test_encoding),
        cmocka_unit_test_setup_teardown(test_duplicates_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_sessions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lifetimes_and_query, setup, teardown),
        cmocka_unit_test(test_metrics_exposition),
        cmocka_unit_test(test_config_keys),
        cmocka_unit_test_setup_teardown(test_retention, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
