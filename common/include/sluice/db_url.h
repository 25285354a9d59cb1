/* Database URLs, in the form OpenStack services write them (oslo.db / SQLAlchemy):
 *   /var/lib/sluice/registry.db               SQLite file (an absolute path)
 *   sqlite:////var/lib/sluice/registry.db     the same, as a URL (four slashes: absolute)
 *   mysql+pymysql://USER:PASS@HOST:PORT/DB?charset=utf8&ssl_ca=/etc/ssl/db-ca.pem
 * Schemes for MariaDB: mysql, mariadb, each optionally +pymysql, +mysqldb or
 * +mariadbconnector (the driver part is ignored: Sluice speaks through MariaDB Connector/C).
 * USER and PASS are percent-decoded. HOST is a name, an IPv4 address or [IPv6]; PORT defaults
 * to 3306. Query keys (each at most once, anything else is refused):
 *   charset=utf8|utf8mb3|utf8mb4   (default utf8mb4)
 *   unix_socket=PATH               (a local server; HOST may then be empty: USER:PASS@/DB)
 *   ssl_ca=FILE, ssl_capath=DIR    TLS to the server, its certificate verified against them
 *                                  (chain and host name: the verification cannot be turned off)
 *   ssl_cert=FILE, ssl_key=FILE    a client certificate (both or neither; needs ssl_ca/_capath)
 *   ssl_verify_cert=true, ssl_verify_identity=true, ssl_check_hostname=true
 *                                  accepted for compatibility; false is refused
 *   connect_timeout=S, read_timeout=S, write_timeout=S   (1..3600; default 5, 30, 30) */
#ifndef SLUICE_DB_URL_H
#define SLUICE_DB_URL_H

#include "sluice/error.h"

typedef enum sl_db_engine { SL_DB_SQLITE, SL_DB_MARIADB } sl_db_engine;

#define SL_DB_URL_PATH_MAX 512

typedef struct sl_db_url {
    sl_db_engine engine;
    char path[SL_DB_URL_PATH_MAX]; /* SQLite */
    char user[128], password[256], host[256], database[65];
    int port; /* 0: the default */
    char socket[SL_DB_URL_PATH_MAX], charset[16];
    char ssl_ca[SL_DB_URL_PATH_MAX], ssl_capath[SL_DB_URL_PATH_MAX];
    char ssl_cert[SL_DB_URL_PATH_MAX], ssl_key[SL_DB_URL_PATH_MAX];
    int tls; /* ssl_ca or ssl_capath given */
    int connect_timeout, read_timeout, write_timeout;
    /* for messages and logs: the path, or mysql://USER@HOST:PORT/DB[ (tls)]: no password */
    char display[SL_DB_URL_PATH_MAX + 512];
} sl_db_url;

/* Parses and checks s; errors name what is wrong (never the password). */
sl_code sl_db_url_parse(const char *s, sl_db_url *u, sl_error *e);

#endif
