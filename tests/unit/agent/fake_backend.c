/* A stand-in for sluice-backend that speaks the control protocol (docs/agent.md) and records
 * what it is told, one line each, in STATE_DIR/events.log: "start PID", "grant UUID SHA" (also
 * for each grant of a grant set, after "grantset N REASON"), "revoke UUID REASON", "shutdown". */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "sluice_control.pb-c.h"

static FILE *logf_;

static void note(const char *fmt, const char *a, const char *b)
{
    fprintf(logf_, fmt, a, b);
    fflush(logf_);
}

static void send_report(void *sock, Sluice__Control__BackendReport *r)
{
    size_t n = sluice__control__backend_report__get_packed_size(r);
    uint8_t *buf = malloc(n ? n : 1);
    sluice__control__backend_report__pack(r, buf);
    zmq_send(sock, buf, n, 0);
    free(buf);
}

int main(int argc, char **argv)
{
    const char *project = NULL, *listen = NULL, *control = NULL, *state = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--project"))
            project = argv[i + 1];
        else if (!strcmp(argv[i], "--listen"))
            listen = argv[i + 1];
        else if (!strcmp(argv[i], "--control"))
            control = argv[i + 1];
        else if (!strcmp(argv[i], "--state-dir"))
            state = argv[i + 1];
    }
    if (!project || !listen || !control || !state)
        return 2;
    char path[1024];
    snprintf(path, sizeof path, "%s/events.log", state);
    logf_ = fopen(path, "a");
    if (!logf_)
        return 3;
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    note("start %s%s\n", pid, "");
    void *ctx = zmq_ctx_new(), *sock = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_connect(sock, control) != 0)
        return 4;
    Sluice__Control__BackendHello h = SLUICE__CONTROL__BACKEND_HELLO__INIT;
    h.project_id = (char *)project;
    h.pid = (uint32_t)getpid();
    h.endpoint = (char *)listen;
    h.version = "fake";
    Sluice__Control__BackendReport r = SLUICE__CONTROL__BACKEND_REPORT__INIT;
    r.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_HELLO;
    r.hello = &h;
    send_report(sock, &r);
    uint64_t seq = 0;
    for (;;) {
        uint8_t buf[65536];
        int n = zmq_recv(sock, buf, sizeof buf, 0);
        if (n < 0)
            break;
        Sluice__Control__BackendControl *m =
            sluice__control__backend_control__unpack(NULL, (size_t)n, buf);
        if (!m)
            continue;
        char hex[65] = "";
        int stop = 0;
        switch (m->kind_case) {
        case SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT:
            for (size_t i = 0; i < m->grant->cert_sha256.len && i < 32; i++)
                sprintf(hex + 2 * i, "%02x", m->grant->cert_sha256.data[i]);
            note("grant %s %s\n", m->grant->instance_uuid, hex);
            break;
        case SLUICE__CONTROL__BACKEND_CONTROL__KIND_GRANT_SET: {
            char n[32];
            snprintf(n, sizeof n, "%zu", m->grant_set->n_grants);
            note("grantset %s %s\n", n, m->grant_set->reason);
            for (size_t k = 0; k < m->grant_set->n_grants; k++) {
                const Sluice__Control__Grant *g = m->grant_set->grants[k];
                for (size_t i = 0; i < g->cert_sha256.len && i < 32; i++)
                    sprintf(hex + 2 * i, "%02x", g->cert_sha256.data[i]);
                note("grant %s %s\n", g->instance_uuid, hex);
            }
            break;
        }
        case SLUICE__CONTROL__BACKEND_CONTROL__KIND_REVOKE:
            note("revoke %s %s\n", m->revoke->instance_uuid, m->revoke->reason);
            break;
        case SLUICE__CONTROL__BACKEND_CONTROL__KIND_SHUTDOWN:
            note("shutdown%s%s\n", "", "");
            stop = 1;
            break;
        default:
            break;
        }
        Sluice__Control__Ack ack = SLUICE__CONTROL__ACK__INIT;
        ack.control_seq = m->seq;
        ack.ok = 1;
        Sluice__Control__BackendReport a = SLUICE__CONTROL__BACKEND_REPORT__INIT;
        a.seq = ++seq;
        if (m->kind_case == SLUICE__CONTROL__BACKEND_CONTROL__KIND_PING) {
            Sluice__Control__Pong pong = SLUICE__CONTROL__PONG__INIT;
            pong.nonce = m->ping->nonce;
            a.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_PONG;
            a.pong = &pong;
            send_report(sock, &a);
        } else {
            a.kind_case = SLUICE__CONTROL__BACKEND_REPORT__KIND_ACK;
            a.ack = &ack;
            send_report(sock, &a);
        }
        sluice__control__backend_control__free_unpacked(m, NULL);
        if (stop)
            break;
    }
    zmq_close(sock);
    zmq_ctx_term(ctx);
    fclose(logf_);
    return 0;
}
