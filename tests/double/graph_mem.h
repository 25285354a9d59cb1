/* What the other files of the double use of graph_mem.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_GRAPH_MEM_H
#define SLUICE_DOUBLE_GRAPH_MEM_H

#include "core.h"

void graph_mem_use(size_t size);
void graph_mem_unuse(size_t size);
/* cuMemFree / cuMemFreeAsync of a graph allocation: its memory is no longer in use, its address
 * stays the graph's (a later launch allocates it there again). CUDA_SUCCESS, an error for one
 * not in use, or -1 when p is not a graph allocation. */
int graph_alloc_free(uintptr_t p);

#endif
