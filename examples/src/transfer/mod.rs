//! Bulk transfer over QUIC with three registry stacks, quinn, quiche and s2n-quic, interoperable
//! through the shared ALPN [`ALPN`] (raw bidirectional stream) or over HTTP/3 (ALPN `h3`,
//! `--http3`: quinn with h3 + h3-quinn, quiche with `quiche::h3`; s2n-quic speaks the raw stream
//! only, see [`s2n_stack`]).
//!
//! # Application protocol (one bidirectional stream, client-initiated)
//!
//! 1. The client opens stream 0 and writes a [`Request`] (13 bytes: magic `SKT1`, direction byte,
//!    length `u64` big-endian).
//! 2. *Download*: the server writes `bytes` bytes of payload; the client, once it holds all of them,
//!    finishes its side of the stream; the server then appends a [`Summary`] and finishes.
//!    *Upload*: the client writes `bytes` bytes after the request and finishes its side; when the
//!    server has read everything up to the client's FIN it writes a [`Summary`] and finishes.
//! 3. The client closes the connection.
//!
//! # Goodput, as the papers measure it
//!
//! Goodput is measured at the receiving application, from the moment the first byte is requested
//! (the client writes the request, after the handshake) to the moment the last byte is received
//! (Packrat (CoNEXT '26) §6.2 measures at the client for a download; Sidekick (NSDI '24) §5.1 for an upload). For an upload
//! the server reports in its [`Summary`] the wall-clock time (`CLOCK_REALTIME`) at which it received
//! the last byte; the client uses it when it is consistent with its own clock (same host or
//! synchronised clocks, as in the namespace lab), otherwise it falls back to the time the summary
//! reached it (an over-estimate by one one-way delay).
//!
//! Transport statistics in the report come from the *data sender's* connection: the server's
//! (carried in the [`Summary`]) for a download, the client's own for an upload.

with_stacks! {
    pub mod cert;
    pub mod ngtcp2;
    mod quiche_both;
    mod quiche_h3;
    mod quiche_outbox;
    mod quiche_sidekick;
    pub mod quiche_stack;
    mod quinn_h3;
    pub mod quinn_stack;
    pub mod s2n_stack;
    pub mod sidekick;
    pub mod tcp_stack;
    pub use self::sidekick::SidekickCounters;
}

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// ALPN shared by the stacks so that a client of one talks to a server of another.
pub const ALPN: &[u8] = b"sidekick-transfer";

/// Size of a chunk of payload written per call.
pub const CHUNK: usize = 64 * 1024;

/// Which QUIC implementation an endpoint uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stack {
    /// quinn 0.11 (rustls with ring).
    Quinn,
    /// quiche 0.24 (BoringSSL).
    Quiche,
    /// s2n-quic 1.91 (rustls with ring), raw stream only ([`s2n_stack`]). Skipped from the
    /// command-line values: `sidekick-rtc` takes this enum as its `--stack` and has no s2n-quic
    /// implementation (`sidekick-transfer` has its own `--stack` values).
    #[value(skip)]
    #[serde(rename = "s2n-quic")]
    S2nQuic,
}

impl Stack {
    /// Lower-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Stack::Quinn => "quinn",
            Stack::Quiche => "quiche",
            Stack::S2nQuic => "s2n-quic",
        }
    }
}

/// Which way the bulk data of a transfer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TransferDirection {
    /// Server sends to client.
    Download,
    /// Client sends to server.
    Upload,
}

impl TransferDirection {
    /// Lower-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            TransferDirection::Download => "download",
            TransferDirection::Upload => "upload",
        }
    }
}

/// Congestion controller requested on the data sender's side (the client sets its own; a server
/// uses its own `--cc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Cc {
    /// CUBIC (default of every stack).
    #[default]
    Cubic,
    /// NewReno (not on s2n-quic, which has none).
    Reno,
    /// BBR (quinn's BBR, quiche's BBRv2 "gcongestion", s2n-quic's BBRv2).
    Bbr,
}

