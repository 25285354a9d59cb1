/* The private table TOOLS_TLS (et_tools_tls.c). */
#ifndef SLUICE_FRONTEND_ET_TOOLS_TLS_H
#define SLUICE_FRONTEND_ET_TOOLS_TLS_H

#include "exports/et_stub.h"

const sl_fe_slot *sl_fe_et_tools_tls(void);

#endif
