//! The I/O backends around [`ProxyCore`]: `sniff` (capture on one interface, the kernel forwards,
//! copies are injected) and `bridge` (user-space forwarding between two interfaces), run by one
//! or more capture workers ([`crate::worker`]), plus the metrics endpoint and clean shutdown on
//! SIGINT/SIGTERM.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sidekick_protocol::ProxyPolicy;

use crate::Time;
use crate::config::{Config, Mode};
use crate::core::{CoreConfig, ProxyCore};
use crate::flow::FlowTableConfig;
use crate::metrics::{self, Counters};
use crate::notify::Notifier;
use crate::pace_board::PaceBoard;
use crate::packet::LinkType;
use crate::session::ProtocolSessions;
use crate::sys::{StopSignals, poll_readable};
use crate::worker::Worker;

/// Build the core a configuration describes (its flow table keyed at random).
pub fn build_core(cfg: &Config) -> ProxyCore<ProtocolSessions> {
    build_core_keyed(cfg, (rand::random(), rand::random()))
}

/// Build the core a configuration describes with the flow table's SipHash key `hash_key` (the
/// simulator seeds it, so runs are reproducible).
pub fn build_core_keyed(cfg: &Config, hash_key: (u64, u64)) -> ProxyCore<ProtocolSessions> {
    let limits = cfg.session_limits();
    let mut policy = ProxyPolicy::new(cfg.advertise());
    limits.apply_to(&mut policy);
    policy.max_sessions = cfg.max_sessions;
    policy.max_half_open = cfg.max_half_open;
    let core_cfg = CoreConfig {
        link: LinkType::Ethernet,
        flows: FlowTableConfig {
            shards: cfg.shards,
            max_flows: cfg.max_flows,
            max_assisted: cfg.max_sessions,
            idle_timeout: cfg.idle_timeout(),
        },
        track_unassisted: cfg.track_unassisted,
        max_flow_memory: cfg.max_flow_memory,
        memory_budget: cfg.memory_budget,
        // Disjoint ICMP probe identifiers per worker (worker k of n: k + 1, step n).
        probe_ids: (
            u16::try_from(cfg.worker_index + 1).unwrap_or(1),
            u16::try_from(cfg.workers.max(1)).unwrap_or(1),
        ),
        ..CoreConfig::default()
    };
    #[allow(unused_mut)] // a test build may lie (feature `testing`)
    let mut sessions =
        ProtocolSessions::new(policy).with_packrat_retx_budget(limits.packrat_retx_budget_percent);
    #[cfg(feature = "testing")]
    if cfg.lie == Some(crate::lie::Lie::ExtremeEcho) {
        tracing::warn!("lying to clients: extreme echoes (a test build)");
        sessions.lie_in_echoes(crate::lie::extreme_echo);
    }
    let core = ProxyCore::new(core_cfg, sessions, hash_key)
        .with_pemi(cfg.pemi_config())
        .with_handshake_rescue(cfg.handshake_rescue_config());
    #[cfg(feature = "testing")]
    let core = core.with_lie(cfg.lie);
    core
}

/// Fresh counters for each scrape: the metrics thread bumps `requested` and waits (at most
/// [`SCRAPE_WAIT`]) until every worker's `served` has caught up; a worker publishes at its next
/// turn (at most 100 ms away) when `requested` is ahead of what it last served. Without it a
/// scrape shows counters up to a second old, and whoever reads them after a burst of traffic
/// (an operator checking a test flow, the lab after a trial) has to wait the second out.
struct Freshness {
    requested: AtomicU64,
    served: Vec<AtomicU64>,
}

