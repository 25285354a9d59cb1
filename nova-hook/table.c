/* Aligned text tables for the CLI. */
#include "table.h"

#include <stdlib.h>
#include <string.h>

int nh_table_init(nh_table *t, int ncols, const char *const *header)
{
    memset(t, 0, sizeof *t);
    if (ncols < 1 || ncols > NH_TABLE_COLS)
        return -1;
    t->ncols = ncols;
    return nh_table_add(t, header);
}

int nh_table_add(nh_table *t, const char *const *row)
{
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **c = realloc(t->cells, cap * (size_t)t->ncols * sizeof *c);
        if (!c)
            return -1;
        t->cells = c;
        t->cap = cap;
    }
    char **dst = t->cells + t->nrows * (size_t)t->ncols;
    for (int i = 0; i < t->ncols; i++) {
        dst[i] = strdup(row[i] ? row[i] : "");
        if (!dst[i]) {
            while (i--)
                free(dst[i]);
            return -1;
        }
    }
    t->nrows++;
    return 0;
}

void nh_table_print(const nh_table *t, FILE *f)
{
    size_t w[NH_TABLE_COLS] = {0};
    for (size_t r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncols; c++) {
            size_t n = strlen(t->cells[r * (size_t)t->ncols + (size_t)c]);
            if (n > w[c])
                w[c] = n;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * (size_t)t->ncols + (size_t)c];
            if (c == t->ncols - 1)
                fprintf(f, "%s\n", s);
            else
                fprintf(f, "%-*s  ", (int)w[c], s);
        }
    }
}

void nh_table_free(nh_table *t)
{
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}
