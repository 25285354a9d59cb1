/* Mapped host memory (mapped.c): each mapped range has a twin in the backend, kept coherent
 * at call boundaries. */
#ifndef SLUICE_FRONTEND_API_MAPPED_H
#define SLUICE_FRONTEND_API_MAPPED_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/* Gives the guest range *pp (len bytes) a mapped twin in the backend; *dptr is the twin's
 * device address. movable: the frontend owns the range (an anonymous mapping of len bytes) and
 * may move it to the twin's address, updating *pp. */
CUresult sl_fe_mapped_add(void **pp, size_t len, int movable, uint64_t *dptr);
/* 1 while len more bytes fit the process's mapped memory bound. */
int sl_fe_mapped_room(size_t len);
void sl_fe_mapped_remove(void *p);
/* 1 and the device address of p if p lies in mapped memory. */
int sl_fe_mapped_dptr(const void *p, uint64_t *dptr);
/* With the rpc lock held: emit(...) for each span the program changed since the last
 * exchange, before a call leaves; apply(...) for each Reply.mapped entry. */
typedef CUresult (*sl_fe_mapped_emit)(uint64_t dptr, uint64_t offset, const void *data, size_t len);
CUresult sl_fe_mapped_sync_out(sl_fe_mapped_emit emit);
void sl_fe_mapped_apply(uint64_t dptr, uint64_t offset, const void *data, size_t len);

#endif