impl Freshness {
    fn new(workers: usize) -> Self {
        Self {
            requested: AtomicU64::new(0),
            served: (0..workers).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// A scrape: asks for fresh counters and waits until every worker has published them or
    /// [`SCRAPE_WAIT`] has passed (a busy or hung worker's last counters are served then).
    fn request(&self) {
        let want = self.requested.fetch_add(1, Ordering::AcqRel) + 1;
        let deadline = Instant::now() + SCRAPE_WAIT;
        while self.served.iter().any(|s| s.load(Ordering::Acquire) < want)
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Worker `k`, each turn: the scrape generation it must publish for, if a scrape waits on
    /// it. Publish, then [`Self::answered`] with that generation.
    fn asked(&self, k: usize) -> Option<u64> {
        let wanted = self.requested.load(Ordering::Acquire);
        self.served
            .get(k)
            .is_some_and(|s| s.load(Ordering::Relaxed) < wanted)
            .then_some(wanted)
    }

    /// Worker `k` published its counters as of generation `wanted` (or later).
    fn answered(&self, k: usize, wanted: u64) {
        if let Some(s) = self.served.get(k) {
            s.store(wanted, Ordering::Release);
        }
    }
}

/// How long a scrape waits for the workers' fresh counters (a worker turns at least every
/// 100 ms).
const SCRAPE_WAIT: Duration = Duration::from_millis(250);

/// Serve the workers' merged counters as Prometheus metrics on `listener` from a background
/// thread, fresh for each scrape; `per_worker` frames counters are added with a `worker` label.
fn spawn_metrics(
    listener: TcpListener,
    slots: Arc<Mutex<Vec<Counters>>>,
    reloads: Arc<Reloads>,
    fresh: Arc<Freshness>,
) -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut s) = conn else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let _ = s.set_write_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                fresh.request();
                let scrape = slots.lock().map(|v| scrape(&v, &reloads)).unwrap_or_default();
                let response = match metrics::encode(scrape) {
                    Ok(body) => format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        metrics::CONTENT_TYPE,
                        body.len()
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics exposition");
                        "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_string()
                    }
                };
                let _ = s.write_all(response.as_bytes());
            }
        })
        .context("spawn metrics thread")?;
    Ok(())
}

/// One scrape: every worker's counters summed, each worker's frames, the reload outcomes.
fn scrape(slots: &[Counters], reloads: &Reloads) -> metrics::Scrape {
    let mut total = Counters::default();
    for c in slots {
        total.merge(c);
    }
    metrics::Scrape {
        counters: total,
        worker_frames: slots.iter().map(|c| c.frames).collect(),
        reloads: Some(metrics::ReloadCounts {
            applied: reloads.applied.load(Ordering::Relaxed),
            refused: reloads.refused.load(Ordering::Relaxed),
        }),
    }
}

/// How often a worker publishes its counters.
const HOUSEKEEPING: Duration = Duration::from_secs(1);
/// How stale a worker's heartbeat (one per turn; a turn comes at least every 100 ms) may be
/// before the main thread stops feeding the service watchdog, so that a hung worker restarts
/// the service (a hung process is noticed sooner: nothing feeds the watchdog at all).
const WORKER_HANG: Duration = Duration::from_secs(2);

/// The configuration the workers run: a generation number, bumped by each applied reload, and
/// the configuration itself. Each worker compares the generation once per turn (at least every
/// 100 ms) and applies a newer configuration to its own core.
struct Shared {
    generation: AtomicU64,
    config: Mutex<Config>,
    workers: usize,
    /// Client paces learned by each worker's handshake rescue, for the others.
    paces: PaceBoard,
}

/// A worker's loop until `stop`: turns, each with a heartbeat (ms since `origin`) in
/// `beats[k]`, and its counters into `slots[k]` once a second and whenever a scrape asks
/// (`fresh`); a reloaded configuration in `shared` is applied between turns.
fn work(
    mut w: Worker,
    stop: &AtomicBool,
    slots: &Mutex<Vec<Counters>>,
    beats: &[AtomicU64],
    origin: Instant,
    shared: &Shared,
    fresh: &Freshness,
) -> anyhow::Result<()> {
    let fds = w.fds();
    let mut last_housekeeping = Instant::now();
    let mut generation = shared.generation.load(Ordering::Acquire);
    let mut paces_seen = 0;
    // The core's clock: time since the daemon started.
    let core_time = |t: Instant| Time::since(origin, t);
    while !stop.load(Ordering::Relaxed) {
        let wait = w.wait_ms(core_time(Instant::now()));
        let ready = poll_readable(&fds, wait).context("poll")?;
        let now = Instant::now();
        let g = shared.generation.load(Ordering::Acquire);
        if g != generation
            && let Ok(cfg) = shared.config.lock()
        {
            generation = g;
            w.reload(&cfg, shared.workers);
            tracing::debug!(worker = w.index, generation, "configuration applied");
        }
        w.turn(core_time(now), &ready);
        if shared.workers > 1 {
            w.share_paces(core_time(now), &shared.paces, &mut paces_seen);
        }
        beat(&w, beats, origin, now);
        let asked = fresh.asked(w.index);
        if asked.is_some() || now.saturating_duration_since(last_housekeeping) >= HOUSEKEEPING {
            last_housekeeping = now;
            publish(&mut w, slots, beats, origin, now);
            if let Some(wanted) = asked {
                fresh.answered(w.index, wanted);
            }
        }
    }
    publish(&mut w, slots, beats, origin, Instant::now());
    w.finish()
}

