/* Error codes at the boundary: null handles and pointers, garbage input, out-of-range
 * arguments. Nothing here may crash. */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "sidekick.h"

static void null_handles_are_refused_everywhere(void) {
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    size_t n = 0;
    uint8_t buf[16];
    CHECK_EQ(sk_quack_insert(NULL, 1), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_quack_count(NULL, &u32), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_quack_serialize(NULL, buf, sizeof buf, &n), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_quack_subtract(NULL, NULL), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_quack_decode(NULL, NULL, 0, NULL, NULL, 0, &n), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_robin_on_sent(NULL, 0, buf, sizeof buf, 0, NULL), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_robin_on_quack(NULL, 0, buf, sizeof buf), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_robin_poll_timeout(NULL, &u64), SK_STATUS_NULL_POINTER);
    // The first release's name still links and answers alike.
    CHECK_EQ(sk_robin_next_timeout(NULL, &u64), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_packrat_next_timeout(NULL, &u64), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_pacubic_cwnd(NULL, &u64), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_pacubic_on_loss(NULL, 0, 0, 0, 0.5, NULL), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_packrat_on_received(NULL, 0, buf, sizeof buf, 0), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_packrat_poll_eack(NULL, 0, buf, sizeof buf, &n), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_client_start(NULL, 0), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_client_poll_timeout(NULL, &u64), SK_STATUS_NULL_POINTER);
    /* Freeing null is a no-op. */
    sk_quack_free(NULL);
    sk_robin_free(NULL);
    sk_pacubic_free(NULL);
    sk_packrat_free(NULL);
    sk_client_free(NULL);
}

static void null_buffers_and_outputs_are_refused(void) {
    SkQuack *q = NULL;
    CHECK_EQ(sk_quack_new(4, NULL), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_quack_new(4, &q), SK_STATUS_OK);
    CHECK_EQ(sk_quack_count(q, NULL), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_quack_insert_batch(q, NULL, 3), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_quack_insert_batch(q, NULL, 0), SK_STATUS_OK); /* empty batch */
    size_t n = 0;
    CHECK_EQ(sk_quack_serialize(q, NULL, 64, &n), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_quack_serialize(q, NULL, 0, &n), SK_STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(n, 8 + 4 + 16);
    CHECK_EQ(sk_quack_decode(q, NULL, 5, NULL, NULL, 0, &n), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_quack_decode(q, NULL, 0, NULL, NULL, 0, NULL), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_quack_subtract(q, NULL), SK_STATUS_NULL_POINTER);
    SkRobin *r = NULL;
    CHECK_EQ(sk_robin_new(NULL, &r), SK_STATUS_OK); /* defaults */
    CHECK_EQ(sk_robin_poll_event(r, NULL, NULL, 0), SK_STATUS_NULL_POINTER);
    CHECK_EQ(sk_robin_on_quack(r, 0, NULL, 10), SK_STATUS_NULL_POINTER);
    SkClient *c = NULL;
    CHECK_EQ(sk_client_new(NULL, &c), SK_STATUS_NULL_POINTER);
    CHECK(c == NULL);
    sk_robin_free(r);
    sk_quack_free(q);
}

static void garbage_and_out_of_range_input_is_refused(void) {
    SkQuack *q = NULL;
    CHECK_EQ(sk_quack_new(SK_QUACK_MAX_THRESHOLD + 1, &q), SK_STATUS_INVALID_ARGUMENT);
    CHECK(q == NULL);
    CHECK_EQ(sk_quack_new(SK_QUACK_MAX_THRESHOLD, &q), SK_STATUS_OK);
    sk_quack_free(q);
    q = NULL;
    /* Pseudo-random garbage of every length up to 300 bytes never parses as a t = 10 quACK
     * by accident in a way that crashes; most lengths are refused outright. */
    uint8_t junk[300];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof junk; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (uint8_t)(x >> 16);
    }
    int refused = 0;
    for (size_t len = 0; len <= sizeof junk; len++) {
        SkQuack *p = NULL;
        SkStatus s = sk_quack_parse(junk, len, &p);
        CHECK(s == SK_STATUS_MALFORMED || s == SK_STATUS_OK);
        if (s == SK_STATUS_MALFORMED) refused++;
        sk_quack_free(p);
    }
    CHECK_EQ(refused, 301);
    /* A valid header with a wrong width (16-bit identifiers) is refused by the 32-bit API. */
    const uint8_t u16_quack[8 + 2 + 2] = {0x11, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK_EQ(sk_quack_parse(u16_quack, sizeof u16_quack, &q), SK_STATUS_MALFORMED);
    SkRobinConfig rc;
    sk_robin_config_default(&rc);
    rc.threshold = 100000;
    SkRobin *r = NULL;
    CHECK_EQ(sk_robin_new(&rc, &r), SK_STATUS_INVALID_ARGUMENT);
    sk_robin_config_default(&rc);
    rc.time_factor = -1.0;
    CHECK_EQ(sk_robin_new(&rc, &r), SK_STATUS_INVALID_ARGUMENT);
    CHECK(r == NULL);
}

int main(void) {
    RUN(null_handles_are_refused_everywhere);
    RUN(null_buffers_and_outputs_are_refused);
    RUN(garbage_and_out_of_range_input_is_refused);
    return REPORT();
}
