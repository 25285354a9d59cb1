/* wire.lanes: the cut of a bulk into lane pieces, the assembly of pieces that arrive out of
 * order on several lanes (each from a thread of its own), and the envelope's checks of the lane
 * fields (sluice/lanes.h, docs/remoting.md "Lanes"). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sluice/lanes.h"
#include "sluice/wire.h"

/* Every layout the checker accepts covers the bulk exactly once, in order, no piece empty. */
static void layout_covers_the_bulk(void **state)
{
    (void)state;
    const uint64_t sizes[] = {
        1, 4095, 4096, 4097, 65537, (16u << 20) - 1, 16u << 20, (16u << 20) + 3, 256u << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        for (uint32_t k = 1; k <= SL_LANE_MAX_PIECES; k++) {
            sl_error e;
            if (!sl_lane_layout_ok(sizes[s], k, &e)) {
                assert_int_equal(e.code, SL_ERR_PROTOCOL);
                continue;
            }
            uint64_t at = 0;
            for (uint32_t i = 0; i < k; i++) {
                uint64_t off, len;
                sl_lane_piece(sizes[s], k, i, &off, &len);
                assert_int_equal(off, at);
                assert_true(len > 0);
                if (i + 1 < k)
                    assert_int_equal(len % SL_LANE_ALIGN, 0);
                at += len;
            }
            assert_int_equal(at, sizes[s]);
        }
        uint32_t k = sl_lane_pieces_for(sizes[s], 4);
        assert_true(k >= 1 && k <= SL_LANE_MAX_PIECES);
        assert_true(sl_lane_layout_ok(sizes[s], k, NULL));
    }
    /* 16 MiB on 4 lanes: 8 pieces of 2 MiB, two per lane */
    assert_int_equal(sl_lane_pieces_for(16u << 20, 4), 8);
    /* a small bulk gets fewer pieces than lanes rather than an empty piece */
    assert_int_equal(sl_lane_pieces_for(4096, 4), 1);
    assert_false(sl_lane_layout_ok(4096, 2, NULL));
    assert_false(sl_lane_layout_ok(0, 1, NULL));
    assert_false(sl_lane_layout_ok(1 << 20, 0, NULL));
    assert_false(sl_lane_layout_ok(1 << 30, SL_LANE_MAX_PIECES + 1, NULL));
    /* pieces go round the lanes starting at the call's seq */
    assert_int_equal(sl_lane_of(5, 0, 4), 1);
    assert_int_equal(sl_lane_of(5, 3, 4), 0);
}

static void fill(uint8_t *p, uint64_t n, uint64_t seed)
{
    for (uint64_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 131 + seed * 7) >> 3);
}

/* One sender per lane: sends its pieces of every call, last call first (a later call's bytes
 * may arrive before an earlier one's), as a lane thread of the receiver would take them. */
struct lane_arg {
    sl_lane_asm *a;
    unsigned lane, lanes;
    const uint8_t *src[3];
    uint64_t seq[3], n[3];
    uint32_t k[3];
    int fails;
};

static void *lane_thread(void *p)
{
    struct lane_arg *l = p;
    for (int c = 2; c >= 0; c--) {
        for (uint32_t i = 0; i < l->k[c]; i++) {
            if (sl_lane_of(l->seq[c], i, l->lanes) != l->lane)
                continue;
            uint64_t off, len;
            sl_lane_piece(l->n[c], l->k[c], i, &off, &len);
            uint8_t *dst;
            sl_error e;
            if (sl_lane_asm_claim(l->a, l->lane, l->seq[c], i, off, len, 2000, &dst, &e) != SL_OK) {
                l->fails++;
                continue;
            }
            memcpy(dst, l->src[c] + off, len);
            sl_lane_asm_arrived(l->a, l->seq[c], i);
        }
    }
    return NULL;
}

