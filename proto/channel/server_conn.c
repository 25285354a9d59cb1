/* The TCP connections under the server's peers, from the socket monitor (ACCEPTED, DISCONNECTED,
 * CLOSED with the connection's file descriptor) and ZMQ_SRCFD of each peer's first frame.
 *
 * Connections that have not authenticated (in the handshake; in server-only mode, every one)
 * are limited per source address (max_unauth_per_addr) and in all (max_unauth): over a limit
 * the oldest such connection is closed, so a flood from one address, or from many, cannot take
 * the slots of the peers that present a certificate, and a newcomer is never the one refused.
 * A connection with no TLS handshake done in handshake_timeout_ms is closed too, whether or not
 * it sent a frame. "Closed" is shutdown(2) on ZeroMQ's descriptor, after checking it is still
 * the same connection (address and port): ZeroMQ sees the end and cleans up as for any peer
 * that left, and the descriptor is free again.
 *
 * A descriptor number from the monitor or ZMQ_SRCFD may name a connection ZeroMQ has closed
 * since, and the number may already be another descriptor of the process: only a stream socket
 * whose local address is the server's endpoint (ours()) is ever recorded or shut down. Before,
 * a session worker's socketpair that took the number of an evicted connection was recorded
 * from that connection's late first frame and shut down with its dead session: the worker saw
 * its session end before it began (64 guests connecting at once, issue 25). */
#include "server_int.h"

#include "sluice/log.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#define SUMMARY_MS   10000 /* the log sums up closed unauthenticated connections this often */
#define SHUT_KEEP_MS 10000
/* Probes for the session of a connection that closed, one per heartbeat interval: ZeroMQ may
 * drop the routing id a moment after the monitor's event */
#define PROBES_AFTER_CLOSE 3

/* Whether fd is a connection accepted on this server's endpoint: a TCP stream socket on the
 * endpoint's port, or a Unix stream socket on its path (an abstract one: "@name"). An endpoint
 * of another kind, or none yet, leaves every descriptor taken as before. */
static int ours(const sl_server *s, int fd)
{
    int type = 0;
    socklen_t tl = sizeof type;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return 0;
    const char *ep = s->endpoint;
    if (!strncmp(ep, "tcp://", 6)) {
        const char *colon = strrchr(ep, ':');
        unsigned want = colon ? (unsigned)strtoul(colon + 1, NULL, 10) : 0;
        if (ss.ss_family == AF_INET)
            return ntohs(((const struct sockaddr_in *)&ss)->sin_port) == want;
        if (ss.ss_family == AF_INET6)
            return ntohs(((const struct sockaddr_in6 *)&ss)->sin6_port) == want;
        return 0;
    }
    if (!strncmp(ep, "ipc://", 6)) {
        const struct sockaddr_un *u = (const struct sockaddr_un *)&ss;
        const char *path = ep + 6;
        size_t have = sl > offsetof(struct sockaddr_un, sun_path)
                          ? sl - offsetof(struct sockaddr_un, sun_path)
                          : 0;
        if (ss.ss_family != AF_UNIX || !have)
            return 0;
        if (path[0] == '@') /* abstract: a NUL, then the name, not terminated */
            return u->sun_path[0] == '\0' && have - 1 == strlen(path + 1) &&
                   !memcmp(u->sun_path + 1, path + 1, have - 1);
        return !strncmp(u->sun_path, path, have);
    }
    return 1;
}

static int peer_of(int fd, char *addr, size_t n, unsigned *port)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    addr[0] = '\0';
    *port = 0;
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
        return -1;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, addr, (socklen_t)n);
        *port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, addr, (socklen_t)n);
        *port = ntohs(a->sin6_port);
    }
    return 0; /* ipc: no address; counted in all, not per address */
}

/* The record of the connection now on fd (one of ours()): a descriptor number ZeroMQ closed and
 * used again is another connection, told apart by the remote address and port. */
static ch_conn *current(sl_server *s, int fd)
{
    char addr[64];
    unsigned port;
    int known = peer_of(fd, addr, sizeof addr, &port) == 0;
    for (ch_conn *c = s->conns; c; c = c->next)
        if (c->fd == fd && !c->shut && (!known || (c->port == port && strcmp(c->addr, addr) == 0)))
            return c;
    return NULL;
}

