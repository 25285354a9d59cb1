/* Graph nodes on guest memory (graph_host.c): the checks of a memcpy node's parameters, the
 * items and the instantiated graphs' views of them. */
#ifndef SLUICE_BE_API_GRAPH_HOST_H
#define SLUICE_BE_API_GRAPH_HOST_H

#include "api/graph.h"

/* Checks a CUDA_MEMCPY3D of a memcpy node: device sides against the session's memory, array
 * sides translated; a HOST side is the guest's memory. *kind: 0 device only, BE_GI_H2D or
 * BE_GI_D2H (host source / destination); *len its contiguous host bytes. */
CUresult be_g_copy_check(sl_be_session *s, Sluice__Wire__Reply *reply, CUDA_MEMCPY3D *c, int *kind,
                         uint64_t *len);
void be_g_item_unref(struct be_gitem *it);
/* The item stops standing for its graph's node (the node changed or went away). */
void be_g_item_leave(struct be_gitem *it);
/* The item of a node of graph `graph` (NULL if the node touches no guest memory). */
struct be_gitem *be_g_item_find(struct be_gstate *st, CUgraphNode n);
/* Rebuilds exec's items and allocations from graph (instantiation, update). */
CUresult be_g_exec_fill(sl_be_session *s, struct be_gexec *e, uint64_t graph, int update);
struct be_gexec *be_g_exec_find(struct be_gstate *st, uint64_t id);
void be_g_exec_free(struct be_gexec *e);

#endif
