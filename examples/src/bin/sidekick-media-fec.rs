//! `sidekick-media-fec`: low-latency media with FEC by repetition (Packrat media workload).
//!
//! ```text
//! sidekick-media-fec server --listen IP:PORT [--once]                      # sender
//! sidekick-media-fec client --connect IP:PORT [--duration SECS] [--json]   # receiver / player
//!                           [--sidekick [--sidekick-eack periodic|nack] [--sidekick-eack-packets 2]
//!                                       [--sidekick-eack-interval-ms 40] [--sidekick-eack-symbols 40]
//!                                       [--sidekick-reorder-ms 65] [--sidekick-discovery-retry-ms MS]
//!                                       [--sidekick-discovery-attempts N]]
//! ```
//! With `--sidekick` the player runs a Packrat receiver (Packrat (CoNEXT '26) §6.2): it sends eACKs of the
//! media datagrams it received to an on-path proxy, which retransmits from its cache what is
//! missing. `--sidekick-eack periodic` (the default) sends them every N packets or MS;
//! `--sidekick-eack nack` only where the NACK layer sees a missing packet (selective eACKs,
//! Packrat (CoNEXT '26) §5.2.3: one at once, then every MS while the packet is missing, for at most
//! the reorder window), and holds the player's own end-to-end NACK for that window while the
//! proxy repairs.
//! The server sends 480 B every 20 ms carrying the last 40 ms (frames k and k−1); the client plays
//! with a 40 ms buffer, NACKs missing frames (re-NACK at most once per RTT), and prints per-frame
//! one-way latency and stall metrics.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use sidekick::session::SidekickClient;
use sidekick_examples::fec::FecConfig;
use sidekick_examples::media_io::{
    FecHooks, NoHooks, ReceiverTiming, run_fec_client_with, serve_fec,
};
use sidekick_examples::media_session::FecReport;
use sidekick_examples::media_sidekick::{
    EackMode, MEDIA_EACK_EXPECTED, MEDIA_EACK_PROBABILITY, MediaSidekick, player_config,
};
use tokio::net::UdpSocket;

/// Media stream with FEC (each packet repeats the previous frame), NACKs and a playback buffer.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Stream to clients that ask (one at a time).
    Server(ServerArgs),
    /// Ask for a stream, play it, print latency and stall metrics.
    Client(ClientArgs),
}

#[derive(Args)]
struct ServerArgs {
    /// Address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// Exit after the first stream.
    #[arg(long)]
    once: bool,
    /// Longest stream served, seconds.
    #[arg(long, default_value_t = 3600.0)]
    max_duration: f64,
}

#[derive(Args)]
struct ClientArgs {
    /// Server address.
    #[arg(long)]
    connect: SocketAddr,
    /// Stream duration, seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Print exactly one JSON line.
    #[arg(long)]
    json: bool,
    /// Playback buffer target, ms (a multiple of 20).
    #[arg(long, default_value_t = 40)]
    buffer_ms: u64,
    /// RTT assumed for re-NACKs before the first measurement, ms.
    #[arg(long, default_value_t = 200)]
    initial_rtt_ms: u64,
    /// After the server's FIN, keep NACKing missing frames for this long, ms.
    #[arg(long, default_value_t = 2000)]
    linger_ms: u64,
    /// Write a per-frame CSV (frame, availability ms since start, latency ms; empty if never).
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
    /// Packrat: use an on-path sidekick proxy (eACKs; the proxy retransmits from its cache);
    /// falls back to end-to-end NACKs when no proxy answers.
    #[arg(long)]
    sidekick: bool,
    /// When to eACK: `periodic` (every N packets or MS) or `nack` (where the player would NACK
    /// a missing packet, and hold its own NACK while the proxy repairs).
    #[arg(long, value_enum, default_value_t = EackMode::Periodic)]
    sidekick_eack: EackMode,
    /// NACK-driven eACKs: how long a missing packet is eACKed (every MS) and the player's NACK
    /// held, ms (about two client–proxy round trips: a repair may need a second attempt).
    #[arg(long, value_name = "MS", default_value_t = 65)]
    sidekick_reorder_ms: u32,
    /// Periodic eACKs: an eACK every N media packets.
    #[arg(long, value_name = "N", default_value_t = 2)]
    sidekick_eack_packets: u32,
    /// …or at least every MS while packets arrive (NACK-driven: while a packet is missing).
    #[arg(long, value_name = "MS", default_value_t = 40)]
    sidekick_eack_interval_ms: u32,
    /// Local eACK symbols (Packrat (CoNEXT '26) Table 4, media: 40).
    #[arg(long, value_name = "N", default_value_t = 40)]
    sidekick_eack_symbols: u32,
    /// Size each eACK to decode this many differences (media datagrams have no packet number,
    /// so the client cannot count its gaps).
    #[arg(long, value_name = "N", default_value_t = MEDIA_EACK_EXPECTED)]
    sidekick_eack_expected: usize,
    /// …with this decoding probability.
    #[arg(long, value_name = "P", default_value_t = MEDIA_EACK_PROBABILITY)]
    sidekick_eack_probability: f64,
    /// First discovery retransmission timeout, ms.
    #[arg(long, value_name = "MS", default_value_t = 250)]
    sidekick_discovery_retry_ms: u32,
    /// Discovery requests before falling back (no proxy).
    #[arg(long, value_name = "N", default_value_t = 4)]
    sidekick_discovery_attempts: u32,
}

