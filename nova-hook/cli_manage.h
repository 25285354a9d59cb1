/* sluice-registry's commands that write: db-sync (create or upgrade the registry schema, the
 * `nova-manage db sync` of Sluice), db-version, prune (retention at once) and token-keys
 * (setup, rotate, public: the signing key repository, keyrepo.h). Each prints what it did and
 * returns the exit status (0 done, 1 failed). */
#ifndef NH_CLI_MANAGE_H
#define NH_CLI_MANAGE_H

int nh_cli_db_sync(const char *db);
int nh_cli_db_version(const char *db);
/* days: usage and placement history older than that go (0: only expired tokens). */
int nh_cli_prune(const char *db, int days);
/* action: setup, rotate or public. */
int nh_cli_token_keys(const char *action, const char *repo, int max_active);

#endif
