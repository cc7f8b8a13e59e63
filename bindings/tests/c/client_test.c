/* The client session without a proxy on the path: discovery requests on the base socket, retry
 * timers, fallback to end-to-end, pass-through of base datagrams, forged sidekick frames. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "harness.h"
#include "sidekick.h"

#define MS 1000ull

static SkClient *robin_client(void) {
    SkSessionConfig cfg;
    CHECK_EQ(sk_session_config_robin(30, 10, &cfg), SK_STATUS_OK);
    CHECK(cfg.robin && !cfg.packrat);
    CHECK_EQ(cfg.quack_threshold, 10);
    CHECK_EQ(cfg.quack_on_gap_percent, 0);
    CHECK_EQ(cfg.identifier.offset, -4);
    CHECK_EQ(cfg.identifier.width, 4);
    SkClient *c = NULL;
    CHECK_EQ(sk_client_new(&cfg, &c), SK_STATUS_OK);
    return c;
}

static void discovery_retries_then_falls_back_without_a_proxy(void) {
    SkClient *c = robin_client();
    uint64_t now = 10 * MS;
    CHECK_EQ(sk_client_start(c, now), SK_STATUS_OK);
    CHECK_EQ(sk_client_start(c, now), SK_STATUS_PROTOCOL);
    uint8_t buf[1500];
    size_t len = 0, alen = 0;
    SkDestination dest;
    struct sockaddr_storage addr;
    int requests = 0, fallbacks = 0;
    SkFallbackCause cause = SK_FALLBACK_CAUSE_NONE;
    for (int step = 0; step < 50; step++) {
        while (sk_client_poll_transmit(c, buf, sizeof buf, &len, &dest, &addr, &alen) ==
               SK_STATUS_OK) {
            CHECK_EQ(dest, SK_DESTINATION_BASE);
            CHECK_EQ(len, 128); /* the discovery request travels inline on the base 4-tuple */
            requests++;
        }
        SkClientEvent ev;
        while (sk_client_poll_event(c, &ev) == SK_STATUS_OK) {
            if (ev.kind == SK_CLIENT_EVENT_KIND_FALLBACK) {
                fallbacks++;
                cause = ev.fallback_cause;
            }
        }
        uint64_t deadline = 0;
        if (sk_client_poll_timeout(c, &deadline) != SK_STATUS_OK) break;
        CHECK(deadline >= now);
        now = deadline;
        CHECK_EQ(sk_client_handle_timeout(c, now), SK_STATUS_OK);
    }
    CHECK_EQ(requests, 4); /* the protocol's discovery attempts */
    CHECK_EQ(fallbacks, 1);
    CHECK_EQ(cause, SK_FALLBACK_CAUSE_NO_PROXY);
    bool active = true;
    SkFallbackCause state = SK_FALLBACK_CAUSE_NONE;
    CHECK_EQ(sk_client_state(c, &active, &state), SK_STATUS_OK);
    CHECK(!active);
    CHECK_EQ(state, SK_FALLBACK_CAUSE_NO_PROXY);
    /* Backoff doubles from 250 ms: the fallback comes after 250 + 500 + 1000 + 2000 ms. */
    CHECK(now - 10 * MS >= 3750 * MS);
    sk_client_free(c);
}

