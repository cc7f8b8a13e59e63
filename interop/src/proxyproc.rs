//! A proxy process (normally `sidekick-proxy`) run inside the ap namespace for one trial: start,
//! wait until it captures, scrape its Prometheus metrics, stop it (SIGTERM, then SIGKILL).
//!
//! The process is owned by a [`ProxyProcess`] whose `Drop` always stops it, so an error, a panic
//! (unwinding) or an interrupted run (SIGINT/SIGTERM make the runner return early) never leaves a
//! proxy behind; a lab process that is itself SIGKILLed leaves it to `sidekick-lab clean`, which
//! kills every process inside a run's namespaces.

use crate::appproc::{LogTail, read_tail};
use crate::topo::LabError;
use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Log lines of the proxy kept for error messages and the final statistics (the newest ones).
const MAX_LOG_LINES: usize = 200;

/// How long the proxy gets to open its capture socket.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the proxy gets to exit after SIGTERM before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// A running proxy.
pub struct ProxyProcess {
    child: Option<Child>,
    log: LogTail,
    ns: String,
    metrics: Option<SocketAddr>,
}

/// Where the proxy serves metrics, from its arguments: `--metrics-listen ADDR`, none with
/// `--no-metrics`, else `sidekick-proxy`'s default 127.0.0.1:9464 (a per-namespace loopback).
///
/// ```
/// use sidekick_lab::proxyproc::metrics_addr;
/// let a = |v: &[&str]| metrics_addr(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
/// assert_eq!(a(&["--no-metrics"]), None);
/// assert_eq!(a(&[]), Some("127.0.0.1:9464".parse().unwrap()));
/// assert_eq!(a(&["--metrics-listen", "10.0.2.1:1"]), Some("10.0.2.1:1".parse().unwrap()));
/// ```
pub fn metrics_addr(args: &[String]) -> Option<SocketAddr> {
    if args.iter().any(|a| a == "--no-metrics") {
        return None;
    }
    let explicit = args
        .windows(2)
        .find(|w| w[0] == "--metrics-listen")
        .and_then(|w| w[1].parse().ok())
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--metrics-listen="))
                .and_then(|v| v.parse().ok())
        });
    Some(explicit.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9464))))
}

