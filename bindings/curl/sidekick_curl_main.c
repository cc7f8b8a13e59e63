/* sidekick-curl: an HTTP/3 download or upload with libcurl, optionally through the sidekick
 * (sidekick_curl.h), printing the one-line JSON report of sidekick-transfer.
 *
 *   sidekick-curl URL [-o FILE] [--upload FILE | --upload-bytes N] [--sidekick]
 *                 [--sidekick-reorder-ms MS] [--sidekick-quack-interval-ms MS] [--insecure]
 *                 [--timeout SECONDS] [--check-pattern]
 *
 * It talks to the project's HTTP/3 servers (`sidekick-transfer server --http3`, quinn or
 * quiche): `GET /download/N` returns N bytes, `POST /upload/N` answers with the server's
 * 52-byte summary, `GET /stats` with the same summary of the server's connection. Goodput is
 * measured from the request (after the handshake) to the last byte received, as
 * sidekick-transfer measures it: for a download at the client, for an upload at the server
 * (the summary's wall-clock time of the last byte, when the clocks agree). The transport
 * counters of the data sender come from the server's summary for a download; for an upload
 * (curl is the sender, and libcurl does not expose its QUIC statistics) sent_packets is the
 * number of datagrams the relay forwarded, and lost_packets/retransmissions are null.
 *
 * Exit status 0 when the transfer completed (HTTP 200, all bytes); the JSON line is printed
 * either way, with "error" set on failure. */

#define _GNU_SOURCE

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sidekick_curl.h"

/* The servers' payload pattern: byte i of every 64 KiB chunk is i % 251 (quinn h3 server). */
#define PATTERN_CHUNK 65536
#define SUMMARY_LEN 52

typedef struct Transfer {
    FILE *out;                /* -o FILE, or NULL (discarded) */
    uint64_t received;        /* body bytes */
    bool check_pattern;
    uint64_t pattern_errors;
    uint8_t summary[SUMMARY_LEN];
    size_t summary_len;
    bool collect_summary;     /* the body is a summary */
    /* Upload source. */
    FILE *in;
    uint64_t upload_left;
    uint64_t upload_offset;
} Transfer;

typedef struct Summary {
    uint64_t bytes, first_byte_unix_ns, last_byte_unix_ns, sent_packets, lost_packets,
        retransmissions;
} Summary;

static uint64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static bool decode_summary(const uint8_t *b, size_t len, Summary *s) {
    if (len < SUMMARY_LEN || memcmp(b, "SKS1", 4) != 0)
        return false;
    uint64_t *f[6] = {&s->bytes, &s->first_byte_unix_ns, &s->last_byte_unix_ns,
                      &s->sent_packets, &s->lost_packets, &s->retransmissions};
    for (int i = 0; i < 6; i++)
        *f[i] = be64(b + 4 + 8 * i);
    return true;
}

static size_t on_body(char *data, size_t size, size_t n, void *arg) {
    Transfer *t = arg;
    size_t len = size * n;
    if (t->collect_summary) {
        size_t take = len;
        if (take > SUMMARY_LEN - t->summary_len)
            take = SUMMARY_LEN - t->summary_len;
        memcpy(t->summary + t->summary_len, data, take);
        t->summary_len += take;
        return len;
    }
    if (t->check_pattern) {
        for (size_t i = 0; i < len; i++) {
            uint64_t off = t->received + i;
            if ((uint8_t)data[i] != (uint8_t)((off % PATTERN_CHUNK) % 251))
                t->pattern_errors++;
        }
    }
    if (t->out && fwrite(data, 1, len, t->out) != len)
        return 0;
    t->received += len;
    return len;
}

static size_t on_upload(char *buf, size_t size, size_t n, void *arg) {
    Transfer *t = arg;
    size_t cap = size * n;
    if (t->in)
        return fread(buf, 1, cap, t->in);
    if (cap > t->upload_left)
        cap = (size_t)t->upload_left;
    for (size_t i = 0; i < cap; i++)
        buf[i] = (char)(((t->upload_offset + i) % PATTERN_CHUNK) % 251);
    t->upload_left -= cap;
    t->upload_offset += cap;
    return cap;
}

static uint64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void usage(void) {
    fprintf(stderr,
            "usage: sidekick-curl URL [-o FILE] [--upload FILE | --upload-bytes N] [--sidekick]\n"
            "                     [--sidekick-reorder-ms MS] [--sidekick-quack-interval-ms MS]\n"
            "                     [--insecure] [--timeout SECONDS] [--check-pattern]\n");
}

