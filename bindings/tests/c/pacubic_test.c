/* PACUBIC: quACK-detected losses shrink the window by r(1 - beta*) instead of 1 - beta*, the
 * window regrows faster, one reduction per recovery period, argument checks. */
#include <math.h>
#include <stdint.h>

#include "harness.h"
#include "sidekick.h"

#define MS 1000ull

static SkPacubic *controller(void) {
    SkPacubicConfig c;
    CHECK_EQ(sk_pacubic_config_default(&c), SK_STATUS_OK);
    CHECK(c.beta_star == 0.7 && c.c_star == 0.4);
    c.mss = 1000;
    c.initial_window = 100000;
    c.minimum_window = 2000;
    c.fast_convergence = 0;
    SkPacubic *cc = NULL;
    CHECK_EQ(sk_pacubic_new(&c, &cc), SK_STATUS_OK);
    return cc;
}

static uint64_t cwnd(SkPacubic *cc) {
    uint64_t w = 0;
    CHECK_EQ(sk_pacubic_cwnd(cc, &w), SK_STATUS_OK);
    return w;
}

static void quack_loss_with_small_r_shrinks_less_than_e2e_loss(void) {
    SkPacubic *e2e = controller(), *near = controller();
    bool reduced = false;
    CHECK_EQ(sk_pacubic_on_loss(e2e, 10 * MS, 5 * MS, SK_CONGESTION_SOURCE_END_TO_END, 0.0,
                                &reduced),
             SK_STATUS_OK);
    CHECK(reduced);
    CHECK_EQ(sk_pacubic_on_loss(near, 10 * MS, 5 * MS, SK_CONGESTION_SOURCE_QUACK, 0.1, &reduced),
             SK_STATUS_OK);
    CHECK(reduced);
    /* beta* = 0.7 end to end; beta = 1 - 0.1 * 0.3 = 0.97 for the quACK (Sidekick (NSDI '24) §4.3.2). */
    CHECK_EQ(cwnd(e2e), 70000);
    CHECK_EQ(cwnd(near), 97000);
    uint64_t ss = 0;
    CHECK_EQ(sk_pacubic_ssthresh(near, &ss), SK_STATUS_OK);
    CHECK_EQ(ss, 97000);
    /* With r = 1 a quACK event is exactly a CUBIC event. */
    SkPacubic *r1 = controller();
    sk_pacubic_on_loss(r1, 10 * MS, 5 * MS, SK_CONGESTION_SOURCE_QUACK, 1.0, NULL);
    CHECK_EQ(cwnd(r1), 70000);
    SkPacubicStats st;
    sk_pacubic_stats(near, &st);
    CHECK_EQ(st.quack_events, 1);
    CHECK_EQ(st.e2e_events, 0);
    sk_pacubic_free(e2e);
    sk_pacubic_free(near);
    sk_pacubic_free(r1);
}

/* Time (ms after the loss) until the window is back at 100 000 bytes, acking a window per
 * 100 ms RTT in 10 ms steps. */
static uint64_t time_to_regrow(SkPacubic *cc, uint64_t loss_at) {
    for (uint64_t t = loss_at + 10 * MS; t < loss_at + 20000 * MS; t += 10 * MS) {
        uint64_t w = cwnd(cc);
        if (w >= 100000) return (t - loss_at) / MS;
        CHECK_EQ(sk_pacubic_on_ack(cc, t, t - 100 * MS + 1, w / 10, 100 * MS), SK_STATUS_OK);
    }
    return UINT64_MAX;
}

static void window_regrows_faster_after_a_quack_loss(void) {
    SkPacubic *e2e = controller(), *near = controller();
    uint64_t at = 1000 * MS;
    sk_pacubic_on_loss(e2e, at, at - 50 * MS, SK_CONGESTION_SOURCE_END_TO_END, 0.0, NULL);
    sk_pacubic_on_loss(near, at, at - 50 * MS, SK_CONGESTION_SOURCE_QUACK, 0.1, NULL);
    uint64_t te2e = time_to_regrow(e2e, at), tnear = time_to_regrow(near, at);
    printf("     regrow to 100 kB: e2e %llu ms, quack(r=0.1) %llu ms\n",
           (unsigned long long)te2e, (unsigned long long)tnear);
    CHECK(tnear < te2e);
    CHECK(te2e != UINT64_MAX);
    /* K = r^(4/3) K*: with r = 0.1, K is ~21x shorter; the quACK epoch is back within 1 s. */
    CHECK(tnear < 1000);
    sk_pacubic_free(e2e);
    sk_pacubic_free(near);
}

