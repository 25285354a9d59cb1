/* A fresh registry database for one test: a SQLite file in a new directory under /tmp, or,
 * when SLUICE_TEST_MARIADB names a file holding a MariaDB URL template (tests/ha/mariadb.py:
 * the `mariadb` fixture's server, {db} where the database name goes), a new database on that
 * server. So every nova-hook test runs on both engines (the .mariadb twins of ctest). */
#ifndef NH_TESTDB_H
#define NH_TESTDB_H

typedef struct nh_testdb {
    char url[1024]; /* what nh_store_open takes */
    char dir[64];   /* SQLite: the directory */
    char name[64];  /* MariaDB: the database */
    int mariadb;
} nh_testdb;

/* Aborts the test program (exit 1, with a message) when the database cannot be made. A
 * MariaDB database gets its schema (db-sync, as an operator does before starting nova-hook);
 * a SQLite file is left to be created by the first open. */
void nh_testdb_make(nh_testdb *t);
/* The same without any schema (tests of the database layer itself). */
void nh_testdb_make_empty(nh_testdb *t);
/* Removes it (the file and its directory, or DROP DATABASE). */
void nh_testdb_drop(nh_testdb *t);
/* "sqlite" or "mariadb", for messages. */
const char *nh_testdb_engine(const nh_testdb *t);

#endif
