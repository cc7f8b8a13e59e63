//! `sidekick-tcp-split`: the transparent split-TCP proxy (connection-splitting PEP) the lab runs on
//! its ap for the `tcp-split` variants. Run as root inside the ap's network namespace.
//!
//! ```text
//! sidekick-tcp-split --client-interface lan0 [--port 7070] [--cc cubic] [--max-connections 64]
//!                    [--bridge br0 --peer IP,MAC ...] [--connect-timeout-s 10]
//! ```
//!
//! Logs `splitting …` once the rules are in place and the listener is up, and on SIGTERM/SIGINT
//! `stopped accepted=… connected=… refused=… failed=… bytes_to_server=… bytes_to_client=…
//! client_side_retrans=… server_side_retrans=…`
//! after removing its rules.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use sidekick_examples::tcp_split::{Diversion, Peer, SplitConfig, SplitCounters, listener, serve};

/// Transparent split-TCP proxy: terminates the client's TCP connections on this host and opens
/// a second connection to their server, splicing the bytes.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Interface towards the clients: TCP connections opened from there are split.
    #[arg(long)]
    client_interface: String,
    /// Local port diverted connections are accepted on.
    #[arg(long, default_value_t = 7070)]
    port: u16,
    /// Kernel congestion controller of both halves.
    #[arg(long, default_value = "cubic")]
    cc: String,
    /// Connections open at once; more are refused.
    #[arg(long, default_value_t = 64)]
    max_connections: usize,
    /// Bridged ap: the bridge joining the client and server interfaces.
    #[arg(long)]
    bridge: Option<String>,
    /// Bridged ap: a host to reach through the bridge, `IP,MAC` (repeat).
    #[arg(long, requires = "bridge")]
    peer: Vec<Peer>,
    /// Seconds the connection to the server may take.
    #[arg(long, default_value_t = 10.0)]
    connect_timeout_s: f64,
}

fn main() -> anyhow::Result<()> {
    sidekick_examples::cli::init_tracing("info");
    let a = Cli::parse();
    let cfg = Arc::new(SplitConfig {
        client_interface: a.client_interface,
        port: a.port,
        cc: a.cc,
        max_connections: a.max_connections.max(1),
        bridge: a.bridge,
        peers: a.peer,
        connect_timeout: Duration::try_from_secs_f64(a.connect_timeout_s)
            .context("--connect-timeout-s")?,
    });
    let rt = tokio::runtime::Runtime::new().context("tokio runtime")?;
    let counters = Arc::new(SplitCounters::default());
    rt.block_on(async {
        let l = listener(&cfg)?;
        let _rules = Diversion::install(&cfg)?;
        tracing::info!(
            interface = %cfg.client_interface,
            port = cfg.port,
            cc = %cfg.cc,
            bridge = cfg.bridge.as_deref().unwrap_or("-"),
            "splitting TCP connections from the client interface"
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let result = tokio::select! {
            r = serve(l, Arc::clone(&cfg), Arc::clone(&counters)) => r,
            _ = term.recv() => Ok(()),
            _ = tokio::signal::ctrl_c() => Ok(()),
        };
        // `_rules` drops here: the ap is as before.
        result
    })?;
    tracing::info!("stopped {}", counters.fields());
    Ok(())
}
