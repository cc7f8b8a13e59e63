//! Fairness on a shared bottleneck: one assisted flow against plain CUBIC flows (quinn-proto's
//! CUBIC), each client on its own lossy near link, all sharing the far link — the set-up of
//! Sidekick (NSDI '24) §4.3.2 and App. A (Scenario #2: near link 1 ms / 100 Mbit/s with random
//! loss, far link the bottleneck) and of PEMI §4.5 (PEMI's Copa-based control enforced by
//! delaying replies, "to keep fairness with other flows").
//!
//! Pairs:
//! - `pacubic`: client 0 runs the SDK (Robin quACKs, PACUBIC) with the proxy sniffing its port
//!   (the lab's Robin #2 proxy command line); uploads;
//! - `pemi`: client 0's port is bridged by the proxy in PEMI transparent mode (the lab's
//!   pemi-file proxy command line), its client plain quinn; downloads, as in PEMI's file
//!   experiments; the plain flows' ports bypass the proxy;
//! - `pemi-reorder`: the same with `--pemi-reply-enforcement reorder` (PEMI §4.5.2's other
//!   enforcement: replies reordered instead of delayed);
//! - `cubic`: no proxy, every flow plain CUBIC uploads (the reference: equal shares expected);
//! - `cubic-down`: the same as downloads (the reference of `pemi`).
//!
//! Each trial runs long-running transfers for `seconds` (client k starts at k × 100 ms) and takes
//! throughputs over the second half; a point's figures are medians over trials.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use sidekick_examples::transfer::TransferDirection;
use sidekick_examples::transfer::sidekick::SidekickParams;
use sidekick_lab::spec::LinkSpec;

use super::heatmap::{Heatmap, HeatmapError, Panel};
use super::{jain, median};
use crate::multi::{ClientSpec, MultiError, MultiSetup, ReplyHold, run_multi};
use crate::proxy_node::{ProxyArgError, parse_args};

/// Which assisted flow competes with plain CUBIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Pair {
    /// Robin + PACUBIC (uploads).
    Pacubic,
    /// PEMI transparent mode (downloads).
    Pemi,
    /// PEMI enforcing its window by reordering replies instead of delaying them.
    PemiReorder,
    /// Plain CUBIC uploads only (reference).
    Cubic,
    /// Plain CUBIC downloads only (reference of [`Pair::Pemi`]).
    CubicDown,
}

impl Pair {
    /// Name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Pair::Pacubic => "pacubic",
            Pair::Pemi => "pemi",
            Pair::PemiReorder => "pemi-reorder",
            Pair::Cubic => "cubic",
            Pair::CubicDown => "cubic-down",
        }
    }
}

