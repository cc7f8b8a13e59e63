//! The experiment runner: builds the topology once, then runs every variant in alternation
//! (A B A B …, so slow drift hits all variants alike), restarting the link elements before
//! every trial, and collects per-trial metrics and per-variant median/IQR.

use crate::element::ElementStats;
use crate::scenario::{Scenario, Variant};
use crate::stats::{Summary, summarize};
use crate::topo::{IfCounters, LabError, TopoConfig, Topology};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Options of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Override of the scenario's trial count.
    pub trials: Option<usize>,
    /// Directory holding application binaries (`sidekick-transfer`, `sidekick-proxy`, ...).
    pub bin_dir: PathBuf,
    /// Set when SIGINT/SIGTERM arrived: the run stops between steps and cleans up.
    pub stop: Arc<AtomicBool>,
    /// Print progress to stderr.
    pub progress: bool,
    /// Also run `check-links` before the trials and store the result.
    pub check_links: bool,
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
    /// Link checks made before the trials (if requested).
    pub link_checks: Vec<crate::probe::Check>,
    /// Per-variant results, in scenario order.
    pub variants: Vec<VariantResult>,
}

fn find_bin(dir: &Path, name: &str) -> Option<PathBuf> {
    let env = format!("SIDEKICK_{}", name.to_ascii_uppercase().replace('-', "_"));
    if let Some(p) = std::env::var_os(env)
        .map(PathBuf::from)
        .filter(|p| p.exists())
    {
        return Some(p);
    }
    Some(dir.join(name)).filter(|p| p.exists())
}

/// Binary name of an application kind.
pub fn app_binary(kind: &str) -> Option<&'static str> {
    match kind {
        "transfer" => Some("sidekick-transfer"),
        "media" => Some("sidekick-media"),
        "media-fec" => Some("sidekick-media-fec"),
        _ => None,
    }
}

struct KillOnDrop(Child);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_in(ns: &str, bin: &Path, args: &[String], stdout: Stdio) -> Result<KillOnDrop, LabError> {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .map(KillOnDrop)
        .map_err(|e| LabError::Io {
            context: format!("starting {}", bin.display()),
            source: e,
        })
}