static void pieces_assemble_in_any_order(void **state)
{
    (void)state;
    enum { LANES = 4 };
    const uint64_t n[3] = {(16u << 20) + 12345, 70000, 3u << 20};
    const uint64_t seq[3] = {7, 9, 12};
    uint8_t *src[3], *dst[3];
    uint32_t k[3];
    sl_lane_asm *a;
    sl_error e;
    assert_int_equal(sl_lane_asm_new(LANES, &a, &e), SL_OK);
    for (int c = 0; c < 3; c++) {
        src[c] = malloc(n[c]);
        dst[c] = calloc(1, n[c]);
        assert_non_null(src[c]);
        assert_non_null(dst[c]);
        fill(src[c], n[c], seq[c]);
        k[c] = sl_lane_pieces_for(n[c], LANES);
    }
    /* the first call is announced before the lanes start, the others while they run */
    assert_int_equal(sl_lane_asm_expect(a, seq[0], dst[0], n[0], k[0], &e), SL_OK);
    struct lane_arg args[LANES];
    pthread_t th[LANES];
    for (unsigned l = 0; l < LANES; l++) {
        args[l] = (struct lane_arg){.a = a, .lane = l, .lanes = LANES};
        for (int c = 0; c < 3; c++) {
            args[l].src[c] = src[c];
            args[l].seq[c] = seq[c];
            args[l].n[c] = n[c];
            args[l].k[c] = k[c];
        }
        assert_int_equal(pthread_create(&th[l], NULL, lane_thread, &args[l]), 0);
    }
    assert_int_equal(sl_lane_asm_expect(a, seq[1], dst[1], n[1], k[1], &e), SL_OK);
    assert_int_equal(sl_lane_asm_expect(a, seq[2], dst[2], n[2], k[2], &e), SL_OK);
    for (int c = 0; c < 3; c++) { /* the owner waits in seq order */
        assert_int_equal(sl_lane_asm_wait(a, seq[c], 5000, &e), SL_OK);
        assert_memory_equal(dst[c], src[c], n[c]);
        sl_lane_asm_forget(a, seq[c]);
    }
    for (unsigned l = 0; l < LANES; l++) {
        pthread_join(th[l], NULL);
        assert_int_equal(args[l].fails, 0);
    }
    sl_lane_asm_free(a);
    for (int c = 0; c < 3; c++) {
        free(src[c]);
        free(dst[c]);
    }
}

/* Every wrong piece fails the whole assembly with a reason naming it; waiters wake. */
static void wrong_pieces_fail_the_assembly(void **state)
{
    (void)state;
    static uint8_t buf[1 << 20];
    const uint64_t n = sizeof buf;
    const uint32_t k = 4; /* 256 KiB each; seq 10: piece i on lane (10 + i) % 4 */
    struct {
        unsigned lane;
        uint64_t seq;
        uint32_t piece;
        uint64_t off, len;
        const char *why;
    } bad[] = {
        {2, 10, 0, 4096, 262144, "its place is 0+262144"},
        {2, 10, 0, 0, 1000, "its place is 0+262144"},
        {1, 10, 0, 0, 262144, "belongs on lane 2"},
        {0, 10, 4, 0, 262144, "which has 4 pieces"},
        {0, 8, 0, 0, 262144, "no pieces outstanding"},
        {0, 11, 0, 0, 262144, "which no call announced"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sl_lane_asm *a;
        sl_error e;
        uint8_t *dst;
        assert_int_equal(sl_lane_asm_new(4, &a, &e), SL_OK);
        assert_int_equal(sl_lane_asm_expect(a, 10, buf, n, k, &e), SL_OK);
        assert_int_equal(sl_lane_asm_claim(a, bad[i].lane, bad[i].seq, bad[i].piece, bad[i].off,
                                           bad[i].len, 10, &dst, &e),
                         SL_ERR_PROTOCOL);
        assert_non_null(strstr(e.msg, bad[i].why));
        assert_null(dst);
        assert_int_equal(sl_lane_asm_wait(a, 10, 1000, &e), SL_ERR_PROTOCOL);
        assert_non_null(strstr(e.msg, bad[i].why));
        sl_lane_asm_free(a);
    }
    /* a piece twice */
    sl_lane_asm *a;
    sl_error e;
    uint8_t *dst;
    assert_int_equal(sl_lane_asm_new(4, &a, &e), SL_OK);
    assert_int_equal(sl_lane_asm_expect(a, 10, buf, n, k, &e), SL_OK);
    assert_int_equal(sl_lane_asm_claim(a, 3, 10, 1, 262144, 262144, 0, &dst, &e), SL_OK);
    assert_ptr_equal(dst, buf + 262144);
    assert_int_equal(sl_lane_asm_claim(a, 3, 10, 1, 262144, 262144, 0, &dst, &e), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "came twice"));
    /* a failed assembly refuses what follows */
    assert_int_equal(sl_lane_asm_expect(a, 9, buf, n, k, &e), SL_ERR_PROTOCOL);
    sl_lane_asm_free(a);
}

