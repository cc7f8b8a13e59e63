/* Tests of the curl adapter over real loopback sockets against an HTTP/3 server of the project
 * (sidekick-transfer server --http3), run by bindings/tests/curl_adapter.rs:
 *
 *   curl_adapter_test https://127.0.0.1:PORT CHECK_PATTERN
 *
 * Downloads and uploads through the relay and checks the bodies; then the bad inputs: a key
 * log that never arrives, a server port nobody listens on, a handle that does not use HTTP/3.
 * Prints "N passed, M failed". */

#define _GNU_SOURCE

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sidekick_curl.h"

static int passed, failed;

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        if (cond) {                                                                      \
            passed++;                                                                    \
        } else {                                                                         \
            failed++;                                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
        }                                                                                \
    } while (0)

typedef struct Body {
    uint64_t len;
    uint64_t pattern_errors;
    char head[64];
} Body;

static size_t on_body(char *d, size_t size, size_t n, void *arg) {
    Body *b = arg;
    size_t len = size * n;
    for (size_t i = 0; i < len; i++) {
        uint64_t off = b->len + i;
        if (off < sizeof b->head - 1)
            b->head[off] = d[i];
        if ((uint8_t)d[i] != (uint8_t)((off % 65536) % 251))
            b->pattern_errors++;
    }
    b->len += len;
    return len;
}

typedef struct Upload {
    uint64_t left, off;
} Upload;

static size_t on_read(char *buf, size_t size, size_t n, void *arg) {
    Upload *u = arg;
    size_t cap = size * n;
    if (cap > u->left)
        cap = (size_t)u->left;
    for (size_t i = 0; i < cap; i++)
        buf[i] = (char)(((u->off + i) % 65536) % 251);
    u->left -= cap;
    u->off += cap;
    return cap;
}

static CURL *h3_handle(const char *url, Body *body) {
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_3ONLY);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    return e;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void download(const char *base, bool check_pattern) {
    char url[256];
    const uint64_t n = 3000000;
    snprintf(url, sizeof url, "%s/download/%llu", base, (unsigned long long)n);
    Body body = {0};
    CURL *e = h3_handle(url, &body);
    SkCurl *sk = NULL;
    SkCurlConfig cfg;
    CHECK(sk_curl_config_default(SK_CURL_MODE_PACKRAT, &cfg) == SK_STATUS_OK, "config");
    CHECK(sk_curl_attach(e, &cfg, &sk) == SK_STATUS_OK, "attach");
    CURLcode rc = curl_easy_perform(e);
    long http = 0, version = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &http);
    curl_easy_getinfo(e, CURLINFO_HTTP_VERSION, &version);
    CHECK(rc == CURLE_OK, "download: %s", curl_easy_strerror(rc));
    CHECK(http == 200 && version == CURL_HTTP_VERSION_3, "HTTP %ld, version %ld", http, version);
    CHECK(body.len == n, "body %llu of %llu bytes", (unsigned long long)body.len,
          (unsigned long long)n);
    if (check_pattern)
        CHECK(body.pattern_errors == 0, "%llu bytes differ from the server's pattern",
              (unsigned long long)body.pattern_errors);
    SkCurlStats st;
    CHECK(sk_curl_stats(sk, &st) == SK_STATUS_OK, "stats");
    CHECK(st.relayed, "curl's QUIC socket went through the relay");
    /* Every datagram curl received crossed the relay: ~3 MB need > 2000 of them. */
    CHECK(st.down_datagrams > 2000 && st.up_datagrams > 0, "relay counts %llu down, %llu up",
          (unsigned long long)st.down_datagrams, (unsigned long long)st.up_datagrams);
    CHECK(st.started, "discovery started after the handshake");
    CHECK(st.keylog_ready && st.keylog_lines >= 2, "key log read (%llu lines)",
          (unsigned long long)st.keylog_lines);
    CHECK((st.reasons & ~(uint32_t)SK_CURL_REASON_SESSION_FALLBACK) == 0, "reasons %#x",
          (unsigned)st.reasons);
    /* No proxy on loopback: discovery gives up (4 requests over ~4 s) and says so. */
    for (int i = 0; i < 100 && st.fallback_cause == SK_FALLBACK_CAUSE_NONE; i++) {
        sleep_ms(100);
        sk_curl_stats(sk, &st);
    }
    CHECK(st.fallback_cause == SK_FALLBACK_CAUSE_NO_PROXY && !st.active,
          "fallback cause %d", (int)st.fallback_cause);
    CHECK(st.reasons & SK_CURL_REASON_SESSION_FALLBACK, "reason bit");
    /* curl first: its CONNECTION_CLOSE still crosses the relay. */
    curl_easy_cleanup(e);
    sk_curl_free(sk);
}

