#include "exports/export_tables.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "exports/et_cls.h"
#include "exports/et_cluster.h"
#include "exports/et_context_checks.h"
#include "exports/et_context_id.h"
#include "exports/et_cudart.h"
#include "exports/et_integrity.h"
#include "exports/et_module_functions.h"
#include "exports/et_tools_hooks.h"
#include "exports/et_tools_tls.h"
#include "sluice/log.h"

/* Bytes as export-tables.md section 1 gives them. */
const uint8_t SL_FE_ET_ID_CUDART_INTERFACE[16] = {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
                                                  0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9};
const uint8_t SL_FE_ET_ID_TOOLS_RUNTIME_CALLBACK_HOOKS[16] = {
    0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66};
const uint8_t SL_FE_ET_ID_TOOLS_TLS[16] = {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47,
                                           0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc};
const uint8_t SL_FE_ET_ID_CONTEXT_LOCAL_STORAGE[16] = {
    0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93};
const uint8_t SL_FE_ET_ID_CONTEXT_CHECKS[16] = {0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43,
                                                0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e};
const uint8_t SL_FE_ET_ID_INTEGRITY_CHECK[16] = {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b,
                                                 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2};
const uint8_t SL_FE_ET_ID_CONTEXT_ID[16] = {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
                                            0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2};
const uint8_t SL_FE_ET_ID_CLUSTER[16] = {0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45,
                                         0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca};
const uint8_t SL_FE_ET_ID_MODULE_FUNCTIONS[16] = {0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d,
                                                  0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e};

struct served {
    const uint8_t *id;
    const sl_fe_slot *(*table)(void);
};

static const struct served SERVED[] = {
    {SL_FE_ET_ID_CUDART_INTERFACE, sl_fe_et_cudart_interface},
    {SL_FE_ET_ID_TOOLS_RUNTIME_CALLBACK_HOOKS, sl_fe_et_tools_hooks},
    {SL_FE_ET_ID_TOOLS_TLS, sl_fe_et_tools_tls},
    {SL_FE_ET_ID_CONTEXT_LOCAL_STORAGE, sl_fe_et_context_local_storage},
    {SL_FE_ET_ID_CONTEXT_CHECKS, sl_fe_et_context_checks},
    {SL_FE_ET_ID_INTEGRITY_CHECK, sl_fe_et_integrity_check},
    {SL_FE_ET_ID_CONTEXT_ID, sl_fe_et_context_id},
    {SL_FE_ET_ID_CLUSTER, sl_fe_et_cluster},
    {SL_FE_ET_ID_MODULE_FUNCTIONS, sl_fe_et_module_functions},
};

CUresult sl_fe_cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    if (!ppExportTable || !pExportTableId)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof SERVED / sizeof SERVED[0]; i++) {
        if (memcmp(SERVED[i].id, pExportTableId->bytes, 16) == 0) {
            *ppExportTable = SERVED[i].table();
            return CUDA_SUCCESS;
        }
    }
    /* The real driver's answer for an id it does not have; f8cff951 is refused on purpose
     * (cudart 13 falls back to CONTEXT_CHECKS). */
    *ppExportTable = NULL;
    if (sl_log_enabled(SL_LOG_DEBUG)) {
        char hex[33];
        for (int i = 0; i < 16; i++)
            snprintf(hex + 2 * i, 3, "%02x", (unsigned char)pExportTableId->bytes[i]);
        sl_log(SL_LOG_DEBUG, "frontend", "cuGetExportTable(%s): not served", hex);
    }
    return CUDA_ERROR_INVALID_VALUE;
}
