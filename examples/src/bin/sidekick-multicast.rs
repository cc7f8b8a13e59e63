//! `sidekick-multicast`: a reliable multicast media stream (Packrat (CoNEXT '26) §6.2, §7.2.3).
//!
//! ```text
//! sidekick-multicast server --listen IP:PORT [--group 239.1.2.3:5004] [--join-wait-ms 1000]
//! sidekick-multicast client --connect IP:PORT [--group 239.1.2.3:5004] [--receivers 4]
//!                           [--duration SECS] [--json]
//!                           [--sidekick [--sidekick-eack nack|periodic] [--sidekick-eack-interval-ms MS]
//!                                       [--sidekick-reorder-ms MS] [--sidekick-eack-packets N]]
//! ```
//! The server streams 240-byte packets every 20 ms to the group from its listening socket and
//! resends by unicast what a receiver NACKs; the client runs `--receivers` receivers in one
//! process (each with its own sockets and, with `--sidekick`, its own Packrat session naming
//! the group) and prints one line: the NACKs that reached the server (`server_nacks`), the
//! receivers' stalls (total, median, largest) and each receiver's report.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use sidekick::session::SidekickClient;
use sidekick_examples::media::MediaConfig;
use sidekick_examples::multicast::{
    MulticastClientArgs, MulticastReport, run_receiver, serve_multicast,
};
use tokio::net::UdpSocket;

/// Reliable multicast media: one server, several receivers, NACKs answered by unicast.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Stream one session to the group, then exit.
    Server(ServerArgs),
    /// Run the receivers, print their metrics.
    Client(MulticastClientArgs),
}

#[derive(Args)]
struct ServerArgs {
    /// Address to listen on (the stream's source address too).
    #[arg(long)]
    listen: SocketAddr,
    /// Multicast group and port to stream to.
    #[arg(long, default_value = "239.1.2.3:5004")]
    group: SocketAddr,
    /// After the first HELLO, wait this long for the other receivers, ms.
    #[arg(long, default_value_t = 1000)]
    join_wait_ms: u64,
    /// Longest stream served, seconds.
    #[arg(long, default_value_t = 3600.0)]
    max_duration: f64,
    /// Multicast TTL of the stream.
    #[arg(long, default_value_t = 4)]
    ttl: u32,
    /// Accepted for the lab's command line (the server always serves one session).
    #[arg(long)]
    once: bool,
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
    if a.group.is_ipv4() {
        socket
            .set_multicast_ttl_v4(a.ttl)
            .context("multicast TTL")?;
    }
    let max = Duration::try_from_secs_f64(a.max_duration).context("--max-duration")?;
    let c = serve_multicast(
        &socket,
        a.group,
        &MediaConfig::default(),
        Duration::from_millis(a.join_wait_ms),
        max,
        Duration::from_secs(10),
    )
    .await
    .context("serving")?;
    tracing::info!(?c, "stream done");
    Ok(())
}

async fn client(a: MulticastClientArgs) -> anyhow::Result<()> {
    let cfg = a.media_config();
    let duration = Duration::try_from_secs_f64(a.duration).context("--duration")?;
    let timing = a.timing();
    let mut tasks = Vec::new();
    for _ in 0..a.receivers.max(1) {
        let sidekick = a.sidekick_config().map(SidekickClient::new);
        let cfg = cfg.clone();
        let (server, group) = (a.connect, a.group);
        tasks.push(tokio::spawn(async move {
            Box::pin(run_receiver(
                server, group, &cfg, duration, timing, sidekick,
            ))
            .await
        }));
    }
    let mut reports = Vec::new();
    for t in tasks {
        match t.await {
            Ok(Ok(r)) => reports.push(r),
            Ok(Err(e)) => tracing::warn!("receiver failed: {e}"),
            Err(e) => tracing::warn!("receiver task: {e}"),
        }
    }
    anyhow::ensure!(!reports.is_empty(), "no receiver got the stream");
    let report = MulticastReport::new(duration, a.receivers, reports);
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{} receivers ({} reporting): {} NACKs reached the server ({} sent), {} resends; stalls {:.0} ms in total, median {:.0} ms, max {:.0} ms; {} eACKs",
            report.receivers,
            report.receivers_reporting,
            report.server.server_nacks,
            report.receiver_nacks,
            report.server.server_retransmissions,
            report.stall_ms_total,
            report.stall_ms_median,
            report.stall_ms_max,
            report.eacks_sent
        );
    }
    Ok(())
}
