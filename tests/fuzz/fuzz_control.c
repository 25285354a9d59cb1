/* fuzz_control: libFuzzer target for the backend's side of the agent's control channel
 * (backend/daemon/control.c, be_control_handle: decode a BackendControl, check the agent key, apply
 * a Grant, GrantSet, Revoke, UsageAck, Ping or Shutdown to the grant table). The backend is keyed
 * (--control-key) as the agent starts it. The first input byte picks: odd: the rest is decoded as a
 * BackendControl and, when it decodes, given the right key (so the handlers are reached; a fuzzer
 * cannot guess 32 random bytes); even: the rest is the frame as it comes (keyless or wrongly keyed
 * messages are ignored). The backend's answers go to a ROUTER bound here and are dropped.
 * Afterwards every grant the table admits must be for this backend's project; the table is made
 * again every 10000 inputs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "daemon/control.h"
#include "daemon/grants.h"

#define PROJECT "f241e906010e4917ae8153f4fb8aa021"

static char dir[64], keyfile[128], endpoint[160];
static uint8_t key[BE_CONTROL_KEY_LEN];
static void *zctx, *router;
static struct be_grants *grants;
static struct be_control *ctl;
static unsigned runs;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_revoke(void *user, const char *uuid, const char *reason)
{
    (void)user;
    if (!uuid || !*uuid || !reason)
        abort();
}

static void on_shutdown(void *user, const char *reason)
{
    (void)user;
    if (!reason)
        abort();
}

static void on_grant(void *user, const char *uuid, const struct be_sla *sla)
{
    (void)user;
    if (!uuid || !*uuid || !sla || !(sla->share > 0 && sla->share <= 1))
        abort(); /* the handler passed an SLA it should have refused */
}

static void open_control(void)
{
    sl_error e;
    struct be_control_hooks h = {
        .revoke = on_revoke, .shutdown = on_shutdown, .grant = on_grant, .user = NULL};
    grants = be_grants_new();
    if (!grants ||
        be_control_open(endpoint, PROJECT, "tcp://127.0.0.1:47000", grants, &h, &ctl, &e) !=
            SL_OK ||
        be_control_require_key(ctl, keyfile, &e) != SL_OK)
        abort();
}

static void close_control(void)
{
    be_control_close(ctl);
    be_grants_free(grants);
}

static void drain(void)
{
    char buf[4096];
    while (zmq_recv(router, buf, sizeof buf, ZMQ_DONTWAIT) >= 0)
        ;
}

static void cleanup(void)
{
    close_control();
    zmq_close(router);
    zmq_ctx_term(zctx);
    unlink(keyfile);
    char sock[160];
    snprintf(sock, sizeof sock, "%s/control.sock", dir);
    unlink(sock);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("SLUICE_LOG_LEVEL", "err", 1);
    snprintf(dir, sizeof dir, "/tmp/fuzz-ctl-XXXXXX");
    if (!mkdtemp(dir))
        abort();
    snprintf(keyfile, sizeof keyfile, "%s/control.key", dir);
    snprintf(endpoint, sizeof endpoint, "ipc://%s/control.sock", dir);
    FILE *f = fopen(keyfile, "w");
    if (!f)
        abort();
    for (size_t i = 0; i < sizeof key; i++) {
        key[i] = (uint8_t)(i * 37 + 11);
        fprintf(f, "%02x", key[i]);
    }
    fputc('\n', f);
    fclose(f);
    zctx = zmq_ctx_new();
    router = zmq_socket(zctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    if (!router || zmq_bind(router, endpoint) != 0)
        abort();
    open_control();
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20))
        return 0;
    if (++runs % 10000 == 0) {
        close_control();
        open_control();
    }
    if (data[0] & 1) {
        Sluice__Control__BackendControl *m =
            sluice__control__backend_control__unpack(NULL, size - 1, data + 1);
        if (!m)
            return 0;
        ProtobufCBinaryData theirs = m->agent_key;
        m->agent_key = (ProtobufCBinaryData){sizeof key, key};
        size_t n = sluice__control__backend_control__get_packed_size(m);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
            abort();
        sluice__control__backend_control__pack(m, buf);
        m->agent_key = theirs; /* the decoder's, freed with m */
        sluice__control__backend_control__free_unpacked(m, NULL);
        be_control_handle(ctl, buf, n);
        free(buf);
    } else {
        be_control_handle(ctl, data + 1, size - 1);
    }
    if (runs % 64 == 0)
        drain();
    sl_peer_identity id;
    memset(&id, 0, sizeof id);
    id.authenticated = 1;
    snprintf(id.project_id, sizeof id.project_id, "%s", "another-project");
    snprintf(id.instance_id, sizeof id.instance_id, "%s", "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60");
    char why[200];
    if (be_grants_check(grants, PROJECT, &id, why, sizeof why) == 0)
        abort(); /* another project's certificate admitted */
    return 0;
}
