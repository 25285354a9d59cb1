/* Test harness: a server on its own thread that echoes MESSAGE+bulk (a MESSAGE "reply:N" gets N
 * bulk bytes back; "seal" is answered "sealed", then the session's bulk goes sealed), a relay that
 * can tamper with frames, and raw ZeroMQ peers. */
#ifndef SLUICE_TEST_HARNESS_H
#define SLUICE_TEST_HARNESS_H

#include "pki.h"
#include "sluice/channel.h"

#include <pthread.h>

typedef struct test_pki {
    pki_ca ca, ca2;
    pki_cred server, client, expired, foreign, server2;
} test_pki;

extern test_pki T; /* built once per process by pki_setup */
int pki_setup(void **state);
int pki_teardown(void **state);

sl_tls_config cfg_server(sl_tls_mode mode);
sl_tls_config cfg_client(const pki_cred *cred, const char *ca_pem);
sl_channel_opts fast_opts(void);

typedef struct echo_srv {
    sl_server *srv;
    pthread_t th;
    pthread_mutex_t mu;
    volatile int stop;
    int refuse;
    int blocking_bulk; /* sl_server_recv_bulk instead of sl_server_take_bulk */
    int accepted, closed, send_failed;
    sl_code last_closed, first_closed;
    char last_closed_msg[SL_ERROR_MSG_MAX], first_closed_msg[SL_ERROR_MSG_MAX];
    sl_peer_identity last_id;
    const sl_tls_config *reload; /* set by echo_reload: applied by the server's thread */
    sl_code reload_rc;
    /* "lend": 3 MiB of g_lent's pattern sent with sl_server_send_lend; "lendbad": the same to
     * a peer that is not there. lent_back counts the releases, lend_rc the last answer. */
    int lent_back;
    sl_code lend_rc;
} echo_srv;
/* The bytes the "lend" command lends: byte i is (uint8_t)(i * 7 + 1). */
#define ECHO_LENT_BYTES ((size_t)3 << 20)
const uint8_t *echo_lent_bytes(void);

void echo_start(echo_srv *e, sl_tls_mode mode, const sl_channel_opts *o);
void echo_stop(echo_srv *e);
/* sl_server_reload_tls on the server's own thread; returns its result. */
sl_code echo_reload(echo_srv *e, const sl_tls_config *cfg);
/* Waits up to ms until the server saw `n` closed sessions; returns the last code. */
sl_code echo_wait_closed(echo_srv *e, int n, int ms);
/* A good client does a round trip (proves the server still serves). */
void assert_good_client(echo_srv *e);
/* Sends msg + bulk and checks the echo. */
void roundtrip(sl_client *c, size_t msg_len, const struct iovec *iov, size_t n, size_t bulk_reads);

enum relay_mode { RELAY_PASS, RELAY_FLIP, RELAY_DUP, RELAY_DROP };
typedef struct relay {
    void *zctx, *front, *back;
    pthread_t th;
    volatile int stop, armed;
    int skip;    /* frames passed untouched once armed, before the one tampered with */
    int replies; /* tamper with the server's frames (to the client) instead of the client's */
    enum relay_mode mode;
    char endpoint[128];
} relay;
void relay_start(relay *r, const char *target, enum relay_mode mode);
void relay_stop(relay *r);

#endif