/* The URL of `path` on the same origin as `url` (scheme://authority). */
static char *same_origin(const char *url, const char *path) {
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *slash = strchr(p, '/');
    size_t origin = slash ? (size_t)(slash - url) : strlen(url);
    char *s = malloc(origin + strlen(path) + 1);
    if (!s)
        return NULL;
    memcpy(s, url, origin);
    strcpy(s + origin, path);
    return s;
}

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void print_sidekick(const SkCurlStats *s, bool upload) {
    const char *state;
    const char *cause = NULL;
    /* The adapter's own reason (no QUIC socket, relay trouble, unreachable peer) comes first:
     * the session's cause is then only the consequence ("application"). */
    const char *relay_cause = NULL;
    for (uint32_t bit = 1; bit; bit <<= 1)
        if ((s->reasons & bit) && bit != SK_CURL_REASON_SESSION_FALLBACK &&
            bit != SK_CURL_REASON_NO_KEYLOG) {
            relay_cause = sk_curl_reason_name(bit);
            break;
        }
    if (s->active) {
        state = "active";
    } else if (relay_cause) {
        state = "fallback";
        cause = relay_cause;
    } else if (s->fallback_cause != SK_FALLBACK_CAUSE_NONE) {
        state = "fallback";
        cause = sk_curl_fallback_cause_name(s->fallback_cause);
    } else {
        state = "discovering";
        cause = "discovery_unanswered";
    }
    printf(",\"sidekick\":{\"mode\":\"%s\",\"state\":\"%s\"", upload ? "robin" : "packrat", state);
    printf(",\"quacks\":%" PRIu64 ",\"inconsistent_quacks\":%" PRIu64 ",\"stale_quacks\":%" PRIu64,
           s->session.quacks, s->session.inconsistent_quacks, s->session.stale_quacks);
    printf(",\"eacks_sent\":%" PRIu64 ",\"eack_symbols\":%" PRIu64, s->session.eacks_sent,
           s->packrat.eack_symbols);
    printf(",\"losses_detected\":%" PRIu64 ",\"cc_events\":0,\"retransmissions\":%" PRIu64,
           s->robin.lost_by_reordering + s->robin.lost_by_time, s->session.retransmissions);
    printf(",\"held\":%" PRIu64 ",\"gaps_opened\":%" PRIu64 ",\"gaps_filled\":%" PRIu64
           ",\"gaps_expired\":%" PRIu64,
           s->packrat.held, s->packrat.gaps_opened, s->packrat.gaps_filled,
           s->packrat.gaps_expired);
    printf(",\"resets_requested\":%" PRIu64 ",\"resets_by_proxy\":%" PRIu64
           ",\"rejected_frames\":%" PRIu64,
           s->session.resets_requested, s->session.resets_by_proxy, s->session.rejected_frames);
    printf(",\"active\":%s,\"fallback\":%s,\"fallback_cause\":", s->active ? "true" : "false",
           s->active ? "false" : "true");
    if (cause)
        json_string(cause);
    else
        printf("null");
    printf(",\"relayed\":%s,\"reasons\":[", s->relayed ? "true" : "false");
    bool first = true;
    for (uint32_t bit = 1; bit; bit <<= 1)
        if (s->reasons & bit) {
            printf("%s\"%s\"", first ? "" : ",", sk_curl_reason_name(bit));
            first = false;
        }
    printf("],\"keylog_ready\":%s,\"keylog_lines\":%" PRIu64, s->keylog_ready ? "true" : "false",
           s->keylog_lines);
    printf(",\"relay_up_datagrams\":%" PRIu64 ",\"relay_down_datagrams\":%" PRIu64
           ",\"relay_send_failures\":%" PRIu64 ",\"sidekick_received\":%" PRIu64
           ",\"sidekick_sent\":%" PRIu64 ",\"packet_numbers_missing\":%" PRIu64 "}",
           s->up_datagrams, s->down_datagrams, s->up_send_failures + s->down_send_failures,
           s->sidekick_received, s->sidekick_sent, s->packrat.no_packet_number);
}

