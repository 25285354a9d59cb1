/* Mapped host memory (mapped.c): the calls that give a guest range its twin in the backend and
 * take it away. */
#ifndef SLUICE_FRONTEND_API_MAPPED_H
#define SLUICE_FRONTEND_API_MAPPED_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/* Gives the guest range *pp (len bytes) a mapped twin in the backend; *dptr is the twin's
 * device address. movable: the frontend owns the range (an anonymous mapping of len bytes) and
 * may move it to the twin's address, updating *pp. */
CUresult sl_fe_mapped_add(void **pp, size_t len, int movable, uint64_t *dptr);
void sl_fe_mapped_remove(void *p);

#endif
