/* What the other files of the double use of stream.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_STREAM_H
#define SLUICE_DOUBLE_STREAM_H

#include "core.h"

CUresult stream_sync(CUstream h);

#endif