fn publish(
    w: &mut Worker,
    slots: &Mutex<Vec<Counters>>,
    beats: &[AtomicU64],
    origin: Instant,
    now: Instant,
) {
    let snap = w.snapshot();
    if let Ok(mut v) = slots.lock()
        && let Some(slot) = v.get_mut(w.index)
    {
        *slot = snap;
    }
    beat(w, beats, origin, now);
}

fn beat(w: &Worker, beats: &[AtomicU64], origin: Instant, now: Instant) {
    if let Some(b) = beats.get(w.index) {
        let ms = u64::try_from(now.saturating_duration_since(origin).as_millis()).unwrap_or(0);
        b.store(ms, Ordering::Relaxed);
    }
}

/// Reads the configuration again (the file and the command line) for a reload.
pub type Reloader = dyn Fn() -> anyhow::Result<Config>;

/// Outcomes of configuration reloads, exported as `sidekick_config_reloads_total{result}`.
#[derive(Default)]
struct Reloads {
    applied: AtomicU64,
    refused: AtomicU64,
}

/// Run the proxy until SIGINT/SIGTERM, without reloads (SIGHUP is logged and ignored).
pub fn run(cfg: &Config) -> anyhow::Result<()> {
    run_reloading(cfg, None)
}

/// SIGHUP: read the configuration again with `reload` and hand its live keys to the workers,
/// or refuse it (unreadable, invalid, or changing a key that needs a restart) and keep the old
/// one. Returns the configuration in force.
fn on_sighup(
    current: Config,
    reload: Option<&Reloader>,
    shared: &Shared,
    reloads: &Reloads,
) -> Config {
    let Some(reload) = reload else {
        tracing::warn!("SIGHUP: no configuration file to reload");
        return current;
    };
    let checked = reload().and_then(|new| {
        let changed = current.reload_changes(&new)?;
        Ok((new, changed))
    });
    match checked {
        Ok((new, changed)) => {
            reloads.applied.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut c) = shared.config.lock() {
                c.clone_from(&new);
            }
            shared.generation.fetch_add(1, Ordering::Release);
            tracing::info!(changed = ?changed, "configuration reloaded");
            new
        }
        Err(e) => {
            reloads.refused.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %format!("{e:#}"), "configuration reload refused; the running configuration is kept");
            current
        }
    }
}

