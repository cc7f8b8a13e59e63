//! The experiment runner: builds the topology once, then runs every variant in alternation
//! (A B A B …, so slow drift hits all variants alike), restarting the link elements before
//! every trial, and collects per-trial metrics and per-variant median/IQR.

use crate::appproc::{
    AppBins, KillOnDrop, LogTail, client_error, find_bin, join_reader, read_all, read_tail,
    spawn_in,
};
use crate::apps::{app_args, app_binaries};
use crate::proxyproc::ProxyProcess;
use crate::scenario::{Scenario, Variant};
use crate::stats::{Summary, summarize};
use crate::topo::{ApMode, IfCounters, LabError, TopoConfig, Topology};
use crate::trial_metrics::add_element_metrics;
pub use crate::trial_metrics::{add_client_json, derive_metrics};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Options of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Override of the scenario's trial count.
    pub trials: Option<usize>,
    /// Index of the first trial (a trial's links are seeded by its index).
    pub first_trial: usize,
    /// Directory holding application binaries (`sidekick-transfer`, `sidekick-proxy`, ...).
    pub bin_dir: PathBuf,
    /// Set when SIGINT/SIGTERM arrived: the run stops between steps and cleans up.
    pub stop: Arc<AtomicBool>,
    /// Print progress to stderr.
    pub progress: bool,
    /// Also run `check-links` before the trials and store the result.
    pub check_links: bool,
    /// How the links are emulated (resolve `auto` with [`crate::netem::resolve`] first).
    pub link_backend: crate::netem::LinkBackend,
}

/// One trial.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trial {
    /// Trial index (0-based).
    pub trial: usize,
    /// Metrics (goodput_mbps, duration_s, per-interface packets and bytes, link drops, ...).
    pub metrics: BTreeMap<String, f64>,
    /// Why the trial failed, if it did.
    pub error: Option<String>,
}

/// Results of one variant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VariantResult {
    /// Variant name.
    pub name: String,
    /// Why the variant was not run, if it was skipped.
    pub skipped: Option<String>,
    /// Trials in order.
    pub trials: Vec<Trial>,
    /// Median/IQR of each metric over successful trials.
    pub summary: BTreeMap<String, Summary>,
}

/// A whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// Scenario name.
    pub scenario: String,
    /// Scenario description.
    pub description: String,
    /// The scenario table after `--set` overrides.
    pub settings: serde_json::Value,
    /// How the links were emulated (`userspace` or `netem`).
    #[serde(default)]
    pub link_backend: crate::netem::LinkBackend,
    /// Link checks made before the trials (if requested).
    pub link_checks: Vec<crate::probe::Check>,
    /// Per-variant results, in scenario order.
    pub variants: Vec<VariantResult>,
}

/// A variant ready to run.
struct Runnable {
    /// Its index in the results.
    index: usize,
    variant: Variant,
    /// The scenario as the variant sees it (its `set` applied).
    scenario: Scenario,
    /// Its proxy binary, if it runs one.
    proxy: Option<PathBuf>,
    /// Its application's server and client binaries.
    server: PathBuf,
    client: PathBuf,
}

