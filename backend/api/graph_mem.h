/* Graph memory: allocation and free nodes (graph_mem.c). */
#ifndef SLUICE_BE_API_GRAPH_MEM_H
#define SLUICE_BE_API_GRAPH_MEM_H

#include "api/graph.h"

/* Allocation nodes of graph id (a clone's copies); registers graph allocations of an exec
 * before it is launched. */
CUresult be_g_clone_allocs(sl_be_session *s, uint64_t orig, uint64_t clone, CUgraph native_clone);
void be_g_exec_allocs_register(sl_be_session *s, const struct be_gexec *e);
void be_g_alloc_forget_node(struct be_gstate *st, CUgraphNode n);

#endif
