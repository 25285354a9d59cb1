/* The report library (sluice/usage_report.h): periods, clipping of intervals to the period,
 * aggregation per project and instance, lifetimes and entitlement, chart buckets, the shared
 * options, and the four renderings against golden files (tests/unit/agent_usage/golden/;
 * SLUICE_UPDATE_GOLDEN=1 rewrites them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "sluice/usage_report.h"

#define NS  1000000000LL
#define HNS (3600LL * NS)

static int64_t T(const char *iso)
{
    return fx_time(iso);
}

static void test_parse_time(void **st)
{
    (void)st;
    int64_t ns;
    sl_error e;
    assert_int_equal(sl_usage_parse_time("2026-11-01", &ns, &e), SL_OK);
    assert_int_equal(ns, 1793491200LL * NS);
    assert_int_equal(sl_usage_parse_time("2026-11-01T01:02:03", &ns, &e), SL_OK);
    assert_int_equal(ns, (1793491200LL + 3723) * NS);
    assert_int_equal(sl_usage_parse_time("2026-11-01T01:02:03Z", &ns, &e), SL_OK);
    assert_int_equal(sl_usage_parse_time("2024-02-29", &ns, &e), SL_OK);
    const char *bad[] = {"",
                         "2026-11",
                         "2026-11-1",
                         "2026/11/01",
                         "2026-13-01",
                         "2026-02-30",
                         "2025-02-29",
                         "2026-11-01T24:00:00",
                         "2026-11-01T10:60:00",
                         "2026-11-01T10:00",
                         "1969-12-31",
                         "2026-11-01x",
                         "20261101"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (sl_usage_parse_time(bad[i], &ns, &e) == SL_OK)
            fail_msg("'%s' accepted", bad[i]);
        assert_non_null(strstr(e.msg, "'"));
    }
}

static void test_this_month_and_overlap(void **st)
{
    (void)st;
    int64_t from, to, now = T("2026-11-22T10:11:12") + 5;
    sl_usage_this_month(now, &from, &to);
    assert_int_equal(from, T("2026-11-01"));
    assert_int_equal(to, now);
    assert_int_equal(sl_usage_overlap(0, 10, 5, 20), 5);
    assert_int_equal(sl_usage_overlap(0, 10, 10, 20), 0);
    assert_int_equal(sl_usage_overlap(12, 15, 10, 20), 3);
    assert_int_equal(sl_usage_overlap(5, 25, 10, 20), 10);
    assert_int_equal(sl_usage_overlap(30, 40, 10, 20), 0);
    char b[40];
    sl_usage_format_time(T("2026-11-01T01:02:03") + 456789000, 1, b, sizeof b);
    assert_string_equal(b, "2026-11-01T01:02:03.456789");
    sl_usage_format_time(T("2026-11-01T01:02:03"), 0, b, sizeof b);
    assert_string_equal(b, "2026-11-01T01:02:03Z");
}

static sl_usage_rec one(int64_t a, int64_t b, uint64_t busy_ns, uint64_t kernels)
{
    sl_usage_rec r = {0};
    r.record_id = "r";
    r.instance = FX_U1;
    r.project = FX_PA;
    r.start_ns = a;
    r.end_ns = b;
    r.gpu_busy_ns = busy_ns;
    r.kernel_ns = busy_ns * 2;
    r.throttled_ns = busy_ns / 2;
    r.kernels = kernels;
    r.bytes_htod = 100;
    r.memory_high_water = 7;
    return r;
}

static const sl_usage_server *only_server(const sl_usage_report *r)
{
    const sl_usage_view *v = sl_usage_report_view(r);
    assert_int_equal(v->n_tenants, 1);
    assert_int_equal(v->tenants[0].n_servers, 1);
    return &v->tenants[0].servers[0];
}

/* Time figures are pro-rated by the overlap; counts go to the period holding the end. */
static void test_clipping(void **st)
{
    (void)st;
    int64_t from = T("2026-11-01"), to = T("2026-11-02");
    sl_usage_rec recs[] = {
        one(from - HNS, from + HNS, 2 * HNS, 10), /* half inside, end inside */
        one(to - HNS, to + 3 * HNS, 4 * HNS, 20), /* a quarter inside, end outside */
        one(from + HNS, from + HNS, 0, 5),        /* zero-length, inside */
        one(from - 2 * HNS, from - HNS, HNS, 99), /* outside */
        one(to, to + HNS, HNS, 99),               /* starts at the end: outside */
    };
    sl_usage_report *r;
    sl_error e;
    assert_int_equal(sl_usage_report_new(from, to, NULL, &r, &e), SL_OK);
    for (size_t i = 0; i < sizeof recs / sizeof *recs; i++)
        assert_int_equal(sl_usage_report_add(r, &recs[i], &e), SL_OK);
    assert_int_equal(sl_usage_report_finish(r, &e), SL_OK);
    const sl_usage_server *s = only_server(r);
    assert_true(fabs(s->busy_s - 2 * 3600.0) < 1e-6); /* 1 h + 1 h */
    assert_true(fabs(s->kernel_s - 4 * 3600.0) < 1e-6);
    assert_true(fabs(s->throttled_s - 3600.0) < 1e-6);
    assert_int_equal(s->kernels, 15); /* 10 + 5: the straddling-end record counts next time */
    assert_int_equal(s->records, 2);
    assert_int_equal(s->bytes_htod, 200);
    assert_int_equal(s->memory_high_water, 7);
    /* no lifetime: existence observed from the first record's start to the last one's end */
    assert_int_equal(s->observed, 1);
    assert_string_equal(s->state, "unknown");
    assert_true(fabs(s->wall_s - 24 * 3600.0) < 1e-6);
    assert_true(fabs(s->entitled_s - s->wall_s) < 1e-6); /* unknown share counts as 1 */
    assert_true(fabs(sl_usage_sla_percent(s) - 100.0 * 2 / 24) < 1e-9);
    sl_usage_report_free(r);

    /* additivity: two adjacent periods add up to their union */
    double busy[3] = {0};
    uint64_t kernels[3] = {0};
    int64_t cuts[][2] = {{from, from + 7 * HNS}, {from + 7 * HNS, to}, {from, to}};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(sl_usage_report_new(cuts[k][0], cuts[k][1], NULL, &r, &e), SL_OK);
        for (size_t i = 0; i < sizeof recs / sizeof *recs; i++)
            assert_int_equal(sl_usage_report_add(r, &recs[i], &e), SL_OK);
        assert_int_equal(sl_usage_report_finish(r, &e), SL_OK);
        const sl_usage_view *v = sl_usage_report_view(r);
        busy[k] = v->n_tenants ? v->tenants[0].total.busy_s : 0;
        kernels[k] = v->n_tenants ? v->tenants[0].total.kernels : 0;
        sl_usage_report_free(r);
    }
    assert_true(fabs(busy[0] + busy[1] - busy[2]) < 1e-6);
    assert_int_equal(kernels[0] + kernels[1], kernels[2]);
}

