//! `sidekick-media-fec`: low-latency media with FEC by repetition (Packrat media workload).
//!
//! ```text
//! sidekick-media-fec server --listen IP:PORT [--once]                      # sender
//! sidekick-media-fec client --connect IP:PORT [--duration SECS] [--json]   # receiver / player
//! ```
//! The server sends 480 B every 20 ms carrying the last 40 ms (frames k and k−1); the client plays
//! with a 40 ms buffer, NACKs missing frames (re-NACK at most once per RTT), and prints per-frame
//! one-way latency and stall metrics.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use serde::Serialize;
use sidekick_examples::fec::{FecConfig, FecMetrics};
use sidekick_examples::media_io::{ReceiverTiming, run_fec_client, serve_fec};
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
}

#[derive(Serialize)]
struct Report {
    app: &'static str,
    duration_s: f64,
    #[serde(flatten)]
    metrics: FecMetrics,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
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
    let socket = UdpSocket::bind(bind).await.context("binding")?;
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
    let out = run_fec_client(&socket, a.connect, &cfg, duration, timing)
        .await
        .context("media client")?;
    if let Some(path) = &a.trace {
        let s = out.receiver.trace_csv();
        std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))?;
    }
    let m = out.metrics;
    if a.json {
        let r = Report {
            app: "media-fec",
            duration_s: duration.as_secs_f64(),
            metrics: m,
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
    }
    Ok(())
}
