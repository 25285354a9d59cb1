/* Is anything listening at a tcp:// endpoint? ZeroMQ retries a refused connection silently, so a
 * closed port shows only as a timeout; one plain TCP connect tells "refused" (nothing listens:
 * the backend is not running there) from "open" and from "no answer" (filtered, unreachable). */
#ifndef SLUICE_TCP_PROBE_H
#define SLUICE_TCP_PROBE_H

#include <stddef.h>

typedef enum sl_tcp_state {
    SL_TCP_UNKNOWN = -1, /* no answer in time, unreachable, or not a tcp://HOST:PORT endpoint */
    SL_TCP_REFUSED = 0,  /* the host answered: nothing listens on that port */
    SL_TCP_OPEN = 1,     /* something accepted the connection */
} sl_tcp_state;

/* endpoint "tcp://HOST:PORT" (HOST a name, an IPv4 or a [IPv6] literal). why (may be NULL)
 * gets a few words for the log. */
sl_tcp_state sl_tcp_probe(const char *endpoint, int timeout_ms, char *why, size_t n);

#endif
