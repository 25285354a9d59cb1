/* What the other files of the double use of graph_cond.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_GRAPH_COND_H
#define SLUICE_DOUBLE_GRAPH_COND_H

#include "graph.h"

void cond_defaults(const struct dbl_graph *g);

#endif
