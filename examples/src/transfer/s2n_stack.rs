//! s2n-quic (1.91, rustls with ring) client and server for the bulk transfer, raw-stream protocol
//! only: HTTP/3 (`--http3`) and the sidekick SDK (which integrates with quinn and quiche) are
//! refused with the reason.
//!
//! - **TLS.** s2n-quic is built without its default s2n-tls provider (no C build of s2n-tls);
//!   its rustls provider gets the same rustls configurations as quinn's
//!   (`quinn_stack::server_tls`, `quinn_stack::client_tls`): TLS 1.3 with ring,
//!   a client that accepts any (self-signed) certificate.
//! - **GSO.** s2n-quic sends with UDP segmentation offload where the kernel has it; it is disabled
//!   unless [`TransportOptions::gso`] is set, so every datagram fits the path MTU, as the lab's
//!   link element requires. s2n-quic then probes the path MTU (PLPMTUD) from 1228 up to 1500 bytes.
//! - **Congestion control.** CUBIC (s2n-quic's default) or BBR (s2n-quic's BBRv2); s2n-quic has
//!   no NewReno, so `--cc reno` is refused.
//! - **Statistics.** s2n-quic has no per-connection statistics call: [`PacketCounting`], an event
//!   subscriber, counts each connection's sent and lost packets ([`PacketCounters`]), which the
//!   application reads with `query_event_context`. s2n-quic has no retransmission counter either;
//!   like quinn it retransmits the frames of lost packets, so `retransmissions` reports the lost
//!   packets, as quinn's does.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use bytes::Bytes;
use s2n_quic::client::Connect;
use s2n_quic::connection::Handle;
use s2n_quic::provider::congestion_controller::{Bbr, Cubic};
use s2n_quic::provider::event::{ConnectionInfo, ConnectionMeta, Subscriber, events};
use s2n_quic::provider::limits::Limits;
use s2n_quic::stream::{BidirectionalStream, ReceiveStream, SendStream};
use s2n_quic::{Client, Connection, Server};
use tokio::io::AsyncReadExt as _;

use super::cert::SelfSigned;
use super::quinn_stack::{client_tls, server_tls};
use super::{
    ALPN, CHUNK, Cc, Request, SOCKET_BUFFER, SenderStats, Stack, Summary, TransferDirection,
    TransferReport, TransportOptions, fill_pattern, unix_ns, upload_duration,
};

/// Per-connection packet counters, kept by [`PacketCounting`] from s2n-quic's events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketCounters {
    /// Packets sent, in every packet number space (ACK-only packets included, as quinn counts).
    pub sent_packets: u64,
    /// Packets declared lost, PLPMTUD probes excepted: a probe larger than the path MTU is meant
    /// to be lost, and quinn counts its lost probes apart too.
    pub lost_packets: u64,
    /// Lost PLPMTUD probes.
    pub lost_mtu_probes: u64,
}

impl PacketCounters {
    /// A packet left.
    pub fn record_sent(&mut self) {
        self.sent_packets += 1;
    }

    /// A packet was declared lost (`is_mtu_probe`: it was a PLPMTUD probe).
    pub fn record_lost(&mut self, is_mtu_probe: bool) {
        if is_mtu_probe {
            self.lost_mtu_probes += 1;
        } else {
            self.lost_packets += 1;
        }
    }

    /// Retransmissions, as reported: s2n-quic counts none, and retransmits the frames of each lost
    /// packet (quinn's convention, see [`TransferReport::retransmissions`]).
    pub fn retransmissions(&self) -> u64 {
        self.lost_packets
    }
}

/// Event subscriber that keeps a [`PacketCounters`] per connection (its connection context).
///
/// ```
/// use s2n_quic::provider::event::Subscriber;
/// use sidekick_examples::transfer::s2n_stack::{PacketCounters, PacketCounting};
/// fn context<S: Subscriber<ConnectionContext = PacketCounters>>(_: &S) {}
/// context(&PacketCounting);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PacketCounting;

impl Subscriber for PacketCounting {
    type ConnectionContext = PacketCounters;

