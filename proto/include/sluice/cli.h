/* What the command line of every Sluice program shares: --version, and a wrong option or value
 * answered with one line that names it and points at --help (never the whole help text).
 * Use getopt_long with an optstring that starts with ':' and opterr = 0, then hand '?' and ':'
 * to sl_cli_bad_option. */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

/* The release, e.g. "0.1.0". */
const char *sl_version(void);

/* Prints "PROG VERSION" on stdout; returns 0 (the exit status). */
int sl_cli_version(const char *prog);

/* Prints "PROG: WHAT; try 'PROG --help'" on stderr; returns 2 (the exit status). */
int sl_cli_usage_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* For getopt_long's answer c ('?': unknown option, ':': missing value) after argv[optind - 1]:
 * prints the one line and returns 2. */
int sl_cli_bad_option(const char *prog, int c, char **argv);

#endif
