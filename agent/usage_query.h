/* A usage report (sluice/usage_report.h) of this host from the agent's usage store: the
 * records and lifetimes touching the period. Used by sluice-usage and the tests. */
#ifndef AG_USAGE_QUERY_H
#define AG_USAGE_QUERY_H

#include "sluice/usage_report.h"
#include "usage_store.h"

/* project: NULL or "" for every project. *out: free with sl_usage_report_free. */
sl_code ag_usage_query(ag_usage_store *s, int64_t from_ns, int64_t to_ns, const char *project,
                       sl_usage_report **out, sl_error *e);

#endif