    fn create_connection_context(
        &mut self,
        _meta: &ConnectionMeta,
        _info: &ConnectionInfo,
    ) -> PacketCounters {
        PacketCounters::default()
    }

    fn on_packet_sent(
        &mut self,
        context: &mut PacketCounters,
        _meta: &ConnectionMeta,
        _event: &events::PacketSent,
    ) {
        context.record_sent();
    }

    fn on_packet_lost(
        &mut self,
        context: &mut PacketCounters,
        _meta: &ConnectionMeta,
        event: &events::PacketLost,
    ) {
        context.record_lost(event.is_mtu_probe);
    }
}

/// The counters of `conn` so far.
fn counters(conn: &Handle) -> anyhow::Result<PacketCounters> {
    conn.query_event_context(|c: &PacketCounters| *c)
        .map_err(|e| anyhow::anyhow!("reading the packet counters: {e:?}"))
}

/// The options s2n-quic cannot honour, refused with the reason: HTTP/3, the sidekick SDK (client
/// only; a server ignores `--sidekick` as the other stacks' do), NewReno, the ServerHello delay.
fn check_options(opts: &TransportOptions, client: bool) -> anyhow::Result<()> {
    if opts.http3 {
        bail!("--stack s2n-quic speaks the raw stream protocol only: drop --http3");
    }
    if client && opts.sidekick {
        bail!("--stack s2n-quic has no sidekick SDK integration: drop --sidekick");
    }
    if opts.cc == Cc::Reno {
        bail!("--stack s2n-quic has no NewReno: use --cc cubic (its default) or --cc bbr");
    }
    if !opts.hello_delay.is_zero() {
        bail!("--stack s2n-quic cannot hold a connection's first Initial: drop --hello-delay-ms");
    }
    Ok(())
}

/// Connection limits of both ends: windows as large as quinn's (s2n-quic's defaults, 3.75 MB, would
/// bind first on a long fat path), a stream send buffer (the unacknowledged data, 4 MiB by
/// default) as large as the stream window, idle timeout.
fn limits(opts: &TransportOptions) -> anyhow::Result<Limits> {
    let l = Limits::new()
        .with_data_window(64 << 20)
        .and_then(|l| l.with_bidirectional_local_data_window(32 << 20))
        .and_then(|l| l.with_bidirectional_remote_data_window(32 << 20))
        .and_then(|l| l.with_max_send_buffer_size(32 << 20))
        .and_then(|l| l.with_max_idle_timeout(opts.idle_timeout))
        .map_err(|e| anyhow::anyhow!("s2n-quic limits: {e}"))?;
    Ok(l)
}

/// The UDP I/O of an endpoint bound to `addr`: [`SOCKET_BUFFER`]-byte socket buffers, GSO as
/// [`TransportOptions::gso`] asks.
fn io(
    addr: SocketAddr,
    opts: &TransportOptions,
) -> anyhow::Result<s2n_quic::provider::io::Default> {
    s2n_quic::provider::io::Default::builder()
        .with_receive_address(addr)
        .and_then(|b| b.with_recv_buffer_size(SOCKET_BUFFER))
        .and_then(|b| b.with_send_buffer_size(SOCKET_BUFFER))
        .and_then(|b| b.with_gso(opts.gso))
        .and_then(s2n_quic::provider::io::tokio::Builder::build)
        .with_context(|| format!("s2n-quic I/O on {addr}"))
}

/// Builds `$builder` (a server or client builder with every provider but the congestion
/// controller) with the controller `$cc` asks for and starts it: the two controllers are two
/// endpoint types, hence a macro rather than a function.
macro_rules! start_with_cc {
    ($builder:expr, $cc:expr) => {
        match $cc {
            Cc::Bbr => $builder.with_congestion_controller(Bbr::default())?.start(),
            // NewReno was refused by `check_options`.
            Cc::Cubic | Cc::Reno => $builder
                .with_congestion_controller(Cubic::default())?
                .start(),
        }
        .map_err(|e| anyhow::anyhow!("starting the s2n-quic endpoint: {e}"))
    };
}

