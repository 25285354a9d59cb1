/* The private table CONTEXT_ID (et_context_id.c). */
#ifndef SLUICE_FRONTEND_ET_CONTEXT_ID_H
#define SLUICE_FRONTEND_ET_CONTEXT_ID_H

#include "exports/et_stub.h"

const sl_fe_slot *sl_fe_et_context_id(void);

#endif