/// Transport options shared by the stacks.
#[cfg(feature = "stacks")]
#[derive(Debug, Clone, Copy)]
pub struct TransportOptions {
    /// Congestion controller.
    pub cc: Cc,
    /// quinn and s2n-quic: allow UDP segmentation offload (GSO). Off by default: the lab's
    /// userspace link element forwards frames one by one and needs every datagram to fit the MTU;
    /// with GSO on, quinn and s2n-quic hand the kernel super-datagrams of up to 64 KiB which the
    /// element would see as such where offloads are not disabled on the veth.
    pub gso: bool,
    /// Idle timeout.
    pub idle_timeout: Duration,
    /// Speak HTTP/3 (ALPN `h3`; `GET /download/N`, `POST /upload/N`, `GET /stats`) instead of the
    /// raw-stream protocol.
    pub http3: bool,
    /// Client only: run the sidekick SDK session (discovery of an on-path proxy; Robin with
    /// early retransmission on uploads — plus PACUBIC on quinn —, Packrat eACKs and the reorder
    /// window on downloads); falls back to end to end when no proxy answers.
    pub sidekick: bool,
    /// Parameters of the sidekick session.
    pub sidekick_params: self::sidekick::SidekickParams,
    /// quinn client only: ask the server to ACK only every N ack-eliciting packets (the
    /// ACK-frequency extension, [`sidekick::ack_frequency_config`]) without the sidekick: the
    /// end-to-end baseline of Robin #3 at the same ACK rate. `--sidekick-ack-reduction` makes
    /// the same request with the sidekick.
    pub ack_frequency: Option<u32>,
    /// Server only: pad the self-signed certificate to at least this many DER bytes (0: no
    /// padding), see [`cert::SelfSigned::generate_padded`].
    pub cert_bytes: usize,
    /// Server only: hold a new connection's first Initial this long before the stack sees it
    /// (ReACKed QUICer (IMC '24) §3: the Δt to the certificate store, "wait for certificate").
    pub hello_delay: Duration,
}

#[cfg(feature = "stacks")]
impl Default for TransportOptions {
    fn default() -> Self {
        Self {
            cc: Cc::Cubic,
            gso: false,
            idle_timeout: Duration::from_secs(30),
            http3: false,
            sidekick: false,
            sidekick_params: self::sidekick::SidekickParams::default(),
            ack_frequency: None,
            cert_bytes: 0,
            hello_delay: Duration::ZERO,
        }
    }
}

/// Errors of the transfer protocol's framing.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// Fewer bytes than the fixed size.
    #[error("truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// Magic mismatch.
    #[error("bad magic")]
    BadMagic,
    /// Unknown direction byte.
    #[error("unknown direction byte {0:#x}")]
    BadDirection(u8),
}

/// The client's request, first bytes on the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Which way the payload goes.
    pub direction: TransferDirection,
    /// Payload size in bytes.
    pub bytes: u64,
}

impl Request {
    /// Encoded size.
    pub const LEN: usize = 13;
    const MAGIC: &'static [u8; 4] = b"SKT1";

    /// Encode to the wire form.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..4].copy_from_slice(Self::MAGIC);
        out[4] = match self.direction {
            TransferDirection::Download => b'D',
            TransferDirection::Upload => b'U',
        };
        out[5..].copy_from_slice(&self.bytes.to_be_bytes());
        out
    }

    /// Decode from the wire form (exactly the first [`Request::LEN`] bytes are read).
    pub fn decode(buf: &[u8]) -> Result<Self, FrameError> {
        let b = buf.get(..Self::LEN).ok_or(FrameError::Truncated {
            need: Self::LEN,
            have: buf.len(),
        })?;
        if &b[..4] != Self::MAGIC {
            return Err(FrameError::BadMagic);
        }
        let direction = match b[4] {
            b'D' => TransferDirection::Download,
            b'U' => TransferDirection::Upload,
            other => return Err(FrameError::BadDirection(other)),
        };
        Ok(Self {
            direction,
            bytes: read_u64(&b[5..13]),
        })
    }
}

/// The server's summary, last bytes on the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Payload bytes the server received (upload) or sent (download).
    pub bytes: u64,
    /// Wall-clock time (ns since the Unix epoch) of the first payload byte received (upload only).
    pub first_byte_unix_ns: u64,
    /// Wall-clock time (ns since the Unix epoch) of the last payload byte received (upload only).
    pub last_byte_unix_ns: u64,
    /// Packets the server's connection sent.
    pub sent_packets: u64,
    /// Packets the server's connection declared lost.
    pub lost_packets: u64,
    /// Retransmissions counted by the server's stack.
    pub retransmissions: u64,
}

impl Summary {
    /// Encoded size.
    pub const LEN: usize = 52;
    const MAGIC: &'static [u8; 4] = b"SKS1";

