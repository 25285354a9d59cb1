/* sluice-registry: the operator's view of the nova-hook registry (hosts, instances, stale,
 * usage: read-only) and its management (db-sync, db-version, prune, token-keys:
 * cli_manage.c). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_manage.h"
#include "config.h"
#include "keyrepo.h"
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
    int shared; /* a record of the period carries its shared GPU time */
} usage_ctx;

static int on_usage(const sl_usage_rec *u, void *ud)
{
    usage_ctx *c = ud;
    c->shared |= !u->shared_unknown;
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
            "usage: sluice-registry [--config FILE | --db DATABASE] [--json] COMMAND [OPTIONS]\n"
            "\n"
            "Reads and manages the nova-hook registry.\n"
            "\n"
            "commands (read-only):\n"
            "  hosts                              agents: endpoint, slots, used, GPUs, last seen\n"
            "  instances [--host H] [--project P] instances placed on Sluice hosts\n"
            "  stale [--older-than SECONDS]       agents not heard from for that long (default "
            "%d)\n"
            "  usage [--from TIME] [--to TIME] [--project ID] [--format F] [--output FILE]\n"
            "                                     GPU usage of the cluster over a period, per\n"
            "                                     project then per instance (docs/usage.md)\n"
            "  db-version                         the schema version of the database\n"
            "commands that write:\n"
            "  db-sync                            create or upgrade the registry schema (once,\n"
            "                                     on one controller, before nova-hooks start)\n"
            "  prune [--days N]                   retention now: usage and placement history\n"
            "                                     older than N days (default: the config's\n"
            "                                     usage_retention_days), tokens expired a day\n"
            "  token-keys setup|rotate|public [--repository DIR] [--max-active N]\n"
            "                                     the token signing key repository: create it,\n"
            "                                     rotate it (keep N keys, default %d), print\n"
            "                                     the public keys agents verify with\n"
            "\n"
            "  --config FILE  read database, token_key_repository and usage_retention_days\n"
            "                 from sluice-novahook's configuration (so no password is typed)\n"
            "  --db DATABASE  a SQLite path or a database URL (default %s)\n"
            "  --json         JSON instead of an aligned table (usage: --format json)\n"
            "  --version      the release\n"
            "  --help         this text\n"
            "\n"
            "usage options:\n%s",
            DEFAULT_STALE, NH_KEYREPO_KEEP_ACTIVE, DEFAULT_DB, sl_usage_options_help);
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
    usage_ctx c = {NULL, &e, SL_OK, 0};
    sl_code rc = sl_usage_report_new(uo->from_ns, uo->to_ns, project, &c.r, &e);
    if (rc == SL_OK)
        rc = nh_store_usage_records(s, uo->from_ns, uo->to_ns, project, on_usage, &c, &e);
    if (rc == SL_OK && (rc = c.rc) == SL_OK)
        rc = nh_store_lifetimes(s, uo->from_ns, uo->to_ns, project, now, on_life, &c, &e);
    if (rc == SL_OK && c.shared) /* agents that forward it: the shared figure beside the raw */
        sl_usage_report_with_shared(c.r);
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

typedef struct cli {
    const char *config, *db, *host, *project, *repo;
    long long older;
    int json, usage_opts, have_format, days, max_active;
    sl_usage_options uo;
    nh_config cfg;
} cli;

static int bad(const char *msg)
{
    return sl_cli_usage_error("sluice-registry", "%s", msg);
}

/* A whole number lo..hi of an option, or -1. */
static long long number(const char *v, long long lo, long long hi)
{
    char *end;
    long long n = strtoll(v, &end, 10);
    return *v && !*end && n >= lo && n <= hi ? n : -1;
}

static int parse(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {{"db", required_argument, NULL, 'd'},
                                         {"config", required_argument, NULL, 'c'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"host", required_argument, NULL, 'H'},
                                         {"project", required_argument, NULL, 'p'},
                                         {"older-than", required_argument, NULL, 'o'},
                                         {"days", required_argument, NULL, 'D'},
                                         {"repository", required_argument, NULL, 'r'},
                                         {"max-active", required_argument, NULL, 'm'},
                                         {"from", required_argument, NULL, 'u'},
                                         {"to", required_argument, NULL, 'u'},
                                         {"format", required_argument, NULL, 'u'},
                                         {"output", required_argument, NULL, 'u'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'V'},
                                         {NULL, 0, NULL, 0}};
    int ch, idx;
    sl_error ue;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":hV", opts, &idx)) != -1) {
        switch (ch) {
        case 'd':
            c->db = optarg;
            break;
        case 'c':
            c->config = optarg;
            break;
        case 'j':
            c->json = 1;
            break;
        case 'H':
            if (!nh_valid_host(c->host = optarg))
                return bad("--host: not a host name");
            break;
        case 'p':
            if (!nh_valid_id(c->project = optarg))
                return bad("--project: not a project id");
            break;
        case 'u':
            if (sl_usage_option(&c->uo, opts[idx].name, optarg, &ue) != SL_OK)
                return bad(ue.msg);
            c->usage_opts = 1;
            c->have_format |= !strcmp(opts[idx].name, "format");
            break;
        case 'o':
            if ((c->older = number(optarg, 1, 100000000)) < 0)
                return bad("--older-than: seconds, 1..100000000");
            break;
        case 'D':
            if ((c->days = (int)number(optarg, 1, 36500)) < 0)
                return bad("--days: 1..36500");
            break;
        case 'r':
            c->repo = optarg;
            break;
        case 'm':
            if ((c->max_active = (int)number(optarg, NH_KEYREPO_MIN_ACTIVE, NH_KEYREPO_MAX - 1)) <
                0)
                return bad("--max-active: 2..31 keys");
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            return sl_cli_version("sluice-registry");
        default:
            return sl_cli_bad_option("sluice-registry", ch, argv);
        }
    }
    return -1;
}