static void test_malformed(void **st)
{
    (void)st;
    sl_usage_report *r;
    sl_error e;
    assert_int_equal(sl_usage_report_new(10, 10, NULL, &r, &e), SL_ERR_INVALID);
    assert_int_equal(sl_usage_report_new(0, 100, NULL, &r, &e), SL_OK);
    sl_usage_rec bad = one(50, 40, 0, 0);
    assert_int_equal(sl_usage_report_add(r, &bad, &e), SL_ERR_INVALID);
    bad = one(10, 20, 0, 0);
    bad.instance = NULL;
    assert_int_equal(sl_usage_report_add(r, &bad, &e), SL_ERR_INVALID);
    sl_usage_life l = {FX_U1, FX_PA, "", "", "", "", 0, 30, 20, 0};
    assert_int_equal(sl_usage_report_add_life(r, &l, &e), SL_ERR_INVALID);
    assert_int_equal(sl_usage_report_finish(r, &e), SL_OK);
    assert_int_equal(sl_usage_report_finish(r, &e), SL_ERR_INVALID);
    sl_usage_report_free(r);
}

/* Overlapping and adjacent lifetimes are merged; the latest one decides the state. */
static void test_lifetimes(void **st)
{
    (void)st;
    int64_t from = T("2026-11-01"), to = T("2026-11-03");
    sl_usage_life l[] = {
        {FX_U1, FX_PA, "vm", "f", "gold", "d", 0.25, from - 5 * HNS, from + 10 * HNS, 0},
        {FX_U1, FX_PA, "vm", "f", "gold", "d", 0.25, from + 5 * HNS, from + 12 * HNS, 0},
        {FX_U1, FX_PA, "vm2", "f", "gold", "d", 0.25, from + 20 * HNS, to + 5 * HNS, 1},
        {FX_U2, FX_PA, "x", "f", "", "", 0.5, from - 9 * HNS, from - HNS, 0}, /* outside */
    };
    sl_usage_report *r;
    sl_error e;
    assert_int_equal(sl_usage_report_new(from, to, NULL, &r, &e), SL_OK);
    for (size_t i = 0; i < sizeof l / sizeof *l; i++)
        assert_int_equal(sl_usage_report_add_life(r, &l[i], &e), SL_OK);
    assert_int_equal(sl_usage_report_finish(r, &e), SL_OK);
    const sl_usage_server *s = only_server(r);
    assert_true(fabs(s->wall_s - (12 + 28) * 3600.0) < 1e-6);
    assert_true(fabs(s->entitled_s - 0.25 * (12 + 28) * 3600.0) < 1e-6);
    assert_int_equal(s->observed, 0);
    assert_string_equal(s->state, "active");
    assert_int_equal(s->ended_ns, 0);
    assert_int_equal(s->started_ns, from - 5 * HNS);
    assert_string_equal(s->name, "vm2"); /* the latest source wins */
    assert_true(fabs(s->gpu_share - 0.25) < 1e-12);
    assert_int_equal(s->records, 0);
    assert_int_equal(sl_usage_sla_percent(s), 0);
    sl_usage_report_free(r);
}

