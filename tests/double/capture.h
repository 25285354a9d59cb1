/* What the other files of the double use of capture.c.
 * TEST DOUBLE: never a GPU result (README.md). */
#ifndef SLUICE_DOUBLE_CAPTURE_H
#define SLUICE_DOUBLE_CAPTURE_H

#include "graph.h"

/* The capture stream s takes part in, NULL when it does not capture. */
struct dbl_capture *capture_of(CUstream s);

/* Adds proto to the capture's graph after the stream's dependencies, which become the node. */
CUresult capture_node(struct dbl_capture *c, struct dbl_gnode *proto);

/* The capture's graph, id and current dependencies (valid until the stream's next change). */
void capture_state(const struct dbl_capture *c, CUgraph *graph, cuuint64_t *id,
                   const CUgraphNode **deps, size_t *n);

/* cuEventRecord on a capturing stream: the event stands for the stream's dependencies, and a
 * stream that waits on it joins the capture (fork and join). 1 when s captures. */
int capture_record(CUevent e, CUstream s);

/* The id of the capture stream s or event e (last recorded in a capture) takes part in, 0 none. */
unsigned long long capture_id_of(CUstream s);
unsigned long long capture_id_of_event(CUevent e);

/* A prohibited operation during capture: the capture id (all: every capture, returning how many
 * there were) is invalidated, as the driver does. */
void capture_invalidate(unsigned long long id);
int capture_invalidate_all(void);

/* The capture whose mode prohibits the calling thread's potentially unsafe calls, 0 when none
 * does (the thread's mode, cuThreadExchangeStreamCaptureMode, and the captures' modes). */
unsigned long long capture_prohibiting(void);

/* cuStreamWaitEvent: 1 when the event was recorded in a capture (s now takes part in it). */
CUresult capture_wait(CUstream s, CUevent e, int *joined);

#endif
