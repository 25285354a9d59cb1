/* The memcpy and host nodes on guest memory (graph_host_nodes.c). */
#ifndef SLUICE_BE_API_GRAPH_HOST_NODES_H
#define SLUICE_BE_API_GRAPH_HOST_NODES_H

#include "api/graph.h"

/* Clone: gives the clone's nodes items of their own. */
CUresult be_g_clone_items(sl_be_session *s, Sluice__Wire__Reply *reply, uint64_t orig,
                          uint64_t clone, CUgraph native_clone);

#endif