int main(int argc, char **argv) {
    const char *url = NULL, *out_path = NULL, *upload_path = NULL;
    uint64_t upload_bytes = 0;
    bool upload = false, sidekick = false, insecure = false, check_pattern = false;
    long reorder_ms = -1, quack_interval_ms = 0;
    double timeout_s = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-o") && v) {
            out_path = v;
            i++;
        } else if (!strcmp(a, "--upload") && v) {
            upload_path = v;
            upload = true;
            i++;
        } else if (!strcmp(a, "--upload-bytes") && v) {
            upload_bytes = strtoull(v, NULL, 10);
            upload = true;
            i++;
        } else if (!strcmp(a, "--sidekick")) {
            sidekick = true;
        } else if (!strcmp(a, "--sidekick-reorder-ms") && v) {
            reorder_ms = strtol(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--sidekick-quack-interval-ms") && v) {
            /* Robin's quACK interval asked of the proxy (default 30 ms): curl's quiche has no
             * pluggable congestion control, and quACKs every 15 ms let more early resends
             * arrive before its own loss detection fires (docs/results.md, "curl"). */
            quack_interval_ms = strtol(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--timeout") && v) {
            timeout_s = strtod(v, NULL);
            i++;
        } else if (!strcmp(a, "--insecure") || !strcmp(a, "-k")) {
            insecure = true;
        } else if (!strcmp(a, "--check-pattern")) {
            check_pattern = true;
        } else if (!strcmp(a, "--json")) {
            /* The report is always JSON; accepted for sidekick-transfer's command lines. */
        } else if (a[0] != '-' && !url) {
            url = a;
        } else {
            usage();
            return 2;
        }
    }
    if (!url) {
        usage();
        return 2;
    }

    Transfer t;
    memset(&t, 0, sizeof t);
    t.check_pattern = check_pattern;
    if (out_path && !(t.out = fopen(out_path, "wb"))) {
        fprintf(stderr, "sidekick-curl: %s: %s\n", out_path, strerror(errno));
        return 2;
    }
    if (upload_path) {
        if (!(t.in = fopen(upload_path, "rb")) || fseeko(t.in, 0, SEEK_END) != 0) {
            fprintf(stderr, "sidekick-curl: %s: %s\n", upload_path, strerror(errno));
            return 2;
        }
        upload_bytes = (uint64_t)ftello(t.in);
        rewind(t.in);
    }
    t.upload_left = upload_bytes;

    if (sk_curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "sidekick-curl: curl_global_init failed\n");
        return 2;
    }
    CURL *easy = curl_easy_init();
    if (!easy)
        return 2;
    const curl_version_info_data *vi = curl_version_info(CURLVERSION_NOW);
    bool have_h3 = (vi->features & CURL_VERSION_HTTP3) != 0;
    /* HTTP/3 only when libcurl has it; a libcurl without it still completes the transfer
     * (over TCP) and the adapter reports no_quic_socket. */
    if (have_h3)
        curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_3ONLY);
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    /* The key-exchange groups our quiche endpoints offer (TLS_GROUPS in
     * examples/src/transfer/quiche_stack.rs), those quiche 0.24's BoringSSL offered: the
     * BoringSSL that quiche 0.30 takes from boring-sys offers X25519MLKEM768 first, whose key
     * share spreads the ClientHello over two Initial datagrams. */
    curl_easy_setopt(easy, CURLOPT_SSL_EC_CURVES, "X25519:P-256:P-384");
    if (insecure) {
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (timeout_s > 0)
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000.0));
    if (upload) {
        curl_easy_setopt(easy, CURLOPT_POST, 1L);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)upload_bytes);
        curl_easy_setopt(easy, CURLOPT_READFUNCTION, on_upload);
        curl_easy_setopt(easy, CURLOPT_READDATA, &t);
        t.collect_summary = true;
    }

    SkCurl *sk = NULL;
    if (sidekick) {
        SkCurlConfig cfg;
        sk_curl_config_default(upload ? SK_CURL_MODE_ROBIN : SK_CURL_MODE_PACKRAT, &cfg);
        if (reorder_ms >= 0)
            cfg.session.reorder_delay_ms = (uint32_t)reorder_ms;
        if (quack_interval_ms > 0)
            cfg.session.quack_interval_ms = (uint32_t)quack_interval_ms;
        SkStatus s = sk_curl_attach(easy, &cfg, &sk);
        if (s != SK_STATUS_OK) {
            fprintf(stderr, "sidekick-curl: sk_curl_attach: %d\n", (int)s);
            return 2;
        }
    }

    uint64_t start_wall = wall_ns();
    CURLcode rc = curl_easy_perform(easy);
    long http = 0, version = 0;
    curl_off_t appconnect_us = 0, total_us = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
    curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &version);
    curl_easy_getinfo(easy, CURLINFO_APPCONNECT_TIME_T, &appconnect_us);
    curl_easy_getinfo(easy, CURLINFO_TOTAL_TIME_T, &total_us);
    double elapsed_s = (double)(total_us - appconnect_us) / 1e6;
    double duration_s = elapsed_s;
    uint64_t bytes = upload ? upload_bytes : t.received;
    Summary sum;
    memset(&sum, 0, sizeof sum);
    bool have_summary = false;
    const char *error = NULL;
    char errbuf[256];
    if (rc != CURLE_OK) {
        snprintf(errbuf, sizeof errbuf, "curl: %s", curl_easy_strerror(rc));
        error = errbuf;
    } else if (http != 200) {
        snprintf(errbuf, sizeof errbuf, "HTTP status %ld", http);
        error = errbuf;
    }
    if (upload && !error) {
        have_summary = decode_summary(t.summary, t.summary_len, &sum);
        if (!have_summary) {
            error = "no summary in the upload response";
        } else if (sum.bytes != upload_bytes) {
            snprintf(errbuf, sizeof errbuf, "server received %" PRIu64 " of %" PRIu64 " bytes",
                     sum.bytes, upload_bytes);
            error = errbuf;
        } else {
            /* The server's clock for the last byte when consistent with ours (same host or
             * synchronised clocks, as in the lab). */
            uint64_t start = start_wall + (uint64_t)appconnect_us * 1000u;
            if (sum.last_byte_unix_ns >= start) {
                double d = (double)(sum.last_byte_unix_ns - start) / 1e9;
                if (d > 0 && d <= elapsed_s)
                    duration_s = d;
            }
        }
    } else if (!upload && !error && check_pattern && t.pattern_errors) {
        snprintf(errbuf, sizeof errbuf, "%" PRIu64 " body bytes differ from the pattern",
                 t.pattern_errors);
        error = errbuf;
    }
    if (!upload && !error) {
        /* The data sender's counters: the server's, on the same connection. */
        char *stats_url = same_origin(url, "/stats");
        if (stats_url) {
            t.collect_summary = true;
            t.summary_len = 0;
            curl_easy_setopt(easy, CURLOPT_URL, stats_url);
            if (curl_easy_perform(easy) == CURLE_OK)
                have_summary = decode_summary(t.summary, t.summary_len, &sum);
            free(stats_url);
        }
    }

    SkCurlStats st;
    memset(&st, 0, sizeof st);
    if (sk)
        sk_curl_stats(sk, &st);

    printf("{\"stack\":\"curl\",\"direction\":\"%s\",\"bytes\":%" PRIu64, upload ? "upload" : "download",
           bytes);
    printf(",\"duration_s\":%.6f,\"goodput_mbps\":%.6f", duration_s,
           duration_s > 0 ? (double)bytes * 8.0 / duration_s / 1e6 : 0.0);
    if (upload) {
        printf(",\"retransmissions\":null,\"lost_packets\":null,\"sent_packets\":%" PRIu64
               ",\"receiver_sent_packets\":%" PRIu64,
               st.up_datagrams, sum.sent_packets);
    } else {
        printf(",\"retransmissions\":%" PRIu64 ",\"lost_packets\":%" PRIu64
               ",\"sent_packets\":%" PRIu64 ",\"receiver_sent_packets\":%" PRIu64,
               sum.retransmissions, sum.lost_packets, sum.sent_packets, st.up_datagrams);
    }
    if (sk)
        print_sidekick(&st, upload);
    printf(",\"http_version\":\"%s\",\"pattern_errors\":%" PRIu64 ",\"error\":",
           version == CURL_HTTP_VERSION_3 ? "3" : version == CURL_HTTP_VERSION_2_0 ? "2" : "1.1",
           t.pattern_errors);
    if (error)
        json_string(error);
    else
        printf("null");
    printf("}\n");
    fflush(stdout);

    /* curl first: its CONNECTION_CLOSE still crosses the relay. */
    curl_easy_cleanup(easy);
    sk_curl_free(sk);
    sk_curl_global_cleanup();
    if (t.out)
        fclose(t.out);
    if (t.in)
        fclose(t.in);
    return error ? 1 : 0;
}
