/* Database URLs (sluice/db_url.h): SQLite paths and OpenStack-style MariaDB URLs. */
#include "sluice/db_url.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const mariadb_schemes[] = {
    "mysql",
    "mysql+pymysql",
    "mysql+mysqldb",
    "mariadb",
    "mariadb+pymysql",
    "mariadb+mysqldb",
    "mysql+mariadbconnector",
    "mariadb+mariadbconnector",
    NULL,
};

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes [s, s + n) into out (cap bytes, NUL-terminated); -1 on a bad escape, a NUL
 * or no room. */
static int decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n)
                return -1;
            int a = hexval(s[i + 1]), b = hexval(s[i + 2]);
            if (a < 0 || b < 0)
                return -1;
            c = (char)(a << 4 | b);
            i += 2;
            if (c == '\0')
                return -1;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

static int printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
            return 0;
    return 1;
}

static sl_code sqlite_path(const char *p, sl_db_url *u, sl_error *e)
{
    size_t n = strlen(p);
    if (p[0] != '/')
        return sl_fail(e, SL_ERR_CONFIG, "database: a SQLite path must be absolute: %s", p);
    if (n >= sizeof u->path)
        return sl_fail(e, SL_ERR_CONFIG, "database: the path is longer than %zu bytes",
                       sizeof u->path - 1);
    if (!printable(p) || strchr(p, '?'))
        return sl_fail(e, SL_ERR_CONFIG, "database: the path holds a control character or '?'");
    u->engine = SL_DB_SQLITE;
    memcpy(u->path, p, n + 1);
    snprintf(u->display, sizeof u->display, "%s", p);
    return SL_OK;
}

static sl_code timeout(const char *key, const char *v, int *out, sl_error *e)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 1 || n > 3600)
        return sl_fail(e, SL_ERR_CONFIG, "database URL: %s: seconds, 1..3600", key);
    *out = (int)n;
    return SL_OK;
}

static sl_code must_be_true(const char *key, const char *v, sl_error *e)
{
    if (!strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes"))
        return SL_OK;
    return sl_fail(e, SL_ERR_CONFIG,
                   "database URL: %s=%s: Sluice always verifies the database server's "
                   "certificate and name; only true is accepted",
                   key, v);
}

static sl_code file_arg(const char *key, const char *v, char *dst, sl_error *e)
{
    if (v[0] != '/')
        return sl_fail(e, SL_ERR_CONFIG, "database URL: %s: must be an absolute path", key);
    if (strlen(v) >= SL_DB_URL_PATH_MAX)
        return sl_fail(e, SL_ERR_CONFIG, "database URL: %s: path too long", key);
    strcpy(dst, v);
    return SL_OK;
}

/* One key=value of the query; seen: a bit per key, for "at most once". */
static sl_code query_item(const char *k, const char *v, sl_db_url *u, unsigned *seen, sl_error *e)
{
    static const char *const keys[] = {
        "charset",
        "unix_socket",
        "ssl_ca",
        "ssl_capath",
        "ssl_cert",
        "ssl_key",
        "ssl_verify_cert",
        "ssl_verify_identity",
        "ssl_check_hostname",
        "connect_timeout",
        "read_timeout",
        "write_timeout",
        NULL,
    };
    int i = 0;
    while (keys[i] && strcmp(keys[i], k))
        i++;
    if (!keys[i])
        return sl_fail(e, SL_ERR_CONFIG,
                       "database URL: unknown query key '%.40s' (known: charset, unix_socket, "
                       "ssl_ca, ssl_capath, ssl_cert, ssl_key, connect_timeout, read_timeout, "
                       "write_timeout)",
                       k);
    if (*seen & 1u << i)
        return sl_fail(e, SL_ERR_CONFIG, "database URL: %s given twice", k);
    *seen |= 1u << i;
    switch (i) {
    case 0:
        if (strcmp(v, "utf8") && strcmp(v, "utf8mb3") && strcmp(v, "utf8mb4"))
            return sl_fail(e, SL_ERR_CONFIG, "database URL: charset: utf8, utf8mb3 or utf8mb4");
        strcpy(u->charset, v);
        return SL_OK;
    case 1:
        return file_arg(k, v, u->socket, e);
    case 2:
        return file_arg(k, v, u->ssl_ca, e);
    case 3:
        return file_arg(k, v, u->ssl_capath, e);
    case 4:
        return file_arg(k, v, u->ssl_cert, e);
    case 5:
        return file_arg(k, v, u->ssl_key, e);
    case 6:
    case 7:
    case 8:
        return must_be_true(k, v, e);
    case 9:
        return timeout(k, v, &u->connect_timeout, e);
    case 10:
        return timeout(k, v, &u->read_timeout, e);
    default:
        return timeout(k, v, &u->write_timeout, e);
    }
}

static sl_code parse_query(const char *q, sl_db_url *u, sl_error *e)
{
    unsigned seen = 0;
    while (*q) {
        size_t n = strcspn(q, "&");
        const char *eq = memchr(q, '=', n);
        if (!eq || eq == q)
            return sl_fail(e, SL_ERR_CONFIG, "database URL: query items are key=value");
        char k[32], v[SL_DB_URL_PATH_MAX];
        if (decode(q, (size_t)(eq - q), k, sizeof k) || !*k)
            return sl_fail(e, SL_ERR_CONFIG, "database URL: a query key is too long or bad");
        if (decode(eq + 1, n - (size_t)(eq + 1 - q), v, sizeof v) || !*v || !printable(v))
            return sl_fail(e, SL_ERR_CONFIG, "database URL: %s: empty, too long or not text", k);
        sl_code rc = query_item(k, v, u, &seen, e);
        if (rc != SL_OK)
            return rc;
        q += n;
        if (*q == '&' && !*++q)
            return sl_fail(e, SL_ERR_CONFIG, "database URL: trailing '&'");
    }
    return SL_OK;
}

static int valid_host(const char *h)
{
    if (strlen(h) > 253)
        return 0;
    for (const char *p = h; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '.' || *p == '_'))
            return 0;
    return 1;
}

