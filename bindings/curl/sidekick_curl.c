/* sidekick_curl: the sidekick session on a libcurl easy handle through a loopback UDP relay
 * (see sidekick_curl.h). Only public libcurl options are used: CURLOPT_OPENSOCKETFUNCTION
 * creates curl's QUIC socket and points it at the relay; the TLS key log comes from libcurl's
 * own SSLKEYLOGFILE support.
 *
 * The relay thread owns three sockets: `front` (loopback; curl's socket is connected to it),
 * `base` (connected to the server: the QUIC connection's path as the network and the proxy see
 * it) and `side` (the sidekick socket, to the proxy). Every datagram crosses the session:
 * sk_client_on_base_sent before it goes to the server, sk_client_on_base_received when it
 * comes back, and curl receives what sk_client_poll_deliver releases (Packrat holds datagrams
 * after a gap for its reorder window: ACK withholding, Packrat (CoNEXT '26) §4). The session's
 * own datagrams (discovery, Robin's identical resends, eACKs) come from
 * sk_client_poll_transmit. */

#define _GNU_SOURCE

#include "sidekick_curl.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Largest UDP payload handled (QUIC datagrams are at most 1500 bytes here; GSO super-datagrams
 * reach the relay already split by the loopback device). */
#define SKC_DGRAM_MAX 65536
/* Datagrams read per socket and wake-up before the others get their turn. */
#define SKC_BATCH 64
/* How often the key log is read while the 1-RTT secrets are awaited. */
#define SKC_KEYLOG_POLL_US 1000

struct SkCurl {
    SkCurlConfig cfg;
    char *keylog_path;

    pthread_mutex_t mu;
    /* Everything below is guarded by `mu` (the relay holds it while it works, not while it
     * waits in ppoll). */
    SkClient *client;
    SkCurlStats st;
    bool saw_udp;
    bool relay_in_use;
    int front_fd, base_fd, side_fd;
    int wake[2];
    pthread_t thread;
    bool thread_started;
    atomic_bool stop;

    struct sockaddr_storage curl_addr;
    socklen_t curl_addr_len;
    bool have_curl_addr;

    int keylog_fd;
    off_t keylog_offset;
    bool keylog_tailing;
    char keylog_buf[512];
    size_t keylog_len;
    bool keylog_discarding;
    bool got_client_secret, got_server_secret;
    uint64_t first_datagram_us;

    uint8_t buf[SKC_DGRAM_MAX];
};

static char *global_keylog_path;

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void set_buffers(int fd, uint32_t bytes) {
    int v = (int)(bytes > 0x7fffffffu ? 0x7fffffffu : bytes);
    if (v <= 0)
        return;
    /* Best effort: Linux caps the size at net.core.[rw]mem_max. */
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
}

const char *sk_curl_reason_name(uint32_t reason_bit) {
    switch (reason_bit) {
    case 0: return "none";
    case SK_CURL_REASON_NO_QUIC_SOCKET: return "no_quic_socket";
    case SK_CURL_REASON_RELAY_SETUP: return "relay_setup";
    case SK_CURL_REASON_PEER_UNREACHABLE: return "peer_unreachable";
    case SK_CURL_REASON_NO_KEYLOG: return "no_keylog";
    case SK_CURL_REASON_SESSION_FALLBACK: return "session_fallback";
    case SK_CURL_REASON_SECOND_SOCKET: return "second_socket";
    case SK_CURL_REASON_RELAY_ERROR: return "relay_error";
    default: return "unknown";
    }
}