static void test_project_filter_and_buckets(void **st)
{
    (void)st;
    const sl_usage_rec *recs;
    const sl_usage_life *lives;
    size_t nr = fx_records(&recs), nl = fx_lives(&lives);
    sl_usage_report *r;
    sl_error e;
    assert_int_equal(sl_usage_report_new(T(FX_FROM), T(FX_TO), FX_PB, &r, &e), SL_OK);
    for (size_t i = 0; i < nr; i++)
        assert_int_equal(sl_usage_report_add(r, &recs[i], &e), SL_OK);
    for (size_t i = 0; i < nl; i++)
        assert_int_equal(sl_usage_report_add_life(r, &lives[i], &e), SL_OK);
    assert_int_equal(sl_usage_report_finish(r, &e), SL_OK);
    const sl_usage_view *v = sl_usage_report_view(r);
    assert_int_equal(v->n_tenants, 1);
    assert_string_equal(v->tenants[0].project, FX_PB);
    assert_int_equal(v->n_buckets, 3);
    assert_int_equal(v->bucket_ns, 86400 * NS);
    double sum = 0;
    for (size_t b = 0; b < v->n_buckets; b++)
        sum += v->tenants[0].bucket_busy_s[b];
    assert_true(fabs(sum - v->tenants[0].total.busy_s) < 1e-6);
    assert_true(fabs(v->tenants[0].bucket_busy_s[2] - 1.5 * 3600) < 1e-6);
    sl_usage_report_free(r);

    /* a long period: whole-day buckets, at most 62 */
    assert_int_equal(sl_usage_report_new(T("2026-01-01"), T("2027-01-01"), NULL, &r, &e), SL_OK);
    v = sl_usage_report_view(r);
    assert_true(v->n_buckets <= 62);
    assert_int_equal(v->bucket_ns % (86400 * NS), 0);
    assert_true((int64_t)v->n_buckets * v->bucket_ns >= v->to_ns - v->from_ns);
    sl_usage_report_free(r);
}

