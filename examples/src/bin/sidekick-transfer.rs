//! `sidekick-transfer`: bulk transfer over QUIC (raw stream, or HTTP/3 with `--http3`) with quinn
//! or quiche.
//!
//! ```text
//! sidekick-transfer server --stack quinn|quiche --listen IP:PORT [--once]
//! sidekick-transfer client --stack quinn|quiche --connect IP:PORT (--download BYTES | --upload BYTES)
//!                          [--json] [--cc cubic|reno|bbr] [--timeout SECS]
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use sidekick_examples::transfer::{
    Cc, Direction, Request, Stack, TransportOptions, quiche_stack, quinn_stack,
};

/// Bulk transfer over QUIC with quinn or quiche; goodput measured at the receiving application.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve downloads and uploads (many sequential connections unless --once).
    Server(ServerArgs),
    /// Run one download or upload and print the result.
    Client(ClientArgs),
}

#[derive(Args)]
struct Common {
    /// QUIC implementation.
    #[arg(long, value_enum)]
    stack: Stack,
    /// Congestion controller of this endpoint (applies to the data it sends).
    #[arg(long, value_enum, default_value = "cubic")]
    cc: Cc,
    /// quinn only: enable UDP segmentation offload (off by default so datagrams fit the MTU of
    /// the lab's link element).
    #[arg(long)]
    gso: bool,
    /// Client, quinn upload: run the sidekick SDK (discovery, Robin quACKs, PACUBIC).
    #[arg(long)]
    sidekick: bool,
    /// Speak HTTP/3 (ALPN h3: GET /download/N, POST /upload/N, GET /stats) instead of the raw
    /// stream protocol. Both ends must agree.
    #[arg(long)]
    http3: bool,
}

#[derive(Args)]
struct ServerArgs {
    #[command(flatten)]
    common: Common,
    /// Address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// Exit after the first connection.
    #[arg(long)]
    once: bool,
}

#[derive(Args)]
#[group(id = "dir", required = true, multiple = false, args = ["download", "upload"])]
struct ClientArgs {
    #[command(flatten)]
    common: Common,
    /// Server address.
    #[arg(long)]
    connect: SocketAddr,
    /// Download this many bytes (server → client).
    #[arg(long, value_name = "BYTES")]
    download: Option<u64>,
    /// Upload this many bytes (client → server).
    #[arg(long, value_name = "BYTES")]
    upload: Option<u64>,
    /// Print exactly one JSON line.
    #[arg(long)]
    json: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,
}

fn options(c: &Common) -> TransportOptions {
    TransportOptions {
        cc: c.cc,
        gso: c.gso,
        http3: c.http3,
        sidekick: c.sidekick,
        ..TransportOptions::default()
    }
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
    match cli.cmd {
        Cmd::Server(a) => {
            let opts = options(&a.common);
            match a.common.stack {
                Stack::Quiche => quiche_stack::serve(a.listen, a.once, &opts),
                Stack::Quinn => {
                    let rt = tokio::runtime::Runtime::new().context("tokio runtime")?;
                    rt.block_on(async {
                        let ep = quinn_stack::server_endpoint(a.listen, &opts)?;
                        quinn_stack::serve(ep, a.once, opts.http3).await
                    })
                }
            }
        }
        Cmd::Client(a) => {
            let opts = options(&a.common);
            let req = match (a.download, a.upload) {
                (Some(b), _) => Request {
                    direction: Direction::Download,
                    bytes: b,
                },
                (None, Some(b)) => Request {
                    direction: Direction::Upload,
                    bytes: b,
                },
                (None, None) => anyhow::bail!("one of --download or --upload is required"),
            };
            let timeout = Duration::try_from_secs_f64(a.timeout).context("--timeout")?;
            let report = match a.common.stack {
                Stack::Quiche => quiche_stack::run_client(a.connect, req, &opts, timeout)?,
                Stack::Quinn => {
                    let rt = tokio::runtime::Runtime::new().context("tokio runtime")?;
                    rt.block_on(async {
                        tokio::time::timeout(
                            timeout,
                            quinn_stack::run_client(a.connect, req, &opts),
                        )
                        .await
                        .with_context(|| format!("timed out after {timeout:?}"))?
                    })?
                }
            };
            if a.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                println!(
                    "{} {} {} bytes in {:.3} s: {:.2} Mbit/s (sender: {} packets sent, {} lost, {} retransmissions)",
                    report.stack,
                    report.direction,
                    report.bytes,
                    report.duration_s,
                    report.goodput_mbps,
                    report.sent_packets,
                    report.lost_packets,
                    report.retransmissions
                );
            }
            Ok(())
        }
    }
}
