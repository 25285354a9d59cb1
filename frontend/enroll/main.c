/* sluice-enroll: enroll this guest with its host's sluice-agent (docs/enrollment.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "enroll_client.h"
#include "sluice/cli.h"
#include "sluice/timefmt.h"
#include "status.h"
#include "vendordata.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice-enroll [options]\n"
            "\n"
            "Reads this instance's Sluice entry of vendor_data2.json: from Nova's config drive\n"
            "when one is mounted at " SE_CONFIG_DRIVE_DIR " and its token is still\n"
            "valid, else from the metadata service. Makes a private key (it never leaves the\n"
            "guest) and a certificate request, enrolls\n"
            "with the host's sluice-agent and writes client.key, client.pem, ca.pem and\n"
            "backend.conf for the Sluice frontend. While the current certificate has more\n"
            "than a third of its lifetime left it only asks the agent where the backend is now,\n"
            "updates backend.conf if it moved, and enrolls again when the agent no longer grants\n"
            "the certificate or the backend refuses it (run it from a timer).\n"
            "\n"
            "options:\n"
            "  --source URL|FILE  vendor_data2.json (default: the config drive's, then\n"
            "                     " SE_DEFAULT_SOURCE ")\n"
            "  --key NAME         our key in it (default " SE_DEFAULT_KEY ")\n"
            "  --dir DIR          where to write the files (default " SE_DEFAULT_DIR ")\n"
            "  --renew            enroll even if the current certificate is still good\n"
            "  --status           print whether this instance is enrolled, until when, and\n"
            "                     whether its backend answers and accepts the certificate;\n"
            "                     exit 0 when all is well, 1 otherwise; changes nothing\n"
            "  --timeout SECONDS  for the metadata fetch and for the agent, each (default 10)\n"
            "  --quiet            print nothing on success\n"
            "  --version          the release\n"
            "  --help             this text\n"
            "\n"
            "Exit status: 0 enrolled or nothing to do, 1 failed, 2 usage error, 3 the agent\n"
            "refused (the message names the reason; see docs/enrollment.md, Troubleshooting).\n");
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"source", required_argument, NULL, 's'},  {"key", required_argument, NULL, 'k'},
        {"dir", required_argument, NULL, 'd'},     {"renew", no_argument, NULL, 'r'},
        {"timeout", required_argument, NULL, 't'}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},          {"version", no_argument, NULL, 'V'},
        {"status", no_argument, NULL, 'S'},        {NULL, 0, NULL, 0},
    };
    se_opts o = {.check_grant = 1};
    int quiet = 0, status = 0, c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hV", longs, NULL)) != -1) {
        switch (c) {
        case 's':
            o.source = optarg;
            break;
        case 'k':
            o.key = optarg;
            break;
        case 'd':
            o.dir = optarg;
            break;
        case 'r':
            o.renew = 1;
            break;
        case 't': {
            char *end = NULL;
            long t = strtol(optarg, &end, 10);
            if (!*optarg || *end || t < 1 || t > 600)
                return sl_cli_usage_error("sluice-enroll", "--timeout: 1..600 seconds");
            o.timeout_ms = (int)t * 1000;
            break;
        }
        case 'q':
            quiet = 1;
            break;
        case 'S':
            status = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            return sl_cli_version("sluice-enroll");
        default:
            return sl_cli_bad_option("sluice-enroll", c, argv);
        }
    }
    if (optind != argc)
        return sl_cli_usage_error("sluice-enroll", "unexpected argument '%s'", argv[optind]);
    const char *dir = o.dir ? o.dir : SE_DEFAULT_DIR;
    if (status) {
        se_status st;
        se_status_read(dir, o.timeout_ms > 0 ? o.timeout_ms : 5000, &st);
        return se_status_print(&st, dir, stdout);
    }
    se_result r;
    sl_error e;
    if (se_enroll(&o, &r, &e) != SL_OK) {
        for (int i = 0; i < r.n_tried; i++)
            fprintf(stderr, "sluice-enroll: %s\n", r.tried[i]);
        fprintf(stderr, "sluice-enroll: %s%s\n", r.n_tried ? "then " : "", e.msg);
        return e.code == SL_ERR_REFUSED ? 3 : 1;
    }
    char until[48];
    sl_time_utc(r.not_after, until, sizeof until);
    if (r.regrant) /* said even with --quiet: the timer's journal should show why */
        printf("sluice-enroll: the current certificate is no longer accepted (%s): enrolled "
               "again\n",
               r.regrant_why);
    if (r.moved) /* printed even with --quiet: the frontend's endpoint changed */
        printf("sluice-enroll: the backend of instance %s moved from %s to %s; %s/backend.conf "
               "updated\n",
               r.instance_id, r.old_endpoint, r.endpoint, dir);
    if (!quiet && r.enrolled)
        printf("sluice-enroll: enrolled instance %s (project %s); certificate valid until %s; "
               "backend %s; files in %s\n",
               r.instance_id, r.project_id, until, r.endpoint, dir);
    else if (!quiet && r.located && !r.moved)
        printf("sluice-enroll: the certificate in %s is still good (until %s); backend %s "
               "(confirmed by the agent%s%s)\n",
               dir, until, r.endpoint, r.regrant_why[0] ? "; " : "", r.regrant_why);
    else if (!quiet && !r.located)
        printf("sluice-enroll: the certificate in %s is still good (until %s); the backend "
               "endpoint could not be confirmed: %s%s%s%s\n",
               dir, until, r.note[0] ? r.note : "no enroll_endpoint known",
               r.regrant_why[0] ? " (" : "", r.regrant_why, r.regrant_why[0] ? ")" : "");
    return 0;
}
