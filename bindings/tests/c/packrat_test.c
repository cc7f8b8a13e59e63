/* Packrat receiver: in-order delivery, holding after a gap, release on fill or window expiry,
 * eACK production. */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "sidekick.h"

#define MS 1000ull

static void dgram(uint32_t i, uint8_t out[24]) {
    memset(out, 0x55, 20);
    memcpy(out + 20, &i, 4); /* little-endian hosts; the identifier is the last 4 bytes */
}

static SkPackrat *receiver(void) {
    SkPackratConfig c;
    CHECK_EQ(sk_packrat_config_default(&c), SK_STATUS_OK);
    CHECK_EQ(c.reorder_window_us, 30 * MS);
    CHECK_EQ(c.eack_every_packets, 16);
    SkPackrat *p = NULL;
    CHECK_EQ(sk_packrat_new(&c, &p), SK_STATUS_OK);
    return p;
}

static void receive(SkPackrat *p, uint64_t now, uint32_t pn) {
    uint8_t d[24];
    dgram(pn, d);
    CHECK_EQ(sk_packrat_on_received(p, now, d, sizeof d, (int64_t)pn), SK_STATUS_OK);
}

/* Pops every ready datagram; returns how many, their identifiers in `ids`. */
static int ready(SkPackrat *p, uint32_t *ids, int max) {
    int n = 0;
    uint8_t buf[64];
    size_t len = 0;
    SkStatus s;
    while ((s = sk_packrat_poll_ready(p, buf, sizeof buf, &len)) == SK_STATUS_OK) {
        CHECK_EQ(len, 24);
        if (n < max) memcpy(&ids[n], buf + 20, 4);
        n++;
    }
    CHECK_EQ(s, SK_STATUS_EMPTY);
    return n;
}

static void in_order_datagrams_are_delivered_at_once(void) {
    SkPackrat *p = receiver();
    for (uint32_t i = 0; i < 5; i++) receive(p, i * MS, i);
    uint32_t ids[8];
    CHECK_EQ(ready(p, ids, 8), 5);
    for (uint32_t i = 0; i < 5; i++) CHECK_EQ(ids[i], i);
    SkPackratStats st;
    sk_packrat_stats(p, &st);
    CHECK_EQ(st.held, 0);
    CHECK_EQ(st.received, 5);
    sk_packrat_free(p);
}

static void gap_holds_later_datagrams_until_filled(void) {
    SkPackrat *p = receiver();
    uint32_t ids[8];
    receive(p, 0, 0);
    receive(p, 1 * MS, 2); /* 1 is missing: 2 is held */
    receive(p, 2 * MS, 3);
    CHECK_EQ(ready(p, ids, 8), 1);
    CHECK_EQ(ids[0], 0);
    SkPackratStats st;
    sk_packrat_stats(p, &st);
    CHECK_EQ(st.held_now, 2);
    CHECK_EQ(st.open_gaps, 1);
    receive(p, 5 * MS, 1); /* the proxy's retransmission */
    CHECK_EQ(ready(p, ids, 8), 3);
    CHECK(ids[0] == 1 && ids[1] == 2 && ids[2] == 3);
    sk_packrat_stats(p, &st);
    CHECK_EQ(st.gaps_filled, 1);
    CHECK_EQ(st.held_now, 0);
    sk_packrat_free(p);
}

static void reorder_window_expiry_releases_held_datagrams(void) {
    SkPackrat *p = receiver();
    uint32_t ids[8];
    uint64_t t0 = 77 * MS;
    receive(p, t0, 0);
    receive(p, t0 + 1 * MS, 2);
    CHECK_EQ(ready(p, ids, 8), 1);
    uint64_t deadline = 0;
    CHECK_EQ(sk_packrat_poll_timeout(p, &deadline), SK_STATUS_OK);
    CHECK(deadline <= t0 + 31 * MS); /* the gap's window, or the earlier eACK timer */
    CHECK_EQ(sk_packrat_handle_timeout(p, t0 + 30 * MS), SK_STATUS_OK);
    CHECK_EQ(ready(p, ids, 8), 0); /* the window is 30 ms from the gap (seen at t0 + 1 ms) */
    CHECK_EQ(sk_packrat_handle_timeout(p, t0 + 31 * MS), SK_STATUS_OK);
    CHECK_EQ(ready(p, ids, 8), 1);
    CHECK_EQ(ids[0], 2);
    SkPackratStats st;
    sk_packrat_stats(p, &st);
    CHECK_EQ(st.gaps_expired, 1);
    sk_packrat_free(p);
}

