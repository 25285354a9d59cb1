/* The monotonic clock, and the bounded spinning of idle threads before they sleep (spin.c,
 * --spin-us). */
#ifndef SLUICE_BE_SESSION_SPIN_H
#define SLUICE_BE_SESSION_SPIN_H

#include <stdint.h>

#define BE_DEFAULT_SPIN_US 200u
#define BE_MAX_SPIN_US     100000u

uint64_t be_now_ns(void); /* CLOCK_MONOTONIC */
/* BE_DEFAULT_SPIN_US, or 0 on a machine of fewer than 4 CPUs (spinning threads would take the
 * CPU from the thread they wait for). */
unsigned be_default_spin_us(void);

#endif
