/* The private table TOOLS_RUNTIME_CALLBACK_HOOKS (et_tools_hooks.c). */
#ifndef SLUICE_FRONTEND_ET_TOOLS_HOOKS_H
#define SLUICE_FRONTEND_ET_TOOLS_HOOKS_H

#include "exports/et_stub.h"

const sl_fe_slot *sl_fe_et_tools_hooks(void);

#endif
