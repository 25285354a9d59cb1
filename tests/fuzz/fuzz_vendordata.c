/* fuzz_vendordata: libFuzzer target for nova-hook's vendordata answer
 * (nova-hook/vendordata.c, nh_vendordata_answer): the JSON body Nova's metadata API POSTs,
 * which an instance's boot influences (its ids) and nova-hook reaches over HTTPS. The store
 * (a real SQLite registry in a scratch folder, /dev/shm when there is one) knows one agent
 * and one placed instance, so ids that match get a signed token. Every answer must be 200,
 * 400 or 500 with a JSON body. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"
#include "signer.h"
#include "vendordata.h"

#define NOW  1800000000LL
#define INST "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60"
#define PROJ "f241e906010e4917ae8153f4fb8aa021"

static nh_vendordata vd;
static char dir[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void cleanup(void)
{
    char p[128];
    const char *suffix[] = {"", "-wal", "-shm"};
    nh_store_close(vd.store);
    nh_signer_free(vd.signer);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/r.db%s", dir, suffix[i]);
        unlink(p);
    }
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("SLUICE_LOG_LEVEL", "err", 1);
    snprintf(dir, sizeof dir, "%s/fuzz-vd-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir))
        abort();
    char path[128];
    snprintf(path, sizeof path, "%s/r.db", dir);
    sl_error e;
    nh_store *s = NULL;
    sl_token_key *key = NULL;
    nh_signer *signer = NULL;
    nh_agent_in a = {"gpu1", "tcp://192.0.2.1:7400", 8, "[]", "0.1", NULL};
    if (nh_store_open(path, NH_STORE_SERVE, &s, &e) != SL_OK ||
        sl_token_key_generate(&key, &e) != SL_OK ||
        nh_signer_from_key(key, &signer, &e) != SL_OK || /* takes key */
        nh_store_register(s, &a, NOW, &e) != SL_OK ||
        nh_store_place(s, INST, PROJ, "g1.small", "gpu1", NOW, &e) != SL_OK)
        abort();
    vd = (nh_vendordata){s,      signer,
                         "fuzz", "sluice-nova-hook",
                         600,    "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"};
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536) /* nova-hook's max_body bound */
        return 0;
    nh_vd_answer a;
    memset(&a, 0, sizeof a);
    nh_vendordata_answer(&vd, (const char *)data, size, NOW, &a);
    if (a.status != 200 && a.status != 400 && a.status != 500)
        abort();
    if (!a.body)
        abort();
    json_error_t je;
    json_t *j = json_loads(a.body, 0, &je);
    if (!j || !json_is_object(j))
        abort(); /* every answer is a JSON object */
    json_decref(j);
    free(a.body);
    return 0;
}
