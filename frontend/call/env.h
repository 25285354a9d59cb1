/* The environment variables the frontend reads as numbers (env.c). */
#ifndef SLUICE_FRONTEND_CALL_ENV_H
#define SLUICE_FRONTEND_CALL_ENV_H

/* The environment variable name as a whole number 0..max; unset or empty gives dflt, anything
 * else (not a number, negative, over max) is logged with its name and gives dflt. */
unsigned sl_fe_env_uint(const char *name, unsigned dflt, unsigned max);
/* $SLUICE_SENDER (0 or 1; dflt when unset or bad). */
int sl_fe_rpc_sender_from_env(int dflt);
/* $SLUICE_FLUSH_US and $SLUICE_FLUSH_START_US checked (a bad value is logged and the default
 * used); the defaults depend on whether frames go out from the sender thread. */
unsigned sl_fe_rpc_flush_us_from_env(int sender);
unsigned sl_fe_rpc_start_us_from_env(int sender);
/* $SLUICE_FLUSH_HOLD_US checked the same way (0 without the sender thread: no hold). */
unsigned sl_fe_rpc_hold_us_from_env(int sender);

#endif