/// Runs `scn`, calling `on_trial(variant, trial)` after each trial.
pub fn run(
    scn: &Scenario,
    opts: &RunOptions,
    mut on_trial: impl FnMut(&str, &Trial),
) -> Result<RunResult, LabError> {
    let trials = opts.trials.unwrap_or(scn.trials).max(1);
    let mut results: Vec<VariantResult> = Vec::new();
    let mut runnable: Vec<Runnable> = Vec::new();
    for v in &scn.variants {
        let vs = scn
            .for_variant(v)
            .map_err(|e| LabError::Config(e.to_string()))?;
        // (server, client) binaries of the variant's application (a variant may change the
        // stack, e.g. `app.stack=tcp`); a missing one skips the variant.
        let app_names = app_binaries(&vs.app);
        let app_bin = app_names
            .and_then(|(s, c)| Some((find_bin(&opts.bin_dir, s)?, find_bin(&opts.bin_dir, c)?)));
        let mut skipped = None;
        let mut proxy = None;
        if app_bin.is_none() {
            let names = app_names.map_or_else(
                || format!("(unknown kind `{}`)", scn.app.kind),
                |(s, c)| format!("{s} / {c}"),
            );
            skipped = Some(format!(
                "application `{}` binaries {names} not found in {} (build the examples crate; \
                 scripts/build-quicgo.sh for quic-go)",
                scn.app.kind,
                opts.bin_dir.display()
            ));
        } else if let Some(p) = v.proxy.first() {
            match find_bin(&opts.bin_dir, p) {
                Some(b) => proxy = Some(b),
                None => {
                    skipped = Some(format!(
                        "proxy binary `{p}` not found in {}",
                        opts.bin_dir.display()
                    ));
                }
            }
        }
        if let Some(s) = &skipped {
            tracing::warn!("variant {}: skipped: {s}", v.name);
        } else if let Some((server, client)) = app_bin {
            runnable.push(Runnable {
                index: results.len(),
                variant: v.clone(),
                scenario: vs,
                proxy,
                server,
                client,
            });
        }
        results.push(VariantResult {
            name: v.name.clone(),
            skipped,
            trials: Vec::new(),
            summary: BTreeMap::new(),
        });
    }
    let mut link_checks = Vec::new();
    if !runnable.is_empty() {
        let first = &runnable[0].scenario;
        let mut topo = Topology::up_with(
            &TopoConfig {
                clients: scn.clients,
                wan: first.wan,
                lan: first.lan,
                seed: 1,
                ap: if scn.ap_bridge {
                    ApMode::Bridge
                } else {
                    ApMode::Router
                },
            },
            opts.link_backend,
        )?;
        if scn.app.kind == "multicast" {
            topo.forward_multicast()?;
        }
        if opts.check_links {
            link_checks = crate::probe::check_links(&topo, &first.wan, &first.lan, true)?;
            let failed: Vec<String> = link_checks
                .iter()
                .filter(|c| !c.pass)
                .map(|c| {
                    format!(
                        "{} {} {}: {:.3} vs {:.3}",
                        c.link, c.dir, c.property, c.measured, c.expected
                    )
                })
                .collect();
            if !failed.is_empty() {
                // The lab does not trust a run whose links are off (issue 6).
                return Err(LabError::Config(format!(
                    "link checks out of tolerance: {}",
                    failed.join("; ")
                )));
            }
        }
        let first = opts.first_trial;
        'outer: for t in first..first.saturating_add(trials) {
            for r in &runnable {
                if opts.stop.load(Ordering::Relaxed) {
                    break 'outer;
                }
                let v = &r.variant;
                let bins = AppBins {
                    server: &r.server,
                    client: &r.client,
                };
                let trial = run_trial(
                    &mut topo,
                    &r.scenario,
                    v,
                    r.proxy.as_deref(),
                    bins,
                    t,
                    &opts.stop,
                );
                if opts.progress {
                    let m = &trial.metrics;
                    let g = if let Some(g) = m.get("goodput_mbps") {
                        format!("{g:.2} Mbit/s")
                    } else if let Some(d) = m.get("dejitter_p99_ms") {
                        format!("de-jitter p99 {d:.1} ms")
                    } else if let Some(l) = m.get("latency_p99_ms") {
                        let st = m.get("stall_ms_total").copied().unwrap_or(0.0);
                        format!("latency p99 {l:.1} ms, stalls {st:.0} ms")
                    } else {
                        "-".into()
                    };
                    eprintln!(
                        "[{}/{}] {:<12} {}{}",
                        t + 1,
                        first.saturating_add(trials),
                        v.name,
                        g,
                        trial
                            .error
                            .as_deref()
                            .map(|e| format!("  error: {e}"))
                            .unwrap_or_default()
                    );
                }
                on_trial(&v.name, &trial);
                results[r.index].trials.push(trial);
            }
        }
        topo.down()?;
    }
    for r in &mut results {
        let mut keys: Vec<String> = r
            .trials
            .iter()
            .flat_map(|t| t.metrics.keys().cloned())
            .collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let vals: Vec<f64> = r
                .trials
                .iter()
                .filter(|t| t.error.is_none())
                .filter_map(|t| t.metrics.get(&k).copied())
                .collect();
            if let Some(s) = summarize(&vals) {
                r.summary.insert(k, s);
            }
        }
    }
    Ok(RunResult {
        scenario: scn.name.clone(),
        description: scn.description.clone(),
        settings: serde_json::to_value(&scn.table).unwrap_or_default(),
        link_backend: opts.link_backend,
        link_checks,
        variants: results,
    })
}

