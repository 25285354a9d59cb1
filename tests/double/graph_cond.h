/* What the other files of the double use of graph_cond.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_GRAPH_COND_H
#define SLUICE_DOUBLE_GRAPH_COND_H

#include "graph.h"

void cond_defaults(const struct dbl_graph *g);

/* cudaGraphSetConditional(handle, value) in a kernel: sets a conditional handle of the graph
 * being launched (launch->status = CUDA_ERROR_ILLEGAL_ADDRESS for an unknown handle). */
void dbl_cond_set(struct dbl_launch *launch, unsigned long long handle, unsigned value);

#endif
