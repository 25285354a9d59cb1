/* GET /metrics over plain HTTP (libmicrohttpd, its own polling thread). Bind it to a
 * management address: the figures name projects and instances. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "sluice/log.h"

#define COMPONENT    "agent"
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct ag_metrics_http {
    struct MHD_Daemon *d;
    ag_metrics *m;
    int port;
};

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = '\0';
    sl_log(SL_LOG_WARNING, COMPONENT, "metrics: libmicrohttpd: %s", line);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *body, size_t len,
                             const char *type)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, body, body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status, const char *msg)
{
    char *body = strdup(msg);
    return reply(c, status, body, body ? strlen(body) : 0, "text/plain; charset=utf-8");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    (void)version;
    (void)upload;
    ag_metrics_http *h = cls;
    if (!*state) { /* first call: headers only; answer on the next */
        *state = h;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0; /* discard any body */
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
        return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n");
    if (!strcmp(url, "/"))
        return text(c, MHD_HTTP_OK, "sluice-agent: metrics at /metrics\n");
    if (strcmp(url, "/metrics"))
        return text(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
    size_t len = 0;
    char *body = ag_metrics_render(h->m, &len);
    if (!body)
        return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    return reply(c, MHD_HTTP_OK, body, len, CONTENT_TYPE);
}

sl_code ag_metrics_http_start(ag_metrics *m, const char *addr, int port, ag_metrics_http **out,
                              sl_error *e)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        flags |= MHD_USE_IPv6;
    } else {
        return sl_fail(e, SL_ERR_CONFIG, "metrics_listen: %s is not an IP address", addr);
    }
    ag_metrics_http *h = calloc(1, sizeof *h);
    if (!h)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    h->m = m;
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handle, h,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64, MHD_OPTION_END);
    if (!h->d) {
        free(h);
        return sl_fail(e, SL_ERR_IO, "metrics_listen %s:%d: cannot listen (address in use?)", addr,
                       port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : port;
    *out = h;
    return SL_OK;
}

int ag_metrics_http_port(const ag_metrics_http *h)
{
    return h->port;
}

void ag_metrics_http_stop(ag_metrics_http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    free(h);
}
