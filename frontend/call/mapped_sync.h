/* Mapped host memory (mapped_sync.c): the ranges the guest mapped, each with its twin in the
 * backend, and the call filter that keeps them coherent at call boundaries. */
#ifndef SLUICE_FRONTEND_CALL_MAPPED_SYNC_H
#define SLUICE_FRONTEND_CALL_MAPPED_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/* One mapped range (opaque). */
struct sl_fe_mapping;

/* 1 while len more bytes fit the process's mapped memory bound. */
int sl_fe_mapped_room(size_t len);
/* A range of len bytes with its shadow copy, not tracked yet; NULL: out of memory. */
struct sl_fe_mapping *sl_fe_mapping_new(size_t len);
/* Frees a range that is not tracked (NULL: nothing). */
void sl_fe_mapping_free(struct sl_fe_mapping *m);
/* Tracks m: the guest's len bytes at guest, whose twin is at device address dptr. */
void sl_fe_mapped_track(struct sl_fe_mapping *m, void *guest, size_t len, uint64_t dptr);
/* Stops tracking the range at guest address p and frees it: 1 and its twin's address, 0 when
 * p starts no range. */
int sl_fe_mapped_untrack(void *p, uint64_t *dptr);
/* 1 and the device address of p if the n bytes from p (n >= 1) lie in one mapped range. */
int sl_fe_mapped_dptr(const void *p, size_t n, uint64_t *dptr);
/* The n bytes at p (in one mapped range) were just written with what its twin holds: the
 * shadow takes them, so that they are not sent back as a change of the program's. */
void sl_fe_mapped_settled(const void *p, size_t n);
/* With the call layer's lock held: emit(...) for each span the program changed since the last
 * exchange, before a call leaves; apply(...) for each Reply.mapped entry. */
typedef CUresult (*sl_fe_mapped_emit)(uint64_t dptr, uint64_t offset, const void *data, size_t len);
CUresult sl_fe_mapped_sync_out(sl_fe_mapped_emit emit);
void sl_fe_mapped_apply(uint64_t dptr, uint64_t offset, const void *data, size_t len);
/* 1 while the program has mapped host memory (its device writes come with replies). */
int sl_fe_mapped_any(void);

#endif
