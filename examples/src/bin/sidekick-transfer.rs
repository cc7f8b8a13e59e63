//! `sidekick-transfer`: bulk transfer over QUIC (raw stream, or HTTP/3 with `--http3`) with quinn
//! or quiche, over QUIC with s2n-quic (`--stack s2n-quic`: raw stream only; no `--http3`, no
//! `--sidekick`, no `--hello-delay-ms`, `--cc cubic|bbr`), or over kernel TCP (`--stack tcp`, the
//! same raw-stream protocol on one TCP connection: the papers' TCP baseline; no `--http3`, no
//! `--sidekick`).
//!
//! ```text
//! sidekick-transfer server --stack quinn|quiche|s2n-quic|tcp --listen IP:PORT [--once] [--cert-bytes B]
//!                          [--hello-delay-ms MS]
//! sidekick-transfer client --stack quinn|quiche|s2n-quic|tcp --connect IP:PORT (--download BYTES | --upload BYTES | --both BYTES)
//!                          [--json] [--cc cubic|reno|bbr] [--timeout SECS] [--http3]
//!                          [--sidekick [--sidekick-quack-interval-ms MS] [--sidekick-quack-threshold T]
//!                           [--sidekick-quack-every-packets N]
//!                           [--sidekick-ack-reduction N] [--sidekick-eack-interval-ms MS]
//!                           [--sidekick-eack-packets N] [--sidekick-eack-symbols N]
//!                           [--sidekick-cache-bytes B] [--sidekick-reorder-ms MS] [--sidekick-selective]
//!                           [--sidekick-eack-inflight N]
//!                           [--sidekick-discovery-retry-ms MS] [--sidekick-discovery-attempts N]
//!                           [--sidekick-engines robin|packrat|both]]
//! ```
//!
//! `--both BYTES` (quinn or quiche, raw stream; `--http3` is refused): an upload and a download
//! of BYTES each at once on one connection, on two streams; with `--sidekick` one session runs
//! Robin for the upload and Packrat for the download (`--sidekick-engines` picks one of them
//! instead, for comparison).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use sidekick_examples::transfer::sidekick::{Mode, SidekickParams};
use sidekick_examples::transfer::{
    Cc, Request, Stack, TransferDirection, TransportOptions, quiche_stack, quinn_stack, s2n_stack,
    tcp_stack,
};

/// The transport of an endpoint: a QUIC stack, or kernel TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum StackArg {
    /// quinn 0.11 (rustls with ring).
    Quinn,
    /// quiche 0.24 (BoringSSL).
    Quiche,
    /// s2n-quic 1.91 (rustls with ring): the raw stream protocol only (no --http3, no
    /// --sidekick), --cc cubic or bbr.
    #[value(name = "s2n-quic")]
    S2nQuic,
    /// Kernel TCP (the congestion controller of `--cc`, CUBIC by default): the papers' baseline.
    Tcp,
}

impl StackArg {
    /// The QUIC stack, or `None` for TCP.
    fn quic(self) -> Option<Stack> {
        match self {
            StackArg::Quinn => Some(Stack::Quinn),
            StackArg::Quiche => Some(Stack::Quiche),
            StackArg::S2nQuic => Some(Stack::S2nQuic),
            StackArg::Tcp => None,
        }
    }
}

/// Bulk transfer over QUIC with quinn, quiche or s2n-quic, or over kernel TCP; goodput measured
/// at the receiving application.
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
    /// QUIC implementation, or `tcp`.
    #[arg(long, value_enum)]
    stack: StackArg,
    /// Congestion controller of this endpoint (applies to the data it sends).
    #[arg(long, value_enum, default_value = "cubic")]
    cc: Cc,
    /// quinn and s2n-quic: enable UDP segmentation offload (off by default so datagrams fit the
    /// MTU of the lab's link element).
    #[arg(long)]
    gso: bool,
    /// Client: use an on-path sidekick proxy through the SDK. Upload: Robin (quACKs, early
    /// retransmission; PACUBIC on quinn). Download: Packrat (eACKs, reorder window). Falls back
    /// to end to end when no proxy answers. Ignored by the server.
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
    /// Pad the self-signed certificate to at least this many DER bytes (ReACKed QUICer (IMC '24)
    /// §3 used 5113 B, beyond the anti-amplification limit); 0: no padding.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    cert_bytes: usize,
    /// Hold each new connection's first Initial this long before answering (Δt before the
    /// ServerHello, "wait for certificate"; neither stack can send an instant ACK first).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    hello_delay_ms: u64,
}