/// An s2n-quic server on `listen` with a fresh self-signed certificate padded to
/// `opts.cert_bytes`. Call it within a tokio runtime: the endpoint's I/O task starts on it.
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> anyhow::Result<()> {
/// use sidekick_examples::transfer::{Request, TransferDirection, TransportOptions, s2n_stack};
/// let opts = TransportOptions::default();
/// let server = s2n_stack::server("127.0.0.1:0".parse()?, &opts)?;
/// let addr = server.local_addr()?;
/// tokio::spawn(s2n_stack::serve(server, true));
/// let req = Request { direction: TransferDirection::Download, bytes: 100_000 };
/// let report = s2n_stack::run_client(addr, req, &opts).await?;
/// assert_eq!((report.stack, report.bytes), ("s2n-quic", 100_000));
/// assert!(report.ttfb_ms.is_some() && report.sent_packets.is_some());
/// # Ok(())
/// # }
/// ```
pub fn server(listen: SocketAddr, opts: &TransportOptions) -> anyhow::Result<Server> {
    check_options(opts, false)?;
    let cert = SelfSigned::generate_padded(opts.cert_bytes)?;
    let tls = s2n_quic::provider::tls::rustls::Server::from(server_tls(ALPN.to_vec(), &cert)?);
    let builder = Server::builder()
        .with_tls(tls)?
        .with_io(io(listen, opts)?)?
        .with_limits(limits(opts)?)?
        .with_event(PacketCounting)?;
    start_with_cc!(builder, opts.cc)
}

/// Serve transfers on `server`, connections concurrently; with `once`, return after the first
/// connection ends.
pub async fn serve(mut server: Server, once: bool) -> anyhow::Result<()> {
    while let Some(conn) = server.accept().await {
        if once {
            return serve_connection(conn).await;
        }
        tokio::spawn(async move {
            if let Err(e) = serve_connection(conn).await {
                tracing::warn!("connection failed: {e:#}");
            }
        });
    }
    Ok(())
}

/// Serve every stream the client opens on `conn`, then wait for the client to close.
async fn serve_connection(conn: Connection) -> anyhow::Result<()> {
    let (handle, mut acceptor) = conn.split();
    let peer = handle.remote_addr().ok();
    let mut streams = tokio::task::JoinSet::new();
    let mut served = 0u32;
    loop {
        tokio::select! {
            s = acceptor.accept_bidirectional_stream() => match s {
                Ok(Some(stream)) => {
                    served += 1;
                    streams.spawn(serve_stream(handle.clone(), stream));
                }
                // The client closes once it has every summary.
                Ok(None) if served > 0 => break,
                Err(e) if served > 0 => {
                    tracing::info!(?peer, reason = %e, "connection closed");
                    break;
                }
                Ok(None) => bail!("connection from {peer:?} closed before opening a stream"),
                Err(e) => return Err(e).context("accepting stream"),
            },
            Some(r) = streams.join_next() => r.context("stream task")??,
        }
    }
    while let Some(r) = streams.join_next().await {
        r.context("stream task")??;
    }
    Ok(())
}

async fn serve_stream(conn: Handle, stream: BidirectionalStream) -> anyhow::Result<()> {
    let peer = conn.remote_addr().ok();
    let (mut recv, mut send) = stream.split();
    let mut hdr = [0u8; Request::LEN];
    recv.read_exact(&mut hdr).await.context("reading request")?;
    let req = Request::decode(&hdr)?;
    tracing::info!(?peer, ?req, "request");
    let summary = match req.direction {
        TransferDirection::Download => {
            send_pattern(&mut send, req.bytes).await?;
            // The client finishes its side once it holds every byte.
            while recv
                .receive()
                .await
                .context("awaiting client FIN")?
                .is_some()
            {}
            let c = counters(&conn)?;
            Summary {
                bytes: req.bytes,
                sent_packets: c.sent_packets,
                lost_packets: c.lost_packets,
                retransmissions: c.retransmissions(),
                ..Summary::default()
            }
        }
        TransferDirection::Upload => {
            let mut got = 0u64;
            let mut first = 0u64;
            let mut last = 0u64;
            while let Some(chunk) = recv.receive().await.context("receiving payload")? {
                if got == 0 && !chunk.is_empty() {
                    first = unix_ns(SystemTime::now());
                }
                got += chunk.len() as u64;
                if got >= req.bytes && last == 0 {
                    last = unix_ns(SystemTime::now());
                }
            }
            if got != req.bytes {
                bail!("upload from {peer:?}: got {got} of {} bytes", req.bytes);
            }
            let c = counters(&conn)?;
            Summary {
                bytes: got,
                first_byte_unix_ns: first,
                last_byte_unix_ns: last,
                sent_packets: c.sent_packets,
                lost_packets: c.lost_packets,
                retransmissions: c.retransmissions(),
            }
        }
    };
    send.send(Bytes::copy_from_slice(&summary.encode()))
        .await
        .context("sending summary")?;
    // The connection stays open until the client closes it, so the summary is delivered after
    // this task ends.
    send.finish().context("finishing stream")?;
    Ok(())
}

/// Write `bytes` bytes of the payload pattern on `send` (one shared chunk, sliced).
async fn send_pattern(send: &mut SendStream, bytes: u64) -> anyhow::Result<()> {
    let mut buf = vec![0u8; CHUNK];
    fill_pattern(&mut buf);
    let chunk = Bytes::from(buf);
    let mut left = bytes;
    while left > 0 {
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(CHUNK);
        send.send(chunk.slice(..n))
            .await
            .context("sending payload")?;
        left -= n as u64;
    }
    Ok(())
}

/// Run one transfer as an s2n-quic client and return the report (`ttfb_ms` for a download).
pub async fn run_client(
    connect: SocketAddr,
    req: Request,
    opts: &TransportOptions,
) -> anyhow::Result<TransferReport> {
    check_options(opts, true)?;
    let tls = s2n_quic::provider::tls::rustls::Client::from(client_tls(ALPN.to_vec())?);
    let builder = Client::builder()
        .with_tls(tls)?
        .with_io(io(super::unspecified_for(connect), opts)?)?
        .with_limits(limits(opts)?)?
        .with_event(PacketCounting)?;
    let mut client: Client = start_with_cc!(builder, opts.cc)?;
    let t0 = Instant::now();
    let mut first_byte = None;
    let mut conn = client
        .connect(Connect::new(connect).with_server_name("localhost"))
        .await
        .with_context(|| format!("handshake with {connect}"))?;
    let (duration, stats) = raw_transfer(&mut conn, req, &mut first_byte).await?;
    conn.close(s2n_quic::application::Error::UNKNOWN);
    drop(conn);
    // Let the CONNECTION_CLOSE leave before the process exits, or the server waits out its idle
    // timeout.
    if let Err(e) = client.wait_idle().await {
        tracing::debug!("waiting for the client endpoint to close: {e}");
    }
    let mut report = TransferReport::new(Stack::S2nQuic, req.direction, req.bytes, duration, stats);
    report.ttfb_ms = first_byte.map(|t: Instant| t.duration_since(t0).as_secs_f64() * 1e3);
    Ok(report)
}

/// The raw-stream transfer on an established connection: (duration, data sender's stats).
/// `first_byte` receives the time the first payload byte of a download arrived.
async fn raw_transfer(
    conn: &mut Connection,
    req: Request,
    first_byte: &mut Option<Instant>,
) -> anyhow::Result<(Duration, SenderStats)> {
    let (mut recv, mut send) = conn
        .open_bidirectional_stream()
        .await
        .context("opening stream")?
        .split();
    let start = Instant::now();
    let start_wall = unix_ns(SystemTime::now());
    send.send(Bytes::copy_from_slice(&req.encode()))
        .await
        .context("sending request")?;
    match req.direction {
        TransferDirection::Download => {
            let mut got = 0u64;
            while got < req.bytes {
                match recv.receive().await.context("receiving payload")? {
                    Some(c) => {
                        if got == 0 && !c.is_empty() {
                            *first_byte = Some(Instant::now());
                        }
                        got += c.len() as u64;
                    }
                    None => bail!("server finished after {got} of {} bytes", req.bytes),
                }
            }
            // The summary follows only our FIN: more bytes now are the server's error.
            if got > req.bytes {
                bail!("server sent {got} bytes for a request of {}", req.bytes);
            }
            let duration = start.elapsed();
            send.finish().context("finishing stream")?;
            let summary = read_summary(&mut recv).await?;
            let own = counters(&conn.handle())?;
            Ok((
                duration,
                SenderStats {
                    sent_packets: summary.sent_packets,
                    lost_packets: summary.lost_packets,
                    retransmissions: summary.retransmissions,
                    receiver_sent_packets: own.sent_packets,
                    sender_unknown: false,
                },
            ))
        }
        TransferDirection::Upload => {
            send_pattern(&mut send, req.bytes).await?;
            send.finish().context("finishing stream")?;
            let summary = read_summary(&mut recv).await?;
            let elapsed = start.elapsed();
            if summary.bytes != req.bytes {
                bail!("server received {} of {} bytes", summary.bytes, req.bytes);
            }
            let own = counters(&conn.handle())?;
            Ok((
                upload_duration(start_wall, &summary, elapsed),
                SenderStats {
                    sent_packets: own.sent_packets,
                    lost_packets: own.lost_packets,
                    retransmissions: own.retransmissions(),
                    receiver_sent_packets: summary.sent_packets,
                    sender_unknown: false,
                },
            ))
        }
    }
}

async fn read_summary(recv: &mut ReceiveStream) -> anyhow::Result<Summary> {
    let mut buf = [0u8; Summary::LEN];
    recv.read_exact(&mut buf).await.context("reading summary")?;
    Ok(Summary::decode(&buf)?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn lost_mtu_probes_are_counted_apart() {
        let mut c = PacketCounters::default();
        for _ in 0..5 {
            c.record_sent();
        }
        c.record_lost(false);
        c.record_lost(true);
        c.record_lost(false);
        assert_eq!(
            c,
            PacketCounters {
                sent_packets: 5,
                lost_packets: 2,
                lost_mtu_probes: 1,
            }
        );
        assert_eq!(c.retransmissions(), 2);
    }

    #[test]
    fn options_it_cannot_honour_are_refused() {
        let ok = TransportOptions::default();
        assert!(check_options(&ok, true).is_ok());
        let bbr = TransportOptions { cc: Cc::Bbr, ..ok };
        assert!(check_options(&bbr, true).is_ok());
        for (opts, client, word) in [
            (TransportOptions { http3: true, ..ok }, false, "--http3"),
            (
                TransportOptions {
                    sidekick: true,
                    ..ok
                },
                true,
                "--sidekick",
            ),
            (TransportOptions { cc: Cc::Reno, ..ok }, true, "NewReno"),
            (
                TransportOptions {
                    hello_delay: Duration::from_millis(1),
                    ..ok
                },
                false,
                "--hello-delay-ms",
            ),
        ] {
            let e = check_options(&opts, client).unwrap_err().to_string();
            assert!(e.contains(word), "{e}");
        }
        // A server ignores --sidekick, as the other stacks' servers do.
        let sk = TransportOptions {
            sidekick: true,
            ..ok
        };
        assert!(check_options(&sk, false).is_ok());
    }

    /// The subscriber's counters reach both reports: a download and an upload in process on
    /// loopback, each data sender with at least one packet per 1500 bytes, the receiver with
    /// some (its ACKs).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn event_counters_reach_the_reports() {
        const BYTES: u64 = 300_000;
        let opts = TransportOptions::default();
        let srv = server("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let addr = srv.local_addr().unwrap();
        tokio::spawn(serve(srv, false));
        for direction in [TransferDirection::Download, TransferDirection::Upload] {
            let req = Request {
                direction,
                bytes: BYTES,
            };
            let r = run_client(addr, req, &opts).await.unwrap();
            assert_eq!((r.stack, r.bytes), ("s2n-quic", BYTES));
            assert!(r.goodput_mbps > 0.0, "{r:?}");
            assert!(r.sent_packets.unwrap() >= BYTES / 1500, "{r:?}");
            assert!(r.receiver_sent_packets > 0, "{r:?}");
            assert_eq!(r.lost_packets, r.retransmissions);
            assert_eq!(
                r.ttfb_ms.is_some(),
                direction == TransferDirection::Download
            );
        }
    }
}
