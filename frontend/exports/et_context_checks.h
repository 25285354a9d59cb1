/* The private table CONTEXT_CHECKS (et_context_checks.c). */
#ifndef SLUICE_FRONTEND_ET_CONTEXT_CHECKS_H
#define SLUICE_FRONTEND_ET_CONTEXT_CHECKS_H

#include "exports/et_stub.h"

const sl_fe_slot *sl_fe_et_context_checks(void);

#endif
