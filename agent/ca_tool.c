/* sluice-agent-ca: initialise, import and show the agent's host CA (docs/enrollment.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ca.h"
#include "sluice/cli.h"
#include "sluice/log.h"

#define DEFAULT_DIR "/var/lib/sluice/ca"

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice-agent-ca COMMAND [options]\n"
               "\n"
               "The host CA of sluice-agent: it signs the client certificates of enrolled guests\n"
               "and the server certificates of the tenant backends and the enrollment endpoint.\n"
               "\n"
               "commands:\n"
               "  init     create a self-signed EC P-256 CA in the directory if it has none\n"
               "           (sluice-agent does the same at start)\n"
               "  import   install an intermediate CA signed by a deployment CA:\n"
               "           --cert FILE   the intermediate certificate (PEM, a CA certificate)\n"
               "           --key FILE    its private key (PEM, EC P-256/P-384 or Ed25519)\n"
               "           --chain FILE  the deployment CA certificates above it, up to the root\n"
               "           --force       replace a CA already there (its certificates stop\n"
               "                         verifying: guests must enroll again)\n"
               "  show     print the CA (subject, issuer, validity, key, fingerprint, chain);\n"
               "           --pem prints the bundle guests receive instead; never writes\n"
               "\n"
               "options:\n"
               "  --dir DIR  the CA directory (default " DEFAULT_DIR ")\n"
               "  --version  the release\n"
               "  --help     this text\n"
               "\n"
               "Exit status: 0 done, 1 failed (the message says what), 2 usage error.\n");
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"dir", required_argument, NULL, 'd'},
        {"cert", required_argument, NULL, 'c'},
        {"key", required_argument, NULL, 'k'},
        {"chain", required_argument, NULL, 'C'},
        {"force", no_argument, NULL, 'f'},
        {"pem", no_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = DEFAULT_DIR, *cert = NULL, *key = NULL, *chain = NULL;
    int force = 0, pem = 0, c;
    opterr = 0;
    sl_log_set_identifier("sluice-agent-ca");
    while ((c = getopt_long(argc, argv, ":hV", longs, NULL)) != -1) {
        switch (c) {
        case 'd':
            dir = optarg;
            break;
        case 'c':
            cert = optarg;
            break;
        case 'k':
            key = optarg;
            break;
        case 'C':
            chain = optarg;
            break;
        case 'f':
            force = 1;
            break;
        case 'p':
            pem = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            return sl_cli_version("sluice-agent-ca");
        default:
            return sl_cli_bad_option("sluice-agent-ca", c, argv);
        }
    }
    if (optind == argc)
        return sl_cli_usage_error("sluice-agent-ca", "a command is needed (init, import, show)");
    if (optind != argc - 1)
        return sl_cli_usage_error("sluice-agent-ca", "unexpected argument '%s'", argv[optind + 1]);
    const char *cmd = argv[optind];
    sl_error e;
    sl_error_clear(&e);
    if (strcmp(cmd, "import") == 0) {
        if (!cert || !key || !chain) {
            fprintf(stderr, "sluice-agent-ca: import needs --cert, --key and --chain\n");
            return 2;
        }
        if (ag_ca_import(dir, cert, key, chain, force, &e) != SL_OK) {
            fprintf(stderr, "sluice-agent-ca: import failed: %s\n", e.msg);
            return 1;
        }
    } else if (strcmp(cmd, "init") != 0 && strcmp(cmd, "show") != 0) {
        return sl_cli_usage_error("sluice-agent-ca", "unknown command '%s' (init, import, show)",
                                  cmd);
    }
    ag_ca *ca = NULL;
    ag_ca_opts o = {.existing_only = strcmp(cmd, "show") == 0};
    if (ag_ca_open(dir, &o, &ca, &e) != SL_OK) {
        fprintf(stderr, "sluice-agent-ca: %s: %s\n", dir, e.msg);
        return 1;
    }
    int rc = 0;
    if (pem) {
        fputs(ag_ca_cert_pem(ca), stdout);
    } else {
        char *text = NULL;
        if (ag_ca_describe(ca, &text, &e) == SL_OK) {
            printf("directory:   %s\n%s", dir, text);
        } else {
            fprintf(stderr, "sluice-agent-ca: %s\n", e.msg);
            rc = 1;
        }
        free(text);
    }
    ag_ca_close(ca);
    return rc;
}