    /// Encode to the wire form.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..4].copy_from_slice(Self::MAGIC);
        let fields = [
            self.bytes,
            self.first_byte_unix_ns,
            self.last_byte_unix_ns,
            self.sent_packets,
            self.lost_packets,
            self.retransmissions,
        ];
        for (i, f) in fields.iter().enumerate() {
            out[4 + 8 * i..12 + 8 * i].copy_from_slice(&f.to_be_bytes());
        }
        out
    }

    /// Decode from the wire form.
    pub fn decode(buf: &[u8]) -> Result<Self, FrameError> {
        let b = buf.get(..Self::LEN).ok_or(FrameError::Truncated {
            need: Self::LEN,
            have: buf.len(),
        })?;
        if &b[..4] != Self::MAGIC {
            return Err(FrameError::BadMagic);
        }
        let f = |i: usize| read_u64(&b[4 + 8 * i..12 + 8 * i]);
        Ok(Self {
            bytes: f(0),
            first_byte_unix_ns: f(1),
            last_byte_unix_ns: f(2),
            sent_packets: f(3),
            lost_packets: f(4),
            retransmissions: f(5),
        })
    }
}

fn read_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Fuzz body for the transfer framing: decoding arbitrary bytes never panics and a successful
/// decode re-encodes to the same prefix.
pub fn fuzz_parse(data: &[u8]) {
    if let Ok(r) = Request::decode(data) {
        assert_eq!(&r.encode()[..], &data[..Request::LEN]);
    }
    if let Ok(s) = Summary::decode(data) {
        assert_eq!(&s.encode()[..], &data[..Summary::LEN]);
    }
}

/// The one-line JSON report of a client run.
#[cfg(feature = "stacks")]
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TransferReport {
    /// Client stack.
    pub stack: &'static str,
    /// `download` or `upload`.
    pub direction: &'static str,
    /// Payload bytes.
    pub bytes: u64,
    /// First byte requested → last byte received, seconds.
    pub duration_s: f64,
    /// Payload bits / duration, Mbit/s.
    pub goodput_mbps: f64,
    /// Retransmissions of the data sender (quiche: `Stats::retrans`; quinn and s2n-quic have no
    /// such counter and report their lost packets, whose frames they retransmit). Absent when the data sender
    /// is a server that does not report its counters (an HTTP/3 server of another stack without
    /// `GET /stats`, e.g. ngtcp2's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmissions: Option<u64>,
    /// Packets the data sender declared lost (absent as `retransmissions`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_packets: Option<u64>,
    /// Of `lost_packets`, those whose acknowledgement arrived after the loss was declared
    /// (quiche's `Stats::spurious_lost`; quiche then undoes the window reduction, RFC 9438 §4.9).
    /// Only where the data sender is this process's quiche connection (a quiche client's
    /// upload): no other stack counts them, and the server's summary does not carry them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spurious_lost_packets: Option<u64>,
    /// Packets the data sender sent (absent as `retransmissions`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_packets: Option<u64>,
    /// Packets the data receiver sent, mostly ACKs (the server's for an upload, the client's for
    /// a download): what ACK reduction (Robin #3) reduces.
    pub receiver_sent_packets: u64,
    /// Sidekick counters (only with `--sidekick`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidekick: Option<SidekickCounters>,
    /// Time to first byte, ms: from the start of the connection (before the client's first
    /// Initial) to the first payload byte of a download reaching the client application
    /// (ReACKed QUICer (IMC '24) §3 measures it for a 10 KB request). Raw-stream downloads only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttfb_ms: Option<f64>,
    /// TCP only ([`tcp_stack`]): duration of the client's TCP handshake, ms — one round trip to
    /// whoever answers the SYN (the server end to end, the ap when a split-TCP proxy terminates
    /// the connection there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<f64>,
    /// `both` only ([`TransferReport::both`]): the upload's goodput, Mbit/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upload_goodput_mbps: Option<f64>,
    /// `both` only: the download's goodput, Mbit/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub download_goodput_mbps: Option<f64>,
}

/// Sender-side transport statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Packets sent.
    pub sent_packets: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// Retransmissions.
    pub retransmissions: u64,
    /// Packets the data *receiver* sent (mostly ACKs): the server's for an upload (from its
    /// summary), the client's own for a download.
    pub receiver_sent_packets: u64,
    /// The data sender's counters (the first three fields) are unknown: a download from an
    /// HTTP/3 server that answers `GET /stats` with anything but a summary.
    pub sender_unknown: bool,
}

#[cfg(feature = "stacks")]
impl TransferReport {
    /// Build a report from measured values.
    pub fn new(
        stack: Stack,
        direction: TransferDirection,
        bytes: u64,
        duration: Duration,
        stats: SenderStats,
    ) -> Self {
        Self::named(stack.name(), direction, bytes, duration, stats)
    }