/* Replies out of seq order (a copy's reply that waited off the worker's call path comes after a
 * later one): a seq below the highest expected may be announced, and its pieces, read before
 * the announcement, wait for it; a seq pending already is refused. */
struct late_arg {
    sl_lane_asm *a;
    uint8_t *buf;
};

static void *announce_later(void *p)
{
    struct late_arg *l = p;
    struct timespec t = {0, 30 * 1000 * 1000};
    nanosleep(&t, NULL);
    sl_error e;
    assert_int_equal(sl_lane_asm_expect(l->a, 7, l->buf, 1 << 20, 4, &e), SL_OK);
    return NULL;
}

static void replies_out_of_seq_order(void **state)
{
    (void)state;
    static uint8_t a9[1 << 20], a7[1 << 20];
    sl_lane_asm *a;
    sl_error e;
    uint8_t *dst;
    assert_int_equal(sl_lane_asm_new(4, &a, &e), SL_OK);
    assert_int_equal(sl_lane_asm_expect(a, 9, a9, sizeof a9, 4, &e), SL_OK);
    assert_int_equal(sl_lane_asm_expect(a, 9, a9, sizeof a9, 4, &e), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "announced twice"));
    struct late_arg l = {a, a7};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, announce_later, &l), 0);
    /* seq 7, piece 1 (lane 0): read before seq 7 is announced, it waits for it */
    assert_int_equal(sl_lane_asm_claim(a, 0, 7, 1, 262144, 262144, 5000, &dst, &e), SL_OK);
    assert_ptr_equal(dst, a7 + 262144);
    pthread_join(th, NULL);
    sl_lane_asm_free(a);
}

/* A lost lane: the thread waiting for the call at the head returns the lane's reason, not a
 * hang; a timeout says how many pieces arrived. */
struct fail_arg {
    sl_lane_asm *a;
};

static void *fail_later(void *p)
{
    struct fail_arg *f = p;
    struct timespec t = {0, 50 * 1000 * 1000};
    nanosleep(&t, NULL);
    sl_lane_asm_fail(f->a, SL_ERR_PEER_LOST, "lane 2 lost: the peer vanished");
    return NULL;
}

static void lost_lane_wakes_the_waiter(void **state)
{
    (void)state;
    static uint8_t buf[1 << 20];
    sl_lane_asm *a;
    sl_error e;
    assert_int_equal(sl_lane_asm_new(4, &a, &e), SL_OK);
    assert_int_equal(sl_lane_asm_expect(a, 3, buf, sizeof buf, 4, &e), SL_OK);
    assert_int_equal(sl_lane_asm_wait(a, 3, 20, &e), SL_ERR_TIMEOUT);
    assert_non_null(strstr(e.msg, "0 of 4 lane pieces of seq 3"));
    struct fail_arg f = {a};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fail_later, &f), 0);
    assert_int_equal(sl_lane_asm_wait(a, 3, -1, &e), SL_ERR_PEER_LOST);
    assert_string_equal(e.msg, "lane 2 lost: the peer vanished");
    pthread_join(th, NULL);
    uint8_t *dst;
    assert_int_equal(sl_lane_asm_claim(a, 3, 3, 0, 0, 262144, 0, &dst, &e), SL_ERR_PEER_LOST);
    assert_int_equal(sl_lane_asm_new(9, &a, &e), SL_ERR_INVALID);
    sl_lane_asm_free(f.a);
}

static sl_code check_client(Sluice__Wire__ClientMessage *m, sl_error *e)
{
    return sl_wire_check_client(m, NULL, e);
}