static void upload(const char *base) {
    char url[256];
    const uint64_t n = 2000000;
    snprintf(url, sizeof url, "%s/upload/%llu", base, (unsigned long long)n);
    Body body = {0};
    Upload up = {n, 0};
    CURL *e = h3_handle(url, &body);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(e, CURLOPT_READDATA, &up);
    SkCurlConfig cfg;
    sk_curl_config_default(SK_CURL_MODE_ROBIN, &cfg);
    SkCurl *sk = NULL;
    CHECK(sk_curl_attach(e, &cfg, &sk) == SK_STATUS_OK, "attach");
    CURLcode rc = curl_easy_perform(e);
    CHECK(rc == CURLE_OK, "upload: %s", curl_easy_strerror(rc));
    /* The answer is the server's summary: magic SKS1, then the byte count (big-endian). */
    uint64_t got = 0;
    for (int i = 0; i < 8; i++)
        got = (got << 8) | (uint8_t)body.head[4 + i];
    CHECK(body.len == 52 && memcmp(body.head, "SKS1", 4) == 0 && got == n,
          "summary of %llu bytes says %llu received", (unsigned long long)body.len,
          (unsigned long long)got);
    SkCurlStats st;
    sk_curl_stats(sk, &st);
    CHECK(st.relayed && st.up_datagrams > 1000, "relay carried the upload (%llu datagrams)",
          (unsigned long long)st.up_datagrams);
    CHECK(st.started, "discovery started after the handshake");
    /* curl first: its CONNECTION_CLOSE still crosses the relay. */
    curl_easy_cleanup(e);
    sk_curl_free(sk);
}

/* A key log nobody writes: the transfer completes, the adapter says why there is no lens. */
static void missing_keylog(const char *base) {
    char url[256], path[] = "/tmp/sidekick-curl-test-keylog-XXXXXX";
    snprintf(url, sizeof url, "%s/download/500000", base);
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    Body body = {0};
    CURL *e = h3_handle(url, &body);
    SkCurlConfig cfg;
    sk_curl_config_default(SK_CURL_MODE_PACKRAT, &cfg);
    cfg.keylog_path = path;
    cfg.keylog_timeout_ms = 100;
    SkCurl *sk = NULL;
    CHECK(sk_curl_attach(e, &cfg, &sk) == SK_STATUS_OK, "attach");
    CURLcode rc = curl_easy_perform(e);
    CHECK(rc == CURLE_OK && body.len == 500000, "transfer without key log: %s, %llu bytes",
          curl_easy_strerror(rc), (unsigned long long)body.len);
    sleep_ms(300);
    SkCurlStats st;
    sk_curl_stats(sk, &st);
    CHECK((st.reasons & SK_CURL_REASON_NO_KEYLOG) && !st.keylog_ready, "reasons %#x",
          (unsigned)st.reasons);
    /* curl first: its CONNECTION_CLOSE still crosses the relay. */
    curl_easy_cleanup(e);
    sk_curl_free(sk);
    unlink(path);
}

/* A server port nobody listens on: curl fails as it would without the relay (connection
 * refused), the adapter reports the unreachable peer, nothing hangs or crashes. */
static void unreachable(void) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    bind(s, (struct sockaddr *)&a, alen);
    getsockname(s, (struct sockaddr *)&a, &alen);
    close(s); /* the port is free again: nobody listens there */
    char url[128];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/download/1000", ntohs(a.sin_port));
    Body body = {0};
    CURL *e = h3_handle(url, &body);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
    SkCurl *sk = NULL;
    CHECK(sk_curl_attach(e, NULL, &sk) == SK_STATUS_OK, "attach");
    CURLcode rc = curl_easy_perform(e);
    CHECK(rc == CURLE_COULDNT_CONNECT, "unreachable: %s", curl_easy_strerror(rc));
    SkCurlStats st;
    sk_curl_stats(sk, &st);
    CHECK(st.reasons & SK_CURL_REASON_PEER_UNREACHABLE, "reasons %#x", (unsigned)st.reasons);
    /* curl first: its CONNECTION_CLOSE still crosses the relay. */
    curl_easy_cleanup(e);
    sk_curl_free(sk);
}

