/* Store -> report. */
#include "usage_query.h"

typedef struct ctx {
    sl_usage_report *r;
    sl_error *e;
    sl_code rc;
    int shared; /* a record of the period has shared GPU time */
} ctx;

static int on_rec(const sl_usage_rec *rec, void *ud)
{
    ctx *c = ud;
    c->shared |= rec->gpu_shared_ns > 0;
    c->rc = sl_usage_report_add(c->r, rec, c->e);
    return c->rc != SL_OK;
}

static int on_life(const sl_usage_life *l, void *ud)
{
    ctx *c = ud;
    c->rc = sl_usage_report_add_life(c->r, l, c->e);
    return c->rc != SL_OK;
}

sl_code ag_usage_query(ag_usage_store *s, int64_t from_ns, int64_t to_ns, const char *project,
                       sl_usage_report **out, sl_error *e)
{
    if (project && !*project)
        project = NULL;
    ctx c = {NULL, e, SL_OK, 0};
    sl_code rc = sl_usage_report_new(from_ns, to_ns, project, &c.r, e);
    if (rc == SL_OK)
        rc = ag_usage_store_records(s, from_ns, to_ns, project, on_rec, &c, e);
    if (rc == SL_OK)
        rc = c.rc;
    if (rc == SL_OK)
        rc = ag_usage_store_lives(s, from_ns, to_ns, project, on_life, &c, e);
    if (rc == SL_OK)
        rc = c.rc;
    if (rc == SL_OK && c.shared) /* apportioned: the shared figure beside the raw one */
        sl_usage_report_with_shared(c.r);
    if (rc == SL_OK)
        rc = sl_usage_report_finish(c.r, e);
    if (rc != SL_OK) {
        sl_usage_report_free(c.r);
        return rc;
    }
    *out = c.r;
    return SL_OK;
}