    /// [`TransferReport::new`] for a stack named by a string (the TCP baseline, which is not a
    /// QUIC [`Stack`]).
    pub fn named(
        stack: &'static str,
        direction: TransferDirection,
        bytes: u64,
        duration: Duration,
        stats: SenderStats,
    ) -> Self {
        let secs = duration.as_secs_f64();
        let goodput_mbps = if secs > 0.0 {
            bytes as f64 * 8.0 / secs / 1e6
        } else {
            0.0
        };
        Self {
            stack,
            direction: direction.name(),
            bytes,
            duration_s: secs,
            goodput_mbps,
            retransmissions: (!stats.sender_unknown).then_some(stats.retransmissions),
            lost_packets: (!stats.sender_unknown).then_some(stats.lost_packets),
            spurious_lost_packets: None,
            sidekick: None,
            ttfb_ms: None,
            connect_ms: None,
            sent_packets: (!stats.sender_unknown).then_some(stats.sent_packets),
            receiver_sent_packets: stats.receiver_sent_packets,
            upload_goodput_mbps: None,
            download_goodput_mbps: None,
        }
    }

    /// The report of an upload and a download of `bytes` each on one connection (direction
    /// `both`): `goodput_mbps` counts both directions' bytes over the time until the later one
    /// ended (`duration_s`), each direction's goodput is reported beside it, and the sender
    /// counters are both data senders' summed (the client's for the upload, the server's for the
    /// download; `receiver_sent_packets` likewise sums both receivers').
    ///
    /// ```
    /// use std::time::Duration;
    /// use sidekick_examples::transfer::{SenderStats, Stack, TransferReport};
    /// let s = SenderStats { lost_packets: 3, ..SenderStats::default() };
    /// let up = (Duration::from_secs(2), s);
    /// let down = (Duration::from_secs(4), s);
    /// let r = TransferReport::both(Stack::Quinn, 10_000_000, up, down);
    /// assert_eq!(r.direction, "both");
    /// assert_eq!((r.goodput_mbps, r.duration_s), (40.0, 4.0));
    /// assert_eq!((r.upload_goodput_mbps, r.download_goodput_mbps), (Some(40.0), Some(20.0)));
    /// assert_eq!(r.lost_packets, Some(6));
    /// ```
    pub fn both(
        stack: Stack,
        bytes: u64,
        upload: (Duration, SenderStats),
        download: (Duration, SenderStats),
    ) -> Self {
        let (u, d) = (upload.1, download.1);
        let stats = SenderStats {
            sent_packets: u.sent_packets + d.sent_packets,
            lost_packets: u.lost_packets + d.lost_packets,
            retransmissions: u.retransmissions + d.retransmissions,
            receiver_sent_packets: u.receiver_sent_packets + d.receiver_sent_packets,
            sender_unknown: u.sender_unknown || d.sender_unknown,
        };
        let up = Self::new(stack, TransferDirection::Upload, bytes, upload.0, u);
        let down = Self::new(stack, TransferDirection::Download, bytes, download.0, d);
        let mut r = Self::new(
            stack,
            TransferDirection::Upload,
            bytes.saturating_mul(2),
            upload.0.max(download.0),
            stats,
        );
        r.direction = "both";
        r.upload_goodput_mbps = Some(up.goodput_mbps);
        r.download_goodput_mbps = Some(down.goodput_mbps);
        r
    }
}

/// Nanoseconds since the Unix epoch (`CLOCK_REALTIME`), 0 if the clock is before the epoch.
pub fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Upload duration: from the client's request (wall clock `start_unix_ns`) to the server's
/// reported last byte, if that lies within `[0, client_elapsed]` (clocks agree); otherwise the
/// client's own elapsed time until the summary arrived.
pub fn upload_duration(
    start_unix_ns: u64,
    summary: &Summary,
    client_elapsed: Duration,
) -> Duration {
    if summary.last_byte_unix_ns >= start_unix_ns {
        let d = Duration::from_nanos(summary.last_byte_unix_ns - start_unix_ns);
        if d <= client_elapsed && !d.is_zero() {
            return d;
        }
    }
    client_elapsed
}

/// Socket buffer size requested for QUIC sockets (Linux caps it at `net.core.rmem_max`/`wmem_max`).
pub const SOCKET_BUFFER: usize = 4 << 20;

