/* Helpers of graph.c shared by the frontend's graph files (graph_host.c, graph_mem.c,
 * graph_cond.c). docs/remoting.md, "Graphs and guest memory", is the design. */
#ifndef SLUICE_FRONTEND_API_GRAPH_H
#define SLUICE_FRONTEND_API_GRAPH_H

#include <stdint.h>

#include <cuda.h>

#include "sluice_session.pb-c.h"

/* Dependency handles -> ids (*out malloc'd, NULL when n is 0). */
CUresult sl_fe_g_deps(const CUgraphNode *deps, size_t n, uint64_t **out);
/* The reply's result (the reply is freed), or rc when there is no reply. */
CUresult sl_fe_g_result(CUresult rc, Sluice__Wire__Reply *rep);
/* A graph node id from a reply's out member, checking the reply's case. */
CUresult sl_fe_g_node_out(Sluice__Wire__Reply *rep, uint64_t id, CUgraphNode *out);

#endif
