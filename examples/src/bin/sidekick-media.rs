//! `sidekick-media`: low-latency media with NACK retransmission (Robin scenario #1).
//!
//! ```text
//! sidekick-media server --listen IP:PORT [--once] [--json] [--trace FILE]   # receiver
//! sidekick-media client --connect IP:PORT [--duration SECS] [--json]        # sender
//!                       [--sidekick [--sidekick-quack-every-packets N] [--sidekick-quack-threshold T]
//!                                   [--sidekick-quack-interval-ms MS] [--sidekick-reorder-threshold N]
//!                                   [--sidekick-discovery-retry-ms MS]
//!                                   [--sidekick-discovery-attempts N]]
//! ```
//! With `--sidekick` the sender runs Robin (Sidekick (NSDI '24) Table 5 #1): an on-path proxy quACKs the
//! datagrams it forwarded and the sender resends at once a datagram a quACK shows lost.
//! The client sends 240 B every 20 ms with an encrypted sequence number; the server NACKs gaps
//! (re-NACK at most once per RTT), measures the de-jitter buffer delay of every packet and returns
//! its metrics, which the client prints together with its own counters.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use sidekick::session::SidekickClient;
use sidekick_examples::media::{MediaConfig, MediaSender, NoObserver, SendObserver};
use sidekick_examples::media_io::{
    ReceiverTiming, parse_media_summary, random_nonce_start, run_sender, serve_media,
};
use sidekick_examples::media_session::MediaReport;
use sidekick_examples::media_sidekick::{MediaSidekick, media_config};
use tokio::net::UdpSocket;

/// Low-latency media stream with NACKs; reports de-jitter buffer delay and latency.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Receive streams (one at a time), NACK gaps, measure de-jitter delay.
    Server(ServerArgs),
    /// Send one stream and print the combined metrics.
    Client(ClientArgs),
}

#[derive(Args)]
struct Stream {
    /// Packet interval, ms.
    #[arg(long, default_value_t = 20)]
    interval_ms: u64,
    /// Payload bytes per packet.
    #[arg(long, default_value_t = 240)]
    payload: usize,
    /// RTT assumed for re-NACKs before the first measurement, ms.
    #[arg(long, default_value_t = 100)]
    initial_rtt_ms: u64,
}

#[derive(Args)]
struct ServerArgs {
    /// Address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// Exit after the first stream.
    #[arg(long)]
    once: bool,
    /// Print each session's metrics as one JSON line.
    #[arg(long)]
    json: bool,
    /// Write a per-packet CSV trace (seq, arrival, latency, de-jitter delay) of each session.
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
    /// After the sender's FIN, keep NACKing missing packets for this long, ms.
    #[arg(long, default_value_t = 2000)]
    linger_ms: u64,
    #[command(flatten)]
    stream: Stream,
}

#[derive(Args)]
struct ClientArgs {
    /// Receiver address.
    #[arg(long)]
    connect: SocketAddr,
    /// Stream duration, seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Print exactly one JSON line.
    #[arg(long)]
    json: bool,
    /// Wait this long after the stream for the receiver's summary, seconds.
    #[arg(long, default_value_t = 10.0)]
    summary_wait: f64,
    #[command(flatten)]
    stream: Stream,
    /// Robin #1: use an on-path sidekick proxy (quACK-driven early retransmission); falls back
    /// to end-to-end NACKs when no proxy answers.
    #[arg(long)]
    sidekick: bool,
    /// quACK every N packets (Sidekick (NSDI '24) Table 5 #1: 2).
    #[arg(long, value_name = "N", default_value_t = 2)]
    sidekick_quack_every_packets: u32,
    /// quACK threshold t (Sidekick (NSDI '24) Table 5 #1: 8).
    #[arg(long, value_name = "T", default_value_t = 8)]
    sidekick_quack_threshold: u32,
    /// Also a quACK every MS milliseconds (0: packet count only).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    sidekick_quack_interval_ms: u32,
    /// Also ask the proxy for a quACK at once when a packet follows a silence longer than PCT %
    /// of the stream's packet spacing — the packet after a near-link loss (0: off; else ≥ 110).
    /// With it a sparse --sidekick-quack-every-packets keeps the recovery of a dense one.
    #[arg(long, value_name = "PCT", default_value_t = 0)]
    sidekick_quack_on_gap: u32,
    /// A hole is lost once this many later packets reached the proxy (Sidekick (NSDI '24) §5.2: 1 for
    /// media, no reordering tolerance; bulk transfers use 3).
    #[arg(long, value_name = "N", default_value_t = 1)]
    sidekick_reorder_threshold: u32,
    /// First discovery retransmission timeout, ms.
    #[arg(long, value_name = "MS", default_value_t = 250)]
    sidekick_discovery_retry_ms: u32,
    /// Discovery requests before falling back (no proxy).
    #[arg(long, value_name = "N", default_value_t = 4)]
    sidekick_discovery_attempts: u32,
}

