/* sluice-fake-agent: the agent's side of a backend's control socket, for tests/e2e/accounting.py
 * and tests/e2e/stall.py. It binds the ROUTER the backend's --control connects to, answers its
 * hello with the grants given on the command line (with their SLA), acknowledges usage records
 * (except the first --no-ack ones, so that the backend must send them again), and writes what
 * it receives as JSON lines (hello, ack, session, usage) to --out. With --ping-ms it pings the
 * backend that often and writes each pong with its round trip; with --regrant-ms it sends the
 * grants again that often and writes each ack's round trip (rtt_ms); with --commands it reads
 * lines "revoke UUID" from its standard input and sends a Revoke for each at once (written as
 * "revoke_sent" with the CLOCK_MONOTONIC time). Test tool only: no store, no durability. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "sluice_control.pb-c.h"

#define MAX_GRANTS 16
#define MAX_SENT   64

struct grant {
    char uuid[64], flavor[128];
    double share;
    unsigned long long quota;
    unsigned max_sessions;
};

static volatile sig_atomic_t stop;

/* When control messages left, to write the round trip of their acks. */
static struct sent {
    uint64_t seq;
    double at_ms;
} sent[MAX_SENT];

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double sent_rtt(uint64_t seq)
{
    for (int i = 0; i < MAX_SENT; i++)
        if (sent[i].seq == seq)
            return mono_ms() - sent[i].at_ms;
    return -1;
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice-fake-agent --control ipc://PATH --out FILE --project ID\n"
            "                         [--grant UUID,FLAVOR,SHARE,QUOTA_BYTES,MAX_SESSIONS]...\n"
            "                         [--no-ack N] [--seconds S] [--ping-ms MS] [--regrant-ms MS]\n"
            "                         [--commands] [--help]\n"
            "A stand-in for sluice-agent's control socket (tests/e2e/accounting.py): grants the\n"
            "instances when the backend says hello, acknowledges usage records (not the first N),\n"
            "and writes every report it gets to FILE as JSON lines; --ping-ms: a Ping that often,\n"
            "each pong written with its round trip; --regrant-ms: the grants again that often;\n"
            "--commands: lines \"revoke UUID\" on standard input send a Revoke.\n");
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c > 0x7e)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void send_ctl(void *sock, const zmq_msg_t *rid, Sluice__Control__BackendControl *m)
{
    size_t n = sluice__control__backend_control__get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return;
    sluice__control__backend_control__pack(m, buf);
    zmq_send(sock, zmq_msg_data((zmq_msg_t *)rid), zmq_msg_size((zmq_msg_t *)rid), ZMQ_SNDMORE);
    zmq_send(sock, buf, n, 0);
    free(buf);
}

static void send_grants(void *sock, const zmq_msg_t *rid, const struct grant *grants, int n,
                        const char *project, uint64_t *seq)
{
    for (int i = 0; i < n; i++) {
        Sluice__Control__Sla sla = SLUICE__CONTROL__SLA__INIT;
        sla.flavor = (char *)grants[i].flavor;
        sla.gpu_share = grants[i].share;
        sla.memory_quota_bytes = grants[i].quota;
        sla.max_sessions = grants[i].max_sessions;
        Sluice__Control__Grant g = SLUICE__CONTROL__GRANT__INIT;
        g.instance_uuid = (char *)grants[i].uuid;
        g.project_id = (char *)project;
        g.sla = &sla;
        g.domain_name = "fake-domain";
        Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
        m.seq = ++*seq;
        m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT;
        m.grant = &g;
        sent[m.seq % MAX_SENT] = (struct sent){m.seq, mono_ms()};
        send_ctl(sock, rid, &m);
    }
}

static int parse_grant(const char *arg, struct grant *g)
{
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", arg);
    char *f[5] = {0}, *save = NULL, *p = tmp;
    for (int i = 0; i < 5; i++, p = NULL)
        if (!(f[i] = strtok_r(p, ",", &save)))
            return -1;
    memset(g, 0, sizeof *g);
    snprintf(g->uuid, sizeof g->uuid, "%s", f[0]);
    snprintf(g->flavor, sizeof g->flavor, "%s", f[1]);
    char *end;
    g->share = strtod(f[2], &end);
    if (*end)
        return -1;
    g->quota = strtoull(f[3], &end, 10);
    if (*end)
        return -1;
    g->max_sessions = (unsigned)strtoul(f[4], &end, 10);
    return *end ? -1 : 0;
}