static void eacks_are_produced_on_the_packet_count(void) {
    SkPackrat *p = receiver();
    uint8_t buf[4096];
    size_t len = 0;
    uint64_t now = 0;
    /* The first packet makes an eACK due at once (no eACK sent yet). */
    receive(p, now, 0);
    CHECK_EQ(sk_packrat_poll_eack(p, now, buf, sizeof buf, &len), SK_STATUS_OK);
    CHECK(len > 0);
    CHECK_EQ(sk_packrat_poll_eack(p, now, buf, sizeof buf, &len), SK_STATUS_EMPTY);
    /* 15 more packets within 1 ms: neither the count (16) nor the 10 ms interval is reached. */
    for (uint32_t i = 1; i < 16; i++) receive(p, now + i * 50, i);
    CHECK_EQ(sk_packrat_poll_eack(p, 1 * MS, buf, sizeof buf, &len), SK_STATUS_EMPTY);
    receive(p, 1 * MS, 16);
    /* Due by count; a buffer that is too small keeps it. */
    uint8_t tiny[2];
    size_t need = 0;
    CHECK_EQ(sk_packrat_poll_eack(p, 1 * MS, tiny, sizeof tiny, &need),
             SK_STATUS_BUFFER_TOO_SMALL);
    CHECK(need > sizeof tiny);
    CHECK_EQ(sk_packrat_poll_eack(p, 1 * MS, buf, sizeof buf, &len), SK_STATUS_OK);
    CHECK_EQ(len, need);
    SkPackratStats st;
    sk_packrat_stats(p, &st);
    CHECK_EQ(st.eacks, 2);
    CHECK(st.eack_symbols >= 2);
    sk_packrat_free(p);
}

static void datagrams_without_packet_numbers_pass_straight_through(void) {
    SkPackrat *p = receiver();
    uint8_t d[24];
    dgram(9, d);
    CHECK_EQ(sk_packrat_on_received(p, 0, d, sizeof d, -1), SK_STATUS_OK);
    uint8_t buf[24];
    size_t len = 0;
    CHECK_EQ(sk_packrat_poll_ready(p, buf, 10, &len), SK_STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(len, 24);
    CHECK_EQ(sk_packrat_poll_ready(p, buf, sizeof buf, &len), SK_STATUS_OK);
    CHECK(memcmp(buf, d, 24) == 0);
    SkPackratStats st;
    sk_packrat_stats(p, &st);
    CHECK_EQ(st.no_packet_number, 1);
    SkPackratConfig c;
    sk_packrat_config_default(&c);
    c.local_symbols = 0;
    SkPackrat *bad = NULL;
    CHECK_EQ(sk_packrat_new(&c, &bad), SK_STATUS_INVALID_ARGUMENT);
    sk_packrat_config_default(&c);
    c.success_probability = 1.0;
    CHECK_EQ(sk_packrat_new(&c, &bad), SK_STATUS_INVALID_ARGUMENT);
    sk_packrat_config_default(&c);
    c.identifier.mode = 7;
    CHECK_EQ(sk_packrat_new(&c, &bad), SK_STATUS_INVALID_ARGUMENT);
    CHECK(bad == NULL);
    /* Identifier widths are 2, 4 or 8 bytes. */
    sk_packrat_config_default(&c);
    c.identifier.width = 3;
    CHECK_EQ(sk_packrat_new(&c, &bad), SK_STATUS_INVALID_ARGUMENT);
    CHECK(bad == NULL);
    sk_packrat_free(p);
}

/* The identifier width applies to Packrat (Sidekick (NSDI '24) §3): the eACK's header names it
 * (byte 1) and its symbols are 5 + width bytes each. */
static void eacks_carry_the_configured_identifier_width(void) {
    static const uint8_t widths[3] = {2, 4, 8};
    size_t lens[3];
    for (int k = 0; k < 3; k++) {
        SkPackratConfig c;
        sk_packrat_config_default(&c);
        c.identifier.width = widths[k];
        c.identifier.offset = -(int32_t)widths[k];
        SkPackrat *p = NULL;
        CHECK_EQ(sk_packrat_new(&c, &p), SK_STATUS_OK);
        receive(p, 0, 0);
        uint8_t buf[4096];
        size_t len = 0;
        CHECK_EQ(sk_packrat_poll_eack(p, 0, buf, sizeof buf, &len), SK_STATUS_OK);
        CHECK(len > 12);
        CHECK_EQ(buf[1], widths[k]);
        CHECK_EQ((len - 12) % (5u + widths[k]), 0);
        lens[k] = len;
        SkPackratStats st;
        sk_packrat_stats(p, &st);
        CHECK_EQ(st.unidentifiable, 0);
        sk_packrat_free(p);
    }
    CHECK(lens[0] < lens[1] && lens[1] < lens[2]);
}

int main(void) {
    RUN(in_order_datagrams_are_delivered_at_once);
    RUN(gap_holds_later_datagrams_until_filled);
    RUN(reorder_window_expiry_releases_held_datagrams);
    RUN(eacks_are_produced_on_the_packet_count);
    RUN(datagrams_without_packet_numbers_pass_straight_through);
    RUN(eacks_carry_the_configured_identifier_width);
    return REPORT();
}
