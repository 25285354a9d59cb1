/* What `sluice-enroll --status` prints and what the renewal timer looks at besides the
 * certificate's age: is this instance enrolled, until when, does its backend answer, and does it
 * accept this certificate (the grant)? A certificate that is still young but that the backend
 * refuses (the instance was stopped and started, more than 8 newer enrollments, the host CA
 * changed) is worth enrolling again; a backend port where nothing listens any more is asked of
 * the agent (a locate request, enroll_internal.h), which names where the backend is now. */
#ifndef SLUICE_ENROLL_STATUS_H
#define SLUICE_ENROLL_STATUS_H

#include <stdint.h>
#include <stdio.h>

typedef enum se_grant {
    SE_GRANT_UNKNOWN = 0, /* the backend did not answer (network, timeout): cannot tell */
    SE_GRANT_LIVE,        /* the backend accepted this certificate */
    SE_GRANT_REFUSED,     /* the backend refused this certificate (why says how) */
    SE_GRANT_NO_BACKEND,  /* nothing listens at the endpoint any more */
} se_grant;

typedef struct se_status {
    int enrolled;  /* the four files are there, match and verify */
    char why[256]; /* not enrolled, or the certificate's problem */
    int renew_due; /* a third of the lifetime or less is left */
    int64_t not_before, not_after, now;
    char instance_id[64], project_id[64], endpoint[256];
    se_grant grant;
    char grant_why[256];
} se_status;

/* Reads DIR's files and, when there is an endpoint, asks the backend (at most timeout_ms). */
void se_status_read(const char *dir, int timeout_ms, se_status *st);

/* The backend's answer to DIR's certificate at endpoint. */
se_grant se_grant_probe(const char *dir, const char *endpoint, int timeout_ms, char *why, size_t n);

/* The endpoint of DIR/backend.conf; 0 when there is none. */
int se_read_endpoint(const char *dir, char *out, size_t cap);

/* Prints the status for a person; returns the exit status: 0 enrolled, granted and reachable,
 * 1 otherwise. */
int se_status_print(const se_status *st, const char *dir, FILE *f);

#endif
