/* Work on guest memory recorded by stream capture (capture.c; docs/remoting.md "Graphs and
 * guest memory"). */
#ifndef SLUICE_FRONTEND_API_CAPTURE_H
#define SLUICE_FRONTEND_API_CAPTURE_H

#include <stdbool.h>

#include <cuda.h>

/* 1 when s (the per-thread default stream's when pt) is capturing, active or invalidated; the
 * question costs nothing before a capture was begun in this process, and the answer "not
 * capturing" is kept by the call layer's memo until a capture may have begun. */
int sl_fe_capturing(bool pt, CUstream s);

/* A copy with a side in guest memory, issued on the capturing stream s: added to the capture's
 * graph as a memcpy node (a UNIFIED or HOST side in guest memory), which the graph's launches
 * carry between guest memory and the device. */
CUresult sl_fe_capture_copy(bool pt, CUstream s, const CUDA_MEMCPY3D *copy);

/* cuLaunchHostFunc on the capturing stream s: a host node of the capture's graph. */
CUresult sl_fe_capture_host_func(bool pt, CUstream s, CUhostFn fn, void *user);

#endif
