/* The agents' side of the tokens in the failover test: every token the vendordata POSTs got
 * (one per line of TOKENS) is verified as sluice-agent verifies it (the public keys of the key
 * repository, a key set: sl_token_verify_keyset) and spent in an agent replay store (the
 * agent's own, agent/replay.c); then every one is presented again and must be refused as
 * used. A token accepted twice, or not accepted once, fails the run.
 * usage: ha_tokens PUBLIC_KEYS TOKENS REPLAY_DB
 * prints: "tokens N accepted A replays_refused R kids K" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay.h"
#include "sluice/token.h"

#define MAX_TOKENS 100000

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ha_tokens PUBLIC_KEYS TOKENS REPLAY_DB\n");
        return 2;
    }
    sl_token_keyset *ks;
    ag_replay *rp;
    sl_error e;
    if (sl_token_keyset_load(argv[1], &ks, &e) != SL_OK ||
        ag_replay_open(argv[3], 60, &rp, &e) != SL_OK) {
        fprintf(stderr, "ha_tokens: %s\n", e.msg);
        return 1;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        fprintf(stderr, "ha_tokens: cannot open %s\n", argv[2]);
        return 1;
    }
    static char *tokens[MAX_TOKENS];
    size_t n = 0;
    char line[SL_TOKEN_MAX_LEN + 4];
    while (n < MAX_TOKENS && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (*line)
            tokens[n++] = strdup(line);
    }
    fclose(f);
    char kids[8][64];
    size_t nkids = 0, accepted = 0, refused = 0;
    sl_token_verify_opts vo = {.skew = 60};
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            sl_token_claims c;
            if (sl_token_verify_keyset(ks, tokens[i], &vo, &c, &e) != SL_OK) {
                fprintf(stderr, "ha_tokens: token %zu refused: %s\n", i, e.msg);
                continue;
            }
            int fresh = 0;
            if (ag_replay_use(rp, c.jti, c.exp, c.sub, &fresh, &e) != SL_OK) {
                fprintf(stderr, "ha_tokens: %s\n", e.msg);
                return 1;
            }
            if (pass == 0 && fresh)
                accepted++;
            else if (pass == 0)
                fprintf(stderr, "ha_tokens: token %zu (jti %s) accepted already\n", i, c.jti);
            else if (!fresh)
                refused++;
            else
                fprintf(stderr, "ha_tokens: token %zu (jti %s) accepted twice\n", i, c.jti);
            char kid[64];
            if (pass == 0 && sl_token_header_kid(tokens[i], kid, sizeof kid, &e) == SL_OK) {
                size_t k = 0;
                while (k < nkids && strcmp(kids[k], kid))
                    k++;
                if (k == nkids && nkids < 8)
                    snprintf(kids[nkids++], sizeof kids[0], "%s", kid);
            }
        }
    printf("tokens %zu accepted %zu replays_refused %zu kids %zu\n", n, accepted, refused, nkids);
    for (size_t i = 0; i < n; i++)
        free(tokens[i]);
    ag_replay_close(rp);
    sl_token_keyset_free(ks);
    return accepted == n && refused == n ? 0 : 1;
}
