//! The proxy on the simulated ap: the same [`ProxyCore`] over the same session layer
//! ([`ProtocolSessions`]) that `sidekick-proxy` runs, configured from the scenario's proxy command
//! line, fed the Ethernet frames crossing the ap's capture interface.
//!
//! Every use of `ProxyCore` in the simulator is in this file, through its public methods only, so
//! that changes to the core's interface touch one place.
//!
//! What stands in for the daemon's I/O (proxy/src/daemon.rs):
//! - bridging (`--mode bridge --client-interface lan0 --server-interface wan0`, PEMI): every
//!   frame between the ap's ports passes the core, which may delay it ([`Verdict::Delay`]);
//! - sniffing (`--mode sniff --interface lan0 --faces client`): frames the ap receives on lan0 are
//!   [`Direction::FromClient`], frames it sends on lan0 (forwarded from the wan, or from its own
//!   sidekick socket) are [`Direction::ToClient`]; injected frames are not captured again (the
//!   kernel does not hand a packet socket its own frames);
//! - the sidekick UDP socket: datagrams addressed to the `--sidekick-listen` address;
//! - housekeeping once a second (`expire`), as the daemon's loop does.
//!
//! Capture batching (`--ring-*`), metrics and logging flags shape only the daemon's I/O and are
//! accepted without effect; flags the simulator cannot honour are errors naming the flag.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Instant;

use crate::net::udp_of;
use crate::sched::Clock;

use sidekick_proxy::config::{Config, Faces, Mode};
use sidekick_proxy::core::{FrameMeta, ProxyCore, Transmit};
use sidekick_proxy::engine::Direction;
use sidekick_proxy::metrics::RenderPrometheus as _;
use sidekick_proxy::session::ProtocolSessions;

/// Errors of the proxy command line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProxyArgError {
    /// A flag the simulated proxy cannot honour.
    #[error("proxy flag `{0}` is not modelled by the simulator")]
    NotModelled(String),
    /// A flag without its value, or a stray argument.
    #[error("proxy argument `{0}`: expected --flag value")]
    Malformed(String),
    /// The configuration the flags describe is invalid.
    #[error("proxy configuration: {0}")]
    Config(String),
}

/// Flags that configure only the daemon's I/O (capture ring, metrics endpoint, logging).
const IO_ONLY: &[&str] = &[
    "metrics_listen",
    "log",
    "ring_block_size",
    "ring_blocks",
    "ring_retire_ms",
    "capture",
    "vnet_hdr",
];

/// Parses `sidekick-proxy` flags (the scenario's `proxy` list without the program name) into the
/// proxy's [`Config`]; every flag is a configuration key (docs/proxy.md).
pub fn parse_args(args: &[String]) -> Result<Config, ProxyArgError> {
    let mut table = toml::Table::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let Some(flag) = a.strip_prefix("--") else {
            return Err(ProxyArgError::Malformed(a.clone()));
        };
        let key = flag.replace('-', "_");
        match key.as_str() {
            "no_metrics" => continue,
            "config" | "check_config" | "pemi_trace" => {
                return Err(ProxyArgError::NotModelled(a.clone()));
            }
            _ => {}
        }
        let v = it
            .next()
            .ok_or_else(|| ProxyArgError::Malformed(a.clone()))?;
        let value = if let Ok(i) = v.parse::<i64>() {
            toml::Value::Integer(i)
        } else if let Ok(b) = v.parse::<bool>() {
            toml::Value::Boolean(b)
        } else {
            toml::Value::String(v.clone())
        };
        table.insert(key, value);
    }
    let text = toml::to_string(&table).map_err(|e| ProxyArgError::Config(e.to_string()))?;
    let cfg = Config::from_toml(&text).map_err(|e| match e {
        sidekick_proxy::config::ConfigError::Toml(t) => {
            // serde names the unknown field; report it as the flag it came from.
            ProxyArgError::NotModelled(t.message().to_string())
        }
        sidekick_proxy::config::ConfigError::Invalid(m) => ProxyArgError::Config(m),
    })?;
    cfg.validate()
        .map_err(|e| ProxyArgError::Config(e.to_string()))?;
    let modelled = match cfg.mode {
        Mode::Sniff => cfg.faces == Faces::Client && cfg.interface == "lan0",
        Mode::Bridge => cfg.client_interface == "lan0" && cfg.server_interface == "wan0",
    };
    if !modelled {
        return Err(ProxyArgError::NotModelled(format!(
            "--mode {:?} on {} (the simulator models sniffing lan0 facing the client, and \
             bridging lan0 to wan0)",
            cfg.mode,
            if cfg.mode == Mode::Sniff {
                cfg.interface.clone()
            } else {
                format!("{} / {}", cfg.client_interface, cfg.server_interface)
            }
        )));
    }
    Ok(cfg)
}

