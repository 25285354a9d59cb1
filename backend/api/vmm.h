/* Virtual memory management (vmm.c). */
#ifndef SLUICE_BE_API_VMM_H
#define SLUICE_BE_API_VMM_H

#include "session/state.h"

/* Session end: frees the reservations' and mappings' bookkeeping (called by be_graph_release). */
void be_vmm_release(sl_be_session *s);

#endif