const char *sk_curl_fallback_cause_name(SkFallbackCause cause) {
    switch (cause) {
    case SK_FALLBACK_CAUSE_NONE: return "none";
    case SK_FALLBACK_CAUSE_NO_PROXY: return "no_proxy";
    case SK_FALLBACK_CAUSE_INIT_TIMEOUT: return "init_timeout";
    case SK_FALLBACK_CAUSE_REJECTED: return "rejected";
    case SK_FALLBACK_CAUSE_IDLE_TIMEOUT: return "idle_timeout";
    case SK_FALLBACK_CAUSE_CONTROL_TIMEOUT: return "control_timeout";
    case SK_FALLBACK_CAUSE_CLOSED_BY_PROXY: return "closed_by_proxy";
    case SK_FALLBACK_CAUSE_INCONSISTENT_QUACKS: return "inconsistent_quacks";
    case SK_FALLBACK_CAUSE_NEVER_SENT: return "never_sent";
    case SK_FALLBACK_CAUSE_OVER_QUOTA: return "over_quota";
    case SK_FALLBACK_CAUSE_TOO_MANY_RESETS: return "too_many_resets";
    case SK_FALLBACK_CAUSE_APPLICATION: return "application";
    case SK_FALLBACK_CAUSE_BAD_ECHO: return "bad_echo";
    case SK_FALLBACK_CAUSE_SIDEKICK_ADDR_REFUSED: return "sidekick_addr_refused";
    case SK_FALLBACK_CAUSE_HOLDS_UNREPAIRED: return "holds_unrepaired";
    case SK_FALLBACK_CAUSE_RESENDS_UNNEEDED: return "resends_unneeded";
    default: return "unknown";
    }
}

SkStatus sk_curl_config_default(SkCurlMode mode, SkCurlConfig *out) {
    if (!out)
        return SK_STATUS_NULL_POINTER;
    memset(out, 0, sizeof *out);
    SkStatus s;
    if (mode == SK_CURL_MODE_PACKRAT)
        s = sk_session_config_packrat(&out->session);
    else if (mode == SK_CURL_MODE_ROBIN)
        /* Sidekick (NSDI '24) Table 5, the upload scenario: a quACK every 30 ms, t = 10. */
        s = sk_session_config_robin(30, 10, &out->session);
    else
        return SK_STATUS_INVALID_ARGUMENT;
    if (s != SK_STATUS_OK)
        return s;
    out->keylog_path = NULL;
    out->keylog_timeout_ms = 5000;
    out->socket_buffer_bytes = 4u << 20;
    return SK_STATUS_OK;
}

CURLcode sk_curl_global_init(long flags) {
    const char *have = getenv("SSLKEYLOGFILE");
    if ((!have || !*have) && !global_keylog_path) {
        const char *dir = getenv("TMPDIR");
        char tmpl[4096];
        int n = snprintf(tmpl, sizeof tmpl, "%s/sidekick-curl-keylog-XXXXXX",
                         dir && *dir ? dir : "/tmp");
        if (n > 0 && (size_t)n < sizeof tmpl) {
            int fd = mkstemp(tmpl);
            if (fd >= 0) {
                close(fd);
                if (setenv("SSLKEYLOGFILE", tmpl, 1) == 0)
                    global_keylog_path = strdup(tmpl);
                else
                    unlink(tmpl);
            }
        }
    }
    return curl_global_init(flags);
}

void sk_curl_global_cleanup(void) {
    curl_global_cleanup();
    if (global_keylog_path) {
        unlink(global_keylog_path);
        free(global_keylog_path);
        global_keylog_path = NULL;
    }
}

/* ---- the relay thread (all helpers below run with `mu` held) ---- */

static void relay_failed(SkCurl *h, uint32_t reason, int err) {
    h->st.reasons |= reason;
    h->st.last_errno = err;
    /* Closing the loopback port makes curl's next send fail with ECONNREFUSED, as it would
     * without the relay when the server is unreachable; the session stops. */
    if (h->front_fd >= 0) {
        close(h->front_fd);
        h->front_fd = -1;
    }
    if (h->client)
        (void)sk_client_fall_back(h->client, now_us());
}

static void sample_engines(SkCurl *h) {
    SkRobinStats r;
    if (sk_client_robin_stats(h->client, &r) == SK_STATUS_OK) {
        h->st.robin = r;
        h->st.have_robin = true;
    }
    SkPackratStats p;
    if (sk_client_packrat_stats(h->client, &p) == SK_STATUS_OK) {
        h->st.packrat = p;
        h->st.have_packrat = true;
    }
}

