/* The transport the call layer talks through: the session's channel client (connection.c),
 * or a fake backend in tests. */
#ifndef SLUICE_FRONTEND_CALL_TRANSPORT_H
#define SLUICE_FRONTEND_CALL_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "sluice/error.h"

struct sl_fe_transport {
    sl_code (*send)(void *t, const void *msg, size_t len, const struct iovec *bulk, size_t n,
                    sl_error *e);
    sl_code (*recv)(void *t, const void **msg, size_t *len, uint64_t *bulk_len, int timeout_ms,
                    sl_error *e);
    sl_code (*recv_bulk)(void *t, void *dst, size_t len, sl_error *e);
    void *t;
    /* Waiting for input without holding the transport (sluice/channel.h sl_client_fds and
     * sl_client_has_input); NULL: the reading thread blocks in recv instead (tests). */
    int (*fds)(void *t, int *fds, int n);
    int (*has_input)(void *t);
};

#endif
