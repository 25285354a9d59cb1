/* Graph nodes that touch guest host memory (docs/remoting.md, "Graphs and guest memory"):
 * memcpy nodes with a host side and host nodes, and the launches of the graphs that hold them.
 *
 * The guest's host memory is not the backend's. A memcpy node whose source or destination is
 * guest memory is made on a staging block of the backend's (the HOST side of the pod as the
 * frontend sends it: the guest's pointer, which the backend keeps only to give it back, never
 * dereferences); a host node is made on a trampoline that records, when the GPU reaches it,
 * that it was reached. An instantiated graph holding such items is launched with slGraphLaunch,
 * synchronously: the host-to-device bytes travel with the launch (or just before it,
 * slGraphHostPut) into the staging blocks, the worker launches and waits for the stream, and the
 * reply carries the device-to-host bytes (or they are fetched, slGraphHostGet) and the host
 * nodes reached, in order, which the guest then runs. cuGraphLaunch of such a graph is refused.
 * Memcpy nodes between device memory and arrays need none of this and go to the driver checked
 * like the 3D copies (copy.c).
 *
 * Here: the checks of a memcpy node's parameters, the items' lookups and lifetimes, and the
 * instantiated graphs' views of them. The nodes are graph_host_nodes.c, the launches
 * graph_host_exec.c. */
#include "api/graph_host.h"

#include <stdlib.h>
#include <string.h>

#include "api/copy_rect.h"
#include "api/graph.h"
#include "session/state.h"
#include "sluice/backend_dispatch.h"
#include "sluice/backend_hooks.h"

/* ---------------------------------------------------------------- parameters */

/* A side of a memcpy node: the guest's memory when HOST (the staging block stands in for it). */
static CUresult side_check(sl_be_session *s, Sluice__Wire__Reply *reply, struct be_rect_side d,
                           const CUDA_MEMCPY3D *c, int is_src)
{
    if (*d.type == CU_MEMORYTYPE_HOST)
        return CUDA_SUCCESS;
    return be_rect_side_check(s, reply, d, c->WidthInBytes, c->Height, c->Depth, is_src,
                              "a memcpy node");
}

CUresult be_g_copy_check(sl_be_session *s, Sluice__Wire__Reply *reply, CUDA_MEMCPY3D *c, int *kind,
                         uint64_t *len)
{
    c->reserved0 = c->reserved1 = NULL;
    struct be_rect_side src = {&c->srcMemoryType, &c->srcHost,     &c->srcDevice,
                               &c->srcArray,      &c->srcXInBytes, &c->srcY,
                               &c->srcZ,          &c->srcPitch,    &c->srcHeight};
    struct be_rect_side dst = {&c->dstMemoryType, (const void **)&c->dstHost,
                               &c->dstDevice,     &c->dstArray,
                               &c->dstXInBytes,   &c->dstY,
                               &c->dstZ,          &c->dstPitch,
                               &c->dstHeight};
    int sh = c->srcMemoryType == CU_MEMORYTYPE_HOST, dh = c->dstMemoryType == CU_MEMORYTYPE_HOST;
    if (sh && dh) {
        sl_be_detail(reply, "memcpy nodes between two host buffers are not supported");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    *kind = sh ? BE_GI_H2D : dh ? BE_GI_D2H : 0;
    *len = 0;
    if (*kind) {
        uint64_t n;
        if (!c->WidthInBytes || !c->Height || !c->Depth ||
            __builtin_mul_overflow((uint64_t)c->WidthInBytes, (uint64_t)c->Height, &n) ||
            __builtin_mul_overflow(n, (uint64_t)c->Depth, &n) || n > BE_G_MAX_STAGING) {
            sl_be_detail(reply, "memcpy node of %zu x %zu x %zu bytes with a host side",
                         c->WidthInBytes, c->Height, c->Depth);
            return CUDA_ERROR_INVALID_VALUE;
        }
        *len = n;
    }
    CUresult rc = side_check(s, reply, src, c, 1);
    return rc == CUDA_SUCCESS ? side_check(s, reply, dst, c, 0) : rc;
}

/* ---------------------------------------------------------------- items */

void be_g_item_unref(struct be_gitem *it)
{
    if (!it || --it->refs)
        return;
    struct be_gstate *st = it->st;
    for (size_t i = 0; i < st->n_items; i++)
        if (st->items[i] == it) {
            st->items[i] = st->items[--st->n_items];
            break;
        }
    st->staging -= it->len;
    free(it->buf);
    free(it);
}

struct be_gitem *be_g_item_find(struct be_gstate *st, CUgraphNode n)
{
    for (size_t i = 0; st && n && i < st->n_items; i++)
        if (st->items[i]->graph && st->items[i]->node == n)
            return st->items[i];
    return NULL;
}

void be_g_item_leave(struct be_gitem *it)
{
    if (it && it->graph) {
        it->graph = 0;
        be_g_item_unref(it);
    }
}

/* Items in the order their nodes were made (st->items is not kept in order). */
static int item_cmp(const void *a, const void *b)
{
    const struct be_gitem *x = *(struct be_gitem *const *)a, *y = *(struct be_gitem *const *)b;
    return x->order < y->order ? -1 : x->order > y->order;
}

struct be_gexec *be_g_exec_find(struct be_gstate *st, uint64_t id)
{
    for (size_t i = 0; st && i < st->n_execs; i++)
        if (st->execs[i]->id == id)
            return st->execs[i];
    return NULL;
}

void be_g_exec_free(struct be_gexec *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n_items; i++)
        be_g_item_unref(e->items[i]);
    free(e->items);
    free(e->nodes);
    free(e->allocs);
    free(e);
}

