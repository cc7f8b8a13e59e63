//! Proxy configuration: a TOML file whose every key is also a command-line flag
//! (`--key value`, dashes for underscores). See `docs/proxy.example.toml`.

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

use serde::Deserialize;
use sidekick_proxy_core::session::SessionLimits;

/// How the proxy sits in the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Capture on one interface; the kernel forwards; inject copies.
    Sniff,
    /// Forward between two interfaces in user space.
    Bridge,
}

/// Which side the sniffed interface faces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Faces {
    /// The interface faces the clients (the lossy Wi-Fi/cellular side): incoming = from client.
    Client,
    /// The interface faces the servers: incoming = to client.
    Server,
}

/// How frames are read from the capture sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Capture {
    /// `socket` in bridge mode (every forwarded frame waits for the capture), `ring` in sniff
    /// mode (the kernel forwards; only the proxy's own reactions wait).
    Auto,
    /// TPACKET_V3 mmap ring: batches, cheapest per frame; a block reaches the proxy when full
    /// or after `ring_retire_ms`.
    Ring,
    /// One `recvmsg` per frame the moment it arrives: no batching delay.
    Socket,
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `sniff` or `bridge`.
    pub mode: Mode,
    /// Sniff mode: the interface to capture on.
    pub interface: String,
    /// Sniff mode: which side that interface faces.
    pub faces: Faces,
    /// Bridge mode: the client-side interface.
    pub client_interface: String,
    /// Bridge mode: the server-side interface.
    pub server_interface: String,
    /// Local address of the sidekick UDP socket.
    pub sidekick_listen: SocketAddr,
    /// Address advertised in discovery replies (defaults to `sidekick_listen`).
    pub sidekick_advertise: Option<SocketAddr>,
    /// Prometheus metrics endpoint (empty to disable).
    pub metrics_listen: Option<SocketAddr>,
    /// Log filter (tracing env-filter syntax).
    pub log: String,
    /// Capture workers: threads that each capture a share of the flows (`PACKET_FANOUT`
    /// hashing both directions of a flow to the same worker) with a core of their own; 0 (the
    /// default) means one per CPU. Worker `k` answers sessions on port `sidekick_listen + k`
    /// (and advertises `sidekick_advertise + k`), so a session reaches its flow's worker; the
    /// flow, session and memory caps are split evenly among the workers.
    pub workers: usize,
    /// Which worker this share of the configuration is for ([`Config::for_worker`]; not a
    /// setting).
    #[serde(skip)]
    pub worker_index: usize,
    /// Flow-table shards.
    pub shards: usize,
    /// Maximum flows tracked.
    pub max_flows: usize,
    /// Maximum sessions (assisted flows).
    pub max_sessions: usize,
    /// Maximum half-open sessions (discovery answered, no Init yet).
    pub max_half_open: usize,
    /// Flow idle timeout in seconds.
    pub idle_timeout_s: u64,
    /// Session idle timeout in seconds (no authentic client message).
    pub session_idle_timeout_s: u64,
    /// Track flows without a session.
    pub track_unassisted: bool,
    /// Per-flow memory cap (bytes), bounds each Packrat cache.
    pub max_flow_memory: usize,
    /// Bytes all engines together may hold (Packrat caches, PEMI buffers, multicast caches,
    /// quACK state); beyond it flows get no new engine (counted).
    pub memory_budget: usize,
    /// Largest quACK threshold granted.
    pub max_threshold: u32,
    /// Smallest quACK interval granted (ms).
    pub min_quack_interval_ms: u32,
    /// Largest local eACK symbol count granted.
    pub max_symbols: u32,
    /// Largest per-session cache granted (bytes).
    pub max_cache_bytes: u64,
    /// Discovery requests answered per second.
    pub discovery_rate: u32,
    /// Discovery token-bucket depth.
    pub discovery_burst: u32,
    /// Capture ring block size (bytes, multiple of the page size).
    pub ring_block_size: u32,
    /// Capture ring block count.
    pub ring_blocks: u32,
    /// Ring block retire timeout (ms).
    pub ring_retire_ms: u32,
    /// `auto`, `ring` or `socket`: how frames are read (see [`Capture`]).
    pub capture: Capture,
    /// Request virtio-net headers (GSO sizes, checksum state).
    pub vnet_hdr: bool,
    /// Run PEMI (transparent mode, PEMI) on QUIC flows without a sidekick session, and as the
    /// fallback of sessions that end or fail. Unset (the default) means on in bridge mode and
    /// off in sniff mode ([`Config::pemi_on`]): in bridge mode it infers losses, retransmits,
    /// hides the gaps it repaired and enforces its window by delaying replies (PEMI §4.5); in
    /// sniff mode the kernel has forwarded every packet before PEMI sees it, so only loss
    /// inference and retransmission remain, without the enforcement that keeps them fair, and it
    /// must be asked for (`pemi = true`).
    pub pemi: Option<bool>,
    /// PEMI's reply-length gap signal (our extension; `pemi::gap`): on by default; off leaves
    /// PEMI to the paper's timing-only inference (PEMI §4.2–4.3).
    pub pemi_gap_signal: bool,
    /// How PEMI slows a flow over its target in bridge mode (PEMI §4.5.2): `delay` every reply
    /// (default) or `reorder` them (`pemi::ReplyEnforcement`).
    pub pemi_reply_enforcement: crate::pemi::ReplyEnforcement,
    /// Write a PEMI trace of every UDP datagram seen (one line each, `pemi::trace`) to this
    /// file: for offline replay and scoring of the loss inference. Off by default.
    pub pemi_trace: Option<std::path::PathBuf>,
    /// Packrat retransmission budget: the bytes retransmitted to a client stay within this
    /// percentage of the bytes forwarded to it (`packrat::RetxBudget`).
    pub packrat_retx_budget_percent: u32,
    /// Bridge mode: keep frames flowing when the proxy exits or hangs. A small supervisor
    /// process runs the proxy as its worker and, when the worker dies or stops feeding its
    /// watchdog for `fail_open_hang_ms`, joins the two interfaces in the kernel bridge
    /// `fail_open_bridge` (removed again once a new worker forwards). See `supervisor`.
    pub fail_open: bool,
    /// Name of the fail-open kernel bridge (an interface name: 1–15 bytes).
    pub fail_open_bridge: String,
    /// A bridge-mode worker silent this long (no watchdog message) counts as hung.
    pub fail_open_hang_ms: u32,
    /// Test builds only (feature `testing`): lie to clients this way (`crate::lie`).
    #[cfg(feature = "testing")]
    pub lie: Option<crate::lie::Lie>,
    /// Keep the server's handshake datagrams of new flows and replay them once when the client
    /// shows it missed them (`core::handshake_rescue`). Off by default.
    pub handshake_rescue: bool,
    /// Handshake rescue: added to twice the proxy–client round trip before a missing client
    /// completion triggers the replay, ms.
    pub handshake_rescue_slack_ms: u32,
    /// Handshake rescue: a tracked handshake without completion is dropped after this, ms.
    pub handshake_rescue_hold_ms: u32,
    /// Handshake rescue: new flows tracked at once.
    pub handshake_rescue_max_flows: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            mode: Mode::Sniff,
            interface: String::new(),
            faces: Faces::Client,
            client_interface: String::new(),
            server_interface: String::new(),
            sidekick_listen: SocketAddr::from(([0, 0, 0, 0], 7788)),
            sidekick_advertise: None,
            metrics_listen: Some(SocketAddr::from(([127, 0, 0, 1], 9464))),
            log: "info".into(),
            workers: 0,
            worker_index: 0,
            shards: 16,
            max_flows: 65536,
            max_sessions: 4096,
            max_half_open: 1024,
            idle_timeout_s: 120,
            session_idle_timeout_s: 30,
            track_unassisted: true,
            max_flow_memory: 4 << 20,
            memory_budget: crate::core::DEFAULT_MEMORY_BUDGET,
            max_threshold: 64,
            min_quack_interval_ms: 1,
            max_symbols: 4096,
            max_cache_bytes: 4 << 20,
            discovery_rate: 200,
            discovery_burst: 50,
            ring_block_size: 1 << 20,
            ring_blocks: 64,
            ring_retire_ms: 1,
            capture: Capture::Auto,
            vnet_hdr: true,
            pemi: None,
            pemi_gap_signal: true,
            pemi_reply_enforcement: crate::pemi::ReplyEnforcement::Delay,
            pemi_trace: None,
            packrat_retx_budget_percent: crate::packrat::DEFAULT_RETX_BUDGET_PERCENT,
            fail_open: true,
            fail_open_bridge: "sidekick0".into(),
            fail_open_hang_ms: 500,
            #[cfg(feature = "testing")]
            lie: None,
            handshake_rescue: false,
            handshake_rescue_slack_ms: 5,
            handshake_rescue_hold_ms: 3000,
            handshake_rescue_max_flows: 1024,
        }
    }
}

