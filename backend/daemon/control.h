/* The agent's control channel, the backend's side (control.c). */
#ifndef SLUICE_BE_DAEMON_CONTROL_H
#define SLUICE_BE_DAEMON_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "accounting/state.h"
#include "daemon/grants.h"
#include "sluice/error.h"

struct be_control;
struct be_control_hooks {
    void (*revoke)(void *user, const char *uuid, const char *reason);
    void (*shutdown)(void *user, const char *reason);
    void *user;
    /* a Grant was applied (its SLA; defaults when it had none) */
    void (*grant)(void *user, const char *uuid, const struct be_sla *sla);
    /* the socket connected to an agent again (after the hello): report the live sessions */
    void (*reconnected)(void *user);
};
#define BE_CONTROL_KEY_LEN     32    /* bytes; the --control-key file holds them as hex */
#define BE_ORPHAN_GRACE_MS     15000 /* keyed: longest time without a word from the agent */
#define BE_CONTROL_WARN_MS     10000 /* at most one "control: send" warning this often */
#define BE_CONTROL_HELD_EVENTS 4096u /* session events held for a slow agent, at most */
sl_code be_control_open(const char *endpoint, const char *project, const char *listen,
                        struct be_grants *grants, const struct be_control_hooks *hooks,
                        struct be_control **out, sl_error *e);
void *be_control_socket(struct be_control *c);
/* --control-key FILE: from now on only messages carrying this key count (see control.c). */
sl_code be_control_require_key(struct be_control *c, const char *path, sl_error *e);
/* Handles every waiting control message (non-blocking). */
void be_control_process(struct be_control *c);
/* One frame from the agent's socket: decoded, checked and applied (what be_control_process does
 * with each; the fuzz target tests/fuzz/fuzz_control.c calls it directly). */
void be_control_handle(struct be_control *c, const void *frame, size_t len);
void be_control_close(struct be_control *c);
/* Usage records: queued until the agent acknowledges them, sent again every ms (default
 * BE_USAGE_RESEND_S) and after a reconnection. rec: an encoded UsageRecord. */
void be_control_set_resend(struct be_control *c, int64_t ms);
/* Keyed: how long without a word from the agent before the backend ends (default
 * BE_ORPHAN_GRACE_MS; tests shorten it). */
void be_control_set_orphan_grace(struct be_control *c, int64_t ms);
void be_control_usage(struct be_control *c, const uint8_t *rec, size_t len);
size_t be_control_usage_waiting(const struct be_control *c);
/* BackendReport{session: SessionEvent{kind (SLUICE__CONTROL__SESSION_EVENT__KIND__*), ...}}. */
void be_control_session(struct be_control *c, int kind, const char *instance, const char *project,
                        uint64_t session_id, const char *detail);
/* A refused session (SessionEvent REFUSED): reason "certificate", "grant" or "limit"
 * (sluice_control.proto); instance "" when the handshake failed before it was known. */
void be_control_refused(struct be_control *c, const char *reason, const char *instance,
                        const char *project, const char *detail);
/* Session events the socket refused, held to go again in order (be_control_process). */
size_t be_control_events_held(const struct be_control *c);

#endif