fn run_trial(
    topo: &mut Topology,
    scn: &Scenario,
    v: &Variant,
    proxy: Option<&Path>,
    bin: AppBins<'_>,
    t: usize,
    stop: &AtomicBool,
) -> Trial {
    let mut metrics = BTreeMap::new();
    let error = match trial_inner(topo, scn, v, proxy, bin, t, stop, &mut metrics) {
        Ok(()) => None,
        Err(e) => Some(e.to_string()),
    };
    Trial {
        trial: t,
        metrics,
        error,
    }
}

#[allow(clippy::too_many_arguments)]
fn trial_inner(
    topo: &mut Topology,
    scn: &Scenario,
    v: &Variant,
    proxy: Option<&Path>,
    bin: AppBins<'_>,
    t: usize,
    stop: &AtomicBool,
    metrics: &mut BTreeMap<String, f64>,
) -> Result<(), LabError> {
    topo.set_links(&scn.wan, &scn.lan, 1 + t as u64 * 7919)?;
    // The proxy is up (capturing) before any packet of the trial, and `ProxyProcess`'s drop
    // stops it on every way out of this function (error, panic, interruption).
    // A proxy that bridges in user space takes the bridged ap's ports for the trial (they go
    // back to the kernel bridge after the proxy has stopped: `ports` drops last).
    let _ports = if proxy.is_some()
        && v.proxy
            .windows(2)
            .any(|w| w[0] == "--mode" && w[1] == "bridge")
    {
        Some(topo.hand_ports_to_proxy()?)
    } else {
        None
    };
    let mut proxy_proc = match proxy {
        Some(p) => Some(ProxyProcess::start(&topo.ns_ap(), p, &v.proxy[1..])?),
        None => None,
    };
    let port = 4433;
    let (mut server_args, mut args) = app_args(&scn.app, port);
    server_args.extend(scn.app.server_args.iter().cloned());
    let mut server = spawn_in(&topo.ns_server(), bin.server, &server_args, Stdio::null())?;
    // The server's log is drained while it runs (a full pipe would stop it mid-transfer) and its
    // last lines go into a failed trial's error.
    let server_log = server
        .0
        .stderr
        .take()
        .map(|e| read_tail(e, SERVER_LOG_LINES, |_| {}));
    // A server on a managed runtime (kwik's JVM) binds its port some 0.5 s after it starts;
    // a client that came sooner would lose its first Initials and wait out a PTO.
    if scn.app.kind == "transfer" {
        let bound = crate::sys::wait_port_bound(&topo.ns_server(), port, SERVER_BIND_TIMEOUT)
            .map_err(|e| LabError::Config(format!("waiting for the server's port: {e}")))?;
        if !bound {
            tracing::warn!(port, "the transfer server did not bind its port in time");
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    args.extend(scn.app.client_args.iter().cloned());
    args.extend(v.client_args.iter().cloned());
    for run in 0..scn.app.prior_connections {
        run_prior_client(topo, bin.client, &args, scn.app.timeout_s, stop)
            .map_err(|e| LabError::Config(format!("prior connection {}: {e}", run + 1)))?;
    }
    // The proxy's counters so far: the measured run's are what it adds to them.
    let proxy_baseline = match proxy_proc.as_ref() {
        Some(p) if scn.app.prior_connections > 0 => p.scrape(),
        _ => None,
    };
    let before = topo.counters()?;
    let started = Instant::now();
    let mut client = spawn_in(&topo.ns_client(0), bin.client, &args, Stdio::piped())?;
    // The client's stdout and stderr are drained while it runs (a full pipe would block it).
    let out_reader = client.0.stdout.take().map(read_all);
    let err_reader = client.0.stderr.take().map(read_all);
    let deadline = started + Duration::from_secs_f64(scn.app.timeout_s + 10.0);
    // Where the data sender's bytes are counted, for `kill_proxy_at`.
    let (sender_ns, sender_before) = if scn.app.direction == "upload" {
        (topo.ns_client(0), before.get("cli0/eth0"))
    } else {
        (topo.ns_server(), before.get("srv/eth0"))
    };
    let sender_before = sender_before.map_or(0, |c| c.tx_bytes);
    let mut kill_at = v
        .kill_proxy_at
        .filter(|_| proxy_proc.is_some() && scn.app.bytes > 0)
        .map(|f| sender_before + (f * scn.app.bytes as f64) as u64);
    let mut last_poll = Instant::now();
    let waited = wait_client(&mut client, deadline, stop, || {
        if let Some(target) = kill_at
            && last_poll.elapsed() >= Duration::from_millis(100)
        {
            last_poll = Instant::now();
            if eth0_tx_bytes(&sender_ns)? >= target {
                if let Some(p) = proxy_proc.as_mut() {
                    p.kill();
                }
                metrics.insert("proxy_killed_at_s".into(), started.elapsed().as_secs_f64());
                kill_at = None;
            }
        }
        Ok(())
    });
    let status = match waited {
        Ok(s) => s,
        Err(e) => {
            drop(client);
            return Err(with_server_log(e, server, server_log));
        }
    };
    let out = out_reader.map(join_reader).unwrap_or_default();
    let err = err_reader.map(join_reader).unwrap_or_default();
    let after = topo.counters()?;
    for (k, a) in &after {
        let d = a.since(before.get(k).unwrap_or(&IfCounters::default()));
        let k = k.replace("/eth0", "").replace('/', "_");
        metrics.insert(format!("{k}_tx_packets"), d.tx_packets as f64);
        metrics.insert(format!("{k}_tx_bytes"), d.tx_bytes as f64);
        metrics.insert(format!("{k}_rx_packets"), d.rx_packets as f64);
        metrics.insert(format!("{k}_rx_bytes"), d.rx_bytes as f64);
    }
    for (name, s) in topo.stop_links() {
        add_element_metrics(metrics, &name, &s);
    }
    if let Some(p) = proxy_proc.as_mut() {
        collect_proxy_metrics(p, proxy_baseline.as_ref(), metrics);
    }
    if !status.success() {
        let e = LabError::Config(format!(
            "client exited with {status}: {}",
            client_error(&err)
        ));
        return Err(with_server_log(e, server, server_log));
    }
    let line = out
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| LabError::Config("client printed no JSON".into()))?;
    let j: serde_json::Value =
        serde_json::from_str(line).map_err(|e| LabError::Config(format!("client JSON: {e}")))?;
    add_client_json(metrics, &j);
    derive_metrics(metrics, &scn.app.direction);
    Ok(())
}

/// Lines of a trial server's log kept for a failed trial's error.
const SERVER_LOG_LINES: usize = 8;

/// How long a trial waits for its transfer server to bind its port.
const SERVER_BIND_TIMEOUT: Duration = Duration::from_secs(10);

/// `e` with what the trial's server logged last (it is stopped first, so its log is complete
/// unless something it started still holds the pipe, which is waited for 1 s at most).
fn with_server_log(e: LabError, server: KillOnDrop, log: Option<LogTail>) -> LabError {
    drop(server);
    let lines = log
        .map(|l| l.lines(Duration::from_secs(1)))
        .unwrap_or_default();
    if lines.is_empty() {
        return e;
    }
    let said: String = lines.join(" | ").chars().take(600).collect();
    LabError::Config(format!("{e}; the server logged: {said}"))
}

/// Waits for `client` to exit, running `meanwhile` every 20 ms; an interruption (`stop`) or the
/// deadline is an error.
fn wait_client(
    client: &mut KillOnDrop,
    deadline: Instant,
    stop: &AtomicBool,
    mut meanwhile: impl FnMut() -> Result<(), LabError>,
) -> Result<ExitStatus, LabError> {
    loop {
        if let Ok(Some(s)) = client.0.try_wait() {
            return Ok(s);
        }
        if stop.load(Ordering::Relaxed) {
            return Err(LabError::Config("interrupted".into()));
        }
        if Instant::now() > deadline {
            return Err(LabError::Config("client timed out".into()));
        }
        meanwhile()?;
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the client once to its end (`app.prior_connections`), its output discarded.
fn run_prior_client(
    topo: &Topology,
    bin: &Path,
    args: &[String],
    timeout_s: f64,
    stop: &AtomicBool,
) -> Result<(), LabError> {
    let mut client = spawn_in(&topo.ns_client(0), bin, args, Stdio::null())?;
    let err_reader = client.0.stderr.take().map(read_all);
    let deadline = Instant::now() + Duration::from_secs_f64(timeout_s + 10.0);
    let status = wait_client(&mut client, deadline, stop, || Ok(()))?;
    let err = err_reader.map(join_reader).unwrap_or_default();
    if !status.success() {
        return Err(LabError::Config(format!(
            "client exited with {status}: {}",
            client_error(&err)
        )));
    }
    Ok(())
}

/// Transmitted bytes of `eth0` in namespace `ns`.
fn eth0_tx_bytes(ns: &str) -> Result<u64, LabError> {
    let j = crate::topo::cmd("ip", &["-n", ns, "-s", "-j", "link", "show", "dev", "eth0"])?;
    Ok(crate::topo::parse_ip_stats(&j)?
        .get("eth0")
        .map_or(0, |c| c.tx_bytes))
}

/// Scrapes the proxy's metrics (each scrape has the workers publish fresh counters, so the whole
/// transfer is counted), stops it and stores `proxy_*` metrics (the Prometheus names without `sidekick_`,
/// e.g. `proxy_quacks_sent_total`), plus the fields of its final log line
/// (`proxy_log_frames`, `proxy_log_quacks`, `proxy_log_retransmissions`). Counters (`*_total`)
/// count from `baseline`, a scrape taken before the measured run, when there is one.
fn collect_proxy_metrics(
    p: &mut ProxyProcess,
    baseline: Option<&BTreeMap<String, f64>>,
    metrics: &mut BTreeMap<String, f64>,
) {
    if p.is_running()
        && let Some(m) = p.scrape()
    {
        for (k, v) in counters_since(m, baseline) {
            let k = k.strip_prefix("sidekick_").unwrap_or(&k);
            metrics.insert(format!("proxy_{k}"), v);
        }
    }
    for (k, v) in p.stop() {
        metrics.insert(format!("proxy_log_{k}"), v);
    }
    metrics.insert("proxy_ran".into(), 1.0);
}

/// A scrape's values with its counters (`*_total`) counted from `baseline`, an earlier scrape,
/// when there is one; gauges as they are.
fn counters_since(
    scrape: BTreeMap<String, f64>,
    baseline: Option<&BTreeMap<String, f64>>,
) -> BTreeMap<String, f64> {
    scrape
        .into_iter()
        .map(|(k, v)| {
            let since = baseline
                .filter(|_| k.ends_with("_total"))
                .and_then(|b| b.get(&k))
                .copied()
                .unwrap_or(0.0);
            (k, v - since)
        })
        .collect()
}

/// A plain-text table of the median and IQR of `metric` per variant, with each variant's median
/// as a ratio of the first variant's (the baseline, e.g. `e2e`).
pub fn format_table(r: &RunResult, metric: &str) -> String {
    let mut s = format!(
        "{:<14} {:>6} {:>12} {:>10} {:>10} {:>8}\n",
        "variant", "trials", metric, "q1", "q3", "ratio"
    );
    let base = r
        .variants
        .first()
        .and_then(|v| v.summary.get(metric))
        .map(|x| x.median)
        .filter(|m| *m != 0.0);
    for v in &r.variants {
        if let Some(sk) = &v.skipped {
            let _ = writeln!(s, "{:<14} skipped: {sk}", v.name);
            continue;
        }
        let failed = v.trials.iter().filter(|t| t.error.is_some()).count();
        let note = if failed > 0 {
            format!("  ({failed} failed)")
        } else {
            String::new()
        };
        match v.summary.get(metric) {
            Some(x) => {
                let ratio = base.map_or_else(|| "-".into(), |b| format!("{:.2}x", x.median / b));
                let _ = writeln!(
                    s,
                    "{:<14} {:>6} {:>12.3} {:>10.3} {:>10.3} {:>8}{note}",
                    v.name, x.n, x.median, x.q1, x.q3, ratio
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "{:<14} {:>6} {:>12}{note}",
                    v.name,
                    v.trials.len(),
                    "n/a"
                );
            }
        }
    }
    s
}

/// A few lines comparing every variant with the first (the baseline): the medians of `metric`
/// and their ratio, and, where the variant had them, the sidekick's own counters (medians per
/// trial) — what the demo prints under its table.
pub fn format_comparison(r: &RunResult, metric: &str) -> String {
    let mut s = String::new();
    let Some(base) = r.variants.first() else {
        return s;
    };
    let Some(b) = base.summary.get(metric).map(|x| x.median) else {
        let _ = writeln!(s, "{}: no successful trial, no comparison", base.name);
        return s;
    };
    for v in r.variants.iter().skip(1) {
        let Some(x) = v.summary.get(metric).map(|x| x.median) else {
            let _ = writeln!(s, "{}: no successful trial", v.name);
            continue;
        };
        let ratio = if b > 0.0 {
            format!("{:.2}x", x / b)
        } else {
            "-".into()
        };
        let _ = writeln!(
            s,
            "{} vs {}: {metric} median {x:.2} vs {b:.2} -> {ratio}",
            v.name, base.name
        );
        let med = |k: &str| v.summary.get(k).map(|x| x.median);
        if let Some(q) = med("sidekick_quacks") {
            let _ = writeln!(
                s,
                "  {}: quACKs received {q:.0}, near-link losses they revealed {:.0}, early retransmissions {:.0}, PACUBIC reductions {:.0} (medians per trial)",
                v.name,
                med("sidekick_losses_detected").unwrap_or(0.0),
                med("sidekick_retransmissions").unwrap_or(0.0),
                med("sidekick_cc_events").unwrap_or(0.0)
            );
        }
        if let (Some(p), Some(pct)) = (med("proxy_pkts_sent"), med("sidekick_overhead_pct")) {
            let _ = writeln!(
                s,
                "  {}: proxy sent {p:.0} packets, {pct:.1} % of the client's",
                v.name
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prior_connections_leave_counters_counted_from_the_baseline() {
        let m = |kv: &[(&str, f64)]| -> BTreeMap<String, f64> {
            kv.iter().map(|&(k, v)| (k.to_string(), v)).collect()
        };
        let now = m(&[
            ("sidekick_handshake_replays_total", 6.0),
            ("sidekick_flows", 3.0),
            ("sidekick_quacks_sent_total", 40.0),
        ]);
        let before = m(&[
            ("sidekick_handshake_replays_total", 2.0),
            ("sidekick_flows", 1.0),
        ]);
        // Counters count from the baseline (absent there: from zero); gauges stay as they are.
        assert_eq!(
            counters_since(now.clone(), Some(&before)),
            m(&[
                ("sidekick_handshake_replays_total", 4.0),
                ("sidekick_flows", 3.0),
                ("sidekick_quacks_sent_total", 40.0),
            ])
        );
        assert_eq!(counters_since(now.clone(), None), now);
    }

    #[test]
    fn table_and_bins() {
        let mut summary = BTreeMap::new();
        summary.insert(
            "goodput_mbps".to_string(),
            summarize(&[1.0, 2.0, 3.0]).unwrap(),
        );
        let r = RunResult {
            scenario: "x".into(),
            description: String::new(),
            settings: serde_json::Value::Null,
            link_backend: crate::netem::LinkBackend::Userspace,
            link_checks: vec![],
            variants: vec![
                VariantResult {
                    name: "e2e".into(),
                    skipped: None,
                    trials: vec![],
                    summary,
                },
                VariantResult {
                    name: "sidekick".into(),
                    skipped: Some("no proxy".into()),
                    trials: vec![],
                    summary: BTreeMap::new(),
                },
                VariantResult {
                    name: "other".into(),
                    skipped: None,
                    trials: vec![],
                    summary: [(
                        "goodput_mbps".to_string(),
                        summarize(&[4.0, 5.0, 6.0]).unwrap(),
                    )]
                    .into(),
                },
            ],
        };
        let t = format_table(&r, "goodput_mbps");
        assert!(
            t.contains("e2e") && t.contains("2.000") && t.contains("skipped: no proxy"),
            "{t}"
        );
        assert!(t.contains("1.00x") && t.contains("2.50x"), "{t}");
        let c = format_comparison(&r, "goodput_mbps");
        assert!(
            c.contains("other vs e2e: goodput_mbps median 5.00 vs 2.00 -> 2.50x"),
            "{c}"
        );
        assert!(c.contains("sidekick: no successful trial"), "{c}");
        assert_eq!(
            crate::apps::app_binary("transfer"),
            Some("sidekick-transfer")
        );
    }
}
