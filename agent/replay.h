/* Durable memory of used enrollment token ids (jti), so every token is single-use even across
 * agent restarts. SQLite in WAL mode with synchronous=FULL: a use is on disk before the call
 * returns. A jti only needs remembering until its token's exp + skew (after that the token is
 * refused as expired anyway), so older entries are pruned. */
#ifndef SLUICE_AGENT_REPLAY_H
#define SLUICE_AGENT_REPLAY_H

#include <stdint.h>

#include "sluice/error.h"

typedef struct ag_replay ag_replay;

/* Opens (creating) the store at path (mode 0600). skew_s: the verifier's clock skew, added to
 * every exp before pruning (0..300). */
sl_code ag_replay_open(const char *path, int skew_s, ag_replay **out, sl_error *e);
void ag_replay_close(ag_replay *r);

/* Records jti as used by subject (for logs) with the token's exp. *fresh = 1 when it had never
 * been used (now it is, durably), 0 when it already was (nothing changes). */
sl_code ag_replay_use(ag_replay *r, const char *jti, int64_t exp, const char *subject, int *fresh,
                      sl_error *e);

/* Forgets the ids whose exp + skew < now; *removed (may be NULL) says how many. Also run by
 * ag_replay_use at most once a minute. */
sl_code ag_replay_prune(ag_replay *r, int64_t now, int *removed, sl_error *e);

/* Number of remembered ids (tests, metrics); -1 on error. */
long ag_replay_count(ag_replay *r);

#endif
