/* The name the frontend's log lines carry (sluice/log.h). */
#ifndef SLUICE_FRONTEND_COMPONENT_H
#define SLUICE_FRONTEND_COMPONENT_H

#define SL_FE_COMPONENT "frontend"

#endif