static void one_reduction_per_recovery_period(void) {
    SkPacubic *cc = controller();
    bool reduced = false;
    sk_pacubic_on_loss(cc, 100 * MS, 90 * MS, SK_CONGESTION_SOURCE_END_TO_END, 0.0, &reduced);
    CHECK(reduced);
    /* Another packet sent before the reduction: same congestion event. */
    sk_pacubic_on_loss(cc, 110 * MS, 95 * MS, SK_CONGESTION_SOURCE_QUACK, 0.5, &reduced);
    CHECK(!reduced);
    CHECK_EQ(cwnd(cc), 70000);
    /* Acks of packets sent during recovery do not grow the window. */
    sk_pacubic_on_ack(cc, 120 * MS, 99 * MS, 5000, 100 * MS);
    CHECK_EQ(cwnd(cc), 70000);
    SkPacubicStats st;
    sk_pacubic_stats(cc, &st);
    CHECK_EQ(st.events_in_recovery, 1);
    sk_pacubic_free(cc);
}

static void slow_start_and_persistent_congestion(void) {
    SkPacubic *cc = controller();
    bool ss = false;
    CHECK_EQ(sk_pacubic_in_slow_start(cc, &ss), SK_STATUS_OK);
    CHECK(ss);
    uint64_t thresh = 0;
    sk_pacubic_ssthresh(cc, &thresh);
    CHECK(thresh == UINT64_MAX);
    sk_pacubic_on_ack(cc, 10 * MS, 1 * MS, 3000, 100 * MS);
    CHECK_EQ(cwnd(cc), 103000);
    sk_pacubic_on_persistent_congestion(cc, 20 * MS);
    CHECK_EQ(cwnd(cc), 2000);
    CHECK_EQ(sk_pacubic_on_mtu_update(cc, 1400), SK_STATUS_OK);
    CHECK_EQ(cwnd(cc), 2800);
    sk_pacubic_free(cc);
}

static void invalid_arguments_are_refused(void) {
    SkPacubic *cc = controller();
    CHECK_EQ(sk_pacubic_on_loss(cc, 1, 1, 7, 0.5, NULL), SK_STATUS_INVALID_ARGUMENT);
    CHECK_EQ(sk_pacubic_set_rtt_ratio(cc, NAN), SK_STATUS_INVALID_ARGUMENT);
    CHECK_EQ(sk_pacubic_set_rtt_ratio(cc, -1.0), SK_STATUS_INVALID_ARGUMENT);
    CHECK_EQ(sk_pacubic_on_mtu_update(cc, 0), SK_STATUS_INVALID_ARGUMENT);
    CHECK_EQ(cwnd(cc), 100000);
    SkPacubicConfig c;
    sk_pacubic_config_default(&c);
    c.beta_star = 1.5;
    SkPacubic *bad = NULL;
    CHECK_EQ(sk_pacubic_new(&c, &bad), SK_STATUS_INVALID_ARGUMENT);
    CHECK(bad == NULL);
    sk_pacubic_config_default(&c);
    c.mss = 0;
    CHECK_EQ(sk_pacubic_new(&c, &bad), SK_STATUS_INVALID_ARGUMENT);
    /* A null config means the defaults. */
    CHECK_EQ(sk_pacubic_new(NULL, &bad), SK_STATUS_OK);
    CHECK_EQ(cwnd(bad), 12000);
    sk_pacubic_free(bad);
    sk_pacubic_free(cc);
}

int main(void) {
    RUN(quack_loss_with_small_r_shrinks_less_than_e2e_loss);
    RUN(window_regrows_faster_after_a_quack_loss);
    RUN(one_reduction_per_recovery_period);
    RUN(slow_start_and_persistent_congestion);
    RUN(invalid_arguments_are_refused);
    return REPORT();
}
