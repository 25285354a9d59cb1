/* Transitional: the headers of the frontend's files for the three files not moved into call/
 * yet (config.c, connection.c, rpc.c). This header goes with their move. */
#ifndef SLUICE_FRONTEND_FE_H
#define SLUICE_FRONTEND_FE_H

#include "call/callbacks.h"
#include "call/config.h"
#include "call/connection.h"
#include "call/contexts.h"
#include "call/frame.h"
#include "call/idle.h"
#include "call/mapped_sync.h"
#include "call/memo.h"
#include "call/rpc.h"
#include "component.h"

#endif
