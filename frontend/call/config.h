/* backend.conf and the credential files the enrollment tool writes (config.c). */
#ifndef SLUICE_FRONTEND_CALL_CONFIG_H
#define SLUICE_FRONTEND_CALL_CONFIG_H

#include "sluice/error.h"

struct sl_fe_config {
    char dir[512];
    char endpoint[512];
    char ca[600], cert[600], key[600];
};

/* Reads <dir>/backend.conf and checks that the three credential files are readable.
 * dir NULL: $SLUICE_CONFIG_DIR, else /etc/sluice. The error names the missing file. */
sl_code sl_fe_config_load(const char *dir, struct sl_fe_config *cfg, sl_error *err);
/* Parses backend.conf text ("endpoint = tcp://HOST:PORT", '#' comments, blank lines). */
sl_code sl_fe_config_parse(const char *text, struct sl_fe_config *cfg, sl_error *err);

#endif
