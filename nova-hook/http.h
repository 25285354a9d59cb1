/* The vendordata HTTPS endpoint (libmicrohttpd + GnuTLS): TLS with a required, verified client
 * certificate (Nova's), POST to one path, a bounded JSON body, answers from vendordata.c. */
#ifndef NH_HTTP_H
#define NH_HTTP_H

#include <stddef.h>

#include "sluice/error.h"
#include "vendordata.h"

typedef struct nh_http_opts {
    const char *addr; /* IPv4 or IPv6 literal */
    int port;         /* 0: ephemeral */
    const char *path;
    const char *cert_pem;  /* our server certificate (chain), PEM text */
    const char *key_pem;   /* its key, PEM text */
    const char *trust_pem; /* the CA(s) Nova's client certificate must chain to, PEM text */
    const char *client_cn; /* comma-separated allowed CNs; NULL or "": any verified client */
    size_t max_body;
    int threads;
    const nh_vendordata *vd;
} nh_http_opts;

typedef struct nh_http nh_http;

sl_code nh_http_start(const nh_http_opts *o, nh_http **out, sl_error *e);
int nh_http_port(const nh_http *h);
void nh_http_stop(nh_http *h);

#endif