/// Whether a configuration key only shapes the daemon's I/O.
pub fn is_io_only(key: &str) -> bool {
    IO_ONLY.contains(&key)
}

/// What the ap must do with the proxy's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyOut {
    /// Send a UDP datagram from the proxy's sidekick socket.
    Sidekick {
        /// Destination (the client's sidekick socket).
        to: SocketAddr,
        /// Payload.
        bytes: Vec<u8>,
    },
    /// Send a frame on a capture interface; not captured again.
    Inject {
        /// Towards the client (sniffing: always; bridging: by the frame's direction).
        to_client: bool,
        /// The frame.
        frame: Vec<u8>,
    },
}

/// What happens to a captured frame in bridge mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Forward now (always, when sniffing: the kernel forwards).
    Forward,
    /// Forward no earlier than this (PEMI's bounded reply delay).
    Delay(Instant),
}

/// The simulated proxy.
pub struct ProxyNode {
    /// The core runs on [`Time`]; the simulation's components on `Instant`s of this clock.
    clock: Clock,
    bridge: bool,
    core: ProxyCore<ProtocolSessions>,
    listen: SocketAddr,
}

impl std::fmt::Debug for ProxyNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyNode")
            .field("listen", &self.listen)
            .finish_non_exhaustive()
    }
}

impl ProxyNode {
    /// The proxy `cfg` describes (as `daemon::build_core` builds it), its flow table keyed by
    /// `hash_key` instead of a random key.
    pub fn new(cfg: &Config, hash_key: (u64, u64), clock: Clock) -> Self {
        // The daemon's own construction, with a seeded flow-table key.
        let core = sidekick_proxy::daemon::build_core_keyed(cfg, hash_key);
        Self {
            clock,
            bridge: cfg.mode == Mode::Bridge,
            core,
            listen: cfg.sidekick_listen,
        }
    }

    /// Whether the proxy bridges the ap's interfaces (it forwards every frame itself).
    pub fn bridges(&self) -> bool {
        self.bridge
    }

    /// The sidekick socket's address.
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    fn drain(&mut self, out: &mut Vec<ProxyOut>) {
        while let Some(t) = self.core.poll_transmit() {
            match t {
                Transmit::Sidekick { to, bytes } => out.push(ProxyOut::Sidekick { to, bytes }),
                // Sniffing: injected frames leave on the capture interface whatever their
                // direction (daemon.rs); bridging: on the interface their direction leads to.
                Transmit::Inject { dir, frame } => out.push(ProxyOut::Inject {
                    to_client: !self.bridge || dir == Direction::ToClient,
                    frame,
                }),
            }
        }
    }

    /// A frame crossed the capture interface at `now` (`from_client`: received from the client
    /// side; else sent towards it). The verdict matters in bridge mode only.
    pub fn on_frame(
        &mut self,
        now: Instant,
        from_client: bool,
        frame: &[u8],
        out: &mut Vec<ProxyOut>,
    ) -> Verdict {
        let dir = if from_client {
            Direction::FromClient
        } else {
            Direction::ToClient
        };
        let verdict =
            self.core
                .handle_frame(self.clock.core_time(now), dir, frame, FrameMeta::default());
        self.drain(out);
        match verdict {
            sidekick_proxy::core::Verdict::Delay { until } if self.bridge => {
                Verdict::Delay(self.clock.core_instant(until))
            }
            _ => Verdict::Forward,
        }
    }

