//! Bridge mode fails open: when the forwarding process exits or hangs, the kernel forwards.
//!
//! In bridge mode the proxy is the only path between `client_interface` and
//! `server_interface`, so its death would cut every connection through the access point. The
//! supervisor is the process the operator (or systemd) starts; it forwards nothing itself and
//! reads no network input. It runs the proxy as a *worker* (the same binary with `--worker`)
//! and watches it over the service-manager protocol (`notify`): the worker says `READY=1` once
//! it forwards and `WATCHDOG=1` every quarter of `fail_open_hang_ms` from its loop.
//!
//! - While no healthy worker forwards — before the first is ready, after one exits (any way,
//!   SIGKILL included: the supervisor sees its exit at once), after one stays silent for
//!   `fail_open_hang_ms` (it is then killed), and after the supervisor itself is told to stop —
//!   both interfaces are ports of the kernel bridge `fail_open_bridge` (STP off: ports forward
//!   at once). With the default 500 ms that is ≤ 0.5 s of loss on a hang, a few ms on a crash.
//! - When a worker is ready the bridge is deleted and the worker forwards alone. (Between its
//!   sockets opening and the deletion a few frames may be delivered twice; transports discard
//!   duplicates, whereas a gap would cost them a loss.)
//! - A worker that failed is restarted after 1 s, doubling up to 30 s while it keeps failing.
//! - If the supervisor itself is killed, the worker carries on forwarding; under systemd the
//!   unit's `ExecStopPost=sidekick-proxy --restore-bridge` rebuilds the bridge (docs/proxy.md).
//!
//! The supervisor keeps CAP_NET_ADMIN (for the bridge) and CAP_NET_RAW (which its workers
//! inherit to open their AF_PACKET sockets, after which they drop everything).

use std::ffi::OsString;
use std::io;
use std::os::fd::AsRawFd as _;
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::config::Config;
use crate::notify::{Notifier, parse_address};
use crate::sys::caps::{CAP_NET_ADMIN, CAP_NET_RAW};
use crate::sys::{StopSignals, poll_readable, send_signal};

/// The kernel bridge that carries the traffic while no worker does.
#[derive(Debug, Clone)]
pub struct FailOpenBridge {
    name: String,
    ports: [String; 2],
}

fn ip(args: &[&str]) -> io::Result<std::process::Output> {
    Command::new("ip").args(args).stdin(Stdio::null()).output()
}

