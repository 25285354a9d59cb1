/* Graph memory: allocation and free nodes, and the graph memory attributes.
 * TEST DOUBLE: never a GPU result (README.md). */
#include "graph_mem.h"

#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "graph.h"

static struct dbl_galloc *gallocs;

static size_t graph_mem_used, graph_mem_high;

/* memory nodes: the allocation is made with the node, at a fixed address */
static CUresult add_alloc(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                          CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    if (!p || !p->bytesize || p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        check_dev(p->poolProps.location.id) || p->poolProps.handleTypes ||
        (p->accessDescCount && !p->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_galloc *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base;
    CUresult rc = alloc_new(p->bytesize, A_DEVICE, NULL, &base);
    if (rc) {
        free(a);
        return rc;
    }
    a->dptr = base;
    a->size = p->bytesize;
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_ALLOC;
    proto.alloc = a;
    proto.allocp = *p;
    proto.allocp.accessDescs = NULL;
    proto.allocp.accessDescCount = 0;
    proto.allocp.dptr = base;
    rc = node_add(ph, g, deps, nd, &proto);
    if (rc) {
        alloc_free(base, A_DEVICE);
        free(a);
        return rc;
    }
    a->next = gallocs;
    gallocs = a;
    p->dptr = base;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies, size_t numDependencies,
                                       CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    LOCKED(add_alloc(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

static CUresult alloc_params(CUgraphNode h, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    struct dbl_gnode *n = node_of(h, N_ALLOC);
    if (!n || !p)
        return CUDA_ERROR_INVALID_VALUE;
    *p = n->allocp;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode,
                                             CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    LOCKED(alloc_params(hNode, params_out));
}

static CUresult add_free(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t nd,
                         CUdeviceptr dptr)
{
    struct dbl_galloc *a = gallocs;
    while (a && a->dptr != dptr)
        a = a->next;
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    struct dbl_gnode proto;
    memset(&proto, 0, sizeof proto);
    proto.type = N_FREE;
    proto.alloc = a;
    return node_add(ph, g, deps, nd, &proto);
}

EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      CUdeviceptr dptr)
{
    LOCKED(add_free(phGraphNode, hGraph, dependencies, numDependencies, dptr));
}

static CUresult graph_mem_attr(CUdevice dev, CUgraphMem_attribute attr, void *value, int set)
{
    if (check_dev(dev) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t *v = value;
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
        if (set)
            return CUDA_ERROR_INVALID_VALUE;
        *v = graph_mem_used;
        return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
        if (set) {
            if (*v)
                return CUDA_ERROR_INVALID_VALUE;
            graph_mem_high = graph_mem_used;
        } else {
            *v = graph_mem_high;
        }
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                             void *value)
{
    LOCKED(graph_mem_attr(device, attr, value, 0));
}

EXPORT CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                             void *value)
{
    LOCKED(graph_mem_attr(device, attr, value, 1));
}

EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    return check_dev(device) ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

/* A launch allocates a graph allocation / a free node frees it (the graph memory attributes). */
void graph_mem_use(size_t size)
{
    graph_mem_used += size;
    if (graph_mem_used > graph_mem_high)
        graph_mem_high = graph_mem_used;
}

void graph_mem_unuse(size_t size)
{
    graph_mem_used -= size;
}

int graph_alloc_free(uintptr_t p)
{
    for (struct dbl_galloc *a = gallocs; a; a = a->next)
        if (a->dptr == p) {
            if (!a->live)
                return CUDA_ERROR_INVALID_VALUE;
            a->live = false;
            graph_mem_unuse(a->size);
            return CUDA_SUCCESS;
        }
    return -1;
}