/// `a` with its port raised by `k` (saturating; [`Config::validate`] keeps it in range).
fn port_plus(a: SocketAddr, k: usize) -> SocketAddr {
    let port = usize::from(a.port()) + k;
    SocketAddr::new(a.ip(), u16::try_from(port).unwrap_or(u16::MAX))
}

/// Keys a running proxy applies when it reloads its configuration file (SIGHUP); every other
/// key needs a restart ([`Config::reload_changes`], docs/proxy.md "Reloading the
/// configuration"). They apply to what begins after the reload — negotiations, discoveries,
/// new flows — and every session and flow already there is kept.
pub const LIVE_KEYS: &[&str] = &[
    "max_threshold",
    "min_quack_interval_ms",
    "max_symbols",
    "max_cache_bytes",
    "discovery_rate",
    "discovery_burst",
    "session_idle_timeout_s",
    "packrat_retx_budget_percent",
    "pemi",
    "pemi_gap_signal",
    "pemi_reply_enforcement",
];

/// Most capture workers (`workers`).
pub const MAX_WORKERS: usize = 64;

/// Largest capture ring per socket (`ring_block_size × ring_blocks`).
pub const MAX_RING_BYTES: u64 = 1 << 30;

/// Whether `name` can name a Linux network interface (IFNAMSIZ − 1 bytes, no separators).
fn is_interface_name(name: &str) -> bool {
    (1..16).contains(&name.len())
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0)
}