#[derive(Args)]
#[group(id = "dir", required = true, multiple = false, args = ["download", "upload", "both"])]
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
    /// Upload and download this many bytes each, at once on one connection (quinn or quiche,
    /// raw stream).
    #[arg(long, value_name = "BYTES")]
    both: Option<u64>,
    /// Print exactly one JSON line.
    #[arg(long)]
    json: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,
    /// quinn: ask the server to ACK only every N ack-eliciting packets (ACK-frequency
    /// extension; out-of-order arrivals do not elicit an immediate ACK) without the sidekick:
    /// Robin #3's end-to-end baseline at the same ACK rate as `--sidekick-ack-reduction N`.
    /// quiche has no ACK-frequency extension and TCP none of QUIC's: both refuse the flag.
    #[arg(long, value_name = "N")]
    ack_frequency: Option<u32>,
    #[command(flatten)]
    sk: SidekickArgs,
}

/// Parameters of the sidekick session (with --sidekick). Defaults: Sidekick (NSDI '24) Table 5 (Robin) and
/// Packrat (CoNEXT '26) Tables 3-4 (Packrat, HTTP/3 on Wi-Fi).
#[derive(Args)]
// The field names are the flags' names, which share the `--sidekick-` prefix on purpose.
#[allow(clippy::struct_field_names)]
struct SidekickArgs {
    /// Upload (Robin): quACK interval in ms [default: 30, or 15 with --sidekick-ack-reduction].
    #[arg(long, value_name = "MS")]
    sidekick_quack_interval_ms: Option<u32>,
    /// Upload (Robin): quACK threshold t [default: 10, or 50 with --sidekick-ack-reduction].
    #[arg(long, value_name = "T")]
    sidekick_quack_threshold: Option<u32>,
    /// Upload (Robin): also a quACK every N packets (Sidekick (NSDI '24) Table 5 #1 uses 2) [default: 0,
    /// time-driven only].
    #[arg(long, value_name = "N", default_value_t = 0)]
    sidekick_quack_every_packets: u32,
    /// quinn upload (Robin #3): ask the server (ACK-frequency extension) to ACK only every N
    /// ack-eliciting packets, and let quACKs advance PACUBIC's window meanwhile.
    #[arg(long, value_name = "N")]
    sidekick_ack_reduction: Option<u32>,
    /// Download (Packrat): send an eACK at least every MS while packets arrive.
    #[arg(long, value_name = "MS", default_value_t = 10)]
    sidekick_eack_interval_ms: u32,
    /// Download (Packrat): …or every N packets.
    #[arg(long, value_name = "N", default_value_t = 16)]
    sidekick_eack_packets: u32,
    /// Download (Packrat): local eACK coded symbols (160 for bulk, 40 for media).
    #[arg(long, value_name = "N", default_value_t = 160)]
    sidekick_eack_symbols: u32,
    /// Download (Packrat): proxy cache capacity requested, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 48_000)]
    sidekick_cache_bytes: u32,
    /// Download (Packrat): reorder window (ACK withholding), ms (30 Wi-Fi/cellular, 65
    /// satellite).
    #[arg(long, value_name = "MS", default_value_t = 30)]
    sidekick_reorder_ms: u32,
    /// Download (Packrat): selective eACKs, only while a gap is open.
    #[arg(long)]
    sidekick_selective: bool,
    /// Download (Packrat): packets added to the open gaps when sizing an eACK, for those the
    /// proxy forwarded that are still in flight to the client (≈ rate × client–proxy RTT: 16 at
    /// 50 Mbit/s and 2 ms one way).
    #[arg(long, value_name = "N", default_value_t = 16)]
    sidekick_eack_inflight: u32,
    /// First discovery retransmission timeout, ms (doubles per attempt, capped at 2 s).
    #[arg(long, value_name = "MS", default_value_t = 250)]
    sidekick_discovery_retry_ms: u32,
    /// Discovery requests before falling back to end to end (no proxy).
    #[arg(long, value_name = "N", default_value_t = 4)]
    sidekick_discovery_attempts: u32,
    /// Identifier width in bytes: 2, 4 or 8 (Sidekick (NSDI '24) §3; the datagram's last N
    /// bytes); Robin's quACKs and Packrat's eACKs both use it.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::builder::TypedValueParser::map(clap::builder::PossibleValuesParser::new(["2", "4", "8"]), |s: String| s.parse::<u32>().unwrap_or(4)))]
    sidekick_id_bytes: u32,
    /// The engines the session asks for [default: Robin for an upload, Packrat for a download,
    /// both for --both].
    #[arg(long, value_enum)]
    sidekick_engines: Option<Engines>,
}