/* The envelope checks the lane fields of every message that carries them. */
static void envelope_checks_lane_fields(void **state)
{
    (void)state;
    sl_error e;
    Sluice__Wire__LaneBulk lb = SLUICE__WIRE__LANE_BULK__INIT;
    Sluice__Wire__ClientMessage m = SLUICE__WIRE__CLIENT_MESSAGE__INIT;
    m.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_LANE;
    m.lane = &lb;
    lb.seq = 4;
    lb.piece = 1;
    lb.offset = 4096;
    lb.length = 4096;
    assert_int_equal(check_client(&m, &e), SL_OK);
    lb.piece = SL_LANE_MAX_PIECES;
    assert_int_equal(check_client(&m, &e), SL_ERR_PROTOCOL);
    lb.piece = 1;
    lb.length = 0;
    assert_int_equal(check_client(&m, &e), SL_ERR_PROTOCOL);
    lb.length = 4096;
    lb.offset = UINT64_MAX - 10;
    assert_int_equal(check_client(&m, &e), SL_ERR_PROTOCOL);
    m.lane = NULL;
    assert_int_equal(check_client(&m, &e), SL_ERR_PROTOCOL);

    Sluice__Wire__SessionOpen o = SLUICE__WIRE__SESSION_OPEN__INIT;
    m.kind_case = SLUICE__WIRE__CLIENT_MESSAGE__KIND_OPEN;
    m.open = &o;
    o.lanes = SL_LANE_MAX;
    assert_int_equal(check_client(&m, &e), SL_OK);
    o.lanes = SL_LANE_MAX + 1;
    assert_int_equal(check_client(&m, &e), SL_ERR_PROTOCOL);

    uint8_t t[SL_LANE_TICKET] = {1};
    uint32_t ports[2] = {48001, 48002};
    ProtobufCBinaryData tickets[2] = {{sizeof t, t}, {sizeof t, t}};
    Sluice__Wire__SessionAccept acc = SLUICE__WIRE__SESSION_ACCEPT__INIT;
    Sluice__Wire__ServerMessage s = SLUICE__WIRE__SERVER_MESSAGE__INIT;
    s.kind_case = SLUICE__WIRE__SERVER_MESSAGE__KIND_ACCEPT;
    s.accept = &acc;
    acc.direct_port = 48000;
    acc.lane_ports = ports;
    acc.n_lane_ports = 2;
    acc.lane_tickets = tickets;
    acc.n_lane_tickets = 2;
    assert_int_equal(sl_wire_check_server(&s, NULL, &e), SL_OK);
    acc.n_lane_tickets = 1;
    assert_int_equal(sl_wire_check_server(&s, NULL, &e), SL_ERR_PROTOCOL);
    acc.n_lane_tickets = 2;
    tickets[1].len = 16;
    assert_int_equal(sl_wire_check_server(&s, NULL, &e), SL_ERR_PROTOCOL);
    assert_non_null(strstr(e.msg, "16-byte ticket"));
    tickets[1].len = sizeof t;
    acc.direct_port = 0;
    assert_int_equal(sl_wire_check_server(&s, NULL, &e), SL_ERR_PROTOCOL);
    acc.direct_port = 48000;

    /* a call's lane pieces must be a layout both sides can cut */
    Sluice__Wire__Call c = SLUICE__WIRE__CALL__INIT;
    c.seq = 1;
    c.call_id = SL_CALL_cuMemcpyHtoD_v2;
    c.args_case = SLUICE__WIRE__CALL__ARGS_CU_MEMCPY_HTO_D_V2;
    Sluice__Cuda__CuMemcpyHtoDV2Request r = SLUICE__CUDA__CU_MEMCPY_HTO_DV2_REQUEST__INIT;
    c.cu_memcpy_hto_d_v2 = &r;
    c.bulk_length = 1 << 20;
    c.lane_pieces = 4;
    assert_int_equal(sl_wire_check_call(&c, NULL, &e), SL_OK);
    c.lane_pieces = 1000;
    assert_int_equal(sl_wire_check_call(&c, NULL, &e), SL_ERR_PROTOCOL);
    c.bulk_length = 4096;
    c.lane_pieces = 2;
    assert_int_equal(sl_wire_check_call(&c, NULL, &e), SL_ERR_PROTOCOL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layout_covers_the_bulk),
        cmocka_unit_test(pieces_assemble_in_any_order),
        cmocka_unit_test(wrong_pieces_fail_the_assembly),
        cmocka_unit_test(replies_out_of_seq_order),
        cmocka_unit_test(lost_lane_wakes_the_waiter),
        cmocka_unit_test(envelope_checks_lane_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
