/* A small text table for the CLI: add rows of strings, print with aligned columns. */
#ifndef NH_TABLE_H
#define NH_TABLE_H

#include <stdio.h>

#define NH_TABLE_COLS 8

typedef struct nh_table {
    int ncols;
    size_t nrows, cap;
    char **cells; /* nrows * ncols, row 0 is the header */
} nh_table;

int nh_table_init(nh_table *t, int ncols, const char *const *header);
/* Copies the strings. 0 on success, -1 out of memory. */
int nh_table_add(nh_table *t, const char *const *row);
void nh_table_print(const nh_table *t, FILE *f);
void nh_table_free(nh_table *t);

#endif
