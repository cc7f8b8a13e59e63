//! `sidekick-proxy`: the sidekick proxy daemon. See docs/proxy.md.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use sidekick_proxy::config::{Config, Faces, Mode};

/// Sidekick proxy: Robin quACKs and Packrat retransmissions for encrypted transports.
///
/// Every configuration key can be given as a flag; flags override the file.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    /// TOML configuration file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Check the configuration (FILE, or the one `--config` and the flags give), print it and
    /// exit; a value outside its documented range is refused with the key's name.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    #[allow(clippy::option_option)] // clap's form for "absent / alone / with a value"
    check_config: Option<Option<PathBuf>>,
    /// Join the bridge-mode interfaces in the fail-open kernel bridge and exit (for the
    /// service's `ExecStopPost`: frames flow again when the whole service is gone).
    #[arg(long)]
    restore_bridge: bool,
    /// Run as the bridge-mode supervisor's worker (set by the supervisor itself).
    #[arg(long, hide = true)]
    worker: bool,
    /// `sniff` or `bridge`.
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// Sniff mode: interface to capture on.
    #[arg(long)]
    interface: Option<String>,
    /// Sniff mode: which side the interface faces.
    #[arg(long, value_enum)]
    faces: Option<Faces>,
    /// Bridge mode: client-side interface.
    #[arg(long)]
    client_interface: Option<String>,
    /// Bridge mode: server-side interface.
    #[arg(long)]
    server_interface: Option<String>,
    /// Sidekick UDP socket address.
    #[arg(long)]
    sidekick_listen: Option<SocketAddr>,
    /// Address advertised in discovery replies.
    #[arg(long)]
    sidekick_advertise: Option<SocketAddr>,
    /// Metrics endpoint address.
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// Disable the metrics endpoint.
    #[arg(long)]
    no_metrics: bool,
    /// Log filter (e.g. `info`, `sidekick_proxy=debug`).
    #[arg(long)]
    log: Option<String>,
    /// Capture workers (0: one per CPU); worker k answers on the sidekick port + k.
    #[arg(long)]
    workers: Option<usize>,
    /// Flow-table shards.
    #[arg(long)]
    shards: Option<usize>,
    /// Maximum flows.
    #[arg(long)]
    max_flows: Option<usize>,
    /// Maximum sessions.
    #[arg(long)]
    max_sessions: Option<usize>,
    /// Maximum half-open sessions.
    #[arg(long)]
    max_half_open: Option<usize>,
    /// Flow idle timeout (s).
    #[arg(long)]
    idle_timeout_s: Option<u64>,
    /// Session idle timeout (s).
    #[arg(long)]
    session_idle_timeout_s: Option<u64>,
    /// Track flows without a session (true/false).
    #[arg(long)]
    track_unassisted: Option<bool>,
    /// Per-flow memory cap (bytes).
    #[arg(long)]
    max_flow_memory: Option<usize>,
    /// Bytes all engines together may hold.
    #[arg(long)]
    memory_budget: Option<usize>,
    /// Largest quACK threshold granted.
    #[arg(long)]
    max_threshold: Option<u32>,
    /// Smallest quACK interval granted (ms).
    #[arg(long)]
    min_quack_interval_ms: Option<u32>,
    /// Largest local eACK symbol count granted.
    #[arg(long)]
    max_symbols: Option<u32>,
    /// Largest per-session cache (bytes).
    #[arg(long)]
    max_cache_bytes: Option<u64>,
    /// Discovery requests answered per second.
    #[arg(long)]
    discovery_rate: Option<u32>,
    /// Discovery burst.
    #[arg(long)]
    discovery_burst: Option<u32>,
    /// Capture ring block size (bytes).
    #[arg(long)]
    ring_block_size: Option<u32>,
    /// Capture ring blocks.
    #[arg(long)]
    ring_blocks: Option<u32>,
    /// Ring block retire timeout (ms).
    #[arg(long)]
    ring_retire_ms: Option<u32>,
    /// How frames are read: auto (socket in bridge mode, ring in sniff mode), ring, socket.
    #[arg(long, value_enum)]
    capture: Option<sidekick_proxy::config::Capture>,
    /// Request virtio-net headers (true/false).
    #[arg(long)]
    vnet_hdr: Option<bool>,
    /// Run PEMI on QUIC flows without a sidekick session and as the fallback of sessions that
    /// end or fail (true/false; default: on in bridge mode, off in sniff mode).
    #[arg(long)]
    pemi: Option<bool>,
    /// PEMI's reply-length gap signal (true/false; on by default, off = timing-only inference).
    #[arg(long)]
    pemi_gap_signal: Option<bool>,
    /// How PEMI slows a flow over its target in bridge mode: delay (every reply) or reorder.
    #[arg(long, value_name = "delay|reorder")]
    pemi_reply_enforcement: Option<sidekick_proxy::pemi::ReplyEnforcement>,
    /// Packrat retransmission budget, % of the bytes forwarded to each client (0–100).
    #[arg(long)]
    packrat_retx_budget_percent: Option<u32>,
    /// Replay the server's handshake datagrams once when the client missed them (true/false).
    #[arg(long)]
    handshake_rescue: Option<bool>,
    /// Handshake rescue: slack over twice the proxy–client RTT before replaying, ms (0–1000).
    #[arg(long)]
    handshake_rescue_slack_ms: Option<u32>,
    /// Handshake rescue: drop a tracked handshake after this, ms (100–60000).
    #[arg(long)]
    handshake_rescue_hold_ms: Option<u32>,
    /// Handshake rescue: new flows tracked at once (1–1048576).
    #[arg(long)]
    handshake_rescue_max_flows: Option<u32>,
    /// Bridge mode: keep frames flowing through a kernel bridge when the proxy exits or hangs
    /// (true/false).
    #[arg(long)]
    fail_open: Option<bool>,
    /// Bridge mode: name of the fail-open kernel bridge.
    #[arg(long)]
    fail_open_bridge: Option<String>,
    /// Bridge mode: a worker silent this long (ms) counts as hung.
    #[arg(long)]
    fail_open_hang_ms: Option<u32>,
    /// Write a trace of every UDP datagram seen to FILE (for `pemi_replay`; see pemi::trace).
    #[arg(long, value_name = "FILE")]
    pemi_trace: Option<std::path::PathBuf>,
    /// Test builds only: lie to clients this way (a lab test of the clients' defences).
    #[cfg(feature = "testing")]
    #[arg(long, value_parser = lie_parser())]
    lie: Option<sidekick_proxy::lie::Lie>,
}

