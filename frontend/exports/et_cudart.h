/* The private table CUDART_INTERFACE: what cudart asks of the driver (et_cudart.c). */
#ifndef SLUICE_FRONTEND_ET_CUDART_H
#define SLUICE_FRONTEND_ET_CUDART_H

#include "exports/et_stub.h"

const sl_fe_slot *sl_fe_et_cudart_interface(void);

#endif
