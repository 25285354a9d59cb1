/* sluice-registry: the operator's read-only view of the nova-hook registry. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/cli.h"
#include "store.h"
#include "table.h"
#include "validate.h"

#define DEFAULT_DB    "/var/lib/sluice/registry.db"
#define DEFAULT_STALE 120

typedef struct usage_ctx {
    sl_usage_report *r;
    sl_error *e;
    sl_code rc;
} usage_ctx;

static int on_usage(const sl_usage_rec *u, void *ud)
{
    usage_ctx *c = ud;
    return (c->rc = sl_usage_report_add(c->r, u, c->e)) != SL_OK;
}

static int on_life(const sl_usage_life *l, void *ud)
{
    usage_ctx *c = ud;
    return (c->rc = sl_usage_report_add_life(c->r, l, c->e)) != SL_OK;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice-registry [--db FILE] [--json] COMMAND [OPTIONS]\n"
            "\n"
            "Reads the nova-hook registry (read-only).\n"
            "\n"
            "commands:\n"
            "  hosts                              agents: endpoint, slots, used, GPUs, last seen\n"
            "  instances [--host H] [--project P] instances placed on Sluice hosts\n"
            "  stale [--older-than SECONDS]       agents not heard from for that long (default "
            "%d)\n"
            "  usage [--from TIME] [--to TIME] [--project ID] [--format F] [--output FILE]\n"
            "                                     GPU usage of the cluster over a period, per\n"
            "                                     project then per instance (docs/usage.md)\n"
            "\n"
            "  --db FILE   the registry database (default %s)\n"
            "  --json      JSON instead of an aligned table (usage: --format json)\n"
            "  --version   the release\n"
            "  --help      this text\n"
            "\n"
            "usage options:\n%s",
            DEFAULT_STALE, DEFAULT_DB, sl_usage_options_help);
}

/* sluice-registry usage: records and placement history -> report -> output. */
static int usage_report(nh_store *s, sl_usage_options *uo)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * SL_USAGE_NS_PER_S + ts.tv_nsec;
    sl_error e = {0};
    if (sl_usage_options_finish(uo, now, &e) != SL_OK) {
        fprintf(stderr, "sluice-registry: %s\n", e.msg);
        return 2;
    }
    const char *project = uo->project[0] ? uo->project : NULL;
    usage_ctx c = {NULL, &e, SL_OK};
    sl_code rc = sl_usage_report_new(uo->from_ns, uo->to_ns, project, &c.r, &e);
    if (rc == SL_OK)
        rc = nh_store_usage_records(s, uo->from_ns, uo->to_ns, project, on_usage, &c, &e);
    if (rc == SL_OK && (rc = c.rc) == SL_OK)
        rc = nh_store_lifetimes(s, uo->from_ns, uo->to_ns, project, now, on_life, &c, &e);
    if (rc == SL_OK && (rc = c.rc) == SL_OK)
        rc = sl_usage_report_finish(c.r, &e);
    if (rc == SL_OK)
        rc = sl_usage_write(sl_usage_report_view(c.r), uo, &e);
    sl_usage_report_free(c.r);
    if (rc != SL_OK) {
        fprintf(stderr, "sluice-registry: %s\n", e.msg);
        return 1;
    }
    return 0;
}

static void iso(int64_t t, char *out, size_t cap)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (t <= 0 || !gmtime_r(&tt, &tm) || !strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, cap, "-");
}

typedef struct out {
    int json;
    json_t *arr;
    nh_table t;
    int64_t now;
    int oom;
} out;

static int host_row(const nh_host_row *r, void *ud)
{
    out *o = ud;
    if (o->json) {
        json_error_t je;
        json_t *gpus = json_loads(r->gpus_json, 0, &je);
        json_t *j =
            json_pack("{s:s, s:s, s:I, s:I, s:I, s:o, s:s, s:I, s:I}", "host", r->host, "endpoint",
                      r->endpoint, "slots", (json_int_t)r->slots, "used", (json_int_t)r->used,
                      "free", (json_int_t)(r->slots - r->used), "gpus", gpus ? gpus : json_array(),
                      "version", r->version, "last_seen", (json_int_t)r->last_seen, "age_seconds",
                      (json_int_t)(o->now - r->last_seen));
        o->oom |= !j || json_array_append_new(o->arr, j) != 0;
        return o->oom;
    }
    char slots[24], used[24], nfree[24], ngpu[24], seen[32], age[32];
    json_error_t je;
    json_t *gpus = json_loads(r->gpus_json, 0, &je);
    snprintf(ngpu, sizeof ngpu, "%zu", json_is_array(gpus) ? json_array_size(gpus) : 0);
    json_decref(gpus);
    snprintf(slots, sizeof slots, "%lld", (long long)r->slots);
    snprintf(used, sizeof used, "%lld", (long long)r->used);
    snprintf(nfree, sizeof nfree, "%lld", (long long)(r->slots - r->used));
    iso(r->last_seen, seen, sizeof seen);
    snprintf(age, sizeof age, "%llds", (long long)(o->now - r->last_seen));
    const char *row[] = {r->host, r->endpoint, slots, used, nfree, ngpu, seen, age};
    o->oom |= nh_table_add(&o->t, row) != 0;
    return o->oom;
}

