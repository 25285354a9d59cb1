#include "fe_test_hooks.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/context.h"
#include "api/device.h"
#include "api/module.h"
#include "call/contexts.h"
#include "exports/exports.h"
#include "exports/procaddr_table.h"

static int g_driver_version = 13000;
static CUcontext g_current;
static struct sl_fe_integrity_device g_devs[8];
static int g_dev_count = 1;
static CUresult g_attr_rc = CUDA_SUCCESS;
static const void *g_last_image;
static int g_loads;
static struct sl_fe_export *g_exports;
static unsigned g_module_functions;
static int *g_stream_id_calls;
static CUresult g_module_functions_rc = CUDA_SUCCESS;
static size_t g_export_count;

static const struct sl_fe_integrity_device DEFAULT_DEV = {
    .uuid = {{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x07, 0x18, 0x29, 0x3a, 0x4b, 0x5c, 0x6d,
              0x7e, 0x0f}},
    .pci_domain = 0,
    .pci_bus = 0x1b,
    .pci_device = 0,
};

void fe_test_reset(void)
{
    g_driver_version = 13000;
    g_current = NULL;
    g_devs[0] = DEFAULT_DEV;
    g_dev_count = 1;
    g_attr_rc = CUDA_SUCCESS;
    g_last_image = NULL;
    g_loads = 0;
    g_module_functions = 0;
    g_module_functions_rc = CUDA_SUCCESS;
    g_stream_id_calls = NULL;
}

void fe_test_set_driver_version(int version)
{
    g_driver_version = version;
}

void fe_test_set_current(CUcontext ctx)
{
    g_current = ctx;
}

void fe_test_set_devices(const struct sl_fe_integrity_device *devs, int count)
{
    if (count < 0 || count > 8)
        abort();
    if (count > 0)
        memcpy(g_devs, devs, (size_t)count * sizeof *devs);
    g_dev_count = count;
}

void fe_test_fail_device_attribute(CUresult rc)
{
    g_attr_rc = rc;
}

static int cmp_export(const void *a, const void *b)
{
    return strcmp(((const struct sl_fe_export *)a)->name, ((const struct sl_fe_export *)b)->name);
}

static void add_export(const char *name, const char *omit, size_t *cap)
{
    if (!name || (omit && strcmp(name, omit) == 0))
        return;
    if (g_export_count == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        g_exports = realloc(g_exports, *cap * sizeof *g_exports);
        if (!g_exports)
            abort();
    }
    g_exports[g_export_count++] = (struct sl_fe_export){name, name};
}

void fe_test_exports_build(const char *omit)
{
    fe_test_exports_free();
    size_t n = 0, cap = 0;
    const struct sl_fe_proc_entry *t = sl_fe_proc_table(&n);
    for (size_t i = 0; i < n; i++) {
        for (unsigned j = 0; j < t[i].n_abis; j++) {
            add_export(t[i].abis[j].export_name, omit, &cap);
            add_export(t[i].abis[j].pt_export_name, omit, &cap);
        }
    }
    qsort(g_exports, g_export_count, sizeof *g_exports, cmp_export);
}

void fe_test_exports_free(void)
{
    free(g_exports);
    g_exports = NULL;
    g_export_count = 0;
}

const void *fe_test_last_image(void)
{
    return g_last_image;
}

int fe_test_module_loads(void)
{
    return g_loads;
}

CUcontext fe_test_primary_handle(CUdevice dev)
{
    return (CUcontext)(uintptr_t)(0x7000 + 0x100 * (uintptr_t)dev);
}

/* ---- the hooks ---- */

int sl_fe_reported_driver_version(void)
{
    return g_driver_version;
}

CUresult sl_fe_primary_ctx_handle(CUdevice dev, CUcontext *pctx)
{
    if (dev < 0 || dev >= g_dev_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *pctx = fe_test_primary_handle(dev);
    return CUDA_SUCCESS;
}

CUresult sl_fe_module_load_image(CUmodule *module, const void *image)
{
    g_last_image = image;
    g_loads++;
    *module = FE_TEST_MODULE;
    return CUDA_SUCCESS;
}

void fe_test_set_module_functions(unsigned count, CUresult rc)
{
    g_module_functions = count;
    g_module_functions_rc = rc;
}

CUresult sl_fe_module_functions(CUmodule module, CUfunction **fns, unsigned *count)
{
    *fns = NULL;
    *count = 0;
    if (module != FE_TEST_MODULE)
        return CUDA_ERROR_INVALID_HANDLE;
    if (g_module_functions_rc != CUDA_SUCCESS || g_module_functions == 0)
        return g_module_functions_rc;
    CUfunction *out = calloc(g_module_functions, sizeof *out);
    if (!out)
        abort();
    for (unsigned i = 0; i < g_module_functions; i++)
        out[i] = fe_test_module_function(i);
    *fns = out;
    *count = g_module_functions;
    return CUDA_SUCCESS;
}

CUresult sl_fe_function_name(CUfunction fn, const char **name)
{
    static const char *const NAMES[] = {"k0", "k1", "k2", "k3"};
    uintptr_t i = (uintptr_t)fn - 0xf000;
    if (i >= 4)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = NAMES[i];
    return CUDA_SUCCESS;
}

void fe_test_stream_ids(int *calls)
{
    g_stream_id_calls = calls;
}

CUresult sl_fe_stream_id(CUcontext ctx, CUstream stream, uint64_t *id)
{
    if (g_stream_id_calls)
        (*g_stream_id_calls)++;
    if ((uintptr_t)stream == 0xbad)
        return CUDA_ERROR_INVALID_HANDLE;
    /* created streams: their own id; the context's streams: the context and the kind */
    *id = (uintptr_t)stream > 2 ? (uintptr_t)stream : ((uintptr_t)ctx << 4) | (uintptr_t)stream;
    return CUDA_SUCCESS;
}

CUcontext sl_fe_current_context(void)
{
    return g_current;
}

CUresult sl_fe_context_id(CUcontext ctx, uint64_t *id)
{
    *id = (uint64_t)(uintptr_t)ctx >> 8;
    return CUDA_SUCCESS;
}

CUresult sl_fe_device_count(int *count)
{
    *count = g_dev_count;
    return CUDA_SUCCESS;
}

CUresult sl_fe_device_uuid(CUdevice dev, CUuuid *uuid)
{
    if (dev < 0 || dev >= g_dev_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *uuid = g_devs[dev].uuid;
    return CUDA_SUCCESS;
}

CUresult sl_fe_device_attribute(CUdevice dev, CUdevice_attribute attr, int *value)
{
    if (dev < 0 || dev >= g_dev_count)
        return CUDA_ERROR_INVALID_DEVICE;
    if (g_attr_rc != CUDA_SUCCESS)
        return g_attr_rc;
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
        *value = g_devs[dev].pci_domain;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        *value = g_devs[dev].pci_bus;
        return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
        *value = g_devs[dev].pci_device;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

const struct sl_fe_export *sl_fe_export_table(size_t *count)
{
    *count = g_export_count;
    return g_exports;
}