static void test_options(void **st)
{
    (void)st;
    sl_usage_options o;
    sl_error e;
    sl_usage_options_init(&o);
    int64_t now = T("2026-11-22T10:00:00");
    assert_int_equal(sl_usage_options_finish(&o, now, &e), SL_OK);
    assert_int_equal(o.from_ns, T("2026-11-01"));
    assert_int_equal(o.to_ns, now);
    assert_int_equal(o.format, SL_USAGE_TABLE);
    sl_usage_options_init(&o);
    assert_int_equal(sl_usage_option(&o, "format", "svg", &e), SL_OK);
    assert_int_equal(o.format, SL_USAGE_SVG);
    assert_int_equal(sl_usage_option(&o, "format", "png", &e), SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "--format"));
    assert_int_equal(sl_usage_option(&o, "project", "not a project", &e), SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "--project"));
    assert_int_equal(sl_usage_option(&o, "project", FX_PA, &e), SL_OK);
    assert_int_equal(sl_usage_option(&o, "from", "2026-11-31", &e), SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "--from"));
    assert_int_equal(sl_usage_option(&o, "to", "2026-10-15", &e), SL_OK);
    assert_int_equal(sl_usage_options_finish(&o, now, &e), SL_OK);
    assert_int_equal(o.from_ns, T("2026-09-15")); /* --to before this month: 30 days before */
    assert_int_equal(sl_usage_option(&o, "from", "2026-10-15", &e), SL_OK);
    assert_int_equal(sl_usage_options_finish(&o, now, &e), SL_ERR_INVALID);
    assert_non_null(strstr(e.msg, "--to"));
    assert_int_equal(sl_usage_option(&o, "bogus", "x", &e), SL_ERR_INVALID);
    assert_int_equal(sl_usage_format_parse("json"), SL_USAGE_JSON);
    assert_int_equal(sl_usage_format_parse("JSON"), -1);
}

/* ------------------------------------------------------------------------------ golden files */

static sl_usage_report *fixture_report(void)
{
    const sl_usage_rec *recs;
    const sl_usage_life *lives;
    size_t nr = fx_records(&recs), nl = fx_lives(&lives);
    sl_usage_report *r;
    sl_error e;
    assert_int_equal(sl_usage_report_new(T(FX_FROM), T(FX_TO), NULL, &r, &e), SL_OK);
    for (size_t i = 0; i < nr; i++)
        assert_int_equal(sl_usage_report_add(r, &recs[i], &e), SL_OK);
    for (size_t i = 0; i < nl; i++)
        assert_int_equal(sl_usage_report_add_life(r, &lives[i], &e), SL_OK);
    assert_int_equal(sl_usage_report_finish(r, &e), SL_OK);
    return r;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    b[*len] = '\0';
    fclose(f);
    return b;
}

static void golden(sl_usage_format fmt, const char *file)
{
    sl_usage_report *r = fixture_report();
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    sl_error e;
    assert_int_equal(sl_usage_render(sl_usage_report_view(r), fmt, m, &e), SL_OK);
    fclose(m);
    sl_usage_report_free(r);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", GOLDEN_DIR, file);
    const char *update = getenv("SLUICE_UPDATE_GOLDEN");
    if (update && !strcmp(update, "1")) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fwrite(out, 1, len, f);
        fclose(f);
    }
    size_t glen = 0;
    char *want = slurp(path, &glen);
    if (!want)
        fail_msg("%s missing (SLUICE_UPDATE_GOLDEN=1 writes it)", path);
    if (glen != len || memcmp(want, out, len)) {
        size_t i = 0;
        while (i < len && i < glen && want[i] == out[i])
            i++;
        fprintf(stderr, "first difference at byte %zu:\n--- golden\n%.200s\n--- got\n%.200s\n", i,
                want + (i > 40 ? i - 40 : 0), out + (i > 40 ? i - 40 : 0));
        fail_msg("%s differs from the rendering", path);
    }
    free(want);
    free(out);
}

