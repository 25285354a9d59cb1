/* Mapped host memory (mapped.c): the twins of the guest's DEVICEMAP ranges. */
#ifndef SLUICE_BE_API_MAPPED_H
#define SLUICE_BE_API_MAPPED_H

#include "session/state.h"
#include "sluice/wire.h"

/* Attaches to a synchronous reply the bytes device work changed in mapped host memory;
 * _done frees them once the reply is encoded. */
void be_mapped_collect(sl_be_session *s, Sluice__Wire__Reply *reply);
void be_mapped_collect_done(Sluice__Wire__Reply *reply);
void be_mapped_release_all(sl_be_session *s);
/* Settles (slMappedSettle) left waiting for a busy stream whose work is done now (all of them,
 * each waited for, with wait: before a context goes) take effect. */
void be_mapped_settle_pending(sl_be_session *s, int wait);

#endif
