/* sidekick_curl: attaches a sidekick session (bindings/include/sidekick.h) to a libcurl easy
 * handle doing HTTP/3, with public libcurl options only (no curl source change).
 *
 * How: CURLOPT_OPENSOCKETFUNCTION creates curl's UDP (QUIC) socket itself and points it at a
 * relay on the loopback interface; a relay thread forwards the datagrams between that socket
 * and a socket of its own connected to the server, running the sidekick session
 * (sk_client_*) on the way: discovery of an on-path proxy, Packrat for downloads (eACKs, and
 * ACK withholding: datagrams after a gap reach curl only after the reorder window), Robin for
 * uploads (identical early resends of datagrams a quACK shows lost near the client). The
 * packet-number lens reads the TLS key log that libcurl writes to $SSLKEYLOGFILE
 * (sk_curl_global_init sets one up). TCP sockets and everything the relay cannot serve pass
 * through untouched; anything that goes wrong falls back to plain end-to-end behaviour and is
 * reported in SkCurlStats.reasons.
 *
 * Threads: the relay runs on a thread of its own per attached handle. The functions below may
 * be called from any thread; one SkCurl must not be freed while another thread uses it.
 */

#ifndef SIDEKICK_CURL_H
#define SIDEKICK_CURL_H

#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>

#include "sidekick.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which engine the session runs: Packrat when curl downloads, Robin when it uploads. */
typedef enum SkCurlMode {
    SK_CURL_MODE_PACKRAT = 1,
    SK_CURL_MODE_ROBIN = 2,
} SkCurlMode;

/* Why the sidekick did not (or no longer) help: bits of SkCurlStats.reasons. The transfer
 * itself is unaffected by all of them (it runs end to end). */
enum {
    /* curl opened no UDP socket for the handle: a libcurl without HTTP/3, or it used TCP. */
    SK_CURL_REASON_NO_QUIC_SOCKET = 1u << 0,
    /* The relay's sockets or thread could not be set up: curl's socket went to the server
     * directly. */
    SK_CURL_REASON_RELAY_SETUP = 1u << 1,
    /* The relay could not reach the server (no route, or an ICMP error such as "port
     * unreachable"): curl connected directly, or the relay closed its loopback port so that
     * curl sees the same error it would see without the relay. */
    SK_CURL_REASON_PEER_UNREACHABLE = 1u << 2,
    /* No 1-RTT secret arrived in the key log within the configured time: datagrams are
     * delivered without packet numbers (no ACK withholding; Robin still works). */
    SK_CURL_REASON_NO_KEYLOG = 1u << 3,
    /* The sidekick session fell back to end to end (SkCurlStats.fallback_cause says why:
     * no proxy, a proxy gone silent, forged or inconsistent quACKs, over quota...). */
    SK_CURL_REASON_SESSION_FALLBACK = 1u << 4,
    /* curl opened a second UDP socket while the relay served another connection: that one
     * went to the server directly. */
    SK_CURL_REASON_SECOND_SOCKET = 1u << 5,
    /* A socket call of the relay failed after setup (its errno in SkCurlStats.last_errno);
     * the relay closed its loopback port, as for an unreachable peer. */
    SK_CURL_REASON_RELAY_ERROR = 1u << 6,
};

/* Configuration of sk_curl_attach; fill with sk_curl_config_default and adjust. */
typedef struct SkCurlConfig {
    /* The session requested from the proxy (sk_session_config_packrat / _robin). */
    SkSessionConfig session;
    /* The key log libcurl writes (NULL: $SSLKEYLOGFILE at attach time; unset: no lens). The
     * relay reads only what is appended after sk_curl_attach. */
    const char *keylog_path;
    /* Give up waiting for the 1-RTT secrets this long after curl's first datagram. */
    uint32_t keylog_timeout_ms;
    /* Send and receive buffer size of the relay's and curl's UDP sockets (best effort). */
    uint32_t socket_buffer_bytes;
} SkCurlConfig;