int main(int argc, char **argv)
{
    const char *control = NULL, *out = NULL, *project = NULL;
    struct grant grants[MAX_GRANTS];
    int ngrants = 0;
    long no_ack = 0;
    double seconds = 600, ping_ms = 0, regrant_ms = 0;
    int commands = 0;
    static const struct option opts[] = {{"control", required_argument, 0, 'c'},
                                         {"out", required_argument, 0, 'o'},
                                         {"project", required_argument, 0, 'p'},
                                         {"grant", required_argument, 0, 'g'},
                                         {"no-ack", required_argument, 0, 'n'},
                                         {"seconds", required_argument, 0, 's'},
                                         {"ping-ms", required_argument, 0, 'P'},
                                         {"regrant-ms", required_argument, 0, 'R'},
                                         {"commands", no_argument, 0, 'C'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'c':
            control = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 'p':
            project = optarg;
            break;
        case 'g':
            if (ngrants == MAX_GRANTS || parse_grant(optarg, &grants[ngrants]) != 0) {
                fprintf(stderr, "sluice-fake-agent: --grant %s: UUID,FLAVOR,SHARE,QUOTA,MAX\n",
                        optarg);
                return 2;
            }
            ngrants++;
            break;
        case 'n':
            no_ack = atol(optarg);
            break;
        case 's':
            seconds = atof(optarg);
            break;
        case 'P':
            ping_ms = atof(optarg);
            break;
        case 'R':
            regrant_ms = atof(optarg);
            break;
        case 'C':
            commands = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!control || !out || !project) {
        fprintf(stderr, "sluice-fake-agent: --control, --out and --project are required\n");
        return 2;
    }
    FILE *f = fopen(out, "a");
    if (!f) {
        fprintf(stderr, "sluice-fake-agent: %s: %s\n", out, strerror(errno));
        return 2;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_bind(sock, control) != 0) {
        fprintf(stderr, "sluice-fake-agent: bind %s: %s\n", control, zmq_strerror(errno));
        return 1;
    }
    fprintf(f, "{\"type\":\"listening\"}\n");
    fflush(f);
    uint64_t seq = 0;
    long usage_seen = 0;
    double t0 = mono_ms(), next_ping = 0, next_regrant = 0;
    zmq_msg_t backend; /* the routing id of the backend that said hello */
    zmq_msg_init(&backend);
    int have_backend = 0;
    while (!stop) {
        double now = mono_ms();
        if (now - t0 > seconds * 1e3)
            break;
        if (have_backend && ping_ms > 0 && now >= next_ping) {
            Sluice__Control__Ping ping = SLUICE__CONTROL__PING__INIT;
            ping.nonce = (uint64_t)(now * 1000.0); /* microseconds: the pong brings it back */
            Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
            m.seq = ++seq;
            m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_PING;
            m.ping = &ping;
            send_ctl(sock, &backend, &m);
            next_ping = now + ping_ms;
        }
        if (have_backend && regrant_ms > 0 && now >= next_regrant) {
            if (next_regrant > 0)
                send_grants(sock, &backend, grants, ngrants, project, &seq);
            next_regrant = now + regrant_ms;
        }
        zmq_pollitem_t it[2] = {{sock, 0, ZMQ_POLLIN, 0}, {NULL, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(it, commands ? 2 : 1, ping_ms > 0 || regrant_ms > 0 ? 10 : 100) <= 0)
            continue;
        if (it[1].revents & ZMQ_POLLIN) {
            char line[256], uuid[128];
            ssize_t k = read(0, line, sizeof line - 1);
            if (k <= 0) {
                commands = 0; /* end of input */
            } else {
                line[k] = '\0';
                for (char *l = strtok(line, "\n"); l; l = strtok(NULL, "\n"))
                    if (sscanf(l, "revoke %127s", uuid) == 1 && have_backend) {
                        Sluice__Control__Revoke rv = SLUICE__CONTROL__REVOKE__INIT;
                        rv.instance_uuid = uuid;
                        rv.reason = "revoked by the test";
                        Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
                        m.seq = ++seq;
                        m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_REVOKE;
                        m.revoke = &rv;
                        sent[m.seq % MAX_SENT] = (struct sent){m.seq, mono_ms()};
                        send_ctl(sock, &backend, &m);
                        fprintf(f,
                                "{\"type\":\"revoke_sent\",\"seq\":%" PRIu64
                                ",\"mono_ms\":%.3f,\"instance\":",
                                m.seq, mono_ms());
                        json_str(f, uuid);
                        fprintf(f, "}\n");
                        fflush(f);
                    }
            }
        }
        if (!(it[0].revents & ZMQ_POLLIN))
            continue;
        zmq_msg_t rid, body;
        zmq_msg_init(&rid);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&rid, sock, 0) < 0 || !zmq_msg_more(&rid) ||
            zmq_msg_recv(&body, sock, 0) < 0) {
            zmq_msg_close(&rid);
            zmq_msg_close(&body);
            continue;
        }
        Sluice__Control__BackendReport *r =
            sluice__control__backend_report__unpack(NULL, zmq_msg_size(&body), zmq_msg_data(&body));
        if (!r) {
            fprintf(f, "{\"type\":\"undecodable\"}\n");
        } else if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_HELLO) {
            fprintf(f, "{\"type\":\"hello\",\"project\":");
            json_str(f, r->hello->project_id);
            fprintf(f, ",\"pid\":%u}\n", r->hello->pid);
            zmq_msg_close(&backend);
            zmq_msg_init(&backend);
            zmq_msg_copy(&backend, &rid);
            have_backend = 1;
            send_grants(sock, &rid, grants, ngrants, project, &seq);
        } else if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_ACK) {
            fprintf(f,
                    "{\"type\":\"ack\",\"seq\":%" PRIu64 ",\"ok\":%s,\"rtt_ms\":%.3f,"
                    "\"detail\":",
                    r->ack->control_seq, r->ack->ok ? "true" : "false",
                    sent_rtt(r->ack->control_seq));
            json_str(f, r->ack->detail);
            fprintf(f, "}\n");
        } else if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_SESSION) {
            const Sluice__Control__SessionEvent *ev = r->session;
            fprintf(f, "{\"type\":\"session\",\"kind\":%d,\"session_id\":%" PRIu64 ",\"instance\":",
                    (int)ev->kind, ev->session_id);
            json_str(f, ev->instance_uuid);
            fprintf(f, ",\"detail\":");
            json_str(f, ev->detail);
            fprintf(f, ",\"reason\":");
            json_str(f, ev->reason);
            fprintf(f, "}\n");
        } else if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_USAGE) {
            const Sluice__Control__UsageRecord *u = r->usage;
            int ack = ++usage_seen > no_ack;
            fprintf(f, "{\"type\":\"usage\",\"acked\":%s,\"record_id\":", ack ? "true" : "false");
            json_str(f, u->record_id);
            fprintf(f, ",\"instance\":");
            json_str(f, u->instance_uuid);
            fprintf(f, ",\"project\":");
            json_str(f, u->project_id);
            fprintf(f, ",\"flavor\":");
            json_str(f, u->flavor);
            fprintf(f, ",\"gpu_uuid\":");
            json_str(f, u->gpu_uuid);
            fprintf(f, ",\"measurement\":");
            json_str(f, u->measurement);
            fprintf(f,
                    ",\"session_id\":%" PRIu64 ",\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64
                    ",\"gpu_busy_ns\":%" PRIu64 ",\"kernel_ns\":%" PRIu64 ",\"kernels\":%" PRIu64
                    ",\"bytes_htod\":%" PRIu64 ",\"bytes_dtoh\":%" PRIu64
                    ",\"memory_high_water\":%" PRIu64 ",\"calls\":%" PRIu64 ",\"errors\":%" PRIu64
                    ",\"throttled_ns\":%" PRIu64
                    ",\"quota_refusals\":%u,\"gpu_share\":%.6f,\"final\":%s"
                    ",\"busy_widened_ns\":%" PRIu64 ",\"busy\":[",
                    u->session_id, u->interval_start_ns, u->interval_end_ns, u->gpu_busy_ns,
                    u->kernel_ns, u->kernels, u->bytes_htod, u->bytes_dtoh, u->memory_high_water,
                    u->calls, u->errors, u->throttled_ns, u->quota_refusals, u->gpu_share,
                    u->final ? "true" : "false", u->busy_widened_ns);
            for (size_t i = 0; i < u->n_busy; i++)
                fprintf(f, "%s[%" PRId64 ",%" PRId64 "]", i ? "," : "", u->busy[i]->start_ns,
                        u->busy[i]->end_ns);
            fprintf(f, "]}\n");
            if (ack) {
                char *ids[1] = {u->record_id};
                Sluice__Control__UsageAck ua = SLUICE__CONTROL__USAGE_ACK__INIT;
                ua.record_ids = ids;
                ua.n_record_ids = 1;
                Sluice__Control__BackendControl m = SLUICE__CONTROL__BACKEND_CONTROL__INIT;
                m.seq = ++seq;
                m.kind_case = SLUICE__CONTROL__BACKEND_CONTROL__KIND_USAGE_ACK;
                m.usage_ack = &ua;
                send_ctl(sock, &rid, &m);
            }
        } else if (r->kind_case == SLUICE__CONTROL__BACKEND_REPORT__KIND_PONG) {
            fprintf(f, "{\"type\":\"pong\",\"at_ms\":%.3f,\"rtt_ms\":%.3f}\n", mono_ms() - t0,
                    mono_ms() - (double)r->pong->nonce / 1000.0);
        } else {
            fprintf(f, "{\"type\":\"other\",\"kind\":%d}\n", (int)r->kind_case);
        }
        fflush(f);
        if (r)
            sluice__control__backend_report__free_unpacked(r, NULL);
        zmq_msg_close(&rid);
        zmq_msg_close(&body);
    }
    fclose(f);
    zmq_msg_close(&backend);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return 0;
}
