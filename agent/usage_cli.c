/* sluice-usage: usage reports of this host from the agent's usage store (read-only). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "sluice/cli.h"
#include "usage_query.h"

#define DEFAULT_CONFIG "/etc/sluice/agent.conf"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice-usage [--db FILE | --config FILE] [--from TIME] [--to TIME]\n"
            "                    [--project ID] [--format table|csv|json|svg] [--output FILE]\n"
            "\n"
            "GPU usage of this host's instances over a period, per project then per instance:\n"
            "hours existed, GPU hours, kernel hours, kernels, bytes moved, memory high-water,\n"
            "SLA entitlement (share x hours) against use, throttled hours, quota refusals.\n"
            "Reads the agent's usage store read-only (docs/usage.md).\n"
            "\n"
            "  --db FILE          the usage store (default: usage_db of the agent's config)\n"
            "  --config FILE      the agent's configuration (default %s)\n"
            "%s"
            "  -V, --version      the release\n"
            "  -h, --help         this text\n"
            "\n"
            "Exit status: 0 on success, 1 when the store cannot be read or the output written,\n"
            "2 on bad usage.\n",
            DEFAULT_CONFIG, sl_usage_options_help);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, NULL, 'd'},      {"config", required_argument, NULL, 'c'},
        {"from", required_argument, NULL, 'o'},    {"to", required_argument, NULL, 'o'},
        {"project", required_argument, NULL, 'o'}, {"format", required_argument, NULL, 'o'},
        {"output", required_argument, NULL, 'o'},  {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {NULL, 0, NULL, 0}};
    const char *db = NULL, *config = NULL;
    sl_usage_options uo;
    sl_usage_options_init(&uo);
    sl_error e = {0};
    int ch, idx;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":hV", opts, &idx)) != -1) {
        switch (ch) {
        case 'd':
            db = optarg;
            break;
        case 'c':
            config = optarg;
            break;
        case 'o':
            if (sl_usage_option(&uo, opts[idx].name, optarg, &e) != SL_OK)
                return sl_cli_usage_error("sluice-usage", "%s", e.msg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            return sl_cli_version("sluice-usage");
        default:
            return sl_cli_bad_option("sluice-usage", ch, argv);
        }
    }
    if (optind != argc)
        return sl_cli_usage_error("sluice-usage", "unexpected argument '%s'", argv[optind]);
    if (db && config)
        return sl_cli_usage_error("sluice-usage", "give --db or --config, not both");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (sl_usage_options_finish(&uo, (int64_t)ts.tv_sec * SL_USAGE_NS_PER_S + ts.tv_nsec, &e) !=
        SL_OK)
        return sl_cli_usage_error("sluice-usage", "%s", e.msg);
    static ag_config cfg;
    if (!db) {
        ag_config_defaults(&cfg);
        if (ag_config_load(config ? config : DEFAULT_CONFIG, &cfg, &e) != SL_OK) {
            fprintf(stderr, "sluice-usage: %s\n", e.msg);
            return 1;
        }
        db = cfg.usage_db;
    }
    ag_usage_store *s;
    if (ag_usage_store_open(db, 1, &s, &e) != SL_OK) {
        fprintf(stderr, "sluice-usage: %s\n", e.msg);
        return 1;
    }
    sl_usage_report *r = NULL;
    sl_code rc = ag_usage_query(s, uo.from_ns, uo.to_ns, uo.project, &r, &e);
    ag_usage_store_close(s);
    if (rc == SL_OK)
        rc = sl_usage_write(sl_usage_report_view(r), &uo, &e);
    sl_usage_report_free(r);
    if (rc != SL_OK) {
        fprintf(stderr, "sluice-usage: %s\n", e.msg);
        return 1;
    }
    return 0;
}
