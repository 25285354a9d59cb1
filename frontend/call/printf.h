/* The printf filter (printf.c): device printf output, written where the program's own goes. */
#ifndef SLUICE_FRONTEND_CALL_PRINTF_H
#define SLUICE_FRONTEND_CALL_PRINTF_H

#include "sluice_session.pb-c.h"

/* Writes d (a reply's stdout_data) to file descriptor 1, after the program's buffered
 * output. */
void sl_fe_printf_write(const ProtobufCBinaryData *d);

#endif
