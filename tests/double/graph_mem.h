/* What the other files of the double use of graph_mem.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_GRAPH_MEM_H
#define SLUICE_DOUBLE_GRAPH_MEM_H

#include "core.h"

void graph_mem_use(size_t size);
void graph_mem_unuse(size_t size);

#endif
