/* The enrollment server: guests trade a nova-hook token and a certificate request for a client
 * certificate (docs/enrollment.md). A channel server in server-authentication mode: the agent
 * presents a certificate from its host CA, the guest none. Each session carries one
 * EnrollRequest, is answered with one EnrollReply and is then closed.
 *
 * Checks, in order; the first that fails answers with its status and a log line naming the
 * reason and the source address:
 *   rate limit (failures per source address)            RATE_LIMITED
 *   request and token (format, signature, aud, expiry)  BAD_TOKEN
 *   token id never used (recorded durably here)         REPLAYED
 *   a domain with that uuid on this host, running       UNKNOWN_DOMAIN
 *   its project = the token's                           WRONG_PROJECT
 *   a GPU flavor                                        NOT_GPU_FLAVOR
 *   source address = one of the domain's port IPs       WRONG_SOURCE
 *   the tenant backend runs                             INTERNAL
 *   the CSR (signature, key type)                       BAD_CSR
 * then the certificate is signed, env->issued() is called, and OK carries the certificate, the
 * CA chain, the backend endpoint and notAfter.
 *
 * A locate request (EnrollRequest.locate_cert_der, no token, no CSR) asks where the guest's
 * backend is now: rate limit; the certificate's SHA-256 is a granted, unexpired fingerprint
 * (env->granted), else NOT_GRANTED; then the domain, flavor, source and backend checks above;
 * OK carries only the backend endpoint (docs/enrollment.md, "The backend moved").
 *
 * Single-threaded: every call (and every callback) happens on the caller's thread. */
#ifndef SLUICE_AGENT_ENROLL_H
#define SLUICE_AGENT_ENROLL_H

#include <stddef.h>
#include <stdint.h>

#include "ca.h"
#include "instances.h"
#include "ratelimit.h"
#include "sluice/error.h"

#define AG_ENROLL_DEFAULT_PORT 7400
#define AG_ENROLL_MAX_REQUEST  16384 /* bytes of one EnrollRequest */

typedef struct ag_enroll ag_enroll;

typedef struct ag_enroll_opts {
    const char *endpoint; /* where to listen, e.g. "tcp://192.0.2.10:7400" */
    /* SANs of the enrollment server certificate, issued from the host CA at open: the
     * addresses or names guests dial (the host part of nova-hook's enroll_endpoint). */
    const char *const *server_names;
    size_t n_server_names;
    /* nova-hook's Ed25519 public keys: a PEM file of one or more keys, or a directory of them
     * (sl_token_keyset_load); loaded again when it changes (a key rotation) */
    const char *token_key_file;
    const char *token_key_pem; /* or the PEM itself (wins) */
    const char *token_issuer;  /* required iss claim; NULL: any */
    int token_skew_s;          /* allowed clock skew, 0..300; 0: 60; -1: none */
    const char *replay_db;     /* SQLite file of used token ids, e.g. /var/lib/sluice/... */
    ag_ratelimit_opts ratelimit;
    size_t max_request;       /* 0: AG_ENROLL_MAX_REQUEST */
    int handshake_timeout_ms; /* 0: 5000 */
} ag_enroll_opts;

typedef struct ag_enroll_env {
    int (*lookup)(void *user, const char *uuid, ag_instance *out); /* 1 = found */
    int (*backend_endpoint)(void *user, const char *project_id, char *out,
                            size_t n); /* 1 = running */
    void (*issued)(void *user, const ag_instance *inst, const char *fingerprint_hex,
                   int64_t not_after);
    void *user;
    /* 1 and the instance uuid when the certificate fingerprint (64 hex digits) is granted and
     * unexpired; NULL: every locate request is refused */
    int (*granted)(void *user, const char *fingerprint_hex, char *instance, size_t n);
} ag_enroll_env;

/* Opens the replay store, issues the server certificate, loads the token key and binds. The
 * CA and env must outlive the server. */
sl_code ag_enroll_open(const ag_enroll_opts *o, ag_ca *ca, const ag_enroll_env *env,
                       ag_enroll **out, sl_error *e);

/* A descriptor that becomes readable (edge-triggered, ZMQ_FD) when something may have arrived.
 * It may change after ag_enroll_poll (the server is re-bound when its certificate is renewed):
 * read it again after every poll. */
int ag_enroll_fd(const ag_enroll *e);

/* Handles what arrived: waits up to timeout_ms (< 0 forever) for the first event, then handles
 * every pending one (at most 1024 per call). Call it when the fd is readable and at least once a
 * second (timers). Refusals are not errors; an error means the server itself failed. */
sl_code ag_enroll_poll(ag_enroll *e, int timeout_ms, sl_error *err);

/* The bound endpoint with the real port (tests bind "tcp://127.0.0.1:*"). */
const char *ag_enroll_endpoint(const ag_enroll *e);

/* Decides one request as the server does for each message (addr: the source address, bulk:
 * bulk bytes that came with it) and encodes the EnrollReply into *out (malloc'd; NULL when out
 * of memory). Returns the reply's status. The fuzz target tests/fuzz/fuzz_enroll.c drives it. */
int ag_enroll_answer(ag_enroll *en, const char *addr, const void *msg, size_t len, uint64_t bulk,
                     uint8_t **out, size_t *out_len);

/* Counters, for tests and metrics. */
typedef struct ag_enroll_stats {
    uint64_t ok;
    uint64_t refused[16]; /* by EnrollReply status value */
} ag_enroll_stats;
void ag_enroll_get_stats(const ag_enroll *e, ag_enroll_stats *st);

void ag_enroll_close(ag_enroll *e);

/* The name of an EnrollReply status ("OK", "BAD_TOKEN", ...). */
const char *ag_enroll_status_name(int status);

#endif