/// A UDP socket bound to `addr` with [`SOCKET_BUFFER`]-byte send and receive buffers (best
/// effort), so bursts at high rates are not dropped by the host before the transport sees them.
pub fn udp_socket(addr: std::net::SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if let Err(e) = s.set_recv_buffer_size(SOCKET_BUFFER) {
        tracing::debug!("SO_RCVBUF: {e}");
    }
    if let Err(e) = s.set_send_buffer_size(SOCKET_BUFFER) {
        tracing::debug!("SO_SNDBUF: {e}");
    }
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// The unspecified address (port 0) of `peer`'s family: where a client socket binds.
#[cfg(feature = "stacks")]
pub(crate) fn unspecified_for(peer: std::net::SocketAddr) -> std::net::SocketAddr {
    use std::net::{Ipv4Addr, Ipv6Addr};
    if peer.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    }
}

/// Fill `buf` with a deterministic, non-constant payload pattern.
pub fn fill_pattern(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn request_roundtrip() {
        let r = Request {
            direction: TransferDirection::Upload,
            bytes: 10_000_000,
        };
        assert_eq!(Request::decode(&r.encode()), Ok(r));
        assert_eq!(
            Request::decode(b"SKT1X00000000"),
            Err(FrameError::BadDirection(b'X'))
        );
        assert_eq!(
            Request::decode(b"SKT"),
            Err(FrameError::Truncated { need: 13, have: 3 })
        );
    }

    #[test]
    fn summary_roundtrip() {
        let s = Summary {
            bytes: 1,
            first_byte_unix_ns: 2,
            last_byte_unix_ns: 3,
            sent_packets: 4,
            lost_packets: 5,
            retransmissions: 6,
        };
        assert_eq!(Summary::decode(&s.encode()), Ok(s));
        let mut bad = s.encode();
        bad[0] = b'X';
        assert_eq!(Summary::decode(&bad), Err(FrameError::BadMagic));
    }

    /// The same byte strings are in examples/quic-go/transfer/transfer_test.go (`vecRequest`,
    /// `vecSummary`): the quic-go transfer speaks this framing.
    #[test]
    fn wire_vectors_match_the_go_transfer() {
        let hex = |b: &[u8]| {
            use std::fmt::Write as _;
            b.iter().fold(String::new(), |mut s, x| {
                let _ = write!(s, "{x:02x}");
                s
            })
        };
        let r = Request {
            direction: TransferDirection::Upload,
            bytes: 10_000_000,
        };
        assert_eq!(hex(&r.encode()), "534b5431550000000000989680");
        let s = Summary {
            bytes: 1,
            first_byte_unix_ns: 2,
            last_byte_unix_ns: 3,
            sent_packets: 4,
            lost_packets: 5,
            retransmissions: 6,
        };
        let want: String = std::iter::once("534b5331".to_string())
            .chain((1..=6u64).map(|v| format!("{v:016x}")))
            .collect();
        assert_eq!(hex(&s.encode()), want);
    }

    #[test]
    fn upload_duration_uses_server_clock_when_consistent() {
        let s = Summary {
            last_byte_unix_ns: 1_500_000_000,
            ..Summary::default()
        };
        assert_eq!(
            upload_duration(1_000_000_000, &s, Duration::from_secs(1)),
            Duration::from_millis(500)
        );
        // Server clock behind the client's: fall back to the client's elapsed time.
        assert_eq!(
            upload_duration(2_000_000_000, &s, Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        // Server clock far ahead: fall back too.
        assert_eq!(
            upload_duration(0, &s, Duration::from_secs(1)),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn report_goodput() {
        let r = TransferReport::new(
            Stack::Quiche,
            TransferDirection::Download,
            10_000_000,
            Duration::from_secs(2),
            SenderStats::default(),
        );
        assert!((r.goodput_mbps - 40.0).abs() < 1e-9);
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.starts_with(r#"{"stack":"quiche","direction":"download","bytes":10000000,"duration_s":2.0,"goodput_mbps":40.0"#));
    }

    proptest! {
        #[test]
        fn fuzz_parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            fuzz_parse(&data);
        }

        #[test]
        fn summary_roundtrips(a in any::<u64>(), b in any::<u64>(), c in any::<u64>(), d in any::<u64>()) {
            let s = Summary { bytes: a, first_byte_unix_ns: b, last_byte_unix_ns: c, sent_packets: d, lost_packets: a ^ d, retransmissions: b ^ c };
            prop_assert_eq!(Summary::decode(&s.encode()), Ok(s));
        }
    }
}