/* HOST[:PORT] or [V6][:PORT] (may be empty with unix_socket). */
static sl_code parse_hostport(const char *s, size_t n, sl_db_url *u, sl_error *e)
{
    const char *port = NULL;
    size_t hn = n;
    if (n && s[0] == '[') {
        const char *end = memchr(s, ']', n);
        if (!end)
            return sl_fail(e, SL_ERR_CONFIG, "database URL: '[' without ']' in the host");
        hn = (size_t)(end - s - 1);
        if (hn >= sizeof u->host)
            return sl_fail(e, SL_ERR_CONFIG, "database URL: host too long");
        memcpy(u->host, s + 1, hn);
        u->host[hn] = '\0';
        struct in6_addr a6;
        if (inet_pton(AF_INET6, u->host, &a6) != 1)
            return sl_fail(e, SL_ERR_CONFIG, "database URL: [%s] is not an IPv6 address", u->host);
        if (end + 1 < s + n) {
            if (end[1] != ':')
                return sl_fail(e, SL_ERR_CONFIG, "database URL: expected :PORT after ]");
            port = end + 2;
        }
    } else {
        const char *colon = memchr(s, ':', n);
        if (colon) {
            hn = (size_t)(colon - s);
            port = colon + 1;
        }
        if (hn >= sizeof u->host)
            return sl_fail(e, SL_ERR_CONFIG, "database URL: host too long");
        memcpy(u->host, s, hn);
        u->host[hn] = '\0';
        if (!valid_host(u->host))
            return sl_fail(e, SL_ERR_CONFIG, "database URL: '%.64s' is not a host name", u->host);
    }
    if (port) {
        char buf[8];
        size_t pn = n - (size_t)(port - s);
        if (pn == 0 || pn >= sizeof buf)
            return sl_fail(e, SL_ERR_CONFIG, "database URL: port: 1..65535");
        memcpy(buf, port, pn);
        buf[pn] = '\0';
        char *end;
        long p = strtol(buf, &end, 10);
        if (*end || p < 1 || p > 65535)
            return sl_fail(e, SL_ERR_CONFIG, "database URL: port: 1..65535");
        u->port = (int)p;
    }
    return SL_OK;
}

static int valid_dbname(const char *d)
{
    size_t n = strlen(d);
    if (n == 0 || n > 64)
        return 0;
    for (; *d; d++)
        if (!((*d >= 'a' && *d <= 'z') || (*d >= 'A' && *d <= 'Z') || (*d >= '0' && *d <= '9') ||
              *d == '_' || *d == '$'))
            return 0;
    return 1;
}