/// A configuration problem.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// TOML syntax or an unknown key.
    #[error("config file: {0}")]
    Toml(#[from] toml::de::Error),
    /// A value out of range or a missing required value.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl Config {
    /// Parse a TOML document (missing keys take defaults; unknown keys are errors).
    pub fn from_toml(s: &str) -> Result<Self, ConfigError> {
        let c: Config = toml::from_str(s)?;
        Ok(c)
    }

    /// Every numeric key with its value and its allowed range (inclusive). The ranges are the
    /// ones documented in docs/proxy.md ("Configuration keys and ranges") and
    /// docs/proxy.example.toml; [`Config::validate`] refuses a value outside them.
    pub fn numeric_keys(&self) -> [(&'static str, u64, RangeInclusive<u64>); 23] {
        const GIB: u64 = 1 << 30;
        let u = |v: usize| v as u64;
        [
            ("workers", u(self.workers), 0..=MAX_WORKERS as u64),
            ("shards", u(self.shards), 1..=256),
            ("max_flows", u(self.max_flows), 1..=16_777_216),
            ("max_sessions", u(self.max_sessions), 1..=1_048_576),
            ("max_half_open", u(self.max_half_open), 1..=1_048_576),
            ("idle_timeout_s", self.idle_timeout_s, 1..=86_400),
            (
                "session_idle_timeout_s",
                self.session_idle_timeout_s,
                1..=86_400,
            ),
            ("max_flow_memory", u(self.max_flow_memory), 4096..=GIB),
            (
                "memory_budget",
                u(self.memory_budget),
                (1 << 20)..=1024 * GIB,
            ),
            (
                "max_threshold",
                self.max_threshold.into(),
                1..=u(quack::MAX_THRESHOLD),
            ),
            (
                "min_quack_interval_ms",
                self.min_quack_interval_ms.into(),
                0..=60_000,
            ),
            (
                "max_symbols",
                self.max_symbols.into(),
                1..=u(eack::MAX_SYMBOLS),
            ),
            ("max_cache_bytes", self.max_cache_bytes, 1..=GIB),
            ("discovery_rate", self.discovery_rate.into(), 1..=100_000),
            ("discovery_burst", self.discovery_burst.into(), 1..=100_000),
            (
                "ring_block_size",
                self.ring_block_size.into(),
                4096..=64 << 20,
            ),
            ("ring_blocks", self.ring_blocks.into(), 1..=65_536),
            ("ring_retire_ms", self.ring_retire_ms.into(), 0..=1000),
            (
                "packrat_retx_budget_percent",
                self.packrat_retx_budget_percent.into(),
                0..=100,
            ),
            (
                "fail_open_hang_ms",
                self.fail_open_hang_ms.into(),
                100..=60_000,
            ),
            (
                "handshake_rescue_slack_ms",
                self.handshake_rescue_slack_ms.into(),
                0..=1000,
            ),
            (
                "handshake_rescue_hold_ms",
                self.handshake_rescue_hold_ms.into(),
                100..=60_000,
            ),
            (
                "handshake_rescue_max_flows",
                self.handshake_rescue_max_flows.into(),
                1..=1_048_576,
            ),
        ]
    }

    /// Check every value against its range and the keys against each other. The message of an
    /// error names the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(m.to_string()));
        match self.mode {
            Mode::Sniff if self.interface.is_empty() => return bad("sniff mode needs `interface`"),
            Mode::Bridge
                if self.client_interface.is_empty() || self.server_interface.is_empty() =>
            {
                return bad("bridge mode needs `client_interface` and `server_interface`");
            }
            Mode::Bridge if self.client_interface == self.server_interface => {
                return bad("bridge interfaces must differ");
            }
            _ => {}
        }
        for (key, value, range) in self.numeric_keys() {
            if !range.contains(&value) {
                return Err(ConfigError::Invalid(format!(
                    "`{key}` = {value} is outside its range {}..={}",
                    range.start(),
                    range.end()
                )));
            }
        }
        if self.max_sessions > self.max_flows {
            return bad("`max_sessions` must not exceed `max_flows`");
        }
        let last_port = usize::from(self.sidekick_listen.port()) + self.worker_count() - 1;
        let last_adv = self
            .sidekick_advertise
            .map_or(0, |a| usize::from(a.port()) + self.worker_count() - 1);
        if self.sidekick_listen.port() == 0 || last_port > 65_535 || last_adv > 65_535 {
            return bad(
                "the sidekick ports `sidekick_listen` + worker (and `sidekick_advertise` + worker) must lie in 1..=65535",
            );
        }
        if !self.ring_block_size.is_power_of_two() {
            return bad("`ring_block_size` must be a power of two");
        }
        if u64::from(self.ring_block_size) * u64::from(self.ring_blocks) > MAX_RING_BYTES {
            return bad("`ring_block_size` × `ring_blocks` must not exceed 1 GiB");
        }
        for (key, name) in [
            ("interface", &self.interface),
            ("client_interface", &self.client_interface),
            ("server_interface", &self.server_interface),
            ("fail_open_bridge", &self.fail_open_bridge),
        ] {
            if !name.is_empty() && !is_interface_name(name) {
                return Err(ConfigError::Invalid(format!(
                    "`{key}` = {name:?} is not an interface name (1–15 bytes, no '/', ':' or blanks)"
                )));
            }
        }
        if self.fail_open && self.mode == Mode::Bridge && self.fail_open_bridge.is_empty() {
            return bad("`fail_open_bridge` is required for a fail-open bridge");
        }
        if self.sidekick_advertise.is_none() && self.sidekick_listen.ip().is_unspecified() {
            return bad(
                "sidekick_advertise is required when sidekick_listen is a wildcard address",
            );
        }
        Ok(())
    }

    /// Whether this configuration runs under the fail-open supervisor (bridge mode with
    /// `fail_open`).
    pub fn supervised(&self) -> bool {
        self.mode == Mode::Bridge && self.fail_open
    }

    /// Whether frames are read through the mmap ring (resolving `capture = "auto"`).
    pub fn mmap_ring(&self) -> bool {
        match self.capture {
            Capture::Ring => true,
            Capture::Socket => false,
            Capture::Auto => self.mode == Mode::Sniff,
        }
    }

    /// The advertised sidekick address.
    pub fn advertise(&self) -> SocketAddr {
        self.sidekick_advertise.unwrap_or(self.sidekick_listen)
    }

    /// How many capture workers run: `workers`, or one per CPU when 0. One when a PEMI trace
    /// is written (a single ordered file).
    pub fn worker_count(&self) -> usize {
        if self.pemi_trace.is_some() {
            return 1;
        }
        match self.workers {
            0 => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            n => n,
        }
        .min(MAX_WORKERS)
    }

    /// The configuration of worker `k` of `n`: its sidekick port (`+ k`, listening and
    /// advertised) and its share of the flow, session, memory and capture-ring caps.
    pub fn for_worker(&self, k: usize, n: usize) -> Config {
        let mut c = self.clone();
        let n = n.max(1);
        c.sidekick_listen = port_plus(self.sidekick_listen, k);
        c.sidekick_advertise = self.sidekick_advertise.map(|a| port_plus(a, k));
        c.max_flows = (self.max_flows / n).max(1);
        c.max_sessions = (self.max_sessions / n).max(1);
        c.max_half_open = (self.max_half_open / n).max(1);
        c.memory_budget = (self.memory_budget / n).max(1 << 20);
        // Each worker sees a share of the frames: the capture rings together stay the size
        // one worker would have (`ring_block_size × ring_blocks`).
        c.ring_blocks = (self.ring_blocks / n as u32).max(1);
        c.handshake_rescue_max_flows = (self.handshake_rescue_max_flows / n as u32).max(1);
        c.workers = n;
        c.worker_index = k;
        c
    }

    /// The handshake rescue settings, when `handshake_rescue` is on.
    pub fn handshake_rescue_config(&self) -> Option<crate::core::RescueConfig> {
        self.handshake_rescue.then(|| crate::core::RescueConfig {
            max_flows: self.handshake_rescue_max_flows as usize,
            slack: Duration::from_millis(self.handshake_rescue_slack_ms.into()),
            hold: Duration::from_millis(self.handshake_rescue_hold_ms.into()),
            ..crate::core::RescueConfig::default()
        })
    }

    /// Whether PEMI runs: `pemi` when set, else on in bridge mode and off in sniff mode.
    pub fn pemi_on(&self) -> bool {
        self.pemi.unwrap_or(self.mode == Mode::Bridge)
    }

    /// The PEMI settings implied by `pemi` and `mode` (reply delays only in bridge mode).
    pub fn pemi_config(&self) -> Option<crate::pemi::PemiConfig> {
        self.pemi_on().then(|| crate::pemi::PemiConfig {
            enforce_delay: self.mode == Mode::Bridge,
            hold_on_gap: self.mode == Mode::Bridge,
            gap_signal: self.pemi_gap_signal,
            reply_enforcement: self.pemi_reply_enforcement,
            ..crate::pemi::PemiConfig::default()
        })
    }

    /// What a reload from `self` to `new` changes (SIGHUP, docs/proxy.md "Reloading the
    /// configuration"): the [`LIVE_KEYS`] whose values differ. A reload that changes any other
    /// key is refused with an error naming those keys: they shape sockets, threads, tables or
    /// rings made at start, and need a restart.
    pub fn reload_changes(&self, new: &Config) -> Result<Vec<&'static str>, ConfigError> {
        let mut live = Vec::new();
        let mut restart: Vec<&'static str> = Vec::new();
        for ((key, a, _), (_, b, _)) in self.numeric_keys().into_iter().zip(new.numeric_keys()) {
            if a != b {
                if LIVE_KEYS.contains(&key) {
                    live.push(key);
                } else {
                    restart.push(key);
                }
            }
        }
        if self.pemi != new.pemi {
            live.push("pemi");
        }
        if self.pemi_gap_signal != new.pemi_gap_signal {
            live.push("pemi_gap_signal");
        }
        if self.pemi_reply_enforcement != new.pemi_reply_enforcement {
            live.push("pemi_reply_enforcement");
        }
        let others: [(&'static str, bool); 18] = [
            ("mode", self.mode == new.mode),
            ("interface", self.interface == new.interface),
            ("faces", self.faces == new.faces),
            (
                "client_interface",
                self.client_interface == new.client_interface,
            ),
            (
                "server_interface",
                self.server_interface == new.server_interface,
            ),
            (
                "sidekick_listen",
                self.sidekick_listen == new.sidekick_listen,
            ),
            (
                "sidekick_advertise",
                self.sidekick_advertise == new.sidekick_advertise,
            ),
            ("metrics_listen", self.metrics_listen == new.metrics_listen),
            ("log", self.log == new.log),
            (
                "track_unassisted",
                self.track_unassisted == new.track_unassisted,
            ),
            ("capture", self.capture == new.capture),
            ("vnet_hdr", self.vnet_hdr == new.vnet_hdr),
            ("pemi_trace", self.pemi_trace == new.pemi_trace),
            ("fail_open", self.fail_open == new.fail_open),
            (
                "fail_open_bridge",
                self.fail_open_bridge == new.fail_open_bridge,
            ),
            (
                "handshake_rescue",
                self.handshake_rescue == new.handshake_rescue,
            ),
            ("workers", self.worker_count() == new.worker_count()),
            #[cfg(feature = "testing")]
            ("lie", self.lie == new.lie),
            #[cfg(not(feature = "testing"))]
            ("lie", true),
        ];
        restart.extend(others.iter().filter(|(_, same)| !same).map(|(k, _)| *k));
        restart.dedup();
        if restart.is_empty() {
            Ok(live)
        } else {
            Err(ConfigError::Invalid(format!(
                "{} cannot change while running (restart the proxy)",
                restart
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    }

    /// The flow idle timeout.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.idle_timeout_s)
    }

    /// The session layer's share of the [`LIVE_KEYS`]: what a reload changes on a running core.
    pub fn session_limits(&self) -> SessionLimits {
        SessionLimits {
            max_threshold: self.max_threshold,
            min_quack_interval_ms: self.min_quack_interval_ms,
            max_symbols: self.max_symbols,
            max_cache_bytes: self.max_cache_bytes,
            discovery_rate: self.discovery_rate,
            discovery_burst: self.discovery_burst,
            idle_timeout: Duration::from_secs(self.session_idle_timeout_s),
            packrat_retx_budget_percent: self.packrat_retx_budget_percent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_config_parses_and_validates() {
        let text = include_str!("../../docs/proxy.example.toml");
        let c = Config::from_toml(text).unwrap();
        c.validate().unwrap();
        assert_eq!(c.mode, Mode::Sniff);
        assert_eq!(c.idle_timeout_s, 120);
    }

    #[test]
    fn unknown_keys_and_bad_values_rejected() {
        assert!(Config::from_toml("bogus = 1").is_err());
        let c = Config::from_toml(
            "mode = \"bridge\"\nclient_interface = \"a\"\nserver_interface = \"a\"",
        )
        .unwrap();
        assert!(c.validate().is_err());
        let c = Config::from_toml("interface = \"eth0\"").unwrap();
        // Wildcard listen without an advertised address.
        assert!(c.validate().is_err());
    }

    #[test]
    fn capture_follows_the_mode() {
        assert!(Config::default().mmap_ring());
        assert!(!Config::from_toml("mode = \"bridge\"").unwrap().mmap_ring());
        let c = Config::from_toml("mode = \"bridge\"\ncapture = \"ring\"").unwrap();
        assert!(c.mmap_ring());
        assert!(
            !Config::from_toml("capture = \"socket\"")
                .unwrap()
                .mmap_ring()
        );
    }

    #[test]
    fn reload_changes_name_live_and_restart_keys() {
        let old = Config::from_toml("interface = \"eth0\"\nmax_threshold = 64").unwrap();
        let new = Config::from_toml(
            "interface = \"eth0\"\nmax_threshold = 8\npemi = true\ndiscovery_rate = 10",
        )
        .unwrap();
        assert_eq!(
            old.reload_changes(&new).unwrap(),
            vec!["max_threshold", "discovery_rate", "pemi"]
        );
        assert!(old.reload_changes(&old).unwrap().is_empty());
        let moved = Config::from_toml("interface = \"eth1\"\nshards = 8").unwrap();
        let e = old.reload_changes(&moved).unwrap_err().to_string();
        assert!(e.contains("`shards`") && e.contains("`interface`"), "{e}");
        for k in LIVE_KEYS {
            assert!(
                old.numeric_keys().iter().any(|(n, _, _)| n == k)
                    || ["pemi", "pemi_gap_signal", "pemi_reply_enforcement"].contains(k),
                "{k}"
            );
        }
    }

    #[test]
    fn pemi_switch_and_mode() {
        // The default follows the mode: on where PEMI can enforce its window (bridge), off
        // where it cannot (sniff); an explicit value wins either way.
        assert!(Config::default().pemi_config().is_none());
        let c = Config::from_toml("mode = \"bridge\"").unwrap();
        assert!(c.pemi_config().unwrap().enforce_delay);
        let c = Config::from_toml("mode = \"bridge\"\npemi = false").unwrap();
        assert!(c.pemi_config().is_none());
        let c = Config::from_toml("pemi = true").unwrap();
        assert!(!c.pemi_config().unwrap().enforce_delay);
        assert!(!c.pemi_config().unwrap().hold_on_gap);
        let c = Config::from_toml("pemi = true\nmode = \"bridge\"").unwrap();
        assert!(c.pemi_config().unwrap().enforce_delay);
        assert!(c.pemi_config().unwrap().hold_on_gap);
        assert!(c.pemi_config().unwrap().gap_signal);
        let c = Config::from_toml("pemi = true\npemi_gap_signal = false").unwrap();
        assert!(!c.pemi_config().unwrap().gap_signal);
        assert_eq!(
            c.pemi_config().unwrap().reply_enforcement,
            crate::pemi::ReplyEnforcement::Delay
        );
        let c =
            Config::from_toml("mode = \"bridge\"\npemi_reply_enforcement = \"reorder\"").unwrap();
        assert_eq!(
            c.pemi_config().unwrap().reply_enforcement,
            crate::pemi::ReplyEnforcement::Reorder
        );
        assert!(Config::from_toml("pemi_reply_enforcement = \"drop\"").is_err());
    }
}