fn ip_ok(args: &[&str]) -> anyhow::Result<()> {
    let out = ip(args).with_context(|| format!("run ip {}", args.join(" ")))?;
    anyhow::ensure!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

impl FailOpenBridge {
    /// The bridge a bridge-mode configuration names.
    pub fn new(cfg: &Config) -> Self {
        Self {
            name: cfg.fail_open_bridge.clone(),
            ports: [cfg.client_interface.clone(), cfg.server_interface.clone()],
        }
    }

    /// Join both interfaces in the bridge, creating it if needed (idempotent). The bridge gets
    /// no addresses (`addrgenmode none`): it is a wire, not a host.
    pub fn open(&self) -> anyhow::Result<()> {
        let n = self.name.as_str();
        let add = ip(&["link", "add", "name", n, "type", "bridge", "stp_state", "0"])
            .context("run ip link add")?;
        if !add.status.success() {
            let err = String::from_utf8_lossy(&add.stderr);
            anyhow::ensure!(err.contains("exists"), "ip link add {n}: {}", err.trim());
        }
        let _ = ip(&["link", "set", "dev", n, "addrgenmode", "none"]);
        for p in &self.ports {
            ip_ok(&["link", "set", "dev", p, "master", n])?;
        }
        ip_ok(&["link", "set", "dev", n, "up"])
    }

    /// Delete the bridge (its ports are released and stay up); nothing if it does not exist.
    pub fn close(&self) -> anyhow::Result<()> {
        let out = ip(&["link", "del", "dev", &self.name]).context("run ip link del")?;
        let err = String::from_utf8_lossy(&out.stderr);
        anyhow::ensure!(
            out.status.success() || err.contains("Cannot find") || err.contains("does not exist"),
            "ip link del {}: {}",
            self.name,
            err.trim()
        );
        Ok(())
    }
}

/// A worker process and what it last said.
struct Worker {
    child: Child,
    /// Its notification socket (a fresh one per worker: a dead worker's queued messages cannot
    /// vouch for the next).
    sock: UnixDatagram,
    started: Instant,
    ready: bool,
    last_beat: Instant,
}

/// How long a worker may take to open its sockets before it counts as hung.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopping worker gets after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(3);
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Why the supervisor gave up on a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerFault {
    /// It exited (crash, SIGKILL, error).
    Exited,
    /// It stopped feeding the watchdog.
    Hung,
    /// It never became ready.
    NotReady,
}

/// What the supervisor decides about its worker at `now`: `Some(fault)` to fail open.
fn judge(
    exited: bool,
    ready: bool,
    since_beat: Duration,
    since_start: Duration,
    hang: Duration,
) -> Option<WorkerFault> {
    if exited {
        Some(WorkerFault::Exited)
    } else if ready && since_beat > hang {
        Some(WorkerFault::Hung)
    } else if !ready && since_start > START_TIMEOUT {
        Some(WorkerFault::NotReady)
    } else {
        None
    }
}

/// The supervisor's state.
struct Supervisor {
    bridge: FailOpenBridge,
    bridge_open: bool,
    hang: Duration,
    worker_args: Vec<OsString>,
    spawned: u64,
}

impl Supervisor {
    fn fail_open(&mut self) {
        // Retried on every loop turn until it works: frames must flow again.
        match self.bridge.open() {
            Ok(()) => {
                if !self.bridge_open {
                    tracing::warn!(bridge = %self.bridge.name, "failed open: the kernel bridge forwards");
                }
                self.bridge_open = true;
            }
            Err(e) => tracing::error!(error = %e, "could not open the fail-open bridge"),
        }
    }

    fn spawn(&mut self) -> anyhow::Result<Worker> {
        self.spawned += 1;
        let name = format!(
            "sidekick-proxy-{}-{}-{:016x}",
            std::process::id(),
            self.spawned,
            rand::random::<u64>()
        );
        let addr = parse_address(&format!("@{name}"))?;
        let sock = UnixDatagram::bind_addr(&addr).context("bind the worker's notify socket")?;
        sock.set_nonblocking(true)?;
        let exe = std::env::current_exe().context("locate the proxy binary")?;
        let child = Command::new(exe)
            .args(&self.worker_args)
            .arg("--worker")
            .env("NOTIFY_SOCKET", format!("@{name}"))
            .env("WATCHDOG_USEC", (self.hang.as_micros().max(1)).to_string())
            .env_remove("WATCHDOG_PID")
            .stdin(Stdio::null())
            .spawn()
            .context("start the worker")?;
        tracing::info!(pid = child.id(), "worker started");
        let now = Instant::now();
        Ok(Worker {
            child,
            sock,
            started: now,
            ready: false,
            last_beat: now,
        })
    }
}

/// Run the supervisor until SIGINT/SIGTERM (see the module documentation). `worker_args` are
/// the command-line arguments the worker gets (the supervisor's own, without the program name).
pub fn run(cfg: &Config, worker_args: Vec<OsString>) -> anyhow::Result<()> {
    let signals = StopSignals::new().context("block SIGINT/SIGTERM")?;
    crate::sys::caps::restrict_to(&[CAP_NET_ADMIN, CAP_NET_RAW])
        .context("keep CAP_NET_ADMIN and CAP_NET_RAW (needed by the fail-open bridge)")?;
    let mut manager = Notifier::from_env().context("NOTIFY_SOCKET")?;
    let mut sup = Supervisor {
        bridge: FailOpenBridge::new(cfg),
        bridge_open: false,
        hang: Duration::from_millis(u64::from(cfg.fail_open_hang_ms)),
        worker_args,
        spawned: 0,
    };
    sup.fail_open();
    let mut worker: Option<Worker> = None;
    let mut next_spawn = Instant::now();
    let mut backoff = FIRST_BACKOFF;
    let mut announced = false;
    let mut buf = [0u8; 512];
    loop {
        let mut fds = vec![signals.fd()];
        if let Some(w) = &worker {
            fds.push(w.sock.as_raw_fd());
        }
        let ready = poll_readable(&fds, 20).context("poll")?;
        if ready[0]
            && let Some(sig) = signals.pending()
        {
            if sig == libc::SIGHUP {
                // The worker runs the cores: it reloads the configuration.
                if let Some(w) = &worker {
                    let _ = send_signal(w.child.id(), libc::SIGHUP);
                }
                continue;
            }
            tracing::info!(signal = sig, "stopping");
            break;
        }
        let now = Instant::now();
        if let Some(m) = manager.as_mut() {
            m.feed_watchdog(now);
        }
        if !sup.bridge_open && worker.as_ref().is_none_or(|w| !w.ready) {
            sup.fail_open();
        }
        let Some(w) = worker.as_mut() else {
            if now >= next_spawn {
                match sup.spawn() {
                    Ok(w) => worker = Some(w),
                    Err(e) => {
                        tracing::error!(error = %e, "worker not started");
                        next_spawn = now + backoff;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
            continue;
        };
        while let Ok(k) = w.sock.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..k]);
            for line in msg.lines() {
                match line {
                    "READY=1" => {
                        w.ready = true;
                        w.last_beat = now;
                        tracing::info!(pid = w.child.id(), "worker forwarding");
                    }
                    "WATCHDOG=1" => w.last_beat = now,
                    _ => {}
                }
            }
            if w.ready && sup.bridge_open {
                match sup.bridge.close() {
                    Ok(()) => sup.bridge_open = false,
                    Err(e) => tracing::error!(error = %e, "could not remove the fail-open bridge"),
                }
            }
        }
        if w.ready && !announced {
            announced = true;
            if let Some(m) = &manager {
                let _ = m.send("READY=1");
            }
        }
        let exited = w.child.try_wait().ok().flatten();
        let fault = judge(
            exited.is_some(),
            w.ready,
            now.saturating_duration_since(w.last_beat),
            now.saturating_duration_since(w.started),
            sup.hang,
        );
        let Some(fault) = fault else {
            continue;
        };
        // Frames first, then the post-mortem.
        sup.fail_open();
        let pid = w.child.id();
        if exited.is_none() {
            let _ = w.child.kill();
        }
        let status = w.child.wait().ok();
        let ran = now.saturating_duration_since(w.started);
        tracing::warn!(
            pid,
            ?fault,
            ?status,
            ran_s = ran.as_secs_f64(),
            "worker failed"
        );
        backoff = if ran > MAX_BACKOFF {
            FIRST_BACKOFF
        } else {
            backoff
        };
        next_spawn = now + backoff;
        backoff = (backoff * 2).min(MAX_BACKOFF);
        worker = None;
    }
    if let Some(m) = &manager {
        let _ = m.send("STOPPING=1");
    }
    sup.fail_open();
    if let Some(mut w) = worker {
        let _ = send_signal(w.child.id(), libc::SIGTERM);
        let end = Instant::now() + STOP_GRACE;
        while matches!(w.child.try_wait(), Ok(None)) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        if matches!(w.child.try_wait(), Ok(None)) {
            tracing::warn!(pid = w.child.id(), "worker ignored SIGTERM; killing it");
            let _ = w.child.kill();
        }
        let _ = w.child.wait();
    }
    tracing::info!(bridge = %sup.bridge.name, "supervisor stopped; the kernel bridge forwards");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_faults() {
        let ms = Duration::from_millis;
        let hang = ms(500);
        assert_eq!(judge(false, true, ms(100), ms(9000), hang), None);
        assert_eq!(
            judge(true, true, ms(0), ms(1), hang),
            Some(WorkerFault::Exited)
        );
        assert_eq!(
            judge(false, true, ms(501), ms(9000), hang),
            Some(WorkerFault::Hung)
        );
        // Not ready yet: the watchdog does not apply, the start timeout does.
        assert_eq!(judge(false, false, ms(5000), ms(5000), hang), None);
        assert_eq!(
            judge(false, false, ms(0), START_TIMEOUT + ms(1), hang),
            Some(WorkerFault::NotReady)
        );
    }
}
