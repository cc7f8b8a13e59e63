/* Robin sender engine: loss after three later receipts, early retransmission copies, the time
 * rule, rejected quACKs. */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "sidekick.h"

#define MS 1000ull /* microseconds */

/* A 24-byte datagram whose identifier (last 4 bytes, little-endian) is `i`. */
static void dgram(uint32_t i, uint8_t out[24]) {
    memset(out, 0xAB, 20);
    out[20] = (uint8_t)i;
    out[21] = (uint8_t)(i >> 8);
    out[22] = (uint8_t)(i >> 16);
    out[23] = (uint8_t)(i >> 24);
}

/* Sends the proxy's quACK to the engine. */
static SkStatus deliver_quack(SkRobin *r, SkQuack *proxy, uint64_t now) {
    uint8_t wire[128];
    size_t len = 0;
    CHECK_EQ(sk_quack_serialize(proxy, wire, sizeof wire, &len), SK_STATUS_OK);
    return sk_robin_on_quack(r, now, wire, len);
}

static SkRobin *robin_t8(void) {
    SkRobinConfig c;
    CHECK_EQ(sk_robin_config_default(&c), SK_STATUS_OK);
    CHECK_EQ(c.reorder_threshold, 3);
    c.threshold = 8;
    SkRobin *r = NULL;
    CHECK_EQ(sk_robin_new(&c, &r), SK_STATUS_OK);
    return r;
}

static int count_lost(SkRobin *r, SkRobinEvent *lost, uint8_t *copy, size_t *copy_len) {
    int n = 0;
    SkRobinEvent ev;
    uint8_t buf[1500];
    SkStatus s;
    while ((s = sk_robin_poll_event(r, &ev, buf, sizeof buf)) == SK_STATUS_OK) {
        if (ev.kind == SK_ROBIN_EVENT_KIND_LOST) {
            *lost = ev;
            n++;
        } else if (ev.kind == SK_ROBIN_EVENT_KIND_RETRANSMIT && copy != NULL) {
            memcpy(copy, buf, ev.datagram_len);
            *copy_len = ev.datagram_len;
        }
    }
    CHECK_EQ(s, SK_STATUS_EMPTY);
    return n;
}

static void loss_is_flagged_after_three_later_receipts(void) {
    SkRobin *r = robin_t8();
    SkQuack *proxy = NULL;
    sk_quack_new(8, &proxy);
    uint64_t t0 = 5000000; /* the caller's monotonic clock, arbitrary origin */
    /* The first quACK of the epoch is the baseline (nothing counted yet). */
    CHECK_EQ(deliver_quack(r, proxy, t0), SK_STATUS_OK);
    uint8_t d[24];
    SkRobinEvent lost;
    uint8_t copy[64];
    size_t copy_len = 0;
    for (uint32_t i = 0; i <= 3; i++) {
        dgram(i, d);
        uint64_t seq = 99;
        CHECK_EQ(sk_robin_on_sent(r, t0 + i * 100, d, sizeof d, i, &seq), SK_STATUS_OK);
        CHECK_EQ(seq, i);
        if (i != 3) sk_quack_insert(proxy, i); /* datagram 3 is lost before the proxy */
    }
    CHECK_EQ(deliver_quack(r, proxy, t0 + 1 * MS), SK_STATUS_OK);
    CHECK_EQ(count_lost(r, &lost, NULL, NULL), 0); /* no later packet yet: only missing */
    for (uint32_t i = 4; i <= 5; i++) {
        dgram(i, d);
        sk_robin_on_sent(r, t0 + 1 * MS + i * 100, d, sizeof d, i, NULL);
        sk_quack_insert(proxy, i);
    }
    CHECK_EQ(deliver_quack(r, proxy, t0 + 2 * MS), SK_STATUS_OK);
    CHECK_EQ(count_lost(r, &lost, NULL, NULL), 0); /* two later receipts: could be reordering */
    dgram(6, d);
    sk_robin_on_sent(r, t0 + 2 * MS + 600, d, sizeof d, 6, NULL);
    sk_quack_insert(proxy, 6);
    CHECK_EQ(deliver_quack(r, proxy, t0 + 3 * MS), SK_STATUS_OK);
    CHECK_EQ(count_lost(r, &lost, copy, &copy_len), 1); /* the third later receipt */
    CHECK_EQ(lost.id, 3);
    CHECK_EQ(lost.packet_number, 3);
    CHECK_EQ(lost.rule, SK_LOSS_RULE_REORDERING);
    CHECK_EQ(lost.sent_us, t0 + 300);
    CHECK_EQ(lost.len, 24);
    /* The early retransmission is the identical datagram. */
    dgram(3, d);
    CHECK(copy_len == 24 && memcmp(copy, d, 24) == 0);
    SkRobinStats st;
    CHECK_EQ(sk_robin_stats(r, &st), SK_STATUS_OK);
    CHECK_EQ(st.lost_by_reordering, 1);
    CHECK_EQ(st.retransmitted, 1);
    CHECK_EQ(st.delivered, 6);
    CHECK_EQ(st.outstanding, 1); /* the resend awaits its own verdict */
    sk_quack_free(proxy);
    sk_robin_free(r);
}

