/* The private table MODULE_FUNCTIONS (et_module_functions.c). */
#ifndef SLUICE_FRONTEND_ET_MODULE_FUNCTIONS_H
#define SLUICE_FRONTEND_ET_MODULE_FUNCTIONS_H

#include "exports/et_stub.h"

const sl_fe_slot *sl_fe_et_module_functions(void);

#endif
