/* sluice-share-check [--per-record] STORE FILE...: the usage records in the fake agent's JSON
 * lines (FILE, from tests/e2e/fake_agent.c) through the agent's own code: each record checked as
 * the agent checks it (usage_record.c), stored in a fresh usage store at STORE (usage_store.c),
 * every window apportioned (usage_store_shared.c, docs/accounting.md "Shared GPU time"), then one
 * JSON line:
 * {"records":N,"rejected":N,"windows":N,"busy_ns":GPU busy time apportioned,
 *  "projects":{"ID":{"raw_ns":N,"shared_ns":N},...}}
 * and with --per-record also "shared_by_record":{"RECORD_ID":shared_ns,...}. A test tool
 * (accounting.py, part shared; tests/gpu/soak.py). */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "usage_record.h"
#include "usage_store.h"

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static int64_t num(json_t *o, const char *k)
{
    return (int64_t)json_integer_value(json_object_get(o, k));
}

/* One usage line as a record (strings point into the JSON, kept until the end). */
static int to_record(json_t *o, Sluice__Control__UsageRecord *r)
{
    sluice__control__usage_record__init(r);
    r->record_id = (char *)str(o, "record_id");
    r->instance_uuid = (char *)str(o, "instance");
    r->project_id = (char *)str(o, "project");
    r->flavor = (char *)str(o, "flavor");
    r->gpu_uuid = (char *)str(o, "gpu_uuid");
    r->measurement = (char *)str(o, "measurement");
    r->session_id = (uint64_t)num(o, "session_id");
    r->interval_start_ns = num(o, "start_ns");
    r->interval_end_ns = num(o, "end_ns");
    r->gpu_busy_ns = (uint64_t)num(o, "gpu_busy_ns");
    r->kernel_ns = (uint64_t)num(o, "kernel_ns");
    r->kernels = (uint64_t)num(o, "kernels");
    r->throttled_ns = (uint64_t)num(o, "throttled_ns");
    r->final = json_is_true(json_object_get(o, "final"));
    r->busy_widened_ns = (uint64_t)num(o, "busy_widened_ns");
    json_t *b = json_object_get(o, "busy");
    size_t n = json_array_size(b);
    if (n) {
        Sluice__Control__BusyInterval *iv = calloc(n, sizeof *iv);
        Sluice__Control__BusyInterval **ivp = calloc(n, sizeof *ivp);
        if (!iv || !ivp) {
            free(iv);
            free(ivp);
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            sluice__control__busy_interval__init(&iv[i]);
            iv[i].start_ns = (int64_t)json_integer_value(json_array_get(json_array_get(b, i), 0));
            iv[i].end_ns = (int64_t)json_integer_value(json_array_get(json_array_get(b, i), 1));
            ivp[i] = &iv[i];
        }
        r->busy = ivp;
        r->n_busy = n;
    }
    return 0;
}

struct sums {
    json_t *projects, *by_record; /* by_record: NULL without --per-record */
};

static int on_rec(const sl_usage_rec *r, void *ud)
{
    struct sums *sums = ud;
    json_t *projects = sums->projects, *p = json_object_get(projects, r->project);
    if (sums->by_record)
        json_object_set_new(sums->by_record, r->record_id,
                            json_integer((json_int_t)r->gpu_shared_ns));
    if (!p) {
        p = json_pack("{s:I,s:I}", "raw_ns", (json_int_t)0, "shared_ns", (json_int_t)0);
        json_object_set_new(projects, r->project, p);
    }
    json_object_set_new(p, "raw_ns",
                        json_integer(json_integer_value(json_object_get(p, "raw_ns")) +
                                     (json_int_t)r->gpu_busy_ns));
    json_object_set_new(p, "shared_ns",
                        json_integer(json_integer_value(json_object_get(p, "shared_ns")) +
                                     (json_int_t)r->gpu_shared_ns));
    return 0;
}