/// Run the proxy until SIGINT/SIGTERM; SIGHUP reloads the configuration through `reload`
/// (docs/proxy.md "Reloading the configuration").
///
/// Every socket of every worker is opened first ([`Worker::open`]); then the process gives up
/// all its capabilities (they are needed only to create AF_PACKET sockets, and capabilities are
/// per thread: this happens before any other thread starts, and threads inherit the empty
/// sets), starts the workers (worker 0 on a thread like the others), tells the service manager
/// it is ready (`READY=1`, [`Notifier`]) and feeds its watchdog while every worker's heartbeat
/// is fresh. SIGINT/SIGTERM stop every worker.
pub fn run_reloading(cfg: &Config, reload: Option<&Reloader>) -> anyhow::Result<()> {
    let signals = StopSignals::new().context("block SIGINT/SIGTERM")?;
    let mut notifier = Notifier::from_env().context("NOTIFY_SOCKET")?;
    let n = cfg.worker_count();
    let workers = (0..n)
        .map(|k| Worker::open(cfg, k, n))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let metrics_listener = match cfg.metrics_listen {
        Some(addr) => {
            let l = TcpListener::bind(addr).with_context(|| format!("metrics listen {addr}"))?;
            tracing::info!(%addr, "metrics endpoint");
            Some(l)
        }
        None => None,
    };
    match cfg.mode {
        Mode::Sniff => tracing::info!(interface = %cfg.interface, workers = n, "sniffing"),
        Mode::Bridge => tracing::info!(
            client = %cfg.client_interface,
            server = %cfg.server_interface,
            workers = n,
            "bridging"
        ),
    }
    crate::sys::caps::restrict_to(&[]).context("drop capabilities")?;
    tracing::info!("capabilities dropped");
    let slots = Arc::new(Mutex::new(vec![Counters::default(); n]));
    let reloads = Arc::new(Reloads::default());
    let fresh = Arc::new(Freshness::new(n));
    if let Some(l) = metrics_listener {
        spawn_metrics(
            l,
            Arc::clone(&slots),
            Arc::clone(&reloads),
            Arc::clone(&fresh),
        )?;
    }
    let shared = Arc::new(Shared {
        generation: AtomicU64::new(0),
        config: Mutex::new(cfg.clone()),
        workers: n,
        paces: PaceBoard::default(),
    });
    let mut current = cfg.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let beats: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let origin = Instant::now();
    let mut handles = Vec::with_capacity(n);
    for w in workers {
        let (stop, slots, beats) = (Arc::clone(&stop), Arc::clone(&slots), Arc::clone(&beats));
        let (shared, fresh) = (Arc::clone(&shared), Arc::clone(&fresh));
        let name = format!("worker-{}", w.index);
        handles.push(
            std::thread::Builder::new()
                .name(name)
                .spawn(move || work(w, &stop, &slots, &beats, origin, &shared, &fresh))
                .context("spawn worker")?,
        );
    }
    if let Some(n) = &notifier {
        n.send("READY=1").context("notify READY=1")?;
    }
    loop {
        let now = Instant::now();
        let age = |b: &AtomicU64| {
            let at = origin + Duration::from_millis(b.load(Ordering::Relaxed));
            now.saturating_duration_since(at)
        };
        let alive = beats.iter().all(|b| age(b) < WORKER_HANG);
        if let Some(nt) = notifier.as_mut()
            && alive
        {
            nt.feed_watchdog(now);
        }
        if handles.iter().any(std::thread::JoinHandle::is_finished) {
            tracing::error!("a worker stopped");
            break;
        }
        // 50 ms: the watchdog wants a message every quarter of its interval (WATCHDOG_USEC).
        if poll_readable(&[signals.fd()], 50).context("poll")?[0]
            && let Some(sig) = signals.pending()
        {
            if sig == libc::SIGHUP {
                current = on_sighup(current, reload, &shared, &reloads);
                continue;
            }
            tracing::info!(signal = sig, "stopping");
            break;
        }
    }
    if let Some(n) = &notifier {
        let _ = n.send("STOPPING=1");
    }
    stop.store(true, Ordering::Relaxed);
    let mut result = Ok(());
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => result = Err(e),
            Err(_) => result = Err(anyhow::anyhow!("a worker panicked")),
        }
    }
    let total = slots.lock().map(|v| {
        let mut t = Counters::default();
        for c in v.iter() {
            t.merge(c);
        }
        t
    });
    if let Ok(snap) = total {
        tracing::info!(
            frames = snap.frames,
            quacks = snap.quacks_sent,
            retransmissions = snap.packrat.retransmissions,
            workers = n,
            "stopped"
        );
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scrape returns as soon as every worker has answered it, and each answer covers the
    /// scrape's generation; a worker that never turns holds a scrape for `SCRAPE_WAIT` only.
    #[test]
    fn a_scrape_waits_for_every_workers_fresh_counters_and_no_longer() {
        let fresh = Arc::new(Freshness::new(2));
        assert_eq!(fresh.asked(0), None, "nothing asked before a scrape");
        let stop = Arc::new(AtomicBool::new(false));
        let answers = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..2)
            .map(|k| {
                let (fresh, stop, answers) = (fresh.clone(), stop.clone(), answers.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(wanted) = fresh.asked(k) {
                            answers.fetch_add(1, Ordering::Relaxed);
                            fresh.answered(k, wanted);
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                })
            })
            .collect();
        for generation in 1..=3u64 {
            let t = Instant::now();
            fresh.request();
            assert!(t.elapsed() < SCRAPE_WAIT, "{:?}", t.elapsed());
            for s in &fresh.served {
                assert_eq!(s.load(Ordering::Acquire), generation);
            }
        }
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join().unwrap();
        }
        // One answer per worker and scrape: nothing published twice for one request.
        assert_eq!(answers.load(Ordering::Relaxed), 6);
        // No worker turns now: the scrape gives up after its wait.
        let t = Instant::now();
        fresh.request();
        assert!(t.elapsed() >= SCRAPE_WAIT);
        assert_eq!(fresh.asked(1), Some(4));
    }
}
