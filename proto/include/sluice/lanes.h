/* Bulk lanes (docs/remoting.md, "Lanes and page-locked staging"): how a call's (or a reply's)
 * bulk is cut into pieces, which lane carries each piece, and the assembly of the pieces that
 * arrive on several lanes, each read by a thread of its own, into the buffer reserved for the
 * call, for a thread that waits for all of them.
 *
 * Layout: a bulk of n bytes in k pieces (1 <= k <= SL_LANE_MAX_PIECES) has pieces of
 * P = ceil(n / k) rounded up to SL_LANE_ALIGN bytes, the last one shorter; piece i covers
 * [i * P, min((i + 1) * P, n)) and travels on lane (seq + i) mod lanes. A layout in which a
 * piece would be empty is refused: both sides compute the same cut, and a LaneBulk's offset,
 * length and lane must be exactly its piece's. */
#ifndef SLUICE_LANES_H
#define SLUICE_LANES_H

#include <stdint.h>

#include "sluice/error.h"

#define SL_LANE_MAX         8u                  /* lanes of one session */
#define SL_LANE_MAX_PIECES  64u                 /* pieces of one call's bulk */
#define SL_LANE_ALIGN       ((uint64_t)4096)    /* a piece's size is a multiple of this */
#define SL_LANE_PIECE       ((uint64_t)2 << 20) /* the size sl_lane_pieces_for aims at */
#define SL_LANE_TICKET      32u                 /* bytes of a lane's ticket */
#define SL_LANE_MAX_PENDING 256u                /* calls with pieces outstanding at once */
/* A lane's channel sends its bulk in frames of this much (sl_channel_opts.chunk_size; the
 * channel's default is 256 KiB): 1 MiB frames moved 10% more than 256 KiB ones and 64 KiB ones
 * 20% less (run 29, call F: docs/performance.md). */
#define SL_LANE_CHUNK ((size_t)1 << 20)

/* 1 when n bytes can be cut into k non-empty pieces as above; else 0 and e says why. */
int sl_lane_layout_ok(uint64_t n, uint32_t k, sl_error *e);

/* Piece i of n bytes in k pieces (a layout sl_lane_layout_ok accepts, i < k). */
void sl_lane_piece(uint64_t n, uint32_t k, uint32_t i, uint64_t *offset, uint64_t *length);

/* The lane of piece i of call seq on a session with `lanes` lanes (>= 1). */
unsigned sl_lane_of(uint64_t seq, uint32_t i, unsigned lanes);

/* The piece count a sender uses for n bytes (n > 0) on `lanes` lanes: pieces of about
 * SL_LANE_PIECE, at least one per lane while they stay non-empty, at most SL_LANE_MAX_PIECES. */
uint32_t sl_lane_pieces_for(uint64_t n, unsigned lanes);

/* The assembly of one direction of one session. Thread-safe: the lane threads claim and
 * complete pieces, the thread that owns the call expects and waits. */
typedef struct sl_lane_asm sl_lane_asm;

sl_code sl_lane_asm_new(unsigned lanes, sl_lane_asm **out, sl_error *e);
void sl_lane_asm_free(sl_lane_asm *a);

/* Call (reply) seq's bulk of n bytes comes as k pieces into dst (n bytes, owned by the caller
 * until sl_lane_asm_wait returned and sl_lane_asm_forget was called). seq must not be pending
 * already; replies may come out of seq order (a copy's reply that waited off the worker's call
 * path follows later ones), so seqs need not rise. */
sl_code sl_lane_asm_expect(sl_lane_asm *a, uint64_t seq, uint8_t *dst, uint64_t n, uint32_t k,
                           sl_error *e);

/* A LaneBulk{seq, piece, offset, length} read on lane `lane`: checked against the expected
 * layout (the piece's offset, length and lane; each piece once) and *dst set to where its bytes
 * go. A seq not expected yet may be announced a little later (its call or reply travels on
 * another connection): the claim waits up to wait_ms for it. Any failure also fails the
 * assembly (sl_lane_asm_fail): the bytes of one piece cannot come again. */
sl_code sl_lane_asm_claim(sl_lane_asm *a, unsigned lane, uint64_t seq, uint32_t piece,
                          uint64_t offset, uint64_t length, int wait_ms, uint8_t **dst,
                          sl_error *e);

/* The bytes of a claimed piece are all in its destination. */
void sl_lane_asm_arrived(sl_lane_asm *a, uint64_t seq, uint32_t piece);

/* Waits until every piece of seq arrived (SL_OK), the assembly failed (its code and reason), or
 * timeout_ms passed (SL_ERR_TIMEOUT; < 0: no limit). */
sl_code sl_lane_asm_wait(sl_lane_asm *a, uint64_t seq, int timeout_ms, sl_error *e);

/* Seq is done with (its pieces all arrived, or the caller gives up on it). */
void sl_lane_asm_forget(sl_lane_asm *a, uint64_t seq);

/* A lane was refused or lost, or a piece was wrong: every waiter and every later call returns
 * this code and reason (the first failure's). */
void sl_lane_asm_fail(sl_lane_asm *a, sl_code code, const char *why);

#endif
