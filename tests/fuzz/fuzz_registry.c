/* fuzz_registry: libFuzzer target for nova-hook's registry requests (nova-hook/
 * registry_channel.c, nh_regchan_process: decode, nh_registry_handle, reply), what an agent's
 * authenticated channel session delivers. The peer is the registered host "gpu1" of a real
 * SQLite registry in a scratch folder (/dev/shm when there is one), made again every 20000
 * inputs so that it stays small. A request must be answered (a RegistryReply that decodes) or
 * refused as malformed; never anything else. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry_channel.h"
#include "store.h"

#define NOW  1800000000LL
#define HOST "gpu1"

static nh_store *store;
static char dir[64], path[128];
static unsigned runs;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drop_store(void)
{
    nh_store_close(store);
    store = NULL;
    char p[160];
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", path, suffix[i]);
        unlink(p);
    }
}

static void make_store(void)
{
    sl_error e;
    nh_agent_in a = {HOST, "tcp://192.0.2.1:7400", 8, "[]", "0.1", NULL};
    if (nh_store_open(path, NH_STORE_SERVE, &store, &e) != SL_OK ||
        nh_store_register(store, &a, NOW, &e) != SL_OK ||
        nh_store_place(store, "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60",
                       "f241e906010e4917ae8153f4fb8aa021", "g1.small", HOST, NOW, &e) != SL_OK)
        abort();
}

static void cleanup(void)
{
    drop_store();
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("SLUICE_LOG_LEVEL", "err", 1);
    snprintf(dir, sizeof dir, "%s/fuzz-reg-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir))
        abort();
    snprintf(path, sizeof path, "%s/registry.db", dir);
    make_store();
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (++runs % 20000 == 0) {
        drop_store();
        make_store();
    }
    uint8_t *out = NULL;
    size_t out_len = 0;
    sl_error store_err, e;
    if (nh_regchan_process(store, HOST, NOW, data, size, &out, &out_len, &store_err, &e) != SL_OK) {
        if (out || e.code == SL_OK)
            abort(); /* a refusal names its reason and answers nothing */
        return 0;
    }
    Sluice__Control__RegistryReply *r = sluice__control__registry_reply__unpack(NULL, out_len, out);
    if (!r)
        abort(); /* what we answer must decode */
    if (!r->ok && (!r->detail || !*r->detail))
        abort(); /* a refusal says why */
    sluice__control__registry_reply__free_unpacked(r, NULL);
    free(out);
    return 0;
}
