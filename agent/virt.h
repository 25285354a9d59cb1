/* The libvirt side: a read-only connection (keepalive 5 s x 3, close callback), LIFECYCLE,
 * REBOOT and METADATA_CHANGE events, reconnect with exponential backoff (1 s .. 30 s) and a
 * full resync (every domain, active or not) after every (re)connect, including the first.
 * Everything runs on one thread that also runs libvirt's default event loop; what it sees is
 * queued as observations for the agent's main loop, which is woken through an eventfd. */
#ifndef AG_VIRT_H
#define AG_VIRT_H

#include "sluice/error.h"

typedef enum ag_obs_kind {
    AG_OBS_UP,           /* the domain runs; meta_xml holds its Nova metadata (or NULL) */
    AG_OBS_DOWN,         /* the domain is not running (reason) */
    AG_OBS_GONE,         /* the domain was undefined */
    AG_OBS_META,         /* its metadata changed (meta_xml; running says whether it runs) */
    AG_OBS_REBOOT,       /* the guest rebooted (no stop) */
    AG_OBS_RESYNC_BEGIN, /* a full listing follows (as UP/DOWN observations) */
    AG_OBS_RESYNC_END,   /* the listing is complete: what was not in it is gone */
    AG_OBS_DISCONNECTED, /* the connection was lost (reason) */
} ag_obs_kind;

typedef struct ag_obs {
    ag_obs_kind kind;
    char uuid[40];
    char domain[256];
    int running;
    char reason[32];
    char *meta_xml; /* malloc'd; the receiver frees it (ag_obs_clear) */
    int meta_ns;    /* 11 or 10: the namespace meta_xml was read from */
} ag_obs;

void ag_obs_clear(ag_obs *o);

typedef struct ag_virt ag_virt;

/* Starts the thread; it connects (retrying with backoff) and resyncs. */
sl_code ag_virt_start(const char *uri, ag_virt **out, sl_error *e);

/* An fd readable when observations wait (an eventfd). */
int ag_virt_fd(const ag_virt *v);

/* 1 and *o filled with the next observation, 0 if none. */
int ag_virt_next(ag_virt *v, ag_obs *o);

/* 1 while connected. */
int ag_virt_connected(ag_virt *v);

/* Tests: drops the connection as if it was lost (the thread reconnects and resyncs). */
void ag_virt_force_reconnect(ag_virt *v);

/* Stops the thread, deregisters, closes the connection. NULL is fine. */
void ag_virt_stop(ag_virt *v);

#endif
