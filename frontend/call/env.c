/* The environment variables the frontend reads as numbers: each checked, a bad value logged
 * with its name and the default used (docs/tenant-guide.md names them). */
#include <errno.h>
#include <stdlib.h>

#include "call/env.h"
#include "call/rpc_session.h"
#include "component.h"
#include "sluice/log.h"

unsigned sl_fe_env_uint(const char *name, unsigned dflt, unsigned max)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (*v == '-' || *end || errno || n > max) {
        sl_log(SL_LOG_WARNING, SL_FE_COMPONENT,
               "%s=%s is not a whole number from 0 to %u; using %u", name, v, max, dflt);
        return dflt;
    }
    return (unsigned)n;
}

unsigned sl_fe_rpc_flush_us_from_env(int sender)
{
    return sl_fe_env_uint("SLUICE_FLUSH_US",
                          sender ? SL_FE_FLUSH_US_SENDER : SL_FE_FLUSH_US_DEFAULT,
                          SL_FE_FLUSH_US_MAX);
}

unsigned sl_fe_rpc_start_us_from_env(int sender)
{
    return sl_fe_env_uint("SLUICE_FLUSH_START_US",
                          sender ? SL_FE_START_US_SENDER : SL_FE_START_US_DEFAULT,
                          SL_FE_FLUSH_US_MAX);
}

unsigned sl_fe_rpc_hold_us_from_env(int sender)
{
    unsigned us = sl_fe_env_uint("SLUICE_FLUSH_HOLD_US", SL_FE_HOLD_US_DEFAULT, SL_FE_HOLD_US_MAX);
    return sender ? us : 0;
}

int sl_fe_rpc_sender_from_env(int dflt)
{
    return (int)sl_fe_env_uint("SLUICE_SENDER", dflt != 0, 1);
}
