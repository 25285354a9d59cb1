/* The private table CLUSTER (et_cluster.c). */
#ifndef SLUICE_FRONTEND_ET_CLUSTER_H
#define SLUICE_FRONTEND_ET_CLUSTER_H

#include "exports/et_stub.h"

const sl_fe_slot *sl_fe_et_cluster(void);

#endif
