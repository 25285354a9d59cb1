/* INI-style configuration reader shared by the daemons. */
#include "sluice/conf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEEN_MAX 64
#define KEY_MAX  32

sl_code sl_conf_bad(const sl_conf_where *w, sl_error *e, const char *what)
{
    return sl_fail(e, SL_ERR_CONFIG, "%s:%d: %s: %s", w->file, w->line, w->key, what);
}

sl_code sl_conf_str(const sl_conf_where *w, const char *v, char *dst, size_t cap, sl_error *e)
{
    if (!*v)
        return sl_conf_bad(w, e, "empty value");
    size_t n = strlen(v);
    if (n >= cap)
        return sl_conf_bad(w, e, "value too long");
    for (const char *c = v; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            return sl_conf_bad(w, e, "value is not printable ASCII");
    memcpy(dst, v, n + 1);
    return SL_OK;
}

sl_code sl_conf_int(const sl_conf_where *w, const char *v, long long lo, long long hi,
                    long long *out, sl_error *e)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || errno)
        return sl_conf_bad(w, e, "not an integer");
    if (n < lo || n > hi) {
        char msg[96];
        snprintf(msg, sizeof msg, "%lld outside %lld..%lld", n, lo, hi);
        return sl_conf_bad(w, e, msg);
    }
    *out = n;
    return SL_OK;
}

sl_code sl_conf_duration(const sl_conf_where *w, const char *v, long lo, long hi, int *out,
                         sl_error *e)
{
    static const char syntax[] = "expected a duration such as 3600, 90m, 12h or 7d";
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10), mul = 1;
    if (!*v || errno || end == v || n < 0 || (end[0] && end[1]))
        return sl_conf_bad(w, e, syntax);
    switch (*end) {
    case '\0':
    case 's':
        break;
    case 'm':
        mul = 60;
        break;
    case 'h':
        mul = 3600;
        break;
    case 'd':
        mul = 86400;
        break;
    default:
        return sl_conf_bad(w, e, syntax);
    }
    if (n > hi / mul || n * mul < lo) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s outside %ld..%ld seconds", v, lo, hi);
        return sl_conf_bad(w, e, msg);
    }
    *out = (int)(n * mul);
    return SL_OK;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        *--end = '\0';
    return s;
}

/* A '#' after a blank starts a comment that runs to the end of the line: "key = 5  # why". */
static char *strip_comment(char *s)
{
    for (char *p = s + 1; *p; p++)
        if (*p == '#' && (p[-1] == ' ' || p[-1] == '\t')) {
            *p = '\0';
            break;
        }
    return s;
}

/* "[KIND NAME]"; w->key is the line as cut so far ("[KIND" for the callback). */
static sl_code section(const sl_conf_reader *r, sl_conf_where *w, char *s, sl_error *e)
{
    size_t n = strlen(s);
    if (s[n - 1] != ']')
        return sl_conf_bad(w, e, r->section_syntax);
    s[n - 1] = '\0';
    char *kind = trim(s + 1);
    char *sp = strpbrk(kind, " \t");
    if (!sp)
        return sl_conf_bad(w, e, r->section_syntax);
    *sp = '\0';
    char *name = trim(sp + 1);
    return r->section(r->ctx, w, kind, name, e);
}

sl_code sl_conf_parse(const char *name, const char *text, const sl_conf_reader *r, sl_error *e)
{
    char *copy = strdup(text);
    if (!copy)
        return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", name);
    sl_code rc = SL_OK;
    char seen[SEEN_MAX][KEY_MAX];
    int nseen = 0, line = 0;
    char *save = NULL;
    for (char *ln = copy; rc == SL_OK && ln; ln = save) {
        save = strchr(ln, '\n');
        if (save)
            *save++ = '\0';
        line++;
        char *s = trim(ln);
        if (!*s || *s == '#' || *s == ';')
            continue;
        s = trim(strip_comment(s));
        sl_conf_where w = {name, line, s};
        if (*s == '[' && r->section) {
            rc = section(r, &w, s, e);
            nseen = 0;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = sl_fail(e, SL_ERR_CONFIG, "%s:%d: expected key = value", name, line);
            break;
        }
        *eq = '\0';
        char *k = trim(s), *v = trim(eq + 1);
        w.key = k;
        if (!*k || strlen(k) >= KEY_MAX) {
            rc = sl_conf_bad(&w, e, "missing or too long key");
            break;
        }
        for (int i = 0; i < nseen && rc == SL_OK; i++)
            if (!strcmp(seen[i], k))
                rc = sl_conf_bad(&w, e, "key given twice");
        if (rc != SL_OK)
            break;
        if (nseen < SEEN_MAX)
            snprintf(seen[nseen++], sizeof seen[0], "%s", k);
        rc = r->key(r->ctx, &w, v, e);
    }
    free(copy);
    return rc;
}

sl_code sl_conf_read_file(const char *path, size_t max, char **out, sl_error *e)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return sl_fail(e, SL_ERR_CONFIG, "%s: cannot open: %s", path, strerror(errno));
    char *buf = malloc(max + 1);
    if (!buf) {
        fclose(f);
        return sl_fail(e, SL_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t n = fread(buf, 1, max + 1, f);
    fclose(f);
    if (n > max) {
        free(buf);
        return sl_fail(e, SL_ERR_CONFIG, "%s: larger than %zu bytes", path, max);
    }
    if (memchr(buf, '\0', n)) {
        free(buf);
        return sl_fail(e, SL_ERR_CONFIG, "%s: holds a NUL byte", path);
    }
    buf[n] = '\0';
    *out = buf;
    return SL_OK;
}
