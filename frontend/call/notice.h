/* What the tenant reads, at the default log level, when CUDA cannot work for a reason the
 * tenant can act on: one line each, naming what to do (docs/tenant-guide.md, "Errors you may
 * see"). Internal to libcuda.so.1. */
#ifndef SLUICE_FRONTEND_CALL_NOTICE_H
#define SLUICE_FRONTEND_CALL_NOTICE_H

#include <stdint.h>

#include <cuda.h>

#include "call/config.h"
#include "sluice/error.h"

/* Before connecting: the client certificate's dates, then one TCP connect to the endpoint (a
 * closed port is told at once as "refused", not after the channel's connect attempts).
 * CUDA_SUCCESS to go on, or CUDA_ERROR_NO_DEVICE after the line. */
CUresult sl_fe_preflight(const struct sl_fe_config *cfg);

/* The channel could not connect: the line, with the hint that fits the reason. */
void sl_fe_explain_connect(const struct sl_fe_config *cfg, const sl_error *err);

/* A reply: an allocation refused by the instance's memory quota is told at warning level (the
 * first one in full; later ones at debug). */
void sl_fe_notice_reply(uint32_t call_id, int result, const char *detail);

#endif
