/* The daemon's token signing key, shared by the HTTPS threads: one key file (token_key), or
 * the primary key of a key repository (token_key_repository, keyrepo.h) that is loaded again
 * when it changes on disk (a rotation copied in by the operator), without a restart. */
#ifndef NH_SIGNER_H
#define NH_SIGNER_H

#include <stddef.h>

#include "sluice/error.h"
#include "sluice/token.h"

typedef struct nh_signer nh_signer;

/* Exactly one of key_file (a PEM private key) and repo_dir. */
sl_code nh_signer_open(const char *key_file, const char *repo_dir, nh_signer **out, sl_error *e);
/* A signer over a key already loaded (tests); the signer takes it. */
sl_code nh_signer_from_key(sl_token_key *key, nh_signer **out, sl_error *e);
void nh_signer_free(nh_signer *s);

/* Signs c with the current primary key; kid (cap >= 24) receives the key's id. */
sl_code nh_signer_sign(nh_signer *s, const sl_token_claims *c, char **token, char *kid,
                       size_t kid_cap, sl_error *e);

/* With a repository: when it changed on disk since it was loaded, loads it again; 1 when the
 * keys were replaced, 0 when nothing changed, -1 when the new contents are unusable (the old
 * keys stay; *e says why). Without one: 0. */
int nh_signer_refresh(nh_signer *s, sl_error *e);

/* For the log: "key FILE (kid K)" or "repository DIR: primary N (kid K), M keys". */
void nh_signer_describe(nh_signer *s, char *out, size_t cap);

#endif