static int instance_row(const nh_instance_row *r, void *ud)
{
    out *o = ud;
    char since[32];
    iso(r->since, since, sizeof since);
    if (o->json) {
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "instance", r->instance, "project",
                              r->project, "flavor", r->flavor, "host", r->host, "since",
                              (json_int_t)r->since, "since_iso", since);
        o->oom |= !j || json_array_append_new(o->arr, j) != 0;
        return o->oom;
    }
    const char *row[] = {r->instance, r->project, r->flavor, r->host, since};
    o->oom |= nh_table_add(&o->t, row) != 0;
    return o->oom;
}

static int finish(out *o, sl_code rc, const sl_error *e)
{
    int status = 0;
    if (rc != SL_OK || o->oom) {
        fprintf(stderr, "sluice-registry: %s\n", rc != SL_OK ? e->msg : "out of memory");
        status = 1;
    } else if (o->json) {
        json_dumpf(o->arr, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    } else {
        nh_table_print(&o->t, stdout);
    }
    json_decref(o->arr);
    nh_table_free(&o->t);
    return status;
}

static const char *const host_header[] = {"HOST", "ENDPOINT", "SLOTS",     "USED",
                                          "FREE", "GPUS",     "LAST SEEN", "AGE"};
static const char *const instance_header[] = {"INSTANCE", "PROJECT", "FLAVOR", "HOST", "SINCE"};

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, NULL, 'd'},         {"json", no_argument, NULL, 'j'},
        {"host", required_argument, NULL, 'H'},       {"project", required_argument, NULL, 'p'},
        {"older-than", required_argument, NULL, 'o'}, {"from", required_argument, NULL, 'u'},
        {"to", required_argument, NULL, 'u'},         {"format", required_argument, NULL, 'u'},
        {"output", required_argument, NULL, 'u'},     {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},          {NULL, 0, NULL, 0}};
    const char *db = DEFAULT_DB, *host = NULL, *project = NULL;
    long long older = DEFAULT_STALE;
    int json = 0, c, idx, usage_opts = 0, have_format = 0;
    char *end;
    sl_usage_options uo;
    sl_usage_options_init(&uo);
    sl_error ue;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hV", opts, &idx)) != -1) {
        switch (c) {
        case 'd':
            db = optarg;
            break;
        case 'j':
            json = 1;
            break;
        case 'H':
            host = optarg;
            if (!nh_valid_host(host)) {
                fprintf(stderr, "sluice-registry: --host: not a host name\n");
                return 2;
            }
            break;
        case 'p':
            project = optarg;
            if (!nh_valid_id(project)) {
                fprintf(stderr, "sluice-registry: --project: not a project id\n");
                return 2;
            }
            break;
        case 'u':
            if (sl_usage_option(&uo, opts[idx].name, optarg, &ue) != SL_OK) {
                fprintf(stderr, "sluice-registry: %s\n", ue.msg);
                return 2;
            }
            usage_opts = 1;
            have_format |= !strcmp(opts[idx].name, "format");
            break;
        case 'o':
            older = strtoll(optarg, &end, 10);
            if (!*optarg || *end || older < 1 || older > 100000000) {
                fprintf(stderr, "sluice-registry: --older-than: seconds, 1..100000000\n");
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            return sl_cli_version("sluice-registry");
        default:
            return sl_cli_bad_option("sluice-registry", c, argv);
        }
    }
    if (optind == argc)
        return sl_cli_usage_error("sluice-registry",
                                  "a command is needed (hosts, instances, stale, usage)");
    if (optind != argc - 1)
        return sl_cli_usage_error("sluice-registry", "unexpected argument '%s'", argv[optind + 1]);
    const char *cmd = argv[optind];
    int is_hosts = !strcmp(cmd, "hosts"), is_stale = !strcmp(cmd, "stale");
    int is_inst = !strcmp(cmd, "instances"), is_usage = !strcmp(cmd, "usage");
    if (!is_hosts && !is_stale && !is_inst && !is_usage) {
        return sl_cli_usage_error("sluice-registry",
                                  "unknown command '%s' (hosts, instances, stale, usage)", cmd);
    }
    if ((host && !is_inst) || (project && !is_inst && !is_usage)) {
        fprintf(stderr, "sluice-registry: --host goes with instances, --project with "
                        "instances and usage\n");
        return 2;
    }
    if (usage_opts && !is_usage) {
        fprintf(stderr, "sluice-registry: --from, --to, --format and --output go with usage\n");
        return 2;
    }
    if (is_usage && project && sl_usage_option(&uo, "project", project, &ue) != SL_OK) {
        fprintf(stderr, "sluice-registry: %s\n", ue.msg);
        return 2;
    }
    if (is_usage && json && !have_format)
        uo.format = SL_USAGE_JSON;
    nh_store *s;
    sl_error e;
    if (nh_store_open(db, 1, &s, &e) != SL_OK) {
        fprintf(stderr, "sluice-registry: %s\n", e.msg);
        return 1;
    }
    if (is_usage) {
        int status = usage_report(s, &uo);
        nh_store_close(s);
        return status;
    }
    out o = {.json = json, .now = (int64_t)time(NULL)};
    o.arr = json_array();
    sl_code rc;
    if (is_inst) {
        nh_table_init(&o.t, 5, instance_header);
        rc = nh_store_instances(s, host, project, instance_row, &o, &e);
    } else {
        nh_table_init(&o.t, 8, host_header);
        rc = nh_store_hosts(s, is_stale ? o.now - older : 0, host_row, &o, &e);
    }
    nh_store_close(s);
    return finish(&o, rc, &e);
}