/* Counters and state of an attached handle (sk_curl_stats). */
typedef struct SkCurlStats {
    /* curl's QUIC socket went through the relay. */
    bool relayed;
    /* Discovery was started (after curl's first 1-RTT datagram). */
    bool started;
    /* The sidekick session is up now. */
    bool active;
    /* If the session fell back: why (SK_FALLBACK_CAUSE_NONE otherwise). */
    SkFallbackCause fallback_cause;
    /* SK_CURL_REASON_* bits. */
    uint32_t reasons;
    /* errno of the socket call behind SK_CURL_REASON_PEER_UNREACHABLE / _RELAY_ERROR. */
    int last_errno;
    /* Datagrams and bytes curl sent through the relay (to the server). */
    uint64_t up_datagrams, up_bytes;
    /* Datagrams and bytes the relay handed to curl (from the server). */
    uint64_t down_datagrams, down_bytes;
    /* Datagrams the relay could not send (socket buffer full, errors): lost, as on a link. */
    uint64_t up_send_failures, down_send_failures;
    /* Datagrams on the sidekick socket, received and sent. */
    uint64_t sidekick_received, sidekick_sent;
    /* Early retransmissions sent on the server socket (Robin). */
    uint64_t early_resends;
    /* Key-log lines fed to the lens, and whether both 1-RTT secrets were among them. */
    uint64_t keylog_lines;
    bool keylog_ready;
    /* Near-segment losses the session reported (SK_CLIENT_EVENT_KIND_NEAR_LOSS). */
    uint64_t near_losses;
    /* The session's counters. */
    SkClientStats session;
    /* The engines' counters, last sampled while the engine ran (the session drops its engines
     * when it falls back); have_* says whether a sample exists. */
    bool have_robin, have_packrat;
    SkRobinStats robin;
    SkPackratStats packrat;
} SkCurlStats;

/* An attached handle (opaque). */
typedef struct SkCurl SkCurl;

/* Fills `out` for `mode` (Packrat: the WiFi defaults of sk_session_config_packrat; Robin: a
 * quACK every 30 ms with t = 10), the key log from $SSLKEYLOGFILE, 5 s key-log timeout, 4 MiB
 * socket buffers. Thread-safe (writes only `out`). Returns SK_STATUS_NULL_POINTER or
 * SK_STATUS_INVALID_ARGUMENT for a bad argument. */
SkStatus sk_curl_config_default(SkCurlMode mode, SkCurlConfig *out);

/* curl_global_init(flags), after pointing $SSLKEYLOGFILE at a fresh private file when it is
 * not set, so that libcurl writes the TLS key log the lens needs (libcurl opens it only in
 * curl_global_init). Call it instead of curl_global_init, before any other thread runs (it
 * changes the environment). The file is removed by sk_curl_global_cleanup. */
CURLcode sk_curl_global_init(long flags);

/* curl_global_cleanup() and removal of the key-log file sk_curl_global_init created. Same
 * thread rules as curl_global_cleanup. */
void sk_curl_global_cleanup(void);

/* Attaches a sidekick relay to `easy` (sets CURLOPT_OPENSOCKETFUNCTION and
 * CURLOPT_OPENSOCKETDATA; the application must not set them itself). `config` is copied
 * (keylog_path too); NULL means sk_curl_config_default(SK_CURL_MODE_PACKRAT). The relay thread
 * starts when curl opens its QUIC socket. The caller owns *out and frees it with sk_curl_free
 * after curl_easy_cleanup(easy) (curl may call the callbacks until then). Use the easy
 * handle from one thread at a time, as libcurl requires. Returns SK_STATUS_NULL_POINTER,
 * SK_STATUS_INVALID_ARGUMENT (a bad session configuration) or SK_STATUS_PROTOCOL (curl
 * refused an option). */
SkStatus sk_curl_attach(CURL *easy, const SkCurlConfig *config, SkCurl **out);

/* Copies the current counters into `out`. Thread-safe: may run while the relay works. */
SkStatus sk_curl_stats(SkCurl *h, SkCurlStats *out);

/* Stops the relay thread and frees everything of `h` (NULL is ignored). Call it after
 * curl_easy_cleanup (or once the connection is closed): curl's CONNECTION_CLOSE must still
 * cross the relay, or the server keeps the connection until its idle timeout. Not
 * concurrently with another call on `h`. */
void sk_curl_free(SkCurl *h);

/* A stable lower-case name of one SK_CURL_REASON_* bit ("no_quic_socket", ...), or "none"
 * for 0 and "unknown" for anything else. The string is static. Thread-safe. */
const char *sk_curl_reason_name(uint32_t reason_bit);

/* A stable lower-case name of a session fallback cause ("no_proxy", "idle_timeout", ...),
 * as sidekick-transfer reports it. The string is static. Thread-safe. */
const char *sk_curl_fallback_cause_name(SkFallbackCause cause);

#ifdef __cplusplus
}
#endif

#endif /* SIDEKICK_CURL_H */
