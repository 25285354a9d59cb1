/* The printf filter (printf.c): device printf output, written where the program's own goes. */
#ifndef SLUICE_FRONTEND_CALL_PRINTF_H
#define SLUICE_FRONTEND_CALL_PRINTF_H

#include "sluice_session.pb-c.h"

/* Writes out (a reply's stdout_data) to file descriptor 1 and err (its stderr_data) to file
 * descriptor 2, each after the program's buffered output to it. */
void sl_fe_printf_write(const ProtobufCBinaryData *out, const ProtobufCBinaryData *err);

#endif