static void test_golden_table(void **st)
{
    (void)st;
    golden(SL_USAGE_TABLE, "report.txt");
}
static void test_golden_csv(void **st)
{
    (void)st;
    golden(SL_USAGE_CSV, "report.csv");
}
static void test_golden_json(void **st)
{
    (void)st;
    golden(SL_USAGE_JSON, "report.json");
}
static void test_golden_svg(void **st)
{
    (void)st;
    golden(SL_USAGE_SVG, "report.svg");
}

/* The fixture's figures, checked by hand (the golden files show the same numbers). */
static void test_fixture_figures(void **st)
{
    (void)st;
    sl_usage_report *r = fixture_report();
    const sl_usage_view *v = sl_usage_report_view(r);
    assert_int_equal(v->n_tenants, 2);
    const sl_usage_tenant *a = &v->tenants[0], *b = &v->tenants[1];
    assert_int_equal(a->n_servers, 2);
    const sl_usage_server *u1 = &a->servers[0], *u2 = &a->servers[1];
    assert_true(fabs(u1->wall_s - 60 * 3600.0) < 1e-6);     /* 11-01 00:00 .. 11-03 12:00 */
    assert_true(fabs(u1->entitled_s - 30 * 3600.0) < 1e-6); /* x 0.5 */
    assert_true(fabs(u1->busy_s - 2.5 * 3600.0) < 1e-6);
    assert_int_equal(u1->kernels, 8000);
    assert_int_equal(u1->quota_refusals, 1);
    assert_int_equal(u1->memory_high_water, 3ULL << 30);
    assert_true(fabs(u1->throttled_s - 1800.0) < 1e-6);
    assert_true(fabs(u2->wall_s - 18 * 3600.0) < 1e-6); /* 6 h + 12 h inside */
    assert_true(fabs(u2->busy_s - (1800.0 + 900.0)) < 1e-6);
    assert_string_equal(u2->state, "terminated");
    assert_int_equal(u2->ended_ns, T("2026-11-02T12:00:00"));
    assert_int_equal(b->n_servers, 1);
    const sl_usage_server *u3 = &b->servers[0];
    assert_int_equal(u3->observed, 1);
    assert_true(fabs(u3->busy_s - 1.5 * 3600.0) < 1e-6);
    assert_int_equal(u3->kernels, 10); /* the record ending after the period is not counted */
    assert_true(fabs(u3->wall_s - 4 * 3600.0) < 1e-6); /* 20:00 .. the period's end */
    sl_usage_report_free(r);
}

static char *render(const sl_usage_view *v, sl_usage_format fmt)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    sl_error e;
    assert_int_equal(sl_usage_render(v, fmt, f, &e), SL_OK);
    fclose(f);
    return text;
}

/* 25 projects with a few milliseconds of GPU time each: nothing rounds to 0, the chart's axis is
 * in milliseconds (no "2e-07"), every project has a colour of its own, the entitlement per bucket
 * adds up to the entitlement. */