/* Room for more records (the store takes them all at once). */
static int grow(Sluice__Control__UsageRecord **recs, size_t *cap)
{
    size_t c = *cap ? 2 * *cap : 1024;
    Sluice__Control__UsageRecord *r = realloc(*recs, c * sizeof *r);
    if (!r)
        return -1;
    *recs = r;
    *cap = c;
    return 0;
}

static void free_busy(Sluice__Control__UsageRecord *r)
{
    if (r->n_busy)
        free(r->busy[0]);
    free(r->busy);
}

int main(int argc, char **argv)
{
    int per_record = argc > 1 && !strcmp(argv[1], "--per-record");
    argv += per_record;
    argc -= per_record;
    if (argc < 3) {
        fprintf(stderr, "usage: sluice-share-check [--per-record] STORE FILE...\n");
        return 2;
    }
    Sluice__Control__UsageRecord *recs = NULL;
    json_t *keep = json_array();
    size_t n = 0, cap = 0, rejected = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    for (int a = 2; a < argc; a++) {
        FILE *f = fopen(argv[a], "r");
        if (!f) {
            fprintf(stderr, "sluice-share-check: %s: cannot open\n", argv[a]);
            return 1;
        }
        char line[1 << 16];
        while (fgets(line, sizeof line, f)) {
            json_t *o = json_loads(line, 0, NULL);
            if (!o || strcmp(str(o, "type"), "usage")) {
                json_decref(o);
                continue;
            }
            json_array_append_new(keep, o);
            if (n == cap && grow(&recs, &cap) != 0) {
                fprintf(stderr, "sluice-share-check: out of memory\n");
                return 1;
            }
            char why[200];
            if (to_record(o, &recs[n]) != 0) {
                fprintf(stderr, "sluice-share-check: out of memory\n");
                return 1;
            }
            if (ag_usage_record_check(&recs[n], NULL, now, why, sizeof why) != 0) {
                fprintf(stderr, "sluice-share-check: record %s refused: %s\n", recs[n].record_id,
                        why);
                rejected++;
                free_busy(&recs[n]);
                continue;
            }
            n++;
        }
        fclose(f);
    }
    const Sluice__Control__UsageRecord **ok = malloc((n ? n : 1) * sizeof *ok);
    if (!ok) {
        fprintf(stderr, "sluice-share-check: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        ok[i] = &recs[i];
    ag_usage_store *s;
    sl_error e;
    if (ag_usage_store_open(argv[1], 0, &s, &e) != SL_OK ||
        ag_usage_store_put(s, ok, n, now / 1000000000LL, NULL, &e) != SL_OK) {
        fprintf(stderr, "sluice-share-check: %s\n", e.msg);
        return 1;
    }
    /* every session ended: everything is settled at once */
    const ag_usage_settle_opts o = {10 * 1000000000LL, 0, 0, 100000};
    ag_usage_settled d;
    json_t *projects = json_object(), *by_record = per_record ? json_object() : NULL;
    struct sums sums = {projects, by_record};
    if (ag_usage_store_settle(s, &o, now + 20 * 1000000000LL, &d, &e) != SL_OK ||
        ag_usage_store_records(s, 0, INT64_MAX, NULL, on_rec, &sums, &e) != SL_OK) {
        fprintf(stderr, "sluice-share-check: %s\n", e.msg);
        return 1;
    }
    json_t *out = json_pack("{s:I,s:I,s:I,s:I,s:o}", "records", (json_int_t)n, "rejected",
                            (json_int_t)rejected, "windows", (json_int_t)d.windows, "busy_ns",
                            (json_int_t)d.busy_ns, "projects", projects);
    if (by_record)
        json_object_set_new(out, "shared_by_record", by_record);
    char *text = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
    printf("%s\n", text ? text : "{}");
    free(text);
    json_decref(out);
    ag_usage_store_close(s);
    for (size_t i = 0; i < n; i++)
        free_busy(&recs[i]);
    free(recs);
    free(ok);
    json_decref(keep);
    return 0;
}
