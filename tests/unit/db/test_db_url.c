/* Database URLs (sluice/db_url.h): the forms OpenStack services write, what is refused and
 * why, and that no message or display ever shows the password. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "sluice/db_url.h"

static void accepted(void **state)
{
    (void)state;
    sl_db_url u;
    sl_error e;
    assert_int_equal(sl_db_url_parse("/var/lib/sluice/registry.db", &u, &e), SL_OK);
    assert_int_equal(u.engine, SL_DB_SQLITE);
    assert_string_equal(u.path, "/var/lib/sluice/registry.db");
    assert_int_equal(sl_db_url_parse("sqlite:////var/lib/sluice/r.db", &u, &e), SL_OK);
    assert_string_equal(u.path, "/var/lib/sluice/r.db");

    const char *nova = "mysql+pymysql://sluice:s%40cr%3At@db.example.org:3307/sluice"
                       "?charset=utf8&ssl_ca=/etc/ssl/db-ca.pem&ssl_cert=/etc/c.pem"
                       "&ssl_key=/etc/k.pem&ssl_verify_cert=true&connect_timeout=3";
    assert_int_equal(sl_db_url_parse(nova, &u, &e), SL_OK);
    assert_int_equal(u.engine, SL_DB_MARIADB);
    assert_string_equal(u.user, "sluice");
    assert_string_equal(u.password, "s@cr:t");
    assert_string_equal(u.host, "db.example.org");
    assert_int_equal(u.port, 3307);
    assert_string_equal(u.database, "sluice");
    assert_string_equal(u.charset, "utf8");
    assert_string_equal(u.ssl_ca, "/etc/ssl/db-ca.pem");
    assert_true(u.tls);
    assert_int_equal(u.connect_timeout, 3);
    assert_int_equal(u.read_timeout, 30);
    assert_string_equal(u.display, "mysql://sluice@db.example.org:3307/sluice (TLS)");
    assert_null(strstr(u.display, "cr"));

    assert_int_equal(sl_db_url_parse("mariadb://nova:pw@[2001:db8::5]/nova", &u, &e), SL_OK);
    assert_string_equal(u.host, "2001:db8::5");
    assert_string_equal(u.display, "mysql://nova@[2001:db8::5]:3306/nova");
    assert_string_equal(u.charset, "utf8mb4");
    assert_false(u.tls);
    assert_int_equal(
        sl_db_url_parse("mysql://sluice:pw@/sluice?unix_socket=/run/mysqld/mysqld.sock", &u, &e),
        SL_OK);
    assert_string_equal(u.socket, "/run/mysqld/mysqld.sock");
    assert_string_equal(u.host, "");
}

/* s is refused with a message containing want and never the password "hunter2". */
static void refused(const char *s, const char *want)
{
    sl_db_url u;
    sl_error e;
    assert_int_equal(sl_db_url_parse(s, &u, &e), SL_ERR_CONFIG);
    if (!strstr(e.msg, want))
        fail_msg("%s: '%s' does not say '%s'", s, e.msg, want);
    assert_null(strstr(e.msg, "hunter2"));
}

static void refusals(void **state)
{
    (void)state;
    refused("", "empty");
    refused("relative.db", "absolute");
    refused("sqlite:///relative.db", "four slashes");
    refused("postgresql://u:hunter2@h/db", "unknown URL scheme");
    refused("mysql+pymysql://u:hunter2@h", "/DATABASE");
    refused("mysql+pymysql://u:hunter2@h/", "database name");
    refused("mysql+pymysql://u:hunter2@h/db-name", "database name");
    refused("mysql+pymysql://:hunter2@h/db", "no user");
    refused("mysql+pymysql://u:hunter2@/db", "no host");
    refused("mysql+pymysql://u:hunter2@h:0/db", "port");
    refused("mysql+pymysql://u:hunter2@h:99999/db", "port");
    refused("mysql+pymysql://u:hunter2@h a/db", "host name");
    refused("mysql+pymysql://u:hunter2@[::zz]/db", "IPv6");
    refused("mysql+pymysql://u:hunter2%zz@h/db", "password");
    refused("mysql+pymysql://u:hunter2@h/db?plugin=dbcounter", "unknown query key 'plugin'");
    refused("mysql+pymysql://u:hunter2@h/db?charset=latin1", "charset");
    refused("mysql+pymysql://u:hunter2@h/db?charset=utf8&charset=utf8", "twice");
    refused("mysql+pymysql://u:hunter2@h/db?ssl_ca=relative.pem", "absolute");
    refused("mysql+pymysql://u:hunter2@h/db?ssl_verify_cert=false", "only true");
    refused("mysql+pymysql://u:hunter2@h/db?ssl_check_hostname=false", "only true");
    refused("mysql+pymysql://u:hunter2@h/db?ssl_cert=/c.pem", "go together");
    refused("mysql+pymysql://u:hunter2@h/db?ssl_cert=/c.pem&ssl_key=/k.pem", "ssl_ca");
    refused("mysql+pymysql://u:hunter2@h/db?connect_timeout=0", "1..3600");
    refused("mysql+pymysql://u:hunter2@h/db?ssl_ca", "key=value");
    refused("mysql+pymysql://u:hunter2@h/db?charset=utf8&", "trailing");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepted),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