static sl_code mariadb_url(const char *rest, sl_db_url *u, sl_error *e)
{
    u->engine = SL_DB_MARIADB;
    u->connect_timeout = 5;
    u->read_timeout = u->write_timeout = 30;
    strcpy(u->charset, "utf8mb4");
    size_t an = strcspn(rest, "/?");
    if (rest[an] != '/')
        return sl_fail(e, SL_ERR_CONFIG, "database URL: no /DATABASE after the host");
    /* authority: [user[:password]@]host[:port]; the last '@' ends the user part */
    const char *at = NULL;
    for (size_t i = 0; i < an; i++)
        if (rest[i] == '@')
            at = rest + i;
    const char *hp = rest;
    if (at) {
        const char *colon = memchr(rest, ':', (size_t)(at - rest));
        size_t un = colon ? (size_t)(colon - rest) : (size_t)(at - rest);
        if (decode(rest, un, u->user, sizeof u->user) || !printable(u->user))
            return sl_fail(e, SL_ERR_CONFIG, "database URL: the user name is bad or too long");
        if (colon &&
            (decode(colon + 1, (size_t)(at - colon - 1), u->password, sizeof u->password) ||
             !printable(u->password)))
            return sl_fail(e, SL_ERR_CONFIG,
                           "database URL: the password is too long or holds a bad escape");
        hp = at + 1;
    }
    sl_code rc = parse_hostport(hp, (size_t)(rest + an - hp), u, e);
    if (rc != SL_OK)
        return rc;
    const char *db = rest + an + 1;
    size_t dn = strcspn(db, "?");
    if (dn >= sizeof u->database || decode(db, dn, u->database, sizeof u->database) ||
        !valid_dbname(u->database))
        return sl_fail(e, SL_ERR_CONFIG,
                       "database URL: the database name must be 1..64 of A-Z a-z 0-9 _ $");
    if (db[dn] == '?' && (rc = parse_query(db + dn + 1, u, e)) != SL_OK)
        return rc;
    if (!u->user[0])
        return sl_fail(e, SL_ERR_CONFIG, "database URL: no user name (USER:PASSWORD@HOST)");
    if (!u->host[0] && !u->socket[0])
        return sl_fail(e, SL_ERR_CONFIG, "database URL: no host and no unix_socket");
    if (!!u->ssl_cert[0] != !!u->ssl_key[0])
        return sl_fail(e, SL_ERR_CONFIG, "database URL: ssl_cert and ssl_key go together");
    u->tls = u->ssl_ca[0] || u->ssl_capath[0];
    if (u->ssl_cert[0] && !u->tls)
        return sl_fail(e, SL_ERR_CONFIG,
                       "database URL: ssl_cert needs ssl_ca or ssl_capath (the server is "
                       "verified)");
    if (u->socket[0] && !u->host[0])
        snprintf(u->display, sizeof u->display, "mysql://%s@localhost/%s (socket %s)", u->user,
                 u->database, u->socket);
    else
        snprintf(u->display, sizeof u->display, "mysql://%s@%s%s%s:%d/%s%s", u->user,
                 strchr(u->host, ':') ? "[" : "", u->host, strchr(u->host, ':') ? "]" : "",
                 u->port ? u->port : 3306, u->database, u->tls ? " (TLS)" : "");
    return SL_OK;
}

sl_code sl_db_url_parse(const char *s, sl_db_url *u, sl_error *e)
{
    memset(u, 0, sizeof *u);
    if (!s || !*s)
        return sl_fail(e, SL_ERR_CONFIG, "database: empty");
    const char *sep = strstr(s, "://");
    if (!sep)
        return sqlite_path(s, u, e);
    size_t sn = (size_t)(sep - s);
    if (sn == 6 && !strncmp(s, "sqlite", 6)) {
        /* SQLAlchemy: sqlite:///relative, sqlite:////absolute */
        if (sep[3] != '/' || sep[4] != '/')
            return sl_fail(e, SL_ERR_CONFIG,
                           "database: sqlite URLs are sqlite:////ABSOLUTE/PATH (four slashes)");
        return sqlite_path(sep + 4, u, e);
    }
    for (size_t i = 0; mariadb_schemes[i]; i++)
        if (strlen(mariadb_schemes[i]) == sn && !strncmp(s, mariadb_schemes[i], sn))
            return mariadb_url(sep + 3, u, e);
    return sl_fail(e, SL_ERR_CONFIG,
                   "database: unknown URL scheme '%.*s' (an absolute path, sqlite:////PATH, "
                   "mysql+pymysql://... or mariadb://...)",
                   (int)(sn > 40 ? 40 : sn), s);
}