static void retransmission_waits_for_a_large_enough_buffer(void) {
    SkRobin *r = robin_t8();
    SkQuack *proxy = NULL;
    sk_quack_new(8, &proxy);
    deliver_quack(r, proxy, 0);
    uint8_t d[24];
    for (uint32_t i = 0; i < 6; i++) {
        dgram(i, d);
        sk_robin_on_sent(r, i * 10, d, sizeof d, -1, NULL);
        if (i != 1) sk_quack_insert(proxy, i);
    }
    CHECK_EQ(deliver_quack(r, proxy, 1 * MS), SK_STATUS_OK);
    SkRobinEvent ev;
    uint8_t small[4], big[64];
    int retransmits = 0;
    for (int guard = 0; guard < 10; guard++) {
        SkStatus s = sk_robin_poll_event(r, &ev, small, sizeof small);
        if (s == SK_STATUS_EMPTY) break;
        if (s == SK_STATUS_BUFFER_TOO_SMALL) {
            CHECK_EQ(ev.kind, SK_ROBIN_EVENT_KIND_RETRANSMIT);
            CHECK_EQ(ev.datagram_len, 24);
            /* Still queued: a large buffer gets it. */
            CHECK_EQ(sk_robin_poll_event(r, &ev, big, sizeof big), SK_STATUS_OK);
            CHECK_EQ(ev.kind, SK_ROBIN_EVENT_KIND_RETRANSMIT);
            dgram(1, d);
            CHECK(memcmp(big, d, 24) == 0);
            retransmits++;
        } else {
            CHECK_EQ(s, SK_STATUS_OK);
            CHECK(ev.kind != SK_ROBIN_EVENT_KIND_RETRANSMIT);
            if (ev.kind == SK_ROBIN_EVENT_KIND_LOST) CHECK_EQ(ev.packet_number, -1);
        }
    }
    CHECK_EQ(retransmits, 1);
    sk_quack_free(proxy);
    sk_robin_free(r);
}

static void time_rule_declares_a_loss_with_one_later_receipt(void) {
    SkRobin *r = robin_t8();
    SkQuack *proxy = NULL;
    sk_quack_new(8, &proxy);
    deliver_quack(r, proxy, 0);
    uint8_t d[24];
    for (uint32_t i = 0; i < 2; i++) {
        dgram(i, d);
        sk_robin_on_sent(r, i * MS, d, sizeof d, i, NULL);
    }
    sk_quack_insert(proxy, 1); /* 0 lost, only one later receipt */
    CHECK_EQ(deliver_quack(r, proxy, 3 * MS), SK_STATUS_OK);
    SkRobinEvent lost;
    CHECK_EQ(count_lost(r, &lost, NULL, NULL), 0);
    uint64_t deadline = 0;
    CHECK_EQ(sk_robin_poll_timeout(r, &deadline), SK_STATUS_OK);
    CHECK(deadline > 3 * MS);
    CHECK_EQ(sk_robin_handle_timeout(r, deadline - 1), SK_STATUS_OK);
    CHECK_EQ(count_lost(r, &lost, NULL, NULL), 0);
    CHECK_EQ(sk_robin_handle_timeout(r, deadline), SK_STATUS_OK);
    CHECK_EQ(count_lost(r, &lost, NULL, NULL), 1);
    CHECK_EQ(lost.id, 0);
    CHECK_EQ(lost.rule, SK_LOSS_RULE_TIME);
    sk_quack_free(proxy);
    sk_robin_free(r);
}

static void bad_quacks_are_rejected_without_changing_state(void) {
    SkRobin *r = robin_t8();
    const uint8_t garbage[7] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3};
    CHECK_EQ(sk_robin_on_quack(r, 0, garbage, sizeof garbage), SK_STATUS_MALFORMED);
    SkQuack *t4 = NULL;
    sk_quack_new(4, &t4);
    CHECK_EQ(deliver_quack(r, t4, 0), SK_STATUS_THRESHOLD_MISMATCH);
    SkQuack *p = NULL;
    sk_quack_new(8, &p);
    deliver_quack(r, p, 10); /* baseline (empty: nothing sent yet) */
    uint8_t d[24];
    dgram(1, d);
    sk_robin_on_sent(r, 11, d, sizeof d, 0, NULL);
    sk_quack_insert(p, 1);
    sk_quack_insert(p, 2);
    CHECK_EQ(deliver_quack(r, p, 20), SK_STATUS_NEVER_SENT); /* 2 receipts, 1 send */
    const uint8_t tiny[2] = {1, 2};
    CHECK_EQ(sk_robin_on_sent(r, 30, tiny, sizeof tiny, 1, NULL), SK_STATUS_NO_IDENTIFIER);
    SkRobinStats st;
    sk_robin_stats(r, &st);
    CHECK_EQ(st.wire_errors, 1);
    CHECK_EQ(st.threshold_mismatch, 1);
    CHECK_EQ(st.never_sent, 1);
    CHECK_EQ(st.unidentifiable, 1);
    CHECK_EQ(st.outstanding, 1);
    double ratio = 0;
    CHECK_EQ(sk_robin_rtt_ratio(r, &ratio), SK_STATUS_EMPTY);
    sk_quack_free(t4);
    sk_quack_free(p);
    sk_robin_free(r);
}

int main(void) {
    RUN(loss_is_flagged_after_three_later_receipts);
    RUN(retransmission_waits_for_a_large_enough_buffer);
    RUN(time_rule_declares_a_loss_with_one_later_receipt);
    RUN(bad_quacks_are_rejected_without_changing_state);
    return REPORT();
}
