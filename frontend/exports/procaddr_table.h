/* The generated cuGetProcAddress data (frontend/gen/gen_procaddr.py). Internal. */
#ifndef SLUICE_FRONTEND_PROCADDR_TABLE_H
#define SLUICE_FRONTEND_PROCADDR_TABLE_H

#include <stddef.h>

/* One ABI of a driver call: valid for cudaVersion >= since (until the next ABI's since).
 * pt_export_name is its _ptds/_ptsz entry point, served for per-thread requests with
 * cudaVersion >= pt_since; NULL when the ABI has none. */
struct sl_fe_proc_abi {
    int since;
    int pt_since;
    const char *export_name;
    const char *pt_export_name;
};

/* One base name (what cuGetProcAddress is asked for) and its ABIs by ascending since. */
struct sl_fe_proc_entry {
    const char *name;
    const struct sl_fe_proc_abi *abis;
    unsigned n_abis;
};

/* The entries, sorted by strcmp() of name. Sets *count. */
const struct sl_fe_proc_entry *sl_fe_proc_table(size_t *count);

#endif