/// Errors of the fairness study.
#[derive(Debug, thiserror::Error)]
pub enum FairnessError {
    /// A link setting.
    #[error("link setting: {0}")]
    Spec(#[from] sidekick_lab::spec::SpecError),
    /// The proxy's command line.
    #[error(transparent)]
    Proxy(#[from] ProxyArgError),
    /// The run.
    #[error(transparent)]
    Multi(#[from] MultiError),
    /// Bad parameters.
    #[error("fairness study: {0}")]
    Invalid(String),
    /// Plotting.
    #[error(transparent)]
    Plot(#[from] HeatmapError),
}

/// The grid and its runs.
#[derive(Debug, Clone)]
pub struct FairnessSpec {
    /// The pair.
    pub pair: Pair,
    /// Bottleneck (far link) rates, the lab's syntax (`10Mbit`).
    pub rates: Vec<String>,
    /// Far link one-way delays (`25ms`).
    pub delays: Vec<String>,
    /// Near links' random loss (`1%`).
    pub losses: Vec<String>,
    /// Plain flows besides the assisted one.
    pub plain: usize,
    /// The bottleneck's queue in packets (`None`: one bandwidth-delay product of the
    /// bottleneck rate and the base RTT, at least 10 packets; the scenarios' 1000 packets is
    /// 1.2 s at 10 Mbit/s, over which CUBIC flows converge for minutes).
    pub queue: Option<usize>,
    /// All clients on one shared near link (one medium: one queue and loss process each way)
    /// instead of one each; the proxy then sees every flow (PEMI bridges them all).
    pub shared_lan: bool,
    /// Simulated seconds per trial.
    pub seconds: f64,
    /// Trials per point.
    pub trials: usize,
    /// Seed.
    pub seed: u64,
    /// The first flow's datagrams to the server held at the ap at a fixed level (the fixed-level
    /// comparison of PEMI's two enforcements, PEMI §4.5.2; with `cubic-down`, without PEMI).
    pub reply_hold: Option<ReplyHold>,
}

/// One point of the grid.
#[derive(Debug, Clone, Serialize)]
pub struct FairnessPoint {
    /// Far link rate.
    pub rate: String,
    /// Far link one-way delay.
    pub delay: String,
    /// Near links' loss.
    pub loss: String,
    /// Median throughput (Mbit/s) of each flow, the assisted (or first) one first.
    pub mbps: Vec<f64>,
    /// Median over trials of the first flow's share of the total.
    pub share: f64,
    /// Median over trials of the first flow's throughput over the plain flows' mean.
    pub ratio: f64,
    /// Median over trials of Jain's index over all flows.
    pub jain: f64,
    /// Median over trials of the total throughput over the bottleneck rate.
    pub utilisation: f64,
    /// Trials with a flow error.
    pub failed_trials: usize,
    /// Median over trials of the replies the proxy held to enforce PEMI's window (delayed, or
    /// held for reordering); 0 without PEMI.
    pub pemi_replies_held: f64,
    /// Median over trials of PEMI's retransmissions; 0 without PEMI.
    pub pemi_retransmissions: f64,
}

/// A grid's results.
#[derive(Debug, Clone, Serialize)]
pub struct FairnessResult {
    /// The pair.
    pub pair: Pair,
    /// Plain flows.
    pub plain: usize,
    /// Bottleneck queue (packets; `None`: one BDP per point).
    pub queue: Option<usize>,
    /// One shared near link.
    pub shared_lan: bool,
    /// Seconds per trial.
    pub seconds: f64,
    /// Trials per point.
    pub trials: usize,
    /// Seed.
    pub seed: u64,
    /// The first flow's fixed reply hold (`delay:10ms`, `reorder:10ms`), if any.
    pub reply_hold: Option<String>,
    /// Points, rate slowest, then delay, then loss.
    pub points: Vec<FairnessPoint>,
    /// Grid axes (rates, delays, losses).
    pub axes: (Vec<String>, Vec<String>, Vec<String>),
}

fn link(delay: &str, rate: &str, loss: &str, queue: usize) -> Result<LinkSpec, FairnessError> {
    let mut t = toml::Table::new();
    t.insert("delay".into(), delay.into());
    t.insert("rate".into(), rate.into());
    t.insert("loss".into(), loss.into());
    t.insert("queue".into(), (queue as i64).into());
    Ok(LinkSpec::from_table(&t)?)
}

/// One bandwidth-delay product in 1514-byte frames of a link at `rate_bps` for the round trip
/// `rtt`, at least 10.
pub fn bdp_packets(rate_bps: u64, rtt: Duration) -> usize {
    ((rate_bps as f64 * rtt.as_secs_f64() / 8.0 / 1514.0).ceil() as usize).max(10)
}

fn args(s: &[&str]) -> Vec<String> {
    s.iter().map(|a| (*a).to_string()).collect()
}

/// The multi-client setup of one trial of `pair` at a point (seeds zero).
pub fn setup(
    pair: Pair,
    plain: usize,
    (rate, delay, loss): (&str, &str, &str),
    queue: Option<usize>,
    shared_lan: bool,
    seconds: f64,
) -> Result<MultiSetup, FairnessError> {
    let mut wan = link(delay, rate, "0%", 1000)?;
    let lan = link("1ms", "100Mbit", loss, 1000)?;
    wan.queue_packets =
        queue.unwrap_or_else(|| bdp_packets(wan.rate_bps, 2 * (wan.delay + lan.delay)));
    let (proxy, direction) = match pair {
        Pair::Pacubic => (
            Some(parse_args(&args(&[
                "--mode",
                "sniff",
                "--interface",
                "lan0",
                "--faces",
                "client",
                "--sidekick-listen",
                "10.0.2.1:7788",
            ]))?),
            TransferDirection::Upload,
        ),
        Pair::Pemi | Pair::PemiReorder => (
            Some(parse_args(&args(&[
                "--mode",
                "bridge",
                "--client-interface",
                "lan0",
                "--server-interface",
                "wan0",
                "--pemi",
                "true",
                "--sidekick-listen",
                "127.0.0.1:7788",
                "--pemi-reply-enforcement",
                if pair == Pair::PemiReorder {
                    "reorder"
                } else {
                    "delay"
                },
            ]))?),
            TransferDirection::Download,
        ),
        Pair::Cubic => (None, TransferDirection::Upload),
        Pair::CubicDown => (None, TransferDirection::Download),
    };
    let clients = (0..=plain)
        .map(|k| ClientSpec {
            lan,
            sidekick: (k == 0 && pair == Pair::Pacubic).then(SidekickParams::default),
            via_proxy: k == 0,
            start: Duration::from_millis(100 * k as u64),
            reply_hold: None,
        })
        .collect();
    Ok(MultiSetup {
        wan,
        clients,
        direction,
        bytes: 1 << 40,
        duration: Duration::from_secs_f64(seconds),
        sample_every: Duration::from_millis(100),
        proxy,
        shared_lan,
        link_seed: 0,
        stack_seed: 0,
    })
}

fn mix(seed: u64, i: u64) -> u64 {
    let mut z = seed
        .wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Runs one point: `trials` trials, medians.
pub fn run_point(
    spec: &FairnessSpec,
    rate: &str,
    delay: &str,
    loss: &str,
) -> Result<FairnessPoint, FairnessError> {
    let mut base = setup(
        spec.pair,
        spec.plain,
        (rate, delay, loss),
        spec.queue,
        spec.shared_lan,
        spec.seconds,
    )?;
    if let Some(first) = base.clients.first_mut() {
        first.reply_hold = spec.reply_hold;
    }
    let rate_mbps = base.wan.rate_bps as f64 / 1e6;
    let from = Duration::from_secs_f64(spec.seconds / 2.0);
    let n = spec.plain + 1;
    let mut per_flow: Vec<Vec<f64>> = vec![Vec::new(); n];
    let (mut shares, mut ratios, mut jains, mut utils) = (vec![], vec![], vec![], vec![]);
    let (mut held, mut pemi_retx) = (vec![], vec![]);
    let mut failed = 0;
    for t in 0..spec.trials.max(1) {
        let mut s = base.clone();
        s.link_seed = mix(spec.seed, 2 * t as u64);
        s.stack_seed = mix(spec.seed, 2 * t as u64 + 1);
        let out = run_multi(&s)?;
        if out.errors.iter().any(Option::is_some) {
            failed += 1;
            continue;
        }
        let x: Vec<f64> = (0..n)
            .map(|k| out.throughput_mbps(k, from).unwrap_or(0.0))
            .collect();
        let total: f64 = x.iter().sum();
        for (k, v) in x.iter().enumerate() {
            per_flow[k].push(*v);
        }
        let plain_mean = x[1..].iter().sum::<f64>() / (n - 1).max(1) as f64;
        if total > 0.0 {
            shares.push(x[0] / total);
            utils.push(total / rate_mbps);
        }
        if plain_mean > 0.0 {
            ratios.push(x[0] / plain_mean);
        }
        if let Some(j) = jain(&x) {
            jains.push(j);
        }
        let pemi = out.proxy.map(|c| c.pemi).unwrap_or_default();
        held.push(pemi.replies_delayed as f64);
        pemi_retx.push(pemi.retransmissions as f64);
    }
    let med = |v: &[f64]| median(v).unwrap_or(f64::NAN);
    Ok(FairnessPoint {
        rate: rate.into(),
        delay: delay.into(),
        loss: loss.into(),
        mbps: per_flow.iter().map(|v| med(v)).collect(),
        share: med(&shares),
        ratio: med(&ratios),
        jain: med(&jains),
        utilisation: med(&utils),
        failed_trials: failed,
        pemi_replies_held: med(&held),
        pemi_retransmissions: med(&pemi_retx),
    })
}

/// Runs the grid; `progress` prints a line per point.
pub fn run_grid(spec: &FairnessSpec, progress: bool) -> Result<FairnessResult, FairnessError> {
    if spec.plain == 0 && !matches!(spec.pair, Pair::Cubic | Pair::CubicDown) {
        return Err(FairnessError::Invalid(
            "need at least one plain flow".into(),
        ));
    }
    if spec.rates.is_empty() || spec.delays.is_empty() || spec.losses.is_empty() {
        return Err(FairnessError::Invalid("empty grid axis".into()));
    }
    let total = spec.rates.len() * spec.delays.len() * spec.losses.len();
    if total > sidekick_lab::sweep::MAX_POINTS {
        return Err(FairnessError::Invalid(format!("{total} points: too many")));
    }
    let mut points = Vec::new();
    for r in &spec.rates {
        for d in &spec.delays {
            for l in &spec.losses {
                let p = run_point(spec, r, d, l)?;
                if progress {
                    eprintln!(
                        "[{}/{total}] {} rate {r} delay {d} loss {l}: {:?} Mbit/s, share {:.3}, \
                         ratio {:.2}, Jain {:.3}, utilisation {:.2}, PEMI replies held {}, \
                         PEMI retransmissions {}",
                        points.len() + 1,
                        spec.pair.name(),
                        p.mbps
                            .iter()
                            .map(|v| (v * 100.0).round() / 100.0)
                            .collect::<Vec<_>>(),
                        p.share,
                        p.ratio,
                        p.jain,
                        p.utilisation,
                        p.pemi_replies_held,
                        p.pemi_retransmissions
                    );
                }
                points.push(p);
            }
        }
    }
    Ok(FairnessResult {
        pair: spec.pair,
        plain: spec.plain,
        queue: spec.queue,
        shared_lan: spec.shared_lan,
        seconds: spec.seconds,
        trials: spec.trials,
        seed: spec.seed,
        reply_hold: spec.reply_hold.map(|h| {
            format!(
                "{}:{}ms",
                format!("{:?}", h.enforcement).to_lowercase(),
                h.delay.as_secs_f64() * 1e3
            )
        }),
        points,
        axes: (spec.rates.clone(), spec.delays.clone(), spec.losses.clone()),
    })
}

impl FairnessResult {
    /// A Markdown table, one row per point.
    pub fn table(&self) -> String {
        let mut s = format!(
            "| rate | delay | near loss | {} Mbit/s | plain Mbit/s | share | ratio | Jain | utilisation |\n\
             |---|---|---|---|---|---|---|---|---|\n",
            self.pair.name()
        );
        for p in &self.points {
            let plain: Vec<String> = p.mbps[1..].iter().map(|v| format!("{v:.2}")).collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2} | {} | {:.3} | {:.2} | {:.3} | {:.2} |",
                p.rate,
                p.delay,
                p.loss,
                p.mbps[0],
                plain.join(", "),
                p.share,
                p.ratio,
                p.jain,
                p.utilisation
            );
        }
        s
    }

    /// Heat map of the first flow's throughput over the plain flows' mean: loss across, delay
    /// up, one panel per rate; writes `fairness-<pair>.{svg,png}` in `dir`.
    pub fn plot(&self, dir: &Path) -> Result<Vec<PathBuf>, FairnessError> {
        let (rates, delays, losses) = &self.axes;
        let at = |r: usize, d: usize, l: usize| {
            self.points
                .get((r * delays.len() + d) * losses.len() + l)
                .map(|p| p.ratio)
                .filter(|v| v.is_finite())
        };
        let panels = (0..rates.len())
            .map(|r| Panel {
                title: format!("bottleneck {}", rates[r]),
                cells: (0..delays.len())
                    .map(|d| (0..losses.len()).map(|l| at(r, d, l)).collect())
                    .collect(),
            })
            .collect();
        let h = Heatmap {
            title: format!(
                "{} vs {} CUBIC: throughput ratio (median of {} trials)",
                self.pair.name(),
                self.plain,
                self.trials
            ),
            x: ("near-link loss".into(), losses.clone()),
            y: ("far-link one-way delay".into(), delays.clone()),
            panels,
        };
        Ok(h.write(dir, &format!("fairness-{}", self.pair.name()))?)
    }
}