static void base_datagrams_pass_through_unchanged(void) {
    SkClient *c = robin_client();
    sk_client_start(c, 0);
    uint8_t d[40];
    for (int i = 0; i < 40; i++) d[i] = (uint8_t)(i * 7);
    bool logged = true;
    CHECK_EQ(sk_client_on_base_sent(c, 1 * MS, d, sizeof d, &logged), SK_STATUS_OK);
    CHECK(!logged); /* no session yet: Robin is not running */
    CHECK_EQ(sk_client_on_base_received(c, 2 * MS, d, sizeof d), SK_STATUS_OK);
    uint8_t out[64];
    size_t len = 0;
    CHECK_EQ(sk_client_poll_deliver(c, out, 8, &len), SK_STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(len, 40);
    CHECK_EQ(sk_client_poll_deliver(c, out, sizeof out, &len), SK_STATUS_OK);
    CHECK(len == 40 && memcmp(out, d, 40) == 0);
    CHECK_EQ(sk_client_poll_deliver(c, out, sizeof out, &len), SK_STATUS_EMPTY);
    sk_client_free(c);
}

static void forged_sidekick_frames_are_counted_not_fatal(void) {
    SkClient *c = robin_client();
    sk_client_start(c, 0);
    struct sockaddr_in from;
    memset(&from, 0, sizeof from);
    from.sin_family = AF_INET;
    from.sin_port = htons(7000);
    from.sin_addr.s_addr = htonl(0xC0000201u); /* 192.0.2.1 */
    uint8_t junk[60];
    for (int i = 0; i < 60; i++) junk[i] = (uint8_t)(i * 31 + 5);
    CHECK_EQ(sk_client_on_sidekick_received(c, 1 * MS, (const struct sockaddr *)&from,
                                            sizeof from, junk, sizeof junk),
             SK_STATUS_OK);
    SkClientStats st;
    CHECK_EQ(sk_client_stats(c, &st), SK_STATUS_OK);
    CHECK_EQ(st.rejected_frames, 1);
    SkFallbackCause cause = SK_FALLBACK_CAUSE_APPLICATION;
    sk_client_state(c, NULL, &cause);
    CHECK_EQ(cause, SK_FALLBACK_CAUSE_NONE);
    /* A truncated address is refused before anything is read. */
    CHECK_EQ(sk_client_on_sidekick_received(c, 1 * MS, (const struct sockaddr *)&from, 3, junk,
                                            sizeof junk),
             SK_STATUS_INVALID_ARGUMENT);
    /* The application may switch the sidekick off at any time. */
    CHECK_EQ(sk_client_fall_back(c, 2 * MS), SK_STATUS_OK);
    SkClientEvent ev;
    int seen = 0;
    while (sk_client_poll_event(c, &ev) == SK_STATUS_OK)
        if (ev.kind == SK_CLIENT_EVENT_KIND_FALLBACK &&
            ev.fallback_cause == SK_FALLBACK_CAUSE_APPLICATION)
            seen++;
    CHECK_EQ(seen, 1);
    sk_client_free(c);
}

static void invalid_session_configurations_are_refused(void) {
    SkSessionConfig cfg;
    SkClient *c = NULL;
    sk_session_config_robin(30, 0, &cfg); /* t = 0 */
    CHECK_EQ(sk_client_new(&cfg, &c), SK_STATUS_INVALID_ARGUMENT);
    sk_session_config_robin(30, 10, &cfg);
    cfg.quack_on_gap_percent = 50; /* below 110: ordinary jitter would trigger it */
    CHECK_EQ(sk_client_new(&cfg, &c), SK_STATUS_INVALID_ARGUMENT);
    CHECK(c == NULL);
    cfg.quack_on_gap_percent = 150; /* a quACK with the packet after a silence */
    CHECK_EQ(sk_client_new(&cfg, &c), SK_STATUS_OK);
    sk_client_free(c);
    c = NULL;
    CHECK_EQ(cfg.quack_on_gap_percent, 150);
    /* Identifier widths: 2 and 8 are sessions the protocol negotiates, 3 is not a width. */
    cfg.identifier.width = 2;
    cfg.identifier.offset = -2;
    CHECK_EQ(sk_client_new(&cfg, &c), SK_STATUS_OK);
    sk_client_free(c);
    c = NULL;
    cfg.identifier.width = 8;
    cfg.identifier.offset = -8;
    CHECK_EQ(sk_client_new(&cfg, &c), SK_STATUS_OK);
    sk_client_free(c);
    c = NULL;
    cfg.identifier.width = 3;
    CHECK_EQ(sk_client_new(&cfg, &c), SK_STATUS_INVALID_ARGUMENT);
    CHECK(c == NULL);
    cfg.identifier.width = 4;
    cfg.identifier.offset = -4;
    cfg.robin = 0; /* neither mode */
    CHECK_EQ(sk_client_new(&cfg, &c), SK_STATUS_INVALID_ARGUMENT);
    CHECK(c == NULL);
    CHECK_EQ(sk_session_config_packrat(&cfg), SK_STATUS_OK);
    CHECK(cfg.packrat && !cfg.robin);
    CHECK_EQ(cfg.reorder_delay_ms, 30);
    CHECK_EQ(cfg.local_symbols, 160);
    cfg.robin = 1; /* both, Robin fields from the Robin preset */
    SkSessionConfig r;
    sk_session_config_robin(30, 10, &r);
    cfg.quack_interval_ms = r.quack_interval_ms;
    cfg.quack_threshold = r.quack_threshold;
    CHECK_EQ(sk_client_new(&cfg, &c), SK_STATUS_OK);
    CHECK_EQ(sk_client_keylog_line(c, (const uint8_t *)"garbage", 7), SK_STATUS_MALFORMED);
    CHECK_EQ(sk_client_set_dcid_len(c, 1, 21), SK_STATUS_INVALID_ARGUMENT);
    CHECK_EQ(sk_client_set_dcid_len(c, 1, 8), SK_STATUS_OK);
    sk_client_free(c);
}

int main(void) {
    RUN(discovery_retries_then_falls_back_without_a_proxy);
    RUN(base_datagrams_pass_through_unchanged);
    RUN(forged_sidekick_frames_are_counted_not_fatal);
    RUN(invalid_session_configurations_are_refused);
    return REPORT();
}
