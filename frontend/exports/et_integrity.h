/* The private table INTEGRITY_CHECK (et_integrity.c). */
#ifndef SLUICE_FRONTEND_ET_INTEGRITY_H
#define SLUICE_FRONTEND_ET_INTEGRITY_H

#include "exports/et_stub.h"

const sl_fe_slot *sl_fe_et_integrity_check(void);

#endif
