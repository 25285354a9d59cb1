/* A small reader for Sluice's INI-style configuration files.
 *
 * Lines are `key = value`; blank lines and lines starting with '#' or ';' are skipped; a '#'
 * after a blank starts a comment to the end of the line (`key = 5  # why`); surrounding blanks
 * are trimmed. With a section callback, `[KIND NAME]` lines open a
 * section and start a fresh duplicate-key set. A key given twice in one section is an
 * error. Errors read `FILE:LINE: KEY: what is wrong`. The caller keeps its own key table
 * and semantics: the reader only yields (section, key, value, line). */
#ifndef SLUICE_CONF_H
#define SLUICE_CONF_H

#include <stddef.h>

#include "sluice/error.h"

/* Where a value came from, for error messages. */
typedef struct sl_conf_where {
    const char *file;
    int line;
    const char *key;
} sl_conf_where;

typedef struct sl_conf_reader {
    /* `[KIND NAME]`: w->key is "[KIND". NULL: '[' lines are read as ordinary lines. */
    sl_code (*section)(void *ctx, const sl_conf_where *w, const char *kind, const char *name,
                       sl_error *e);
    /* The message for a malformed section line, e.g. "expected [tier NAME]". */
    const char *section_syntax;
    /* `key = value`: w->key is the key; value is trimmed and may be empty. */
    sl_code (*key)(void *ctx, const sl_conf_where *w, const char *value, sl_error *e);
    void *ctx;
} sl_conf_reader;

/* Reads text (named name in messages), calling r's callbacks; stops at the first error. */
sl_code sl_conf_parse(const char *name, const char *text, const sl_conf_reader *r, sl_error *e);

/* Reads the file at path (at most max bytes, no NUL byte) into a malloc'd string *out. */
sl_code sl_conf_read_file(const char *path, size_t max, char **out, sl_error *e);

/* Fails with SL_ERR_CONFIG: "FILE:LINE: KEY: what". */
sl_code sl_conf_bad(const sl_conf_where *w, sl_error *e, const char *what);

/* A non-empty printable-ASCII string shorter than cap, copied into dst. */
sl_code sl_conf_str(const sl_conf_where *w, const char *v, char *dst, size_t cap, sl_error *e);

/* A decimal integer within lo..hi. */
sl_code sl_conf_int(const sl_conf_where *w, const char *v, long long lo, long long hi,
                    long long *out, sl_error *e);

/* N, Ns, Nm, Nh or Nd, within lo..hi seconds. */
sl_code sl_conf_duration(const sl_conf_where *w, const char *v, long lo, long hi, int *out,
                         sl_error *e);

#endif
