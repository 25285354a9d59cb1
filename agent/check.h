/* What --check-config checks beyond the syntax of agent.conf, and what sluice-agent checks before
 * it starts: the files the configuration names, the directories it writes (each must exist, or
 * be made by the agent with one mkdir in a directory that exists), and the backend user and
 * group. Every problem is handed to report as one line naming the key; warnings (a missing
 * driver) do not count as errors. */
#ifndef AG_CHECK_H
#define AG_CHECK_H

#include "config.h"

typedef void (*ag_check_report)(void *user, int is_error, const char *line);

/* Returns the number of errors (0: the daemon can start). */
int ag_check_config(const ag_config *c, ag_check_report report, void *user);

#endif
