/* The agent's end of the agent <-> backend control channel: a plain ZeroMQ ROUTER bound to
 * ipc://RUN_DIR/control.sock (no TLS: trust is the file permissions of RUN_DIR, 0750, group =
 * the backends' group). Each message is one ZeroMQ frame holding one protobuf message
 * (BackendControl from the agent, BackendReport from a backend); no empty delimiter frame.
 * Protocol: docs/agent.md, "Control channel". Used by one thread at a time. */
#ifndef AG_CONTROL_H
#define AG_CONTROL_H

#include <stddef.h>

#include "sluice/error.h"
#include "sluice_control.pb-c.h"

#define AG_CONTROL_MAX_MSG (1u << 20) /* larger frames are dropped */
#define AG_CONTROL_KEY_LEN 32         /* BackendControl.agent_key (the backend's --control-key) */

typedef struct ag_control ag_control;

typedef struct ag_ctl_peer {
    unsigned char id[256]; /* ZeroMQ routing id */
    size_t len;
} ag_ctl_peer;

/* Binds the ROUTER at path (the socket file is chmod 0660 and, when gid >= 0, chgrp'd). */
sl_code ag_control_bind(const char *path, int gid, ag_control **out, sl_error *e);

/* Readable (edge-triggered, ZMQ_FD) when messages may be waiting: drain with ag_control_recv. */
int ag_control_fd(const ag_control *c);

/* 1: *rep is a decoded report from *peer (free with
 * sluice__control__backend_report__free_unpacked(rep, NULL)); 0: nothing waiting;
 * -1: a message was dropped (too large, bad framing or undecodable: logged). */
int ag_control_recv(ag_control *c, ag_ctl_peer *peer, Sluice__Control__BackendReport **rep);

/* Sends one encoded BackendControl to peer. SL_ERR_PEER_LOST if the peer is gone. */
sl_code ag_control_send(ag_control *c, const ag_ctl_peer *peer, const void *buf, size_t len,
                        sl_error *e);

/* Packs msg into a malloc'd buffer (*len); NULL when out of memory. */
void *ag_control_pack(const Sluice__Control__BackendControl *msg, size_t *len);

void ag_control_close(ag_control *c);

#endif
