/* A set of disjoint address ranges [base, base + size), kept sorted by base in one array of a
 * fixed capacity, for the question "which range holds this address" in O(log n) (allocs.c: the
 * allocation cache's freed ranges, asked about every device pointer a call names while the
 * cache holds something). Not thread-safe: its owner's lock covers it. */
#ifndef SLUICE_FRONTEND_CALL_RANGES_H
#define SLUICE_FRONTEND_CALL_RANGES_H

#include <stddef.h>
#include <stdint.h>

struct sl_fe_ranges;

/* A set that holds at most cap ranges; NULL without memory. */
struct sl_fe_ranges *sl_fe_ranges_new(size_t cap);
void sl_fe_ranges_free(struct sl_fe_ranges *r);

/* Adds [base, base + size): 0, or -1 when the set is full, size is 0, its last byte lies past
 * the end of the address space, or it overlaps a range already there (the set is unchanged). */
int sl_fe_ranges_add(struct sl_fe_ranges *r, uint64_t base, uint64_t size);
/* Removes the range that starts at base: 1, or 0 when no range starts there. */
int sl_fe_ranges_remove(struct sl_fe_ranges *r, uint64_t base);
/* The range holding p: 1 and *base (may be NULL), or 0 when none holds it. */
int sl_fe_ranges_find(const struct sl_fe_ranges *r, uint64_t p, uint64_t *base);
size_t sl_fe_ranges_count(const struct sl_fe_ranges *r);
void sl_fe_ranges_clear(struct sl_fe_ranges *r);

#endif