static void test_short_use_many_projects(void **st)
{
    (void)st;
    sl_usage_report *r;
    sl_error e;
    assert_int_equal(sl_usage_report_new(T("2026-11-01"), T("2026-11-03"), NULL, &r, &e), SL_OK);
    char project[25][40], instance[25][40];
    for (int i = 0; i < 25; i++) {
        snprintf(project[i], sizeof project[i], "%032d", i + 1);
        snprintf(instance[i], sizeof instance[i], "11111111-0000-4000-8000-%012d", i + 1);
        sl_usage_rec u = {.record_id = "r",
                          .instance = instance[i],
                          .project = project[i],
                          .gpu_share = 0.5,
                          .start_ns = T("2026-11-01T10:00:00"),
                          .end_ns = T("2026-11-01T10:00:10"),
                          .gpu_busy_ns = 2000000};
        sl_usage_life l = {.instance = instance[i],
                           .project = project[i],
                           .gpu_share = 0.5,
                           .start_ns = T("2026-11-01T12:00:00"),
                           .end_ns = T("2026-11-02T12:00:00")};
        assert_int_equal(sl_usage_report_add(r, &u, &e), SL_OK);
        assert_int_equal(sl_usage_report_add_life(r, &l, &e), SL_OK);
    }
    assert_int_equal(sl_usage_report_finish(r, &e), SL_OK);
    const sl_usage_view *v = sl_usage_report_view(r);
    for (size_t t = 0; t < v->n_tenants; t++) {
        double sum = 0;
        for (size_t b = 0; b < v->n_buckets; b++)
            sum += v->tenants[t].bucket_entitled_s[b];
        assert_true(fabs(sum - v->tenants[t].total.entitled_s) < 1e-6);
        assert_true(fabs(v->tenants[t].bucket_entitled_s[0] - 6 * 3600.0) < 1e-6);
    }
    char *svg = render(v, SL_USAGE_SVG);
    assert_non_null(strstr(svg, ">GPU hours<")); /* the entitlement (6 h a day) sets the scale */
    assert_null(strstr(svg, "e-0"));
    assert_non_null(strstr(svg, ": 2.0 ms of GPU time, 12.00 h entitled<"));
    char seen[25][8];
    int n = 0;
    for (const char *p = svg; (p = strstr(p, "<rect x=\"70\" y=\"")) != NULL; p++) {
        const char *fill = strstr(p, "fill=\"#");
        assert_non_null(fill);
        char c[8];
        memcpy(c, fill + 6, 7);
        c[7] = '\0';
        for (int k = 0; k < n; k++)
            if (!strcmp(seen[k], c))
                fail_msg("colour %s used twice", c);
        if (n < 25)
            memcpy(seen[n++], c, 8);
    }
    assert_int_equal(n, 25); /* the legend: one colour per project, none repeated */
    free(svg);
    char *csv = render(v, SL_USAGE_CSV);
    assert_non_null(strstr(csv, ",5.555555556e-07,")); /* 2 ms in hours, not 0.000000 */
    free(csv);
    char *table = render(v, SL_USAGE_TABLE);
    assert_non_null(strstr(table, "2.0 ms"));
    free(table);
    sl_usage_report_free(r);
    /* milliseconds on the axis when that is the largest figure */
    assert_int_equal(sl_usage_report_new(T("2026-11-01"), T("2026-11-02"), NULL, &r, &e), SL_OK);
    sl_usage_rec u = {.record_id = "r",
                      .instance = instance[0],
                      .project = project[0],
                      .start_ns = T("2026-11-01T10:00:00"),
                      .end_ns = T("2026-11-01T10:00:00"),
                      .gpu_busy_ns = 3000000};
    assert_int_equal(sl_usage_report_add(r, &u, &e), SL_OK);
    assert_int_equal(sl_usage_report_finish(r, &e), SL_OK);
    svg = render(sl_usage_report_view(r), SL_USAGE_SVG);
    assert_non_null(strstr(svg, ">GPU milliseconds<"));
    free(svg);
    sl_usage_report_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_time),
        cmocka_unit_test(test_this_month_and_overlap),
        cmocka_unit_test(test_clipping),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_lifetimes),
        cmocka_unit_test(test_project_filter_and_buckets),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_fixture_figures),
        cmocka_unit_test(test_golden_table),
        cmocka_unit_test(test_golden_csv),
        cmocka_unit_test(test_golden_json),
        cmocka_unit_test(test_golden_svg),
        cmocka_unit_test(test_short_use_many_projects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
