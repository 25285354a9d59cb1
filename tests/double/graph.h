/* What the other files of the double use of graph.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_GRAPH_H
#define SLUICE_DOUBLE_GRAPH_H

#include <stdbool.h>
#include <string.h>

#include "core.h"

/* A graph is its nodes in the order they were added (dependencies are always earlier nodes, so
 * that order is a valid execution order); launching runs them one after the other on the
 * calling thread. Node types: kernel, memset, memcpy (any sides copy3d accepts), host (the
 * function runs at that point), empty, memory allocation (the memory is allocated when the node
 * is made and stays: a launch marks it in use, a free node not, for the graph memory
 * attributes), memory free, and conditional (IF / WHILE / SWITCH over body graphs the node
 * owns, on a handle kernels set through dbl_cond_set). A kernel node keeps a copy of its
 * parameters (as the driver does); an instantiated graph keeps a deep copy of its graph, so
 * changing or destroying the graph later does not change it. Graphs are context-independent
 * bookkeeping here (hdr.ctx NULL). Stream capture: capture.c. */
#define DBL_NODE_PARAM_BYTES 512

#define DBL_MAX_WHILE 1000000

/* Dependencies a node keeps (for cuGraphGetEdges_v2); a node with more is refused. */
#define DBL_MAX_DEPS 32

enum { N_KERNEL = 1, N_MEMSET, N_MEMCPY, N_HOST, N_EMPTY, N_ALLOC, N_FREE, N_COND };

struct dbl_cond {
    struct dbl_cond *next;
    struct dbl_graph *graph;
    unsigned value, def, flags;
};

struct dbl_galloc {
    struct dbl_galloc *next;
    CUdeviceptr dptr;
    size_t size;
    bool live;
};

struct dbl_gnode {
    struct dbl_obj hdr;
    struct dbl_graph *graph;
    const struct dbl_gnode *origin; /* the node this one was copied from (clone, instance) */
    int type;
    size_t ndeps;
    struct dbl_gnode *deps[DBL_MAX_DEPS]; /* nodes of the same graph, all with default edges */
    void *func;                           /* struct dbl_func * */
    unsigned grid[3], block[3];
    size_t shared;
    unsigned char params[DBL_NODE_PARAM_BYTES];
    void *argv[DBL_MAX_PARAMS];
    CUDA_MEMSET_NODE_PARAMS memset;
    CUDA_MEMCPY3D memcpy;
    CUDA_HOST_NODE_PARAMS host;
    struct dbl_galloc *alloc; /* alloc and free nodes */
    CUDA_MEM_ALLOC_NODE_PARAMS allocp;
    struct dbl_cond *cond;
    unsigned ctype, csize;
    struct dbl_graph **bodies;
};

struct dbl_graph {
    struct dbl_obj hdr;
    struct dbl_gnode **nodes;
    size_t n, cap;
    bool registered; /* an object the caller may name (not an instance's private copy) */
};

struct dbl_gexec {
    struct dbl_obj hdr;
    struct dbl_graph *snap;  /* the instance's own copy of the graph */
    struct dbl_graph *graph; /* the graph it was made from (conditional handles' defaults) */
};

struct dbl_graph *graph_new(bool registered);

void node_free(struct dbl_gnode *n);

void graph_free(struct dbl_graph *g);

CUresult node_add(CUgraphNode *ph, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                  struct dbl_gnode *proto);

struct dbl_gnode *node_of(CUgraphNode h, int type);

/* A kernel node's parameters in *proto (zeroed first), as cuGraphAddKernelNode keeps them. */
CUresult kernel_proto(struct dbl_gnode *proto, const CUDA_KERNEL_NODE_PARAMS *p);

#endif