static void flush(SkCurl *h) {
    size_t len;
    /* Datagrams curl may read now (dropped once the loopback port is closed or before curl
     * sent anything: nobody to hand them to). */
    while (sk_client_poll_deliver(h->client, h->buf, sizeof h->buf, &len) == SK_STATUS_OK) {
        if (h->front_fd < 0 || !h->have_curl_addr)
            continue;
        if (sendto(h->front_fd, h->buf, len, 0, (struct sockaddr *)&h->curl_addr,
                   h->curl_addr_len) < 0) {
            h->st.down_send_failures++;
        } else {
            h->st.down_datagrams++;
            h->st.down_bytes += len;
        }
    }
    /* The session's own datagrams. */
    SkDestination dest;
    struct sockaddr_storage to;
    size_t to_len = 0;
    while (sk_client_poll_transmit(h->client, h->buf, sizeof h->buf, &len, &dest, &to,
                                   &to_len) == SK_STATUS_OK) {
        if (dest == SK_DESTINATION_BASE) {
            if (send(h->base_fd, h->buf, len, 0) < 0) {
                h->st.up_send_failures++;
            } else {
                h->st.early_resends++;
            }
        } else if (sendto(h->side_fd, h->buf, len, 0, (struct sockaddr *)&to,
                          (socklen_t)to_len) >= 0) {
            h->st.sidekick_sent++;
        }
    }
    /* The engines go away when the session falls back: sample them while they run. */
    sample_engines(h);
    SkClientEvent ev;
    while (sk_client_poll_event(h->client, &ev) == SK_STATUS_OK) {
        if (ev.kind == SK_CLIENT_EVENT_KIND_NEAR_LOSS)
            h->st.near_losses++;
        else if (ev.kind == SK_CLIENT_EVENT_KIND_FALLBACK)
            h->st.reasons |= SK_CURL_REASON_SESSION_FALLBACK;
    }
}

static void on_curl_datagram(SkCurl *h, const uint8_t *d, size_t len,
                             const struct sockaddr_storage *from, socklen_t from_len) {
    uint64_t now = now_us();
    if (!h->have_curl_addr || from_len != h->curl_addr_len ||
        memcmp(from, &h->curl_addr, from_len) != 0) {
        if (h->have_curl_addr) {
            /* Only curl's socket is connected to the loopback port; anything else is not
             * ours to forward. */
            return;
        }
        memcpy(&h->curl_addr, from, from_len);
        h->curl_addr_len = from_len;
        h->have_curl_addr = true;
    }
    if (!h->first_datagram_us)
        h->first_datagram_us = now;
    /* Discovery starts with curl's first 1-RTT (short-header) datagram, once the handshake
     * is through, as in the SDK's own integrations. */
    if (!h->st.started && len > 0 && (d[0] & 0x80) == 0) {
        if (sk_client_start(h->client, now) == SK_STATUS_OK)
            h->st.started = true;
    }
    (void)sk_client_on_base_sent(h->client, now, d, len, NULL);
    if (send(h->base_fd, d, len, 0) < 0) {
        int e = errno;
        (void)sk_client_withdraw_sent(h->client, 1);
        h->st.up_send_failures++;
        if (e == ECONNREFUSED || e == EHOSTUNREACH || e == ENETUNREACH)
            relay_failed(h, SK_CURL_REASON_PEER_UNREACHABLE, e);
        return;
    }
    h->st.up_datagrams++;
    h->st.up_bytes += len;
}

static void read_front(SkCurl *h) {
    for (int i = 0; i < SKC_BATCH && h->front_fd >= 0; i++) {
        struct sockaddr_storage from;
        socklen_t from_len = sizeof from;
        ssize_t n = recvfrom(h->front_fd, h->buf, sizeof h->buf, 0, (struct sockaddr *)&from,
                             &from_len);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNREFUSED)
                relay_failed(h, SK_CURL_REASON_RELAY_ERROR, errno);
            return;
        }
        on_curl_datagram(h, h->buf, (size_t)n, &from, from_len);
    }
}

static void read_base(SkCurl *h) {
    for (int i = 0; i < SKC_BATCH; i++) {
        ssize_t n = recv(h->base_fd, h->buf, sizeof h->buf, 0);
        if (n < 0) {
            int e = errno;
            if (e == ECONNREFUSED || e == EHOSTUNREACH || e == ENETUNREACH)
                relay_failed(h, SK_CURL_REASON_PEER_UNREACHABLE, e);
            else if (e != EAGAIN && e != EWOULDBLOCK && e != EINTR)
                relay_failed(h, SK_CURL_REASON_RELAY_ERROR, e);
            return;
        }
        (void)sk_client_on_base_received(h->client, now_us(), h->buf, (size_t)n);
    }
}

