/* Lifetimes of graphs, their nodes and instantiations (graph_life.c). */
#ifndef SLUICE_BE_API_GRAPH_LIFE_H
#define SLUICE_BE_API_GRAPH_LIFE_H

#include <stdint.h>

#include "session/state.h"

/* Forgets graph id's items, allocations and bodies (it was destroyed), and its node ids. */
void be_g_graph_gone(sl_be_session *s, uint64_t graph);
/* Session end, after its contexts are gone: frees the graph state, which also frees the VMM
 * bookkeeping (be_vmm_release) and the link states (be_link_release). */
void be_graph_release(sl_be_session *s);

#endif
