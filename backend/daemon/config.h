/* What sluice-backend was started with (main.c fills it, loop.c and the files of the channel
 * thread read it). Header only. */
#ifndef SLUICE_BE_DAEMON_CONFIG_H
#define SLUICE_BE_DAEMON_CONFIG_H

struct be_config {
    const char *project, *listen, *cert, *key, *ca, *driver, *control, *allow, *state_dir;
    const char *control_key; /* --control-key FILE: the agent's key (control.c) */
    /* Set by main: each session runs in `worker_exe --session-worker FD ...` (worker.c) and
     * the server never loads the driver. NULL (unit tests): sessions run on threads of this
     * process with the api/devs given to be_server_run. */
    const char *worker_exe;
    unsigned max_sessions;     /* live sessions; 0 = BE_DEFAULT_MAX_SESSIONS */
    unsigned usage_interval_s; /* usage record period; 0 = BE_USAGE_INTERVAL_S */
    unsigned usage_resend_s;   /* unacknowledged records again after; 0 = BE_USAGE_RESEND_S */
    int no_gpu_timing;         /* --measure none: no timing events (overhead measurements) */
    const char *image_dir;     /* set by main: STATE_DIR/images when it could be made; NULL */
    unsigned spin_us;          /* --spin-us: idle threads poll this long before sleeping */
    int no_direct;             /* --direct off: guests' calls stay on the backend's channel */
    const char *direct_ports;  /* --direct-ports MIN-MAX: the workers' ports; NULL: any free */
    unsigned staging_slots;    /* --staging-slots: page-locked 16 MiB slots per session */
    unsigned staging_budget;   /* --staging-budget MiB across the sessions; 0 = the default */
};
#define BE_DEFAULT_MAX_SESSIONS 64u
#define BE_STAGING_BUDGET_MIB   4096u    /* --staging-budget's default: 32 sessions' slots */
#define BE_STAGING_BUDGET_MAX   1048576u /* MiB: 1 TiB */
#define BE_WORKER_GRACE_MS      5000     /* after the socket is closed, then SIGKILL */
#define BE_ABANDON_WAIT_MS      500      /* a worker's wait for its session's final usage record */
#define BE_TRIM_AFTER_MS        500 /* after the last session ended, its memory is given back */

#endif
