/* One pause of a loop that polls without sleeping: tells the CPU (and a hypervisor that watches
 * for it) that this thread spins, which frees resources for the sibling hyperthread. */
#ifndef SLUICE_RELAX_H
#define SLUICE_RELAX_H

static inline void sl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
