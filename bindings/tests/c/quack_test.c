/* quACK surface: insert/remove/count/serialize/parse/subtract/decode against a log. */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "sidekick.h"

static uint32_t id_of(uint32_t i) { return i * 2654435761u + 12345u; }

static void hundred_ids_five_removed_decode_to_exactly_those(void) {
    uint32_t log[100];
    const size_t lost[5] = {7, 23, 42, 77, 99};
    SkQuack *sender = NULL, *proxy = NULL, *parsed = NULL;
    CHECK_EQ(sk_quack_new(10, &sender), SK_STATUS_OK);
    CHECK_EQ(sk_quack_new(10, &proxy), SK_STATUS_OK);
    for (uint32_t i = 0; i < 100; i++) {
        log[i] = id_of(i);
        CHECK_EQ(sk_quack_insert(sender, log[i]), SK_STATUS_OK);
        int dropped = 0;
        for (int k = 0; k < 5; k++) dropped |= (lost[k] == i);
        if (!dropped) CHECK_EQ(sk_quack_insert(proxy, log[i]), SK_STATUS_OK);
    }
    /* The proxy's quACK crosses the wire. */
    uint8_t wire[256];
    size_t len = 0;
    CHECK_EQ(sk_quack_serialize(proxy, wire, sizeof wire, &len), SK_STATUS_OK);
    CHECK_EQ(len, 8 + 4 + 4 * 10);
    CHECK_EQ(sk_quack_parse(wire, len, &parsed), SK_STATUS_OK);
    uint32_t count = 0;
    CHECK_EQ(sk_quack_count(parsed, &count), SK_STATUS_OK);
    CHECK_EQ(count, 95);
    CHECK_EQ(sk_quack_subtract(sender, parsed), SK_STATUS_OK);
    CHECK_EQ(sk_quack_count(sender, &count), SK_STATUS_OK);
    CHECK_EQ(count, 5);

    size_t idx[10];
    uint32_t ids[10];
    size_t n = 0;
    CHECK_EQ(sk_quack_decode(sender, log, 100, idx, ids, 10, &n), SK_STATUS_OK);
    CHECK_EQ(n, 5);
    for (size_t k = 0; k < 5 && k < n; k++) {
        CHECK_EQ(idx[k], lost[k]);
        CHECK_EQ(ids[k], log[lost[k]]);
    }
    /* A buffer for fewer entries than are missing: the needed count comes back. */
    CHECK_EQ(sk_quack_decode(sender, log, 100, idx, NULL, 2, &n), SK_STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(n, 5);
    sk_quack_free(sender);
    sk_quack_free(proxy);
    sk_quack_free(parsed);
}

static void wire_form_round_trips(void) {
    SkQuack *q = NULL, *back = NULL;
    CHECK_EQ(sk_quack_new(4, &q), SK_STATUS_OK);
    uint32_t last = 0;
    CHECK_EQ(sk_quack_last_value(q, &last), SK_STATUS_EMPTY);
    sk_quack_insert(q, 9);
    sk_quack_insert(q, 4000000000u);
    size_t enc = 0, threshold = 0;
    CHECK_EQ(sk_quack_encoded_len(q, &enc), SK_STATUS_OK);
    CHECK_EQ(enc, 8 + 4 + 16);
    uint8_t a[64], b[64];
    size_t la = 0, lb = 0;
    /* Too small: nothing written, needed length reported. */
    CHECK_EQ(sk_quack_serialize(q, a, 3, &la), SK_STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(la, enc);
    CHECK_EQ(sk_quack_serialize(q, a, sizeof a, &la), SK_STATUS_OK);
    CHECK_EQ(sk_quack_parse(a, la, &back), SK_STATUS_OK);
    CHECK_EQ(sk_quack_threshold(back, &threshold), SK_STATUS_OK);
    CHECK_EQ(threshold, 4);
    CHECK_EQ(sk_quack_last_value(back, &last), SK_STATUS_OK);
    CHECK_EQ(last, 4000000000u);
    CHECK_EQ(sk_quack_serialize(back, b, sizeof b, &lb), SK_STATUS_OK);
    CHECK(la == lb && memcmp(a, b, la) == 0);
    /* Every truncation of a valid quACK is refused. */
    for (size_t cut = 0; cut < la; cut++) {
        SkQuack *t = NULL;
        CHECK_EQ(sk_quack_parse(a, cut, &t), SK_STATUS_MALFORMED);
        CHECK(t == NULL);
    }
    sk_quack_free(q);
    sk_quack_free(back);
}

static void too_many_missing_is_reported(void) {
    uint32_t log[20];
    SkQuack *sent = NULL, *got = NULL;
    sk_quack_new(4, &sent);
    sk_quack_new(4, &got);
    for (uint32_t i = 0; i < 20; i++) {
        log[i] = id_of(i);
        sk_quack_insert(sent, log[i]);
        if (i >= 6) sk_quack_insert(got, log[i]); /* 6 missing, t = 4 */
    }
    sk_quack_subtract(sent, got);
    size_t n = 99;
    CHECK_EQ(sk_quack_decode(sent, log, 20, NULL, NULL, 0, &n), SK_STATUS_TOO_MANY_MISSING);
    sk_quack_free(sent);
    sk_quack_free(got);
}

static void identical_resend_missing_once_is_indeterminate(void) {
    /* Datagram 2 was sent twice (same identifier) and one copy was lost: which one is unknown. */
    uint32_t log[5] = {11, 22, 33, 22, 44};
    SkQuack *sent = NULL, *got = NULL;
    sk_quack_new(4, &sent);
    sk_quack_new(4, &got);
    sk_quack_insert_batch(sent, log, 5);
    sk_quack_insert(got, 11);
    sk_quack_insert(got, 22);
    sk_quack_insert(got, 33);
    sk_quack_insert(got, 44);
    sk_quack_subtract(sent, got);
    size_t idx[4], n = 99;
    CHECK_EQ(sk_quack_decode(sent, log, 5, idx, NULL, 4, &n), SK_STATUS_INDETERMINATE);
    CHECK_EQ(n, 0);
    sk_quack_free(sent);
    sk_quack_free(got);
}

static void remove_inverts_insert_and_self_subtraction_empties(void) {
    SkQuack *q = NULL;
    sk_quack_new(3, &q);
    sk_quack_insert(q, 5);
    sk_quack_insert(q, 6);
    sk_quack_remove(q, 5);
    uint32_t count = 0;
    sk_quack_count(q, &count);
    CHECK_EQ(count, 1);
    uint32_t log[1] = {6};
    size_t n = 0;
    uint32_t ids[3];
    CHECK_EQ(sk_quack_decode(q, log, 1, NULL, ids, 3, &n), SK_STATUS_OK);
    CHECK_EQ(n, 1);
    CHECK_EQ(ids[0], 6);
    CHECK_EQ(sk_quack_subtract(q, q), SK_STATUS_OK);
    sk_quack_count(q, &count);
    CHECK_EQ(count, 0);
    CHECK_EQ(sk_quack_decode(q, log, 1, NULL, ids, 3, &n), SK_STATUS_OK);
    CHECK_EQ(n, 0);
    sk_quack_free(q);
}

static void identifiers_are_read_from_datagrams(void) {
    const uint8_t d[9] = {9, 8, 7, 6, 5, 4, 3, 2, 1};
    uint32_t id = 0;
    CHECK_EQ(sk_identifier_at(d, 9, -4, &id), SK_STATUS_OK);
    CHECK_EQ(id, 0x01020304u);
    CHECK_EQ(sk_identifier_at(d, 9, 0, &id), SK_STATUS_OK);
    CHECK_EQ(id, 0x06070809u);
    CHECK_EQ(sk_identifier_at(d, 3, -4, &id), SK_STATUS_NO_IDENTIFIER);
    CHECK_EQ(sk_identifier_at(d, 9, 6, &id), SK_STATUS_NO_IDENTIFIER);
}

int main(void) {
    RUN(hundred_ids_five_removed_decode_to_exactly_those);
    RUN(wire_form_round_trips);
    RUN(too_many_missing_is_reported);
    RUN(identical_resend_missing_once_is_indeterminate);
    RUN(remove_inverts_insert_and_self_subtraction_empties);
    RUN(identifiers_are_read_from_datagrams);
    return REPORT();
}
