/* Bounded spinning before a thread sleeps. A frame crosses three backend threads (the channel
 * thread, the worker's reader, the session thread) and each of them usually sleeps when the
 * frame arrives: on a virtual machine the wake-up of an idle CPU costs tens of microseconds,
 * several times the work the thread then does. With --spin-us N each of them, once idle,
 * polls for N microseconds before it sleeps; a guest that sends a frame every few hundred
 * microseconds (a training loop) then finds them awake. N = 0 turns it off; the cost is CPU
 * time while a tenant is active, at most N microseconds after its last frame. On a machine of
 * fewer than 4 CPUs the default is 0: there the spinning threads would take turns with the one
 * they wait for. */
#include "session/spin.h"

#include <time.h>
#include <unistd.h>

uint64_t be_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

unsigned be_default_spin_us(void)
{
    return sysconf(_SC_NPROCESSORS_ONLN) >= 4 ? BE_DEFAULT_SPIN_US : 0;
}
