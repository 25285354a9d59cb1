/* sl_tcp_probe (sluice/tcp_probe.h). */
#include "sluice/tcp_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static sl_tcp_state say(sl_tcp_state st, char *why, size_t n, const char *what)
{
    if (why && n)
        snprintf(why, n, "%s", what);
    return st;
}

/* One address: OPEN, REFUSED, or UNKNOWN with errno's words in why. */
static sl_tcp_state try_one(const struct addrinfo *ai, int timeout_ms, char *why, size_t n)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return say(SL_TCP_UNKNOWN, why, n, strerror(errno));
    int r = connect(fd, ai->ai_addr, ai->ai_addrlen), err = r == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
        struct pollfd p = {fd, POLLOUT, 0};
        int pr;
        do
            pr = poll(&p, 1, timeout_ms);
        while (pr < 0 && errno == EINTR);
        socklen_t len = sizeof err;
        if (pr == 0)
            err = ETIMEDOUT;
        else if (pr < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
    }
    close(fd);
    if (err == 0)
        return say(SL_TCP_OPEN, why, n, "open");
    if (err == ECONNREFUSED)
        return say(SL_TCP_REFUSED, why, n, "connection refused");
    return say(SL_TCP_UNKNOWN, why, n, err == ETIMEDOUT ? "no answer in time" : strerror(err));
}

sl_tcp_state sl_tcp_probe(const char *endpoint, int timeout_ms, char *why, size_t n)
{
    char host[256], port[16];
    if (!endpoint || strncmp(endpoint, "tcp://", 6) != 0)
        return say(SL_TCP_UNKNOWN, why, n, "not a tcp:// endpoint");
    const char *h = endpoint + 6, *colon = strrchr(h, ':');
    if (!colon || (size_t)(colon - h) >= sizeof host || strlen(colon + 1) >= sizeof port)
        return say(SL_TCP_UNKNOWN, why, n, "not tcp://HOST:PORT");
    size_t hl = (size_t)(colon - h);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']')
        snprintf(host, sizeof host, "%.*s", (int)hl - 2, h + 1);
    else
        snprintf(host, sizeof host, "%.*s", (int)hl, h);
    snprintf(port, sizeof port, "%s", colon + 1);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0)
        return say(SL_TCP_UNKNOWN, why, n, gai_strerror(g));
    sl_tcp_state st = SL_TCP_UNKNOWN;
    for (struct addrinfo *ai = res; ai && st != SL_TCP_OPEN; ai = ai->ai_next) {
        sl_tcp_state s = try_one(ai, timeout_ms, why, n);
        if (s != SL_TCP_UNKNOWN || st == SL_TCP_UNKNOWN)
            st = s;
    }
    freeaddrinfo(res);
    return st;
}
