/* The JIT linker run in the backend (link.c). */
#ifndef SLUICE_BE_API_LINK_H
#define SLUICE_BE_API_LINK_H

#include "session/state.h"

/* Session end: frees the link states still open (called by be_graph_release). */
void be_link_release(sl_be_session *s);

#endif
