/* sluice-enroll: our entry of vendor_data2.json ({"sluice": {token, ca, enroll_endpoint,
 * expires}}, written by sluice-novahook and handed out by Nova) and where to find it: the
 * metadata service, or a config drive (docs/enrollment.md, "Where the token comes from"). */
#ifndef SLUICE_ENROLL_VENDORDATA_H
#define SLUICE_ENROLL_VENDORDATA_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/error.h"

/* Where Nova's config drive (a file system labelled config-2) is mounted for sluice-enroll
 * (frontend/enroll/systemd/sluice-config-drive.service, before sluice-enroll.service), and our
 * file on it. */
#define SE_CONFIG_DRIVE_DIR    "/run/sluice/config-drive"
#define SE_CONFIG_DRIVE_SOURCE SE_CONFIG_DRIVE_DIR "/openstack/latest/vendor_data2.json"

/* The token may be this many seconds past its "expires" and still be tried (clock skew; the
 * agent allows 60 s too). */
#define SE_TOKEN_SKEW_S 60

typedef struct se_vendordata {
    char *token, *ca, *endpoint;
    int64_t expires; /* unix time; 0 when the entry has none (older nova-hook) */
} se_vendordata;

/* Parses body (from src, named in messages) and takes our entry under key. */
sl_code se_vendordata_parse(const char *src, const char *body, size_t len, const char *key,
                            se_vendordata *v, sl_error *e);

/* SL_OK while the token is usable at now (expires + SE_TOKEN_SKEW_S); else
 * SL_ERR_CERT_EXPIRED with when it expired and, for a config drive, why it cannot be newer. */
sl_code se_vendordata_check_time(const char *src, const se_vendordata *v, int64_t now, sl_error *e);

void se_vendordata_free(se_vendordata *v);

/* The sources sluice-enroll tries when none is given, in order: the config drive's file when
 * it is there (mounted), then the metadata service. Returns how many (1 or 2) are in out. */
int se_default_sources(const char *out[2]);

/* 1 when src is the config drive's file (or any file on a config drive mount). */
int se_source_is_config_drive(const char *src);

#endif