static ch_conn *of_peer(sl_server *s, const peer *p)
{
    for (ch_conn *c = s->conns; c; c = c->next)
        if (c->peer == p->id && !c->shut)
            return c;
    return NULL;
}

/* A session whose first frame came on fd from addr and is not closed. */
static peer *peer_on(sl_server *s, int fd, const char *addr)
{
    for (peer *p = s->peers; p; p = p->next)
        if (p->fd == fd && (p->state == P_HANDSHAKE || p->state == P_LIVE) &&
            (!addr[0] || !p->address[0] || strcmp(p->address, addr) == 0))
            return p;
    return NULL;
}

static void shut(sl_server *s, ch_conn *c)
{
    char addr[64];
    unsigned port;
    c->shut = 1;
    c->since_ms = ch_now_ms(); /* from now: when it was shut */
    /* the descriptor is ZeroMQ's: touch it only while it is still this connection */
    if (ours(s, c->fd) && peer_of(c->fd, addr, sizeof addr, &port) == 0 && port == c->port &&
        strcmp(addr, c->addr) == 0)
        shutdown(c->fd, SHUT_RDWR);
    peer *p = c->peer ? ch_srv_find_id(s, c->peer) : NULL;
    if (p)
        p->shut = 1;
}

/* Closes an unauthenticated connection and its session, if it has one. */
static void evict(sl_server *s, ch_conn *c, sl_code code, const char *why)
{
    peer *p = c->peer ? ch_srv_find_id(s, c->peer) : NULL;
    if (p && (p->state == P_HANDSHAKE || p->state == P_LIVE)) {
        sl_error e;
        sl_fail(&e, code, "%s", why);
        ch_srv_close_peer(p, &e, 1);
    }
    shut(s, c);
}

static int unauth(const ch_conn *c)
{
    return !c->shut && !c->authed;
}

/* Keeps the limits after c arrived: the oldest unauthenticated connections go first. */
static void enforce(sl_server *s, const ch_conn *c)
{
    char why[160];
    for (;;) {
        int same = 0, all = 0;
        ch_conn *old_same = NULL, *old_all = NULL;
        for (ch_conn *x = s->conns; x; x = x->next) {
            if (!unauth(x))
                continue;
            all++;
            if (!old_all || x->since_ms < old_all->since_ms)
                old_all = x;
            if (c->addr[0] && strcmp(x->addr, c->addr) == 0) {
                same++;
                if (!old_same || x->since_ms < old_same->since_ms)
                    old_same = x;
            }
        }
        if (s->opts.max_unauth_per_addr > 0 && same > s->opts.max_unauth_per_addr) {
            snprintf(why, sizeof why,
                     "closed: more than %d connections from %s have not authenticated",
                     s->opts.max_unauth_per_addr, c->addr);
            evict(s, old_same, SL_ERR_REFUSED, why);
        } else if (s->opts.max_unauth > 0 && all > s->opts.max_unauth) {
            snprintf(why, sizeof why,
                     "closed: more than %d connections have not authenticated; the oldest goes",
                     s->opts.max_unauth);
            evict(s, old_all, SL_ERR_REFUSED, why);
        } else {
            return;
        }
        s->evicted++;
    }
}

/* A record for the connection on fd (one of ours()). */
static ch_conn *add(sl_server *s, int fd, int seen)
{
    ch_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = fd;
    c->seen = seen;
    c->since_ms = ch_now_ms();
    peer_of(fd, c->addr, sizeof c->addr, &c->port);
    c->next = s->conns;
    s->conns = c;
    enforce(s, c);
    return c;
}

/* The connection on fd is gone (closed, or the number used again). Its record goes, but not the
 * record of a newer connection on the same number whose first frame was read before its
 * ACCEPTED event (not seen yet: the monitor's events come in order, so it is not the one that
 * closed). Every session whose first frame came on fd is probed, so that the server learns
 * whether ZeroMQ dropped its routing id (server.c timers): found by the session's own
 * descriptor, not through the record, which a frame read before its event may have lost. */