/// Parses Prometheus text into `name → value` for unlabelled samples, and sums labelled samples
/// of one name into `name` as well (`sidekick_drops_total{reason=…}` → `sidekick_drops_total`).
///
/// ```
/// let m = sidekick_lab::proxyproc::parse_prometheus(
///     "# HELP x y\nsidekick_quacks_sent_total 12\nsidekick_drops_total{reason=\"a\"} 2\n\
///      sidekick_drops_total{reason=\"b\"} 3\n");
/// assert_eq!(m["sidekick_quacks_sent_total"], 12.0);
/// assert_eq!(m["sidekick_drops_total"], 5.0);
/// ```
pub fn parse_prometheus(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((name, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(v) = value.parse::<f64>() else {
            continue;
        };
        let name = name.split('{').next().unwrap_or(name).trim();
        if name.is_empty() {
            continue;
        }
        *out.entry(name.to_string()).or_insert(0.0) += v;
    }
    out
}

/// Parses the `key=value` fields of a tracing log line (ANSI colour codes removed), e.g. the
/// proxy's final `stopped frames=… quacks=… retransmissions=…`.
///
/// ```
/// let f = sidekick_lab::proxyproc::log_fields("INFO sidekick_proxy::daemon: stopped frames=10 quacks=3");
/// assert_eq!(f["quacks"], 3.0);
/// ```
pub fn log_fields(line: &str) -> BTreeMap<String, f64> {
    let mut plain = String::with_capacity(line.len());
    let mut esc = false;
    for c in line.chars() {
        if c == '\u{1b}' {
            esc = true;
        } else if esc {
            if c.is_ascii_alphabetic() {
                esc = false;
            }
        } else {
            plain.push(c);
        }
    }
    plain
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter_map(|(k, v)| v.parse::<f64>().ok().map(|v| (k.to_string(), v)))
        .collect()
}

impl ProxyProcess {
    /// Starts `bin args…` in namespace `ns` and waits until it logs that it captures
    /// (`sniffing` / `bridging`; the split-TCP proxy `sidekick-tcp-split`: `splitting`), or fails
    /// with the proxy's last log lines.
    pub fn start(ns: &str, bin: &Path, args: &[String]) -> Result<Self, LabError> {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(bin)
            .args(args)
            // Plain log lines (no colour codes) at info level unless the scenario asks for more.
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| LabError::Io {
                context: format!("starting {}", bin.display()),
                source: e,
            })?;
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut ready_tx = Some(ready_tx);
        let err: Box<dyn std::io::Read + Send> = match child.stderr.take() {
            Some(e) => Box::new(e),
            None => Box::new(std::io::empty()),
        };
        let log = read_tail(err, MAX_LOG_LINES, move |line| {
            if (line.contains("sniffing")
                || line.contains("bridging")
                || line.contains("splitting"))
                && let Some(tx) = ready_tx.take()
            {
                let _ = tx.send(());
            }
        });
        let mut p = ProxyProcess {
            child: Some(child),
            log,
            ns: ns.to_string(),
            metrics: metrics_addr(args),
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match ready_rx.recv_timeout(Duration::from_millis(50)) {
                Ok(()) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // stderr closed: the proxy exited before it was ready.
                    std::thread::sleep(Duration::from_millis(50));
                    return Err(p.failure("exited before it was ready"));
                }
            }
            if let Some(c) = p.child.as_mut()
                && let Ok(Some(st)) = c.try_wait()
            {
                return Err(p.failure(&format!("exited before it was ready ({st})")));
            }
            if Instant::now() > deadline {
                return Err(p.failure("not ready in time"));
            }
        }
        tracing::debug!(ns, pid = p.pid(), "proxy ready");
        Ok(p)
    }

    fn failure(&mut self, what: &str) -> LabError {
        self.stop();
        LabError::Config(format!("proxy {what}: {}", self.log_tail(5).join(" | ")))
    }

    /// The proxy's pid (that of `ip netns exec`, which execs the proxy).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The last `n` log lines.
    pub fn log_tail(&self, n: usize) -> Vec<String> {
        self.log.last(n)
    }

    /// Fetches the metrics endpoint from inside the namespace (`None` when metrics are off or the
    /// endpoint does not answer).
    pub fn scrape(&self) -> Option<BTreeMap<String, f64>> {
        let addr = self.metrics?;
        let text = crate::sys::in_netns(&self.ns, move || {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
            let mut out = String::new();
            s.read_to_string(&mut out)?;
            Ok(out)
        })
        .ok()?;
        let body = text.split_once("\r\n\r\n").map_or(text.as_str(), |x| x.1);
        Some(parse_prometheus(body))
    }

    /// Stops the proxy: SIGTERM, up to [`STOP_GRACE`] to exit, then SIGKILL. Returns the fields
    /// of its final `stopped …` log line (frames, quacks, retransmissions) if it printed one.
    pub fn stop(&mut self) -> BTreeMap<String, f64> {
        let Some(mut child) = self.child.take() else {
            return BTreeMap::new();
        };
        let pid = i32::try_from(child.id()).unwrap_or(0);
        if matches!(child.try_wait(), Ok(None)) {
            crate::sys::signal(pid, libc::SIGTERM);
            let deadline = Instant::now() + STOP_GRACE;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if matches!(child.try_wait(), Ok(None)) {
                tracing::warn!(pid, "proxy ignored SIGTERM; killing it");
                let _ = child.kill();
            }
        }
        let _ = child.wait();
        // The reader sees EOF right after the exit; give it a moment to store the last line.
        self.log
            .lines(Duration::from_millis(200))
            .iter()
            .rev()
            .find(|l| l.contains("stopped"))
            .map(|l| log_fields(l))
            .unwrap_or_default()
    }

    /// Kills the proxy at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_and_log_parsing() {
        let m = parse_prometheus(
            "# TYPE a counter\nsidekick_a 1\nsidekick_b{x=\"y\"} 2\nsidekick_b{x=\"z\"} 4\n\nbad\nsidekick_c nan_text\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m["sidekick_a"], 1.0);
        assert_eq!(m["sidekick_b"], 6.0);
        let f = log_fields(
            "\u{1b}[2m2026-11-23T18:00:00Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m sidekick_proxy::daemon: stopped \u{1b}[3mframes\u{1b}[0m\u{1b}[2m=\u{1b}[0m42 quacks=7 retransmissions=0",
        );
        assert_eq!(f["frames"], 42.0);
        assert_eq!(f["quacks"], 7.0);
        assert_eq!(f["retransmissions"], 0.0);
    }

    #[test]
    fn metrics_address_forms() {
        let v = |s: &[&str]| s.iter().map(|x| (*x).to_string()).collect::<Vec<_>>();
        assert_eq!(
            metrics_addr(&v(&["--metrics-listen=127.0.0.1:1"])),
            Some("127.0.0.1:1".parse().unwrap())
        );
        assert_eq!(metrics_addr(&v(&["--mode", "sniff", "--no-metrics"])), None);
    }
}
