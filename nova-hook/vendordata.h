/* Nova DynamicJSON vendordata: turns the JSON body Nova's metadata API POSTs into our answer.
 * No HTTP here (http.c carries it), so it is tested on its own. */
#ifndef NH_VENDORDATA_H
#define NH_VENDORDATA_H

#include <stddef.h>
#include <stdint.h>

#include "signer.h"
#include "store.h"

typedef struct nh_vendordata {
    nh_store *store;
    nh_signer *signer; /* the Ed25519 signing key */
    const char *node;  /* this nova-hook, recorded with each token it issues ("" allowed) */
    const char *issuer;
    int64_t ttl;              /* token lifetime, seconds */
    const char *agent_ca_pem; /* the CA handed to guests when the agent registered none */
} nh_vendordata;

typedef struct nh_vd_answer {
    int status;    /* HTTP status: 200, 400 or 500 */
    char *body;    /* malloc'd JSON text; free() */
    char why[320]; /* for the log: what was decided, never request content */
} nh_vd_answer;

/* Answers one request body. 200 with a token for an instance placed on a registered Sluice
 * host (and of the project the body names); 200 with {} for any other instance; 400 for a body
 * that is not a JSON object with string instance-id and project-id; 500 when signing or the
 * store fails. user-data, metadata and the other keys are never read. Every token issued is
 * recorded in the store first (its id unique in the database, whichever nova-hook issued it;
 * an id taken already is stamped anew). */
void nh_vendordata_answer(const nh_vendordata *v, const char *body, size_t len, int64_t now,
                          nh_vd_answer *out);

#endif