fn main() -> anyhow::Result<()> {
    sidekick_examples::cli::init_tracing("warn");
    let cli = Cli::parse();
    let rt = sidekick_examples::cli::current_thread_runtime()?;
    rt.block_on(async move {
        match cli.cmd {
            Cmd::Server(a) => {
                let socket = UdpSocket::bind(a.listen)
                    .await
                    .with_context(|| format!("binding {}", a.listen))?;
                let max = Duration::try_from_secs_f64(a.max_duration).context("--max-duration")?;
                serve_fec(&socket, &FecConfig::default(), max, a.once)
                    .await
                    .context("serving")
            }
            Cmd::Client(a) => client(a).await,
        }
    })
}

async fn client(a: ClientArgs) -> anyhow::Result<()> {
    let bind: SocketAddr = if a.connect.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let socket = Arc::new(UdpSocket::bind(bind).await.context("binding")?);
    let base = FecConfig::default();
    let cfg = FecConfig {
        target_frames: usize::try_from(a.buffer_ms / base.frame.as_millis() as u64)
            .unwrap_or(2)
            .max(1),
        initial_rtt: Duration::from_millis(a.initial_rtt_ms.max(1)),
        ..base
    };
    let duration = Duration::try_from_secs_f64(a.duration).context("--duration")?;
    let timing = ReceiverTiming {
        linger: Duration::from_millis(a.linger_ms),
        ..ReceiverTiming::default()
    };
    let mut sk = None;
    let mut hooks: Box<dyn FecHooks> = if a.sidekick {
        let mut c = player_config(
            a.sidekick_eack,
            a.sidekick_eack_interval_ms,
            a.sidekick_eack_packets,
            a.sidekick_eack_symbols,
            a.sidekick_reorder_ms,
        );
        c.packrat.inflight_allowance = a.sidekick_eack_expected;
        c.packrat.success_probability = a.sidekick_eack_probability;
        c.protocol.discovery_retry =
            Duration::from_millis(u64::from(a.sidekick_discovery_retry_ms));
        c.protocol.discovery_attempts = a.sidekick_discovery_attempts.max(1);
        let sk_socket = UdpSocket::bind(bind)
            .await
            .context("binding the sidekick socket")?;
        let (handle, h) = MediaSidekick::spawn_receiver(
            SidekickClient::new(c),
            socket.clone(),
            a.connect,
            sk_socket,
        );
        sk = Some(handle);
        Box::new(h)
    } else {
        Box::new(NoHooks)
    };
    let out = run_fec_client_with(&socket, a.connect, &cfg, duration, timing, hooks.as_mut())
        .await
        .context("media client")?;
    let sidekick = sk.map(|h| {
        let c = h.counters();
        h.stop();
        c
    });
    if let Some(path) = &a.trace {
        let s = out.receiver.trace_csv();
        std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))?;
    }
    let m = out.metrics;
    if a.json {
        let r = FecReport {
            app: "media-fec",
            duration_s: duration.as_secs_f64(),
            metrics: m,
            sidekick,
        };
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "packets {}/{}, frames {} ({} via FEC, {} missing), {} frames NACKed; latency p50 {:.1} ms p99 {:.1} ms; stalls {} totalling {:.1} ms; RTT {:.1} ms",
            m.packets_received,
            m.packets_expected,
            m.frames_received,
            m.frames_from_fec,
            m.frames_missing,
            m.nacked_frames,
            m.latency_p50_ms,
            m.latency_p99_ms,
            m.stall_count,
            m.stall_ms_total,
            m.rtt_ms
        );
        if let Some(sk) = &sidekick {
            println!("sidekick: {}", serde_json::to_string(sk)?);
        }
    }
    Ok(())
}