/// `--sidekick-engines`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Engines {
    /// Robin only (quACKs of what the client sends).
    Robin,
    /// Packrat only (repairs of what the client receives).
    Packrat,
    /// Both on one session.
    Both,
}

impl SidekickArgs {
    fn params(&self) -> SidekickParams {
        SidekickParams {
            quack_interval_ms: self.sidekick_quack_interval_ms,
            quack_threshold: self.sidekick_quack_threshold,
            quack_packets: self.sidekick_quack_every_packets,
            ack_reduction: self.sidekick_ack_reduction,
            eack_interval_ms: self.sidekick_eack_interval_ms,
            eack_packets: self.sidekick_eack_packets,
            eack_symbols: self.sidekick_eack_symbols,
            cache_bytes: self.sidekick_cache_bytes,
            reorder_ms: self.sidekick_reorder_ms,
            selective: self.sidekick_selective,
            id_bytes: self.sidekick_id_bytes,
            eack_inflight: self.sidekick_eack_inflight,
            discovery_retry_ms: self.sidekick_discovery_retry_ms,
            discovery_attempts: self.sidekick_discovery_attempts,
            engines: self.sidekick_engines.map(|e| match e {
                Engines::Robin => Mode::Robin,
                Engines::Packrat => Mode::Packrat,
                Engines::Both => Mode::Both,
            }),
        }
    }
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
    sidekick_examples::cli::init_tracing("warn");
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Server(a) => {
            let mut opts = options(&a.common);
            opts.cert_bytes = a.cert_bytes;
            opts.hello_delay = Duration::from_millis(a.hello_delay_ms);
            let Some(stack) = a.common.stack.quic() else {
                refuse_quic_only(&a.common)?;
                if a.cert_bytes > 0 || a.hello_delay_ms > 0 {
                    anyhow::bail!("--cert-bytes and --hello-delay-ms are QUIC options, not TCP's");
                }
                return tcp_stack::serve(a.listen, a.once, a.common.cc);
            };
            match stack {
                Stack::Quiche => quiche_stack::serve(a.listen, a.once, &opts),
                Stack::Quinn => {
                    let rt = tokio::runtime::Runtime::new().context("tokio runtime")?;
                    rt.block_on(async {
                        let ep = quinn_stack::server_endpoint(a.listen, &opts)?;
                        quinn_stack::serve(ep, a.once, opts.http3, opts.hello_delay).await
                    })
                }
                Stack::S2nQuic => {
                    let rt = tokio::runtime::Runtime::new().context("tokio runtime")?;
                    rt.block_on(async {
                        let server = s2n_stack::server(a.listen, &opts)?;
                        s2n_stack::serve(server, a.once).await
                    })
                }
            }
        }
        Cmd::Client(a) => {
            let mut opts = options(&a.common);
            opts.sidekick_params = a.sk.params();
            opts.ack_frequency = a.ack_frequency;
            if a.common.stack.quic() != Some(Stack::Quinn)
                && (a.ack_frequency.is_some() || opts.sidekick_params.ack_reduction.is_some())
            {
                anyhow::bail!(
                    "only quinn implements the ACK-frequency extension here: --ack-frequency \
                     and --sidekick-ack-reduction need --stack quinn"
                );
            }
            let timeout = Duration::try_from_secs_f64(a.timeout).context("--timeout")?;
            let req = match (a.download, a.upload, a.both) {
                (Some(b), _, _) => Request {
                    direction: TransferDirection::Download,
                    bytes: b,
                },
                (None, Some(b), _) => Request {
                    direction: TransferDirection::Upload,
                    bytes: b,
                },
                (None, None, Some(b)) => {
                    let report = match a.common.stack.quic() {
                        Some(Stack::Quinn) => {
                            let rt = tokio::runtime::Runtime::new().context("tokio runtime")?;
                            rt.block_on(async {
                                tokio::time::timeout(
                                    timeout,
                                    quinn_stack::run_client_both(a.connect, b, &opts),
                                )
                                .await
                                .with_context(|| format!("timed out after {timeout:?}"))?
                            })?
                        }
                        Some(Stack::Quiche) => {
                            quiche_stack::run_client_both(a.connect, b, &opts, timeout)?
                        }
                        Some(Stack::S2nQuic) | None => {
                            anyhow::bail!("--both needs --stack quinn or --stack quiche")
                        }
                    };
                    return print_report(&report, a.json);
                }
                (None, None, None) => {
                    anyhow::bail!("one of --download, --upload or --both is required")
                }
            };
            let report = match a.common.stack.quic() {
                None => {
                    refuse_quic_only(&a.common)?;
                    tcp_stack::run_client(a.connect, req, a.common.cc, timeout)?
                }
                Some(Stack::Quiche) => quiche_stack::run_client(a.connect, req, &opts, timeout)?,
                Some(Stack::Quinn) => {
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
                Some(Stack::S2nQuic) => {
                    let rt = tokio::runtime::Runtime::new().context("tokio runtime")?;
                    rt.block_on(async {
                        tokio::time::timeout(timeout, s2n_stack::run_client(a.connect, req, &opts))
                            .await
                            .with_context(|| format!("timed out after {timeout:?}"))?
                    })?
                }
            };
            print_report(&report, a.json)
        }
    }
}

