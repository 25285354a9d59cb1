/* State shared by the graph files of the backend (graph.c, graph_host*.c, graph_mem.c,
 * graph_cond.c, graph_life.c), and graph.c's helpers: the session's graph items that touch guest
 * host memory, its instantiated graphs' views of them, graph allocations and conditional body
 * graphs. docs/remoting.md, "Graphs and guest memory", is the design.
 *
 * Lifetimes. An item (a memcpy node with a host side, or a host node) belongs to the graph it
 * was made in and to every instantiated graph made from it: it is counted (refs) and freed
 * with its staging buffer when the last of them is gone, because an instantiated graph keeps
 * using the node's parameters (the staging buffer, the trampoline's argument) after the graph
 * is destroyed. Items are immutable but for their staging bytes: setting a node's parameters
 * makes a new item. Only the session's worker thread touches this state, except the host-node
 * log, which the driver's callback thread appends to (log_mu). */
#ifndef SLUICE_BE_API_GRAPH_H
#define SLUICE_BE_API_GRAPH_H

#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "session/state.h"
#include "sluice/handle_kinds.h"
#include "sluice/wire.h"

#define BE_G_MAX_ITEMS    65536u               /* live items per session */
#define BE_G_MAX_LOG      65536u               /* host nodes one launch may reach */
#define BE_G_MAX_DEPS     4096u                /* dependencies of one node */
#define BE_G_INLINE_BYTES ((uint64_t)32 << 20) /* guest bytes travelling with a launch */
#define BE_G_MAX_STAGING  ((uint64_t)1 << 30)  /* staging blocks of one session */

enum be_gi_kind { BE_GI_H2D = 1, BE_GI_D2H = 2, BE_GI_HOST = 3 };

struct be_gstate;

struct be_gitem {
    unsigned refs;
    enum be_gi_kind kind;
    uint64_t graph;      /* the graph id it was made in; 0 once that graph no longer holds it */
    CUgraphNode node;    /* the driver's node in that graph */
    CUDA_MEMCPY3D guest; /* memcpy: the parameters as the guest gave them (its host pointer) */
    uint64_t len;        /* memcpy: bytes of the contiguous host block */
    uint8_t *buf;        /* memcpy: the staging block the driver's node reads or writes */
    uint64_t fn, user;   /* host node: the guest's function and userData */
    uint64_t order;      /* when its node was made: items are listed in this order */
    struct be_gstate *st;
};

struct be_gexec {
    uint64_t id;
    CUgraphExec exec;
    struct be_gitem **items;
    CUgraphNode *nodes; /* the node of the instantiated graph each item stands for */
    size_t n_items;
    uint64_t (*allocs)[2]; /* graph allocations (address, size) its launches make */
    size_t n_allocs;
    uint64_t generation;
    const char *broken; /* why it cannot be launched, NULL when it can */
};

struct be_galloc {
    uint64_t graph;
    CUgraphNode node;
    CUDA_MEM_ALLOC_NODE_PARAMS p; /* accessDescs cleared: kept in descs */
    CUmemAccessDesc *descs;       /* as the guest gave them (device ordinals) */
};

struct be_gbody {
    uint64_t body, parent; /* a conditional node's body graph and the graph holding the node */
    CUgraphNode node;      /* the conditional node */
};

struct be_gstate {
    struct be_gitem **items;
    size_t n_items, cap_items;
    struct be_gexec **execs;
    size_t n_execs, cap_execs;
    struct be_galloc *allocs;
    size_t n_allocs, cap_allocs;
    struct be_gbody *bodies;
    size_t n_bodies, cap_bodies;
    uint64_t next_generation, next_order;
    uint64_t staging; /* bytes of the live items' staging blocks */
    pthread_mutex_t log_mu;
    struct be_gitem **log; /* host nodes reached by the running launch */
    size_t n_log;
    int log_overflow;
};

/* The session's graph state, made on first use; NULL when out of memory. */
struct be_gstate *be_g_state(sl_be_session *s);
/* Grows *arr (elements of size sz) to hold n + 1; 0 on success. */
int be_g_grow(void **arr, size_t *cap, size_t n, size_t sz);

/* Dependencies from the wire -> native nodes (*out malloc'd, NULL for none). */
CUresult be_g_deps_in(sl_be_session *s, Sluice__Wire__Reply *reply, const uint64_t *ids,
                      size_t n_ids, uint64_t num, CUgraphNode **out);
/* A graph id -> native; id 0 is refused. */
CUresult be_g_graph(sl_be_session *s, uint64_t id, CUgraph *out);
/* A new id for a node the driver just made in graph `graph` (its parent: destroying the graph
 * drops it). */
CUresult be_g_node_put(sl_be_session *s, uint64_t graph, CUgraphNode n, uint64_t *id);
/* The id of a node the driver handed back: the one it has, or a new one (parent graph). */
CUresult be_g_node_id(sl_be_session *s, uint64_t graph, CUgraphNode n, uint64_t *id);
/* The live id of a native object of kind, 0 if none. */
uint64_t be_g_id_of(sl_be_session *s, enum sl_handle_kind kind, const void *native);
/* Sets the parent of handle id (nodes made by generated handlers). */
void be_g_set_parent(sl_be_session *s, uint64_t id, uint64_t parent);
/* 1 if graph id `g` is `root` or a conditional body inside it. */
int be_g_within(const struct be_gstate *st, uint64_t g, uint64_t root);

#endif