/* --config: the database, the key repository and the retention of sluice-novahook's file;
 * --db and --repository win. */
static int from_config(cli *c)
{
    if (!c->config)
        return -1;
    sl_error e;
    nh_config_defaults(&c->cfg);
    if (nh_config_load(c->config, &c->cfg, &e) != SL_OK) {
        fprintf(stderr, "sluice-registry: %s\n", e.msg);
        return 1;
    }
    if (!c->db)
        c->db = c->cfg.database;
    if (!c->repo && c->cfg.token_key_repository[0])
        c->repo = c->cfg.token_key_repository;
    if (!c->days)
        c->days = c->cfg.usage_retention_days;
    return -1;
}

static int manage(cli *c, const char *cmd, const char *arg)
{
    if (!strcmp(cmd, "token-keys")) {
        if (!arg || (strcmp(arg, "setup") && strcmp(arg, "rotate") && strcmp(arg, "public")))
            return bad("token-keys: setup, rotate or public");
        if (!c->repo)
            return bad("token-keys: --repository DIR (or --config with token_key_repository)");
        return nh_cli_token_keys(arg, c->repo,
                                 c->max_active ? c->max_active : NH_KEYREPO_KEEP_ACTIVE);
    }
    if (arg)
        return bad("one command, no argument after it");
    if (!strcmp(cmd, "db-sync"))
        return nh_cli_db_sync(c->db);
    if (!strcmp(cmd, "db-version"))
        return nh_cli_db_version(c->db);
    return nh_cli_prune(c->db, c->days);
}

static int report(cli *c, const char *cmd)
{
    int is_stale = !strcmp(cmd, "stale");
    int is_inst = !strcmp(cmd, "instances"), is_usage = !strcmp(cmd, "usage");
    sl_error ue;
    if ((c->host && !is_inst) || (c->project && !is_inst && !is_usage))
        return bad("--host goes with instances, --project with instances and usage");
    if (c->usage_opts && !is_usage)
        return bad("--from, --to, --format and --output go with usage");
    if (is_usage && c->project && sl_usage_option(&c->uo, "project", c->project, &ue) != SL_OK)
        return bad(ue.msg);
    if (is_usage && c->json && !c->have_format)
        c->uo.format = SL_USAGE_JSON;
    nh_store *s;
    sl_error e;
    if (nh_store_open(c->db, NH_STORE_READ, &s, &e) != SL_OK) {
        fprintf(stderr, "sluice-registry: %s\n", e.msg);
        return 1;
    }
    if (is_usage) {
        int status = usage_report(s, &c->uo);
        nh_store_close(s);
        return status;
    }
    out o = {.json = c->json, .now = (int64_t)time(NULL)};
    o.arr = json_array();
    sl_code rc;
    if (is_inst) {
        nh_table_init(&o.t, 5, instance_header);
        rc = nh_store_instances(s, c->host, c->project, instance_row, &o, &e);
    } else {
        nh_table_init(&o.t, 8, host_header);
        rc = nh_store_hosts(s, is_stale ? o.now - c->older : 0, host_row, &o, &e);
    }
    nh_store_close(s);
    return finish(&o, rc, &e);
}

int main(int argc, char **argv)
{
    static const char *const reports[] = {"hosts", "instances", "stale", "usage", NULL};
    static const char *const writes[] = {"db-sync", "db-version", "prune", "token-keys", NULL};
    cli c;
    memset(&c, 0, sizeof c);
    c.older = DEFAULT_STALE;
    sl_usage_options_init(&c.uo);
    int status = parse(&c, argc, argv);
    if (status >= 0)
        return status;
    if (optind == argc)
        return bad("a command is needed (hosts, instances, stale, usage, db-version, db-sync, "
                   "prune, token-keys)");
    if (optind != argc - 1 && !(optind == argc - 2 && !strcmp(argv[optind], "token-keys")))
        return sl_cli_usage_error("sluice-registry", "unexpected argument '%s'", argv[argc - 1]);
    if ((status = from_config(&c)) >= 0)
        return status;
    if (!c.db)
        c.db = DEFAULT_DB;
    const char *cmd = argv[optind], *arg = optind + 1 < argc ? argv[optind + 1] : NULL;
    for (size_t i = 0; writes[i]; i++)
        if (!strcmp(cmd, writes[i]))
            return manage(&c, cmd, arg);
    for (size_t i = 0; reports[i]; i++)
        if (!strcmp(cmd, reports[i]))
            return report(&c, cmd);
    return sl_cli_usage_error("sluice-registry",
                              "unknown command '%s' (hosts, instances, stale, usage, db-version, "
                              "db-sync, prune, token-keys)",
                              cmd);
}