/// Print the report: one JSON line, or a human-readable summary.
fn print_report(
    report: &sidekick_examples::transfer::TransferReport,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    println!(
        "{} {} {} bytes in {:.3} s: {:.2} Mbit/s (sender: {} packets sent, {} lost, {} retransmissions)",
        report.stack,
        report.direction,
        report.bytes,
        report.duration_s,
        report.goodput_mbps,
        opt(report.sent_packets),
        opt(report.lost_packets),
        opt(report.retransmissions)
    );
    if let Some(t) = report.ttfb_ms {
        println!("time to first byte: {t:.1} ms");
    }
    if let Some(c) = report.connect_ms {
        println!("TCP handshake: {c:.1} ms");
    }
    if let (Some(u), Some(d)) = (report.upload_goodput_mbps, report.download_goodput_mbps) {
        println!("upload {u:.2} Mbit/s, download {d:.2} Mbit/s");
    }
    if let Some(sk) = &report.sidekick {
        println!("sidekick: {}", serde_json::to_string(sk)?);
    }
    Ok(())
}

/// `--stack tcp` speaks the raw-stream protocol over one TCP connection: HTTP/3 and the sidekick
/// SDK are QUIC's.
fn refuse_quic_only(c: &Common) -> anyhow::Result<()> {
    if c.http3 || c.sidekick {
        anyhow::bail!("--stack tcp takes neither --http3 nor --sidekick (they are QUIC's)");
    }
    Ok(())
}

/// A counter for the human-readable line: its value, or `?` when the server did not report it.
fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "?".to_owned(), |v| v.to_string())
}
