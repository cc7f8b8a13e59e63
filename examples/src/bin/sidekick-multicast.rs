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
use sidekick_examples::media_session::ReceiverTiming;
use sidekick_examples::media_sidekick::{fec_config, fec_nack_config};
use sidekick_examples::multicast::{MulticastReport, run_receiver, serve_multicast};
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
    Client(ClientArgs),
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

/// When the receivers send eACKs.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum EackMode {
    /// Every N packets or MS.
    Periodic,
    /// Where the NACK layer sees a missing packet (selective eACKs); NACKs held meanwhile.
    Nack,
}

#[derive(Args)]
struct ClientArgs {
    /// Server address (unicast).
    #[arg(long)]
    connect: SocketAddr,
    /// Multicast group and port to join.
    #[arg(long, default_value = "239.1.2.3:5004")]
    group: SocketAddr,
    /// Receivers to run in this process.
    #[arg(long, default_value_t = 4)]
    receivers: usize,
    /// Stream duration, seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Print exactly one JSON line.
    #[arg(long)]
    json: bool,
    /// RTT assumed for re-NACKs before the first measurement, ms.
    #[arg(long, default_value_t = 200)]
    initial_rtt_ms: u64,
    /// After the server's FIN, keep NACKing missing packets for this long, ms.
    #[arg(long, default_value_t = 2000)]
    linger_ms: u64,
    /// Packrat for the group (Packrat (CoNEXT '26) §6.1): each receiver's session names the
    /// group; the proxy repairs from one shared cache.
    #[arg(long)]
    sidekick: bool,
    /// When to eACK.
    #[arg(long, value_enum, default_value_t = EackMode::Nack)]
    sidekick_eack: EackMode,
    /// eACK interval, ms (NACK-driven: while a packet is missing).
    #[arg(long, value_name = "MS", default_value_t = 25)]
    sidekick_eack_interval_ms: u32,
    /// Periodic eACKs: every N packets.
    #[arg(long, value_name = "N", default_value_t = 2)]
    sidekick_eack_packets: u32,
    /// NACK-driven eACKs: how long a missing packet is eACKed and the NACK held, ms.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    sidekick_reorder_ms: u32,
    /// Local eACK symbols (Packrat (CoNEXT '26) Table 4, multicast: 40).
    #[arg(long, value_name = "N", default_value_t = 40)]
    sidekick_eack_symbols: u32,
    /// The proxy's shared cache, bytes (Table 4, multicast: 64 kB).
    #[arg(long, value_name = "B", default_value_t = 64_000)]
    sidekick_cache_bytes: u64,
    /// Identifier width, bytes (the datagram's last N bytes; every receiver of the group must
    /// use the same, the proxy keeps the first one's).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::builder::TypedValueParser::map(clap::builder::PossibleValuesParser::new(["2", "4", "8"]), |s: String| s.parse::<u32>().unwrap_or(4)))]
    sidekick_id_bytes: u32,
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

async fn client(a: ClientArgs) -> anyhow::Result<()> {
    let cfg = MediaConfig {
        initial_rtt: Duration::from_millis(a.initial_rtt_ms.max(1)),
        ..MediaConfig::default()
    };
    let duration = Duration::try_from_secs_f64(a.duration).context("--duration")?;
    let timing = ReceiverTiming {
        linger: Duration::from_millis(a.linger_ms),
        ..ReceiverTiming::default()
    };
    let mut tasks = Vec::new();
    for _ in 0..a.receivers.max(1) {
        let sidekick = a.sidekick.then(|| {
            let mut c = match a.sidekick_eack {
                EackMode::Periodic => fec_config(
                    a.sidekick_eack_packets,
                    a.sidekick_eack_interval_ms,
                    a.sidekick_eack_symbols,
                ),
                EackMode::Nack => fec_nack_config(
                    a.sidekick_eack_interval_ms,
                    a.sidekick_eack_symbols,
                    a.sidekick_reorder_ms,
                ),
            };
            if let Some(p) = c.protocol.session.packrat.as_mut() {
                p.cache_capacity_bytes = a.sidekick_cache_bytes;
            }
            SidekickClient::new(
                c.with_identifier_width(a.sidekick_id_bytes)
                    .with_multicast_group(a.group),
            )
        });
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
