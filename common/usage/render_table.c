/* The aligned table for people: per project a total line, then its instances, indented. It
 * keeps to the SLA story (existence, GPU time, share, use, time held back) within about 120
 * columns; every figure is in the CSV and the JSON. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define NCOL     10
#define CELL     64
#define NAME_MAX 16 /* longer instance names are cut to 15 characters and '~' */

static const char *const header[NCOL] = {
    "PROJECT / INSTANCE", "NAME",       "FLAVOR", "STATE", "HOURS",
    "GPU TIME",           "GPU SHARED", "SHARE",  "USE %", "HELD BACK"};
#define SHARED_COL 6 /* only when the view has shared GPU time */
/* Columns 4.. are numbers: right-aligned. */
#define FIRST_NUMERIC 4

typedef struct tab {
    char (*cell)[NCOL][CELL];
    size_t n, cap;
} tab;

static int row(tab *t, const sl_usage_server *s, const char *first, int total)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char(*nc)[NCOL][CELL] = realloc(t->cell, cap * sizeof *nc);
        if (!nc)
            return -1;
        t->cell = nc;
        t->cap = cap;
    }
    char(*c)[CELL] = t->cell[t->n++];
    snprintf(c[0], CELL, "%s", first);
    const char *name = total ? "" : s->name;
    if (strlen(name) > NAME_MAX)
        snprintf(c[1], CELL, "%.*s~", NAME_MAX - 1, name);
    else
        snprintf(c[1], CELL, "%s", name);
    snprintf(c[2], CELL, "%s", total ? "" : s->flavor);
    snprintf(c[3], CELL, "%s", s->state);
    sl_usage_hours(s->wall_s, c[4], CELL);
    sl_usage_duration(s->busy_s, c[5], CELL);
    sl_usage_duration(s->shared_s, c[SHARED_COL], CELL);
    if (total)
        snprintf(c[7], CELL, "%s", "");
    else if (s->gpu_share > 0)
        snprintf(c[7], CELL, "%.2f", s->gpu_share);
    else
        snprintf(c[7], CELL, "1.00?");
    sl_usage_percent(s, c[8], CELL);
    sl_usage_duration(s->throttled_s, c[9], CELL);
    return 0;
}

static void print(const tab *t, int shared, FILE *f)
{
    size_t w[NCOL] = {0};
    for (int c = 0; c < NCOL; c++)
        w[c] = strlen(header[c]);
    for (size_t r = 0; r < t->n; r++)
        for (int c = 0; c < NCOL; c++) {
            size_t n = strlen(t->cell[r][c]);
            if (n > w[c])
                w[c] = n;
        }
    for (size_t r = 0; r <= t->n; r++) {
        for (int c = 0; c < NCOL; c++) {
            if (c == SHARED_COL && !shared)
                continue;
            const char *s = r == 0 ? header[c] : t->cell[r - 1][c];
            const char *sep = c == NCOL - 1 ? "\n" : "  ";
            if (c >= FIRST_NUMERIC)
                fprintf(f, "%*s%s", (int)w[c], s, sep);
            else
                fprintf(f, "%-*s%s", (int)w[c], s, sep);
        }
    }
}

sl_code sl_usage_render_table(const sl_usage_view *v, FILE *f)
{
    char from[40], to[40];
    sl_usage_format_time(v->from_ns, 0, from, sizeof from);
    sl_usage_format_time(v->to_ns, 0, to, sizeof to);
    fprintf(f, "GPU usage from %s to %s (UTC); %zu project%s\n\n", from, to, v->n_tenants,
            v->n_tenants == 1 ? "" : "s");
    if (!v->n_tenants) {
        fprintf(f, "no usage in this period\n");
        return SL_OK;
    }
    tab t = {0};
    sl_usage_server grand;
    memset(&grand, 0, sizeof grand);
    int oom = 0;
    for (size_t i = 0; i < v->n_tenants && !oom; i++) {
        const sl_usage_tenant *tn = &v->tenants[i];
        oom |= row(&t, &tn->total, tn->project, 1);
        for (size_t k = 0; k < tn->n_servers && !oom; k++) {
            char first[CELL];
            snprintf(first, sizeof first, "  %s", tn->servers[k].instance);
            oom |= row(&t, &tn->servers[k], first, 0);
        }
        const sl_usage_server *s = &tn->total;
        grand.wall_s += s->wall_s;
        grand.busy_s += s->busy_s;
        grand.shared_s += s->shared_s;
        grand.kernel_s += s->kernel_s;
        grand.throttled_s += s->throttled_s;
        grand.entitled_s += s->entitled_s;
        grand.kernels += s->kernels;
        grand.bytes_htod += s->bytes_htod;
        grand.bytes_dtoh += s->bytes_dtoh;
        grand.quota_refusals += s->quota_refusals;
        grand.closed_by_agent += s->closed_by_agent;
        if (s->memory_high_water > grand.memory_high_water)
            grand.memory_high_water = s->memory_high_water;
    }
    grand.state = "";
    if (!oom)
        oom |= row(&t, &grand, "TOTAL", 1);
    if (!oom)
        print(&t, v->shared, f);
    free(t.cell);
    if (!oom)
        fprintf(f,
                "\nHOURS: how long the instance existed in the period. GPU TIME: how long its "
                "work kept the GPU busy.\n%sSHARE: its SLA's GPU share (1.00? = unknown, counted "
                "as 1). USE %% = GPU TIME / (SHARE x HOURS).\nHELD BACK: work held back by the "
                "share cap. Kernels, bytes, memory, quota refusals: --format csv or json.\n",
                v->shared ? "GPU SHARED: its part of the GPU's busy time, time several sessions "
                            "kept a GPU busy together shared equally among them (GPU TIME counts "
                            "it for each).\n"
                          : "");
    if (!oom && grand.closed_by_agent)
        fprintf(f,
                "CLOSED BY THE AGENT: %llu session%s ended with %s backend (killed or crashed) "
                "before %s final record: the time since %s previous record was not measured.\n",
                (unsigned long long)grand.closed_by_agent, grand.closed_by_agent == 1 ? "" : "s",
                grand.closed_by_agent == 1 ? "its" : "their",
                grand.closed_by_agent == 1 ? "its" : "their",
                grand.closed_by_agent == 1 ? "its" : "their");
    return oom ? SL_ERR_NOMEM : SL_OK;
}
