/* The cluster table 1734dc26... (id bytes 17 34 dc 26 80 0d 47 45 87 26 c0 f1 e7 dd 8b ca).
 *
 * cuBLASLt 13 asks for it and, refused, dies (a NULL dereference: PyTorch's bfloat16 matmul
 * through Sluice, docs/pytorch.md); libnvrtc and libnvJitLink hold the id too. Its layout is
 * known from public material: a byte size, then sixteen functions about thread-block clusters.
 * Every one of them has a public driver call that answers the same question, so each slot is
 * that call, which Sluice already remotes: function cluster attributes through
 * cuFuncGet/SetAttribute, cluster launch support through cuDeviceGetAttribute, cluster
 * occupancy through cuOccupancyMaxPotentialClusterSize / cuOccupancyMaxActiveClusters. Slots
 * about the GPU's internal TPC layout and test overrides answer "not supported". */
#include <stdint.h>
#include <string.h>

#include "exports/et_cluster.h"
#include "exports/exports.h"
#include "sluice/log.h"

static struct sl_fe_et_site cluster = {.table = "CLUSTER(1734dc26)"};

/* The public calls, found through the library's own export table (this file is part of the
 * core that unit tests link without the call layer). */
typedef CUresult (*func_set_fn)(CUfunction, CUfunction_attribute, int);
typedef CUresult (*func_get_fn)(int *, CUfunction_attribute, CUfunction);
typedef CUresult (*dev_get_fn)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*occ_fn)(int *, CUfunction, const CUlaunchConfig *);

static const void *api(const char *name)
{
    return sl_fe_export_address(name);
}