/// `--lie`: one of the lie names, listed in `--help`.
#[cfg(feature = "testing")]
fn lie_parser() -> impl clap::builder::TypedValueParser<Value = sidekick_proxy::lie::Lie> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(sidekick_proxy::lie::Lie::NAMES.map(|(name, _)| name))
        .try_map(|name| name.parse::<sidekick_proxy::lie::Lie>())
}

macro_rules! apply {
    ($cfg:ident, $cli:ident, $($f:ident),+) => { $( if let Some(v) = $cli.$f.clone() { $cfg.$f = v; } )+ };
}

fn load(cli: &Cli) -> anyhow::Result<Config> {
    let file = match &cli.check_config {
        Some(Some(f)) => Some(f),
        _ => cli.config.as_ref(),
    };
    let mut cfg = match file {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("read {}", p.display()))?;
            Config::from_toml(&text).with_context(|| format!("parse {}", p.display()))?
        }
        None => Config::default(),
    };
    apply!(
        cfg,
        cli,
        mode,
        interface,
        faces,
        client_interface,
        server_interface,
        sidekick_listen,
        log,
        workers,
        shards,
        max_flows,
        max_sessions,
        max_half_open,
        idle_timeout_s,
        session_idle_timeout_s,
        track_unassisted,
        max_flow_memory,
        memory_budget,
        max_threshold,
        min_quack_interval_ms,
        max_symbols,
        max_cache_bytes,
        discovery_rate,
        discovery_burst,
        ring_block_size,
        ring_blocks,
        ring_retire_ms,
        capture,
        vnet_hdr,
        pemi_gap_signal,
        pemi_reply_enforcement,
        packrat_retx_budget_percent,
        handshake_rescue,
        handshake_rescue_slack_ms,
        handshake_rescue_hold_ms,
        handshake_rescue_max_flows,
        fail_open,
        fail_open_bridge,
        fail_open_hang_ms
    );
    if cli.sidekick_advertise.is_some() {
        cfg.sidekick_advertise = cli.sidekick_advertise;
    }
    if cli.metrics_listen.is_some() {
        cfg.metrics_listen = cli.metrics_listen;
    }
    if cli.pemi.is_some() {
        cfg.pemi = cli.pemi;
    }
    if cli.pemi_trace.is_some() {
        cfg.pemi_trace.clone_from(&cli.pemi_trace);
    }
    #[cfg(feature = "testing")]
    if cli.lie.is_some() {
        cfg.lie = cli.lie;
    }
    if cli.no_metrics {
        cfg.metrics_listen = None;
    }
    cfg.validate()?;
    Ok(cfg)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let cfg = load(&cli)?;
    if cli.check_config.is_some() {
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), "configuration OK: {cfg:#?}");
        return Ok(());
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&cfg.log))
        .with_writer(std::io::stderr)
        .init();
    if cli.restore_bridge {
        anyhow::ensure!(
            cfg.mode == Mode::Bridge,
            "--restore-bridge needs a bridge-mode configuration"
        );
        return sidekick_proxy::supervisor::FailOpenBridge::new(&cfg).open();
    }
    if cfg.supervised() && !cli.worker {
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        return sidekick_proxy::supervisor::run(&cfg, args);
    }
    // SIGHUP reads the file and the flags again (flags still win).
    let reload = move || load(&cli);
    sidekick_proxy::daemon::run_reloading(&cfg, Some(&reload))
}
