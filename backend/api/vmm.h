/* Virtual memory management (vmm.c). */
#ifndef SLUICE_BE_API_VMM_H
#define SLUICE_BE_API_VMM_H

#include "session/state.h"

/* Session end: frees the reservations' and mappings' bookkeeping (called by be_graph_release). */
void be_vmm_release(sl_be_session *s);
/* The size of the session's physical allocation handle id (cuMemCreate or imported); 0, or -1
 * when the session holds no such handle. */
int be_vmm_handle_size(sl_be_session *s, uint64_t id, uint64_t *size);
/* Handle id's shareable handle was exported (its token is forgotten at cuMemRelease). */
void be_vmm_handle_exported(sl_be_session *s, uint64_t id);
/* A handle the session imported (cuMemImportFromShareableHandle) of size bytes, not counted
 * against its quota; 0, or -1 out of memory. */
int be_vmm_handle_imported(sl_be_session *s, uint64_t id, uint64_t size);

#endif