CUresult be_g_exec_fill(sl_be_session *s, struct be_gexec *e, uint64_t graph, int update)
{
    struct be_gstate *st = be_g_state(s);
    if (!st)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t n = 0;
    for (size_t i = 0; i < st->n_items; i++)
        if (st->items[i]->graph && be_g_within(st, st->items[i]->graph, graph))
            n++;
    struct be_gitem **items = n ? malloc(n * sizeof *items) : NULL;
    CUgraphNode *nodes = n ? malloc(n * sizeof *nodes) : NULL;
    if (n && (!items || !nodes)) {
        free(items);
        free(nodes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t k = 0;
    for (size_t i = 0; i < st->n_items; i++)
        if (st->items[i]->graph && be_g_within(st, st->items[i]->graph, graph))
            items[k++] = st->items[i];
    /* in node creation order: an update pairs the items of two graphs of the same shape so */
    if (n > 1)
        qsort(items, n, sizeof *items, item_cmp);
    for (size_t i = 0; i < n; i++) {
        items[i]->refs++;
        nodes[i] = items[i]->node;
    }
    if (update) {
        if (n != e->n_items)
            e->broken = "updated from a graph with other nodes on guest memory";
        else
            for (size_t i = 0; i < n; i++)
                if (items[i]->kind != e->items[i]->kind)
                    e->broken = "updated from a graph with other nodes on guest memory";
        if (n == e->n_items) {
            free(nodes);
            nodes = e->nodes; /* keep the instantiated graph's node handles */
            e->nodes = NULL;
        }
    }
    for (size_t i = 0; i < e->n_items; i++)
        be_g_item_unref(e->items[i]);
    free(e->items);
    free(e->nodes);
    e->items = items;
    e->nodes = nodes;
    e->n_items = n;
    e->generation = ++st->next_generation;
    free(e->allocs);
    e->allocs = NULL;
    e->n_allocs = 0;
    for (size_t i = 0; i < st->n_allocs; i++)
        if (be_g_within(st, st->allocs[i].graph, graph))
            e->n_allocs++;
    if (e->n_allocs) {
        e->allocs = malloc(e->n_allocs * sizeof *e->allocs);
        if (!e->allocs) {
            e->n_allocs = 0;
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        k = 0;
        for (size_t i = 0; i < st->n_allocs; i++)
            if (be_g_within(st, st->allocs[i].graph, graph)) {
                e->allocs[k][0] = st->allocs[i].p.dptr;
                e->allocs[k++][1] = st->allocs[i].p.bytesize;
            }
    }
    return CUDA_SUCCESS;
}