static void read_side(SkCurl *h) {
    for (int i = 0; i < SKC_BATCH; i++) {
        struct sockaddr_storage from;
        socklen_t from_len = sizeof from;
        ssize_t n = recvfrom(h->side_fd, h->buf, sizeof h->buf, 0, (struct sockaddr *)&from,
                             &from_len);
        if (n < 0)
            return;
        h->st.sidekick_received++;
        (void)sk_client_on_sidekick_received(h->client, now_us(), (struct sockaddr *)&from,
                                             from_len, h->buf, (size_t)n);
    }
}

static void keylog_line(SkCurl *h, const char *line, size_t len) {
    static const char client[] = "CLIENT_TRAFFIC_SECRET_0 ";
    static const char server[] = "SERVER_TRAFFIC_SECRET_0 ";
    h->st.keylog_lines++;
    if (sk_client_keylog_line(h->client, (const uint8_t *)line, len) != SK_STATUS_OK)
        return;
    if (len > sizeof client - 1 && memcmp(line, client, sizeof client - 1) == 0)
        h->got_client_secret = true;
    if (len > sizeof server - 1 && memcmp(line, server, sizeof server - 1) == 0)
        h->got_server_secret = true;
}

/* Reads what libcurl appended to the key log and feeds whole lines to the lens, until both
 * 1-RTT secrets were seen or the configured time ran out. */
static void tail_keylog(SkCurl *h, uint64_t now) {
    if (!h->keylog_tailing)
        return;
    if (h->keylog_fd < 0) {
        h->keylog_fd = open(h->keylog_path, O_RDONLY | O_CLOEXEC);
        if (h->keylog_fd >= 0 && lseek(h->keylog_fd, h->keylog_offset, SEEK_SET) < 0) {
            close(h->keylog_fd);
            h->keylog_fd = -1;
        }
    }
    if (h->keylog_fd >= 0) {
        for (;;) {
            size_t room = sizeof h->keylog_buf - h->keylog_len;
            ssize_t n = read(h->keylog_fd, h->keylog_buf + h->keylog_len, room);
            if (n <= 0)
                break;
            h->keylog_len += (size_t)n;
            size_t start = 0;
            for (size_t i = 0; i < h->keylog_len; i++) {
                if (h->keylog_buf[i] != '\n')
                    continue;
                if (!h->keylog_discarding)
                    keylog_line(h, h->keylog_buf + start, i - start);
                h->keylog_discarding = false;
                start = i + 1;
            }
            memmove(h->keylog_buf, h->keylog_buf + start, h->keylog_len - start);
            h->keylog_len -= start;
            if (h->keylog_len == sizeof h->keylog_buf) {
                /* A line longer than any key-log line: skip it. */
                h->keylog_len = 0;
                h->keylog_discarding = true;
            }
        }
    }
    if (h->got_client_secret && h->got_server_secret) {
        h->st.keylog_ready = true;
        h->keylog_tailing = false;
    } else if (h->first_datagram_us &&
               now - h->first_datagram_us > (uint64_t)h->cfg.keylog_timeout_ms * 1000u) {
        h->st.reasons |= SK_CURL_REASON_NO_KEYLOG;
        h->keylog_tailing = false;
    }
    if (!h->keylog_tailing && h->keylog_fd >= 0) {
        close(h->keylog_fd);
        h->keylog_fd = -1;
    }
}

