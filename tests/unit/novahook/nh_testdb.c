/* Fresh registry databases for the tests (nh_testdb.h). */
#include "nh_testdb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/db.h"
#include "store.h"

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "nh_testdb: %s: %s\n", what, detail);
    exit(1);
}

/* template with {db} replaced by name */
static void fill(const char *template, const char *name, char *out, size_t cap)
{
    const char *at = strstr(template, "{db}");
    if (!at)
        die("the URL template has no {db}", template);
    snprintf(out, cap, "%.*s%s%s", (int)(at - template), template, name, at + 4);
}

static void admin(const char *template, const char *sql)
{
    char url[1024];
    fill(template, "nhtest", url, sizeof url);
    sl_db *db;
    sl_error e;
    if (sl_db_open(url, 0, "test database", &db, &e) != SL_OK)
        die("connecting", e.msg);
    if (sl_db_exec(db, sql, &e) != SL_OK)
        die(sql, e.msg);
    sl_db_close(db);
}

static int read_template(char *out, size_t cap)
{
    const char *file = getenv("SLUICE_TEST_MARIADB");
    if (!file || !*file)
        return 0;
    FILE *f = fopen(file, "r");
    if (!f || !fgets(out, (int)cap, f))
        die("cannot read SLUICE_TEST_MARIADB", file);
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
    return 1;
}

static void make(nh_testdb *t, int sync)
{
    static unsigned counter;
    memset(t, 0, sizeof *t);
    char template[1024];
    if (read_template(template, sizeof template)) {
        t->mariadb = 1;
        snprintf(t->name, sizeof t->name, "nhtest_%d_%u", (int)getpid(), counter++);
        char sql[128];
        snprintf(sql, sizeof sql, "CREATE DATABASE %s", t->name);
        admin(template, sql);
        fill(template, t->name, t->url, sizeof t->url);
        if (!sync)
            return;
        nh_store *s; /* as an operator would: sluice-registry db-sync before the daemon */
        sl_error e;
        if (nh_store_open(t->url, NH_STORE_SYNC, &s, &e) != SL_OK)
            die("db-sync", e.msg);
        nh_store_close(s);
        return;
    }
    snprintf(t->dir, sizeof t->dir, "/tmp/nh-test-XXXXXX");
    if (!mkdtemp(t->dir))
        die("mkdtemp", t->dir);
    snprintf(t->url, sizeof t->url, "%s/registry.db", t->dir);
}

void nh_testdb_make(nh_testdb *t)
{
    make(t, 1);
}

void nh_testdb_make_empty(nh_testdb *t)
{
    make(t, 0);
}

void nh_testdb_drop(nh_testdb *t)
{
    if (t->mariadb) {
        char template[1024], sql[128];
        if (read_template(template, sizeof template)) {
            snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", t->name);
            admin(template, sql);
        }
        return;
    }
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[1100];
        snprintf(p, sizeof p, "%s%s", t->url, suffix[i]);
        unlink(p);
    }
    rmdir(t->dir);
}

const char *nh_testdb_engine(const nh_testdb *t)
{
    return t->mariadb ? "mariadb" : "sqlite";
}