    /// A frame at the ap: when it is a UDP datagram to the sidekick socket, the socket takes it
    /// ([`Self::on_sidekick`]) and this returns true; any other frame is not the socket's.
    pub fn sidekick_frame(&mut self, now: Instant, frame: &[u8], out: &mut Vec<ProxyOut>) -> bool {
        match udp_of(frame) {
            Some((src, dst, payload)) if dst == self.listen => {
                self.on_sidekick(now, src, payload, out);
                true
            }
            _ => false,
        }
    }

    /// A datagram reached the sidekick socket.
    pub fn on_sidekick(
        &mut self,
        now: Instant,
        from: SocketAddr,
        bytes: &[u8],
        out: &mut Vec<ProxyOut>,
    ) {
        self.core
            .handle_sidekick(self.clock.core_time(now), from, bytes);
        self.drain(out);
    }

    /// The next time [`Self::handle_timeout`] must run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.core.poll_timeout().map(|t| self.clock.core_instant(t))
    }

    /// Runs the timers due at `now` (engine cadences and idle expiry).
    pub fn handle_timeout(&mut self, now: Instant, out: &mut Vec<ProxyOut>) {
        self.core.handle_timeout(self.clock.core_time(now));
        self.drain(out);
    }

    /// The core's counters and gauges now (flows, sessions, timers fired, engine memory).
    pub fn counters(&self) -> sidekick_proxy::metrics::Counters {
        self.core.snapshot()
    }

    /// The proxy's metrics as the lab records them: the Prometheus names without `sidekick_`,
    /// prefixed `proxy_` (`proxy_quacks_sent_total`, ...), and `proxy_ran`.
    pub fn metrics(&self, m: &mut BTreeMap<String, f64>) {
        // Encoding into a String fails only on a gauge beyond i64::MAX, which `encode` clamps.
        let text = self.core.snapshot().render_prometheus().unwrap_or_default();
        for (k, v) in sidekick_lab::proxyproc::parse_prometheus(&text) {
            let k = k.strip_prefix("sidekick_").unwrap_or(&k).to_string();
            m.insert(format!("proxy_{k}"), v);
        }
        m.insert("proxy_ran".into(), 1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn lab_command_line_parses() {
        let c = parse_args(&args(
            "--mode sniff --interface lan0 --faces client --sidekick-listen 10.0.2.1:7788 \
             --metrics-listen 127.0.0.1:9464 --ring-blocks 8 --max-threshold 32",
        ))
        .unwrap();
        assert_eq!(c.sidekick_listen, "10.0.2.1:7788".parse().unwrap());
        assert_eq!(c.max_threshold, 32);
        assert_eq!(c.ring_blocks, 8);
        assert!(is_io_only("ring_blocks"));
    }

    #[test]
    fn unknown_and_unmodelled_flags_are_named() {
        let base = "--mode sniff --interface lan0 --sidekick-listen 10.0.2.1:7788";
        let e = parse_args(&args(&format!("{base} --frobnicate 3"))).unwrap_err();
        assert!(e.to_string().contains("frobnicate"), "{e}");
        let e = parse_args(&args(&format!("{base} --pemi-trace /tmp/x"))).unwrap_err();
        assert!(e.to_string().contains("--pemi-trace"), "{e}");
        let e = parse_args(&args(
            "--mode bridge --client-interface a --server-interface b \
             --sidekick-listen 10.0.2.1:7788",
        ))
        .unwrap_err();
        assert!(matches!(e, ProxyArgError::NotModelled(_)), "{e}");
        assert!(matches!(
            parse_args(&args("--mode")),
            Err(ProxyArgError::Malformed(_))
        ));
    }
}