/* A handle that does not speak HTTP/3 (HTTP/1.1 over TCP to a one-shot local server): the
 * adapter stays out of the way and says so. */
static void *one_http11_response(void *arg) {
    int l = *(int *)arg;
    int c = accept(l, NULL, NULL);
    if (c >= 0) {
        char req[2048];
        (void)!read(c, req, sizeof req);
        static const char resp[] =
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
        (void)!write(c, resp, sizeof resp - 1);
        close(c);
    }
    return NULL;
}

static void no_http3(void) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    CHECK(bind(l, (struct sockaddr *)&a, alen) == 0 && listen(l, 1) == 0, "tcp listener");
    getsockname(l, (struct sockaddr *)&a, &alen);
    pthread_t t;
    pthread_create(&t, NULL, one_http11_response, &l);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", ntohs(a.sin_port));
    Body body = {0};
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
    SkCurl *sk = NULL;
    CHECK(sk_curl_attach(e, NULL, &sk) == SK_STATUS_OK, "attach");
    CURLcode rc = curl_easy_perform(e);
    pthread_join(t, NULL);
    close(l);
    CHECK(rc == CURLE_OK && body.len == 5 && memcmp(body.head, "hello", 5) == 0,
          "HTTP/1.1 transfer: %s", curl_easy_strerror(rc));
    SkCurlStats st;
    sk_curl_stats(sk, &st);
    CHECK(!st.relayed && (st.reasons & SK_CURL_REASON_NO_QUIC_SOCKET), "reasons %#x",
          (unsigned)st.reasons);
    /* curl first: its CONNECTION_CLOSE still crosses the relay. */
    curl_easy_cleanup(e);
    sk_curl_free(sk);
}

static void api_errors(void) {
    SkCurlConfig cfg;
    SkCurl *sk = NULL;
    CHECK(sk_curl_config_default(SK_CURL_MODE_PACKRAT, NULL) == SK_STATUS_NULL_POINTER, "null");
    CHECK(sk_curl_config_default((SkCurlMode)7, &cfg) == SK_STATUS_INVALID_ARGUMENT, "mode");
    CHECK(sk_curl_attach(NULL, NULL, &sk) == SK_STATUS_NULL_POINTER, "null handle");
    CURL *e = curl_easy_init();
    sk_curl_config_default(SK_CURL_MODE_ROBIN, &cfg);
    cfg.session.quack_threshold = 0; /* refused by the session */
    CHECK(sk_curl_attach(e, &cfg, &sk) == SK_STATUS_INVALID_ARGUMENT, "bad session config");
    SkCurlStats st;
    CHECK(sk_curl_stats(NULL, &st) == SK_STATUS_NULL_POINTER, "null stats");
    sk_curl_free(NULL);
    curl_easy_cleanup(e);
    CHECK(strcmp(sk_curl_reason_name(SK_CURL_REASON_NO_KEYLOG), "no_keylog") == 0, "name");
    CHECK(strcmp(sk_curl_fallback_cause_name(SK_FALLBACK_CAUSE_NO_PROXY), "no_proxy") == 0,
          "cause name");
    /* Every cause the C API can report has its own name in the report (the lab reads it). */
    for (int c = SK_FALLBACK_CAUSE_NONE; c <= SK_FALLBACK_CAUSE_RESENDS_UNNEEDED; c++)
        CHECK(strcmp(sk_curl_fallback_cause_name((SkFallbackCause)c), "unknown") != 0,
              "cause %d has no name", c);
    CHECK(strcmp(sk_curl_fallback_cause_name(SK_FALLBACK_CAUSE_HOLDS_UNREPAIRED),
                 "holds_unrepaired") == 0,
          "holds_unrepaired");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: curl_adapter_test https://127.0.0.1:PORT CHECK_PATTERN\n");
        return 2;
    }
    const char *base = argv[1];
    bool check_pattern = atoi(argv[2]) != 0;
    if (sk_curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "curl_global_init failed\n");
        return 2;
    }
    const curl_version_info_data *vi = curl_version_info(CURLVERSION_NOW);
    CHECK(vi->features & CURL_VERSION_HTTP3, "libcurl has HTTP/3");
    api_errors();
    download(base, check_pattern);
    upload(base);
    missing_keylog(base);
    unreachable();
    no_http3();
    sk_curl_global_cleanup();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