static void *relay_main(void *arg) {
    SkCurl *h = arg;
    while (!atomic_load(&h->stop)) {
        /* The wait: until a socket is readable, the session's next timer, or the next look at
         * the key log. */
        pthread_mutex_lock(&h->mu);
        uint64_t now = now_us();
        uint64_t deadline = UINT64_MAX, t;
        if (sk_client_poll_timeout(h->client, &t) == SK_STATUS_OK)
            deadline = t;
        if (h->keylog_tailing && now + SKC_KEYLOG_POLL_US < deadline)
            deadline = now + SKC_KEYLOG_POLL_US;
        struct pollfd fds[4] = {
            {.fd = h->wake[0], .events = POLLIN},
            {.fd = h->front_fd, .events = POLLIN},
            {.fd = h->base_fd, .events = POLLIN},
            {.fd = h->side_fd, .events = POLLIN},
        };
        pthread_mutex_unlock(&h->mu);
        struct timespec ts, *tsp = NULL;
        if (deadline != UINT64_MAX) {
            uint64_t wait = deadline > now ? deadline - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000u);
            ts.tv_nsec = (long)(wait % 1000000u) * 1000;
            tsp = &ts;
        }
        int n = ppoll(fds, 4, tsp, NULL);
        if (n < 0 && errno != EINTR)
            break;
        pthread_mutex_lock(&h->mu);
        if (n > 0) {
            if (fds[1].revents && h->front_fd >= 0)
                read_front(h);
            if (fds[2].revents)
                read_base(h);
            if (fds[3].revents)
                read_side(h);
        }
        now = now_us();
        tail_keylog(h, now);
        if (sk_client_poll_timeout(h->client, &t) == SK_STATUS_OK && t <= now)
            (void)sk_client_handle_timeout(h->client, now);
        flush(h);
        pthread_mutex_unlock(&h->mu);
    }
    return NULL;
}

/* ---- setup, on curl's thread ---- */

static void close_fd(int *fd) {
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* Sets up the relay towards `server`; on success rewrites `addr` to the loopback port. */
static int relay_setup(SkCurl *h, struct curl_sockaddr *addr) {
    int family = addr->family;
    uint32_t bufsz = h->cfg.socket_buffer_bytes;
    h->base_fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (h->base_fd < 0)
        goto setup_failed;
    set_buffers(h->base_fd, bufsz);
    if (connect(h->base_fd, &addr->addr, addr->addrlen) < 0) {
        h->st.reasons |= SK_CURL_REASON_PEER_UNREACHABLE;
        h->st.last_errno = errno;
        goto failed;
    }
    h->side_fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    h->front_fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (h->side_fd < 0 || h->front_fd < 0)
        goto setup_failed;
    set_buffers(h->front_fd, bufsz);
    struct sockaddr_storage loop;
    socklen_t loop_len;
    memset(&loop, 0, sizeof loop);
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&loop;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        loop_len = sizeof *a;
    } else if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&loop;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        loop_len = sizeof *a;
    } else {
        goto setup_failed;
    }
    if (bind(h->front_fd, (struct sockaddr *)&loop, loop_len) < 0)
        goto setup_failed;
    loop_len = sizeof loop;
    if (getsockname(h->front_fd, (struct sockaddr *)&loop, &loop_len) < 0)
        goto setup_failed;
    if (pipe2(h->wake, O_CLOEXEC | O_NONBLOCK) < 0)
        goto setup_failed;
    if (sk_client_new(&h->cfg.session, &h->client) != SK_STATUS_OK)
        goto setup_failed;
    if (h->keylog_path) {
        struct stat sb;
        h->keylog_offset = stat(h->keylog_path, &sb) == 0 ? sb.st_size : 0;
        h->keylog_tailing = true;
    }
    if (pthread_create(&h->thread, NULL, relay_main, h) != 0)
        goto setup_failed;
    h->thread_started = true;
    memcpy(&addr->addr, &loop, loop_len);
    addr->addrlen = (unsigned int)loop_len;
    return 0;

setup_failed:
    h->st.reasons |= SK_CURL_REASON_RELAY_SETUP;
    h->st.last_errno = errno;
failed:
    sk_client_free(h->client);
    h->client = NULL;
    close_fd(&h->base_fd);
    close_fd(&h->side_fd);
    close_fd(&h->front_fd);
    close_fd(&h->wake[0]);
    close_fd(&h->wake[1]);
    return -1;
}

