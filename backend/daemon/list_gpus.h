/* `sluice-backend --list-gpus --driver PATH` (list_gpus.c). */
#ifndef SLUICE_BE_DAEMON_LIST_GPUS_H
#define SLUICE_BE_DAEMON_LIST_GPUS_H

/* Prints the driver's GPUs for the agent (one line each); the process's exit status. */
int be_list_gpus_main(const char *driver);

#endif
