/* The token signing key repository, shared by several nova-hooks the way Keystone's fernet
 * key repository is shared by several Keystones: a directory (mode 0700) of Ed25519 private
 * keys (PKCS#8 PEM, mode 0600) named by integers.
 *   0        the staged key: the next primary. Its public half is handed out with the others,
 *            so agents know it before any token is signed with it.
 *   highest  the primary key: signs every token.
 *   others   secondary keys: sign nothing; their public halves still verify tokens signed
 *            before the last rotation.
 * Rotation (sluice-registry token-keys rotate): the staged key becomes the primary (renamed to
 * highest + 1), a new staged key 0 is made, and the oldest secondaries go until max_active
 * keys remain. The operator then copies the repository to every controller (nova-hooks reload
 * it when it changes) and the public bundle (sluice-registry token-keys public) to every agent.
 * Reference: docs/nova-hook.md, "Token keys". */
#ifndef NH_KEYREPO_H
#define NH_KEYREPO_H

#include <stddef.h>

#include "sluice/error.h"
#include "sluice/token.h"

#define NH_KEYREPO_MAX         32
#define NH_KEYREPO_MIN_ACTIVE  2 /* the staged key and the primary */
#define NH_KEYREPO_KEEP_ACTIVE 3 /* the default of rotate: staged, primary, one secondary */

typedef struct nh_keyrepo nh_keyrepo;

/* Loads every key of the repository. Refused: a missing or group/world-accessible directory,
 * a key file others can read, a name that is not a number, no key 0 or no primary. */
sl_code nh_keyrepo_load(const char *dir, nh_keyrepo **out, sl_error *e);
void nh_keyrepo_free(nh_keyrepo *r);

const sl_token_key *nh_keyrepo_primary(const nh_keyrepo *r);
int nh_keyrepo_primary_index(const nh_keyrepo *r);
size_t nh_keyrepo_count(const nh_keyrepo *r);
/* Keys in index order (0, the staged key, first); *index: the file's number. */
const sl_token_key *nh_keyrepo_key(const nh_keyrepo *r, size_t i, int *index);
/* Every key's public half, one PEM after the other (what agents verify with; malloc'd). */
sl_code nh_keyrepo_public_pem(const nh_keyrepo *r, char **pem, sl_error *e);

/* Creates the repository (mode 0700) with a staged key 0 and a primary 1; refused when it
 * holds keys already. */
sl_code nh_keyrepo_setup(const char *dir, sl_error *e);
/* One rotation (above); max_active >= NH_KEYREPO_MIN_ACTIVE. *primary: the new primary's
 * index; *removed: how many secondaries went. */
sl_code nh_keyrepo_rotate(const char *dir, int max_active, int *primary, int *removed, sl_error *e);

#endif
