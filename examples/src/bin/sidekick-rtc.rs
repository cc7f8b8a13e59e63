//! `sidekick-rtc`: RTC frames over QUIC (PEMI §6.1.2) with quinn or quiche: the server sends
//! one frame per stream at a constant frame rate and bit rate, the client measures frame delay
//! and frame-level jitter.
//!
//! ```text
//! sidekick-rtc server --stack quinn|quiche --listen IP:PORT [--once] [--fps 30] [--kbps 3000]
//! sidekick-rtc client --stack quinn|quiche --connect IP:PORT --duration SECS [--json] [--timeout SECS]
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};
use sidekick_examples::rtc::{
    DEFAULT_FPS, DEFAULT_KBPS, FrameParams, MAX_DURATION_MS, RtcReport, Stack, quiche_stack,
    quinn_stack,
};

/// RTC frames over QUIC: the server sends frames (default 30 fps, 3000 kbit/s), each on its own
/// unidirectional stream; the client reports frame delay, frame-level jitter and goodput.
#[derive(Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Send frames to every client that asks (many connections unless --once).
    Server(ServerArgs),
    /// Ask for DURATION seconds of frames and print the metrics.
    Client(ClientArgs),
}

#[derive(Args)]
struct ServerArgs {
    /// QUIC implementation.
    #[arg(long, value_enum)]
    stack: Stack,
    /// Address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// Exit after the first connection.
    #[arg(long)]
    once: bool,
    /// Frames per second.
    #[arg(
        long,
        default_value_t = DEFAULT_FPS,
        value_parser = clap::value_parser!(u32).range(1..=1000)
    )]
    fps: u32,
    /// Bit rate of the frame payloads, kbit/s (payload per frame = kbps · 1000 / 8 / fps bytes).
    #[arg(
        long,
        default_value_t = DEFAULT_KBPS,
        value_parser = clap::value_parser!(u32).range(1..=1_000_000)
    )]
    kbps: u32,
}

#[derive(Args)]
struct ClientArgs {
    /// QUIC implementation.
    #[arg(long, value_enum)]
    stack: Stack,
    /// Server address.
    #[arg(long)]
    connect: SocketAddr,
    /// Seconds of frames to ask the server for.
    #[arg(long, value_name = "SECS")]
    duration: f64,
    /// Print exactly one JSON line.
    #[arg(long)]
    json: bool,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 120.0)]
    timeout: f64,
}

fn main() -> anyhow::Result<()> {
    sidekick_examples::cli::init_tracing("warn");
    match Cli::parse().cmd {
        Cmd::Server(a) => {
            let params = FrameParams {
                fps: a.fps,
                kbps: a.kbps,
            };
            match a.stack {
                Stack::Quiche => quiche_stack::serve(a.listen, a.once, params),
                Stack::Quinn => {
                    let rt = tokio::runtime::Runtime::new().context("tokio runtime")?;
                    rt.block_on(async {
                        let ep = quinn_stack::server_endpoint(a.listen)?;
                        quinn_stack::serve(ep, a.once, params).await
                    })
                }
                // Not a value of --stack here (skipped from the command line).
                Stack::S2nQuic => bail!("sidekick-rtc has no s2n-quic stack"),
            }
        }
        Cmd::Client(a) => {
            let duration = Duration::try_from_secs_f64(a.duration).context("--duration")?;
            if duration.is_zero() || duration.as_millis() > u128::from(MAX_DURATION_MS) {
                bail!("--duration must be above 0 and at most {MAX_DURATION_MS} ms");
            }
            let timeout = Duration::try_from_secs_f64(a.timeout).context("--timeout")?;
            let report = match a.stack {
                Stack::Quiche => quiche_stack::run_client(a.connect, duration, timeout)
                    .with_context(|| format!("quiche client of {}", a.connect))?,
                Stack::Quinn => {
                    let rt = tokio::runtime::Runtime::new().context("tokio runtime")?;
                    rt.block_on(async {
                        tokio::time::timeout(timeout, quinn_stack::run_client(a.connect, duration))
                            .await
                            .with_context(|| format!("timed out after {timeout:?}"))?
                    })
                    .with_context(|| format!("quinn client of {}", a.connect))?
                }
                Stack::S2nQuic => bail!("sidekick-rtc has no s2n-quic stack"),
            };
            if a.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print_text(&report);
            }
            Ok(())
        }
    }
}

fn print_text(r: &RtcReport) {
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |x| format!("{x:.1}"));
    println!(
        "{}: {}/{} frames in {:.3} s, goodput {:.3} Mbit/s; frame delay p50/p90/p99 {}/{}/{} ms; \
         frame jitter p50/p90/p99 {}/{}/{} ms",
        r.stack,
        r.frames_received,
        r.frames_sent,
        r.duration_s,
        r.goodput_mbps,
        ms(r.frame_delay_p50_ms),
        ms(r.frame_delay_p90_ms),
        ms(r.frame_delay_p99_ms),
        ms(r.frame_jitter_p50_ms),
        ms(r.frame_jitter_p90_ms),
        ms(r.frame_jitter_p99_ms),
    );
}