static CUresult set_attr(CUfunction f, CUfunction_attribute a, int v)
{
    func_set_fn fn = (func_set_fn)api("cuFuncSetAttribute");
    return fn ? fn(f, a, v) : CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult get_attr(int *v, CUfunction_attribute a, CUfunction f)
{
    func_get_fn fn = (func_get_fn)api("cuFuncGetAttribute");
    return fn ? fn(v, a, f) : CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult occupancy(const char *name, int *out, CUfunction f, const CUlaunchConfig *c)
{
    occ_fn fn = (occ_fn)api(name);
    return fn ? fn(out, f, c) : CUDA_ERROR_NOT_SUPPORTED;
}

/* [1] the cluster dimensions a function's launches default to; zeros reset */
static CUresult set_dim(CUfunction f, int x, int y, int z)
{
    CUresult rc = set_attr(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, x);
    if (rc == CUDA_SUCCESS)
        rc = set_attr(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, y);
    if (rc == CUDA_SUCCESS)
        rc = set_attr(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, z);
    return rc;
}

/* [2] */
static CUresult set_policy(CUfunction f, int policy)
{
    return set_attr(f, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, policy);
}

/* [3] */
static CUresult set_non_portable(CUfunction f, int enable)
{
    return set_attr(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, enable);
}

/* [4] the GPU's TPC-to-GPC mapping: internal, not remoted */
static CUresult tpc_mapping(unsigned char **vgpc, unsigned char **mtpc)
{
    (void)vgpc;
    (void)mtpc;
    return sl_fe_et_stub_called(&cluster, 4, CUDA_ERROR_NOT_SUPPORTED);
}

/* [5] */
static CUresult get_dim(CUfunction f, int *x, int *y, int *z)
{
    if (!x || !y || !z)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = get_attr(x, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, f);
    if (rc == CUDA_SUCCESS)
        rc = get_attr(y, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, f);
    if (rc == CUDA_SUCCESS)
        rc = get_attr(z, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, f);
    return rc;
}

/* [6] */
static CUresult get_policy(CUfunction f, int *policy)
{
    return get_attr(policy, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, f);
}

/* [7] */
static CUresult get_non_portable(CUfunction f, int *enable)
{
    return get_attr(enable, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, f);
}

/* [8] */
static CUresult launch_supported(CUdevice dev, int *supported)
{
    dev_get_fn fn = (dev_get_fn)api("cuDeviceGetAttribute");
    return fn ? fn(supported, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, dev) : CUDA_ERROR_NOT_SUPPORTED;
}

static CUlaunchConfig config(unsigned block, size_t smem, CUlaunchAttribute *attr, int cluster_x)
{
    CUlaunchConfig c;
    memset(&c, 0, sizeof c);
    c.gridDimX = c.gridDimY = c.gridDimZ = 1;
    c.blockDimX = block;
    c.blockDimY = c.blockDimZ = 1;
    c.sharedMemBytes = (unsigned)smem;
    if (cluster_x > 0) {
        memset(attr, 0, sizeof *attr);
        attr->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr->value.clusterDim.x = (unsigned)cluster_x;
        attr->value.clusterDim.y = attr->value.clusterDim.z = 1;
        c.gridDimX = (unsigned)cluster_x; /* the grid must be a multiple of the cluster */
        c.attrs = attr;
        c.numAttrs = 1;
    }
    return c;
}

/* [9] */
static CUresult max_cluster_size(CUfunction f, int block, size_t smem, int *size)
{
    if (block <= 0 || smem > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    CUlaunchAttribute a;
    CUlaunchConfig c = config((unsigned)block, smem, &a, 0);
    return occupancy("cuOccupancyMaxPotentialClusterSize", size, f, &c);
}

/* [10] */
static CUresult max_active_clusters(CUfunction f, int block, size_t smem, int csize, int *n)
{
    if (block <= 0 || csize <= 0 || smem > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    CUlaunchAttribute a;
    CUlaunchConfig c = config((unsigned)block, smem, &a, csize);
    return occupancy("cuOccupancyMaxActiveClusters", n, f, &c);
}

/* [11] a test override of the per-device maximum; returns the old value, so it cannot say
 * "not supported": nothing is overridden and 0 is returned */
static uint32_t override_max(int dev, uint32_t size)
{
    (void)dev;
    (void)size;
    sl_fe_et_stub_called(&cluster, 11, CUDA_ERROR_NOT_SUPPORTED);
    return 0;
}

/* [12] */
static CUresult dim_must_be_set(CUfunction f, int *must)
{
    return get_attr(must, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, f);
}

/* [13] frees what [4] returned: [4] never returns anything */
static CUresult free_mapping(unsigned char *vgpc, unsigned char *mtpc)
{
    return vgpc || mtpc ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* [14] cluster attributes for device-side launches: not offered (answer 0) */
static CUresult cnp_supported(int *supported)
{
    if (!supported)
        return CUDA_ERROR_INVALID_VALUE;
    *supported = 0;
    return CUDA_SUCCESS;
}

/* [15] the GPU's internal vGPC numbering: not remoted */
static CUresult singleton_vgpc(CUdevice dev, unsigned char *base)
{
    (void)dev;
    (void)base;
    return sl_fe_et_stub_called(&cluster, 15, CUDA_ERROR_NOT_SUPPORTED);
}

/* [16] preferred cluster dimensions (a launch attribute of later GPUs): not offered */
static CUresult preferred_supported(CUdevice dev, int *supported)
{
    (void)dev;
    if (!supported)
        return CUDA_ERROR_INVALID_VALUE;
    *supported = 0;
    return CUDA_SUCCESS;
}

static const sl_fe_slot TABLE[17] = {
    SL_FE_ET_SIZE(17),
    SL_FE_ET_FN(set_dim),
    SL_FE_ET_FN(set_policy),
    SL_FE_ET_FN(set_non_portable),
    SL_FE_ET_FN(tpc_mapping),
    SL_FE_ET_FN(get_dim),
    SL_FE_ET_FN(get_policy),
    SL_FE_ET_FN(get_non_portable),
    SL_FE_ET_FN(launch_supported),
    SL_FE_ET_FN(max_cluster_size),
    SL_FE_ET_FN(max_active_clusters),
    SL_FE_ET_FN(override_max),
    SL_FE_ET_FN(dim_must_be_set),
    SL_FE_ET_FN(free_mapping),
    SL_FE_ET_FN(cnp_supported),
    SL_FE_ET_FN(singleton_vgpc),
    SL_FE_ET_FN(preferred_supported),
};

const sl_fe_slot *sl_fe_et_cluster(void)
{
    return TABLE;
}
