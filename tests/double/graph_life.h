/* What the other files of the double use of graph_life.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_GRAPH_LIFE_H
#define SLUICE_DOUBLE_GRAPH_LIFE_H

#include "graph.h"

/* The instance's copy of node (made from the graph's node `node`). */
struct dbl_gnode *exec_node(CUgraphExec h, CUgraphNode node, int type);

#endif
