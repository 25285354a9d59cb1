/* Graph nodes on guest host memory and the launches of the graphs that hold them
 * (graph_host.c; docs/remoting.md "Graphs and guest memory"). */
#ifndef SLUICE_FRONTEND_API_GRAPH_HOST_H
#define SLUICE_FRONTEND_API_GRAPH_HOST_H

#include <stdint.h>

/* Forgets what the frontend knows of an instantiated graph's guest-memory nodes (it changed). */
void sl_fe_g_exec_forget(uint64_t exec);

#endif