fn config(s: &Stream) -> MediaConfig {
    MediaConfig {
        interval: Duration::from_millis(s.interval_ms.max(1)),
        payload_len: s.payload,
        initial_rtt: Duration::from_millis(s.initial_rtt_ms.max(1)),
        ..MediaConfig::default()
    }
}

fn main() -> anyhow::Result<()> {
    sidekick_examples::cli::init_tracing("warn");
    let cli = Cli::parse();
    let rt = sidekick_examples::cli::current_thread_runtime()?;
    rt.block_on(async move {
        match cli.cmd {
            Cmd::Server(a) => server(a).await,
            Cmd::Client(a) => client(a).await,
        }
    })
}

async fn server(a: ServerArgs) -> anyhow::Result<()> {
    let socket = UdpSocket::bind(a.listen)
        .await
        .with_context(|| format!("binding {}", a.listen))?;
    let cfg = config(&a.stream);
    let timing = ReceiverTiming {
        linger: Duration::from_millis(a.linger_ms),
        ..ReceiverTiming::default()
    };
    let mut n = 0u32;
    serve_media(&socket, &cfg, timing, a.once, |s| {
        let m = s.receiver.metrics();
        if a.json {
            println!("{}", serde_json::to_string(&m).unwrap_or_default());
        } else {
            println!(
                "{}: {} packets, {} missing, {} NACKs; de-jitter p50 {:.1} ms p99 {:.1} ms; latency p99 {:.1} ms",
                s.peer, m.packets_received, m.packets_missing, m.nacked_seqs, m.dejitter_p50_ms,
                m.dejitter_p99_ms, m.latency_p99_ms
            );
        }
        if let Some(path) = &a.trace {
            let path = if n == 0 {
                path.clone()
            } else {
                path.with_extension(format!("{n}.csv"))
            };
            if let Err(e) = std::fs::write(&path, s.receiver.trace_csv()) {
                tracing::warn!("writing {}: {e}", path.display());
            }
        }
        n += 1;
    })
    .await
    .context("serving")
}

async fn client(a: ClientArgs) -> anyhow::Result<()> {
    let bind: SocketAddr = if a.connect.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let socket = Arc::new(UdpSocket::bind(bind).await.context("binding")?);
    let cfg = config(&a.stream);
    let duration = Duration::try_from_secs_f64(a.duration).context("--duration")?;
    let wait = Duration::try_from_secs_f64(a.summary_wait).context("--summary-wait")?;
    let mut sender = MediaSender::new(&cfg, random_nonce_start());
    let mut sk = None;
    let mut observer: Box<dyn SendObserver> = if a.sidekick {
        let mut c = media_config(
            a.sidekick_quack_every_packets,
            a.sidekick_quack_threshold,
            a.sidekick_quack_interval_ms,
            a.sidekick_reorder_threshold,
            a.sidekick_quack_on_gap,
        );
        c.protocol.discovery_retry =
            Duration::from_millis(u64::from(a.sidekick_discovery_retry_ms));
        c.protocol.discovery_attempts = a.sidekick_discovery_attempts.max(1);
        let sk_socket = UdpSocket::bind(bind)
            .await
            .context("binding the sidekick socket")?;
        let (handle, obs) =
            MediaSidekick::spawn(SidekickClient::new(c), socket.clone(), a.connect, sk_socket);
        sk = Some(handle);
        Box::new(obs)
    } else {
        Box::new(NoObserver)
    };
    let out = run_sender(
        &socket,
        a.connect,
        &mut sender,
        cfg.interval,
        duration,
        None,
        observer.as_mut(),
        wait,
    )
    .await;
    let sidekick = sk.map(|h| {
        let c = h.counters();
        h.stop();
        c
    });
    let summary = out
        .summary
        .context("no summary from the receiver (is the server running?)")?;
    let receiver = parse_media_summary(&summary).context("parsing the receiver's summary")?;
    let report = MediaReport {
        app: "media",
        duration_s: duration.as_secs_f64(),
        sender: sender.counters(),
        receiver,
        sidekick,
    };
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        let r = &report;
        println!(
            "sent {} (+{} retransmissions), received {}, {} NACKed; de-jitter p50 {:.1} ms p99 {:.1} ms max {:.1} ms; latency p50 {:.1} ms p99 {:.1} ms; RTT {:.1} ms",
            r.sender.packets_sent,
            r.sender.retransmissions,
            r.receiver.packets_received,
            r.receiver.nacked_seqs,
            r.receiver.dejitter_p50_ms,
            r.receiver.dejitter_p99_ms,
            r.receiver.dejitter_max_ms,
            r.receiver.latency_p50_ms,
            r.receiver.latency_p99_ms,
            r.receiver.rtt_ms
        );
        if let Some(sk) = &r.sidekick {
            println!("sidekick: {}", serde_json::to_string(sk)?);
        }
    }
    Ok(())
}