static curl_socket_t open_socket(void *clientp, curlsocktype purpose,
                                 struct curl_sockaddr *addr) {
    SkCurl *h = clientp;
    int type = addr->socktype & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (purpose != CURLSOCKTYPE_IPCXN || type != SOCK_DGRAM)
        return socket(addr->family, addr->socktype, addr->protocol);
    pthread_mutex_lock(&h->mu);
    h->saw_udp = true;
    if (h->relay_in_use) {
        h->st.reasons |= SK_CURL_REASON_SECOND_SOCKET;
    } else if (relay_setup(h, addr) == 0) {
        h->relay_in_use = true;
        h->st.relayed = true;
    }
    pthread_mutex_unlock(&h->mu);
    /* curl's own socket, of the address's family: connected by curl to the relay's loopback
     * port when the relay is up, else to the server. */
    curl_socket_t fd = socket(addr->family, addr->socktype, addr->protocol);
    if (fd != CURL_SOCKET_BAD)
        set_buffers(fd, h->cfg.socket_buffer_bytes);
    return fd;
}

SkStatus sk_curl_attach(CURL *easy, const SkCurlConfig *config, SkCurl **out) {
    if (!easy || !out)
        return SK_STATUS_NULL_POINTER;
    SkCurl *h = calloc(1, sizeof *h);
    if (!h)
        return SK_STATUS_PANIC;
    if (config) {
        h->cfg = *config;
    } else {
        SkStatus s = sk_curl_config_default(SK_CURL_MODE_PACKRAT, &h->cfg);
        if (s != SK_STATUS_OK) {
            free(h);
            return s;
        }
    }
    /* The configuration must be one the session accepts: checked now, not on curl's thread. */
    SkClient *probe = NULL;
    SkStatus s = sk_client_new(&h->cfg.session, &probe);
    sk_client_free(probe);
    if (s != SK_STATUS_OK) {
        free(h);
        return s;
    }
    const char *path = h->cfg.keylog_path ? h->cfg.keylog_path : getenv("SSLKEYLOGFILE");
    if (path && *path) {
        h->keylog_path = strdup(path);
        if (!h->keylog_path) {
            free(h);
            return SK_STATUS_PANIC;
        }
    }
    h->cfg.keylog_path = h->keylog_path;
    h->front_fd = h->base_fd = h->side_fd = h->keylog_fd = -1;
    h->wake[0] = h->wake[1] = -1;
    atomic_init(&h->stop, false);
    if (pthread_mutex_init(&h->mu, NULL) != 0) {
        free(h->keylog_path);
        free(h);
        return SK_STATUS_PANIC;
    }
    if (curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_socket) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, h) != CURLE_OK) {
        (void)curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, NULL);
        pthread_mutex_destroy(&h->mu);
        free(h->keylog_path);
        free(h);
        return SK_STATUS_PROTOCOL;
    }
    *out = h;
    return SK_STATUS_OK;
}

SkStatus sk_curl_stats(SkCurl *h, SkCurlStats *out) {
    if (!h || !out)
        return SK_STATUS_NULL_POINTER;
    pthread_mutex_lock(&h->mu);
    SkCurlStats st = h->st;
    if (!h->saw_udp)
        st.reasons |= SK_CURL_REASON_NO_QUIC_SOCKET;
    if (h->client) {
        (void)sk_client_stats(h->client, &st.session);
        bool active = false;
        SkFallbackCause cause = SK_FALLBACK_CAUSE_NONE;
        if (sk_client_state(h->client, &active, &cause) == SK_STATUS_OK) {
            st.active = active;
            st.fallback_cause = cause;
            if (cause != SK_FALLBACK_CAUSE_NONE)
                st.reasons |= SK_CURL_REASON_SESSION_FALLBACK;
        }
    }
    pthread_mutex_unlock(&h->mu);
    *out = st;
    return SK_STATUS_OK;
}

void sk_curl_free(SkCurl *h) {
    if (!h)
        return;
    if (h->thread_started) {
        atomic_store(&h->stop, true);
        if (h->wake[1] >= 0) {
            char b = 1;
            (void)!write(h->wake[1], &b, 1);
        }
        pthread_join(h->thread, NULL);
    }
    close_fd(&h->front_fd);
    close_fd(&h->base_fd);
    close_fd(&h->side_fd);
    close_fd(&h->wake[0]);
    close_fd(&h->wake[1]);
    close_fd(&h->keylog_fd);
    sk_client_free(h->client);
    pthread_mutex_destroy(&h->mu);
    free(h->keylog_path);
    free(h);
}