static void remove_fd(sl_server *s, int fd)
{
    for (ch_conn **pp = &s->conns; *pp;) {
        ch_conn *c = *pp;
        if (c->fd == fd && (c->seen || c->shut)) {
            *pp = c->next;
            free(c);
        } else {
            pp = &c->next;
        }
    }
    for (peer *p = s->peers; p; p = p->next)
        if (p->fd == fd)
            p->probes = PROBES_AFTER_CLOSE;
}

int ch_conn_holds(const sl_server *s, const peer *p)
{
    char addr[64];
    unsigned port;
    if (p->fd < 0)
        return 1;
    return ours(s, p->fd) && peer_of(p->fd, addr, sizeof addr, &port) == 0 &&
           port == p->conn_port && strcmp(addr, p->conn_addr) == 0;
}

void ch_conn_event(sl_server *s, int event, int fd)
{
    if (fd < 0)
        return;
    if (event == ZMQ_EVENT_ACCEPTED) {
        int mine = ours(s, fd); /* else that connection is gone, its number another descriptor */
        ch_conn *c = mine ? current(s, fd) : NULL;
        if (c && !c->seen) { /* its first frame was read before this event */
            c->seen = 1;
            return;
        }
        remove_fd(s, fd); /* a descriptor number used again: the old connection is gone */
        if (mine)
            add(s, fd, 1);
    } else if (event == ZMQ_EVENT_DISCONNECTED || event == ZMQ_EVENT_CLOSED) {
        remove_fd(s, fd);
    }
}

void ch_conn_bind_peer(sl_server *s, peer *p, int fd)
{
    p->fd = fd >= 0 && ours(s, fd) ? fd : -1; /* -1: its connection is not known (probed) */
    if (p->fd < 0)
        return;
    peer_of(fd, p->conn_addr, sizeof p->conn_addr, &p->conn_port);
    ch_conn *c = current(s, fd);
    if (!c) /* its ACCEPTED event is not read yet */
        c = add(s, fd, 0);
    if (c && !c->shut)
        c->peer = p->id;
    else
        p->shut = 1;
}

void ch_conn_authed(sl_server *s, const peer *p)
{
    ch_conn *c = of_peer(s, p);
    if (c)
        c->authed = 1;
}

void ch_conn_shutdown(sl_server *s, peer *p)
{
    if (p->shut)
        return;
    p->shut = 1;
    ch_conn *c = of_peer(s, p);
    if (c)
        shut(s, c);
}

void ch_conn_timers(sl_server *s, int64_t now)
{
    for (ch_conn **pp = &s->conns; *pp;) {
        ch_conn *c = *pp;
        if (c->shut && now - c->since_ms > SHUT_KEEP_MS) { /* its CLOSED event never came */
            *pp = c->next;
            free(c);
            continue;
        }
        pp = &c->next;
        if (c->shut || c->authed || c->peer || now - c->since_ms <= s->opts.handshake_timeout_ms)
            continue;
        peer *p = peer_on(s, c->fd, c->addr);
        if (p) { /* a session is on it: a record made again after its first frame */
            c->peer = p->id;
            c->authed = p->state == P_LIVE && p->ident.authenticated;
            continue;
        }
        shut(s, c); /* connected, but not one frame in time */
        s->expired++;
    }
    unsigned long n = s->evicted + s->expired + s->failed;
    if (n && now >= s->next_summary_ms) {
        sl_log(SL_LOG_WARNING, CH_LOG,
               "closed %lu unauthenticated connection%s since the last such line: %lu over the "
               "limits (%d per address, %d in all), %lu without a handshake within %d ms, %lu "
               "failed the handshake (not speaking TLS 1.3, or gone)",
               n, n == 1 ? "" : "s", s->evicted, s->opts.max_unauth_per_addr, s->opts.max_unauth,
               s->expired, s->opts.handshake_timeout_ms, s->failed);
        s->evicted = s->expired = s->failed = 0;
        s->next_summary_ms = now + SUMMARY_MS;
    }
}

void ch_conn_free_all(sl_server *s)
{
    while (s->conns) {
        ch_conn *c = s->conns;
        s->conns = c->next;
        free(c);
    }
}
