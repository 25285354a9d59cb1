#include "exports/et_stub.h"

#include "sluice/log.h"

CUresult sl_fe_et_stub_called(struct sl_fe_et_site *site, unsigned slot, CUresult rc)
{
    if (slot < SL_FE_ET_MAX_SLOTS && !atomic_exchange(&site->seen[slot], 1))
        sl_log(SL_LOG_WARNING, "frontend", "export table %s slot %u called: unknown, returns %d",
               site->table, slot, (int)rc);
    return rc;
}