/// Runs `scn`, calling `on_trial(variant, trial)` after each trial.
pub fn run(
    scn: &Scenario,
    opts: &RunOptions,
    mut on_trial: impl FnMut(&str, &Trial),
) -> Result<RunResult, LabError> {
    let trials = opts.trials.unwrap_or(scn.trials).max(1);
    let app_bin = app_binary(&scn.app.kind).and_then(|b| find_bin(&opts.bin_dir, b));
    let mut results: Vec<VariantResult> = Vec::new();
    let mut runnable: Vec<(usize, Variant, Scenario, Option<PathBuf>)> = Vec::new();
    for v in &scn.variants {
        let vs = scn
            .for_variant(v)
            .map_err(|e| LabError::Config(e.to_string()))?;
        let mut skipped = None;
        let mut proxy = None;
        if app_bin.is_none() {
            skipped = Some(format!(
                "application `{}` binary not found in {} (build the examples crate)",
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
        } else {
            runnable.push((results.len(), v.clone(), vs, proxy));
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
        let first = &runnable[0].2;
        let mut topo = Topology::up(&TopoConfig {
            clients: scn.clients,
            wan: first.wan,
            lan: first.lan,
            seed: 1,
        })?;
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
        let bin = app_bin.unwrap_or_default();
        'outer: for t in 0..trials {
            for (idx, v, vs, proxy) in &runnable {
                if opts.stop.load(Ordering::Relaxed) {
                    break 'outer;
                }
                let trial = run_trial(&mut topo, vs, v, proxy.as_deref(), &bin, t, &opts.stop);
                if opts.progress {
                    let g = trial
                        .metrics
                        .get("goodput_mbps")
                        .map_or_else(|| "-".into(), |g| format!("{g:.2} Mbit/s"));
                    eprintln!(
                        "[{}/{}] {:<12} {}{}",
                        t + 1,
                        trials,
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
                results[*idx].trials.push(trial);
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
        link_checks,
        variants: results,
    })
}

fn run_trial(
    topo: &mut Topology,
    scn: &Scenario,
    v: &Variant,
    proxy: Option<&Path>,
    bin: &Path,
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
    bin: &Path,
    t: usize,
    stop: &AtomicBool,
    metrics: &mut BTreeMap<String, f64>,
) -> Result<(), LabError> {
    topo.set_links(&scn.wan, &scn.lan, 1 + t as u64 * 7919)?;
    let _proxy = match proxy {
        Some(p) => Some(spawn_in(&topo.ns_ap(), p, &v.proxy[1..], Stdio::null())?),
        None => None,
    };
    let port = 4433;
    let srv = format!("{}:{port}", Topology::server_addr());
    let stack = scn.app.stack.clone();
    let _server = spawn_in(
        &topo.ns_server(),
        bin,
        &[
            "server".into(),
            "--stack".into(),
            stack.clone(),
            "--listen".into(),
            format!("0.0.0.0:{port}"),
        ],
        Stdio::null(),
    )?;
    std::thread::sleep(Duration::from_millis(300));
    let before = topo.counters()?;
    let mut args = vec![
        "client".into(),
        "--stack".into(),
        stack,
        "--connect".into(),
        srv,
        format!("--{}", scn.app.direction),
    ];
    args.push(scn.app.bytes.to_string());
    args.extend([
        "--json".into(),
        "--timeout".into(),
        format!("{}", scn.app.timeout_s),
    ]);
    args.extend(scn.app.client_args.iter().cloned());
    let mut client = spawn_in(&topo.ns_client(0), bin, &args, Stdio::piped())?;
    let deadline = Instant::now() + Duration::from_secs_f64(scn.app.timeout_s + 10.0);
    let status = loop {
        if let Ok(Some(s)) = client.0.try_wait() {
            break s;
        }
        if stop.load(Ordering::Relaxed) {
            return Err(LabError::Config("interrupted".into()));
        }
        if Instant::now() > deadline {
            return Err(LabError::Config("client timed out".into()));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = client.0.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut o, &mut out);
    }
    if let Some(mut e) = client.0.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
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
    if !status.success() {
        return Err(LabError::Config(format!(
            "client exited with {status}: {}",
            err.trim().lines().last().unwrap_or("")
        )));
    }
    let line = out
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| LabError::Config("client printed no JSON".into()))?;
    let j: serde_json::Value =
        serde_json::from_str(line).map_err(|e| LabError::Config(format!("client JSON: {e}")))?;
    for (k, val) in j.as_object().into_iter().flatten() {
        if let Some(f) = val.as_f64() {
            metrics.insert(k.clone(), f);
        }
    }
    Ok(())
}

fn add_element_metrics(m: &mut BTreeMap<String, f64>, link: &str, s: &ElementStats) {
    // Direction names: a→b is towards the client (down) for both wan and lan elements.
    m.insert(
        format!("{link}_down_dropped_loss"),
        s.a_to_b.dropped_loss as f64,
    );
    m.insert(
        format!("{link}_down_dropped_queue"),
        s.a_to_b.dropped_queue as f64,
    );
    m.insert(
        format!("{link}_up_dropped_loss"),
        s.b_to_a.dropped_loss as f64,
    );
    m.insert(
        format!("{link}_up_dropped_queue"),
        s.b_to_a.dropped_queue as f64,
    );
    m.insert(format!("{link}_late_p99_us"), s.late_p99_us);
}

/// A plain-text table of the median and IQR of `metric` per variant.
pub fn format_table(r: &RunResult, metric: &str) -> String {
    let mut s = format!(
        "{:<14} {:>6} {:>12} {:>10} {:>10}\n",
        "variant", "trials", metric, "q1", "q3"
    );
    for v in &r.variants {
        if let Some(sk) = &v.skipped {
            let _ = writeln!(s, "{:<14} skipped: {sk}", v.name);
            continue;
        }
        match v.summary.get(metric) {
            Some(x) => {
                let _ = writeln!(
                    s,
                    "{:<14} {:>6} {:>12.3} {:>10.3} {:>10.3}",
                    v.name, x.n, x.median, x.q1, x.q3
                );
            }
            None => {
                let _ = writeln!(s, "{:<14} {:>6} {:>12}", v.name, v.trials.len(), "n/a");
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ],
        };
        let t = format_table(&r, "goodput_mbps");
        assert!(
            t.contains("e2e") && t.contains("2.000") && t.contains("skipped: no proxy"),
            "{t}"
        );
        assert_eq!(app_binary("transfer"), Some("sidekick-transfer"));
        assert!(
            find_bin(Path::new("/nonexistent"), "sidekick-transfer").is_none()
                || std::env::var_os("SIDEKICK_SIDEKICK_TRANSFER").is_some()
        );
    }
}
