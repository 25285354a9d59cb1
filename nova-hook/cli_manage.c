/* sluice-registry db-sync, db-version, prune, token-keys (cli_manage.h). */
#include "cli_manage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keyrepo.h"
#include "store.h"

#define TOKENS_KEEP_S 86400

static int failed(const sl_error *e)
{
    fprintf(stderr, "sluice-registry: %s\n", e->msg);
    return 1;
}

int nh_cli_db_sync(const char *db)
{
    nh_store *s;
    sl_error e;
    if (nh_store_open(db, NH_STORE_SYNC, &s, &e) != SL_OK)
        return failed(&e);
    int from = nh_store_found_version(s);
    if (from == NH_STORE_SCHEMA_VERSION)
        printf("%s: schema version %d is current; nothing to do\n", nh_store_where(s), from);
    else if (from == 0)
        printf("%s: schema version %d created\n", nh_store_where(s), NH_STORE_SCHEMA_VERSION);
    else
        printf("%s: schema upgraded from version %d to %d\n", nh_store_where(s), from,
               NH_STORE_SCHEMA_VERSION);
    nh_store_close(s);
    return 0;
}

int nh_cli_db_version(const char *db)
{
    nh_store *s;
    sl_error e;
    if (nh_store_open(db, NH_STORE_READ, &s, &e) != SL_OK)
        return failed(&e);
    printf("%s: schema version %d (this program's: %d)\n", nh_store_where(s),
           nh_store_found_version(s), NH_STORE_SCHEMA_VERSION);
    nh_store_close(s);
    return 0;
}

int nh_cli_prune(const char *db, int days)
{
    nh_store *s;
    sl_error e;
    if (nh_store_open(db, NH_STORE_SERVE, &s, &e) != SL_OK)
        return failed(&e);
    int64_t now = (int64_t)time(NULL);
    int64_t before = days > 0 ? (now - (int64_t)days * 86400) * 1000000000LL : 0;
    nh_pruned p;
    sl_code rc = nh_store_prune(s, before, now - TOKENS_KEEP_S, &p, &e);
    nh_store_close(s);
    if (rc != SL_OK)
        return failed(&e);
    printf("removed %lld usage records, %lld placement history rows, %lld expired tokens\n",
           (long long)p.usage, (long long)p.history, (long long)p.tokens);
    return 0;
}

int nh_cli_token_keys(const char *action, const char *repo, int max_active)
{
    sl_error e;
    if (!strcmp(action, "setup")) {
        if (nh_keyrepo_setup(repo, &e) != SL_OK)
            return failed(&e);
        printf("%s: staged key 0 and primary key 1 created\n", repo);
        return 0;
    }
    if (!strcmp(action, "rotate")) {
        int primary = 0, removed = 0;
        if (nh_keyrepo_rotate(repo, max_active, &primary, &removed, &e) != SL_OK)
            return failed(&e);
        printf("%s: key %d is the primary now, a new staged key 0 was made, %d old key%s "
               "removed; copy the repository to every controller and the public keys to every "
               "agent\n",
               repo, primary, removed, removed == 1 ? "" : "s");
        return 0;
    }
    nh_keyrepo *r;
    if (nh_keyrepo_load(repo, &r, &e) != SL_OK)
        return failed(&e);
    char *pem = NULL;
    sl_code rc = nh_keyrepo_public_pem(r, &pem, &e);
    nh_keyrepo_free(r);
    if (rc != SL_OK)
        return failed(&e);
    fputs(pem, stdout);
    free(pem);
    return 0;
}
