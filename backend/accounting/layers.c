/* The layers every call passes through around its handler, in this order (docs/backend.md):
 * accounting (timed runs of device work, accounting.c), the memory quota (quota.c), then the
 * handler of the static dispatch table. Which layer acts on which call is the table's word
 * (acct=, quota=): nothing here switches on call ids. */
#include "accounting/layers.h"

#include "accounting/quota.h"
#include "accounting/timing.h"
#include "sluice/backend_dispatch.h"

CUresult be_layers_run(struct sl_be_call *c, const struct sl_call_info *ci)
{
    if (!ci)
        return sl_be_dispatch(sl_be_table, c); /* an unknown id: the dispatch answers */
    be_acct_call_begin(c->s, c->call);
    uint64_t asked;
    CUresult rc = be_quota_before(c, ci, &asked);
    if (rc == CUDA_SUCCESS)
        rc = be_quota_after(c, ci, asked, sl_be_dispatch(sl_be_table, c));
    be_acct_call_end(c->s, c->call, rc);
    return rc;
}
