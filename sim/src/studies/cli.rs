//! `sidekick-sim study ...`: the command lines of the studies.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Subcommand;

use super::{fairness, scale, sweep};

/// A study and its parameters.
#[derive(Debug, Subcommand)]
pub enum Study {
    /// One access point's proxy core with many flows and sessions: memory, timer cost, fairness
    /// of service across sessions.
    Scale {
        /// Concurrent flows (comma-separated list: one run per value and session count).
        #[arg(long, value_delimiter = ',', default_value = "10000")]
        flows: Vec<usize>,
        /// Sidekick sessions, each assisting one of the flows (comma-separated list).
        #[arg(long, value_delimiter = ',', default_value = "1000")]
        sessions: Vec<usize>,
        /// Simulated seconds measured, after the sessions' start-up.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Spread the session starts over this many seconds (default: one per 150 sessions,
        /// at least one).
        #[arg(long)]
        start_over: Option<f64>,
        /// Packets per second of each plain flow.
        #[arg(long, default_value_t = 10.0)]
        flow_pps: f64,
        /// Packets per second of each assisted flow.
        #[arg(long, default_value_t = 100.0)]
        session_pps: f64,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// An assisted flow against plain CUBIC flows on a shared bottleneck, over a grid of
    /// bottleneck rate × RTT × near-link loss: throughput shares and Jain's index.
    Fairness {
        /// Which pair: `pacubic` (Robin + PACUBIC vs CUBIC, uploads), `pemi` (PEMI's flow vs
        /// CUBIC, downloads), `cubic` / `cubic-down` (plain CUBIC flows only: the references).
        #[arg(long, default_value = "pacubic")]
        pair: fairness::Pair,
        /// Bottleneck rates (`;`-separated, the lab's rate syntax).
        #[arg(long, default_value = "10Mbit")]
        rate: String,
        /// One-way delays of the bottleneck link (`;`-separated).
        #[arg(long, default_value = "25ms")]
        delay: String,
        /// Random loss of each client's near link (`;`-separated).
        #[arg(long, default_value = "0%;1%")]
        loss: String,
        /// Plain CUBIC flows competing with the assisted one.
        #[arg(long, default_value_t = 1)]
        plain: usize,
        /// Bottleneck queue in packets (default: one bandwidth-delay product, at least 10).
        #[arg(long)]
        queue: Option<usize>,
        /// All clients on one shared near link instead of one each (the proxy then sees every
        /// flow).
        #[arg(long)]
        shared_lan: bool,
        /// Simulated seconds per trial (shares are taken over the second half).
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
        /// Trials per point (shares are medians).
        #[arg(long, default_value_t = 3)]
        trials: usize,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write a heat map of the assisted flow's share ratio here (`<dir>/fairness-<pair>.svg`).
        #[arg(long)]
        plots: Option<PathBuf>,
        /// Hold the first flow's datagrams to the server at the ap at a fixed level:
        /// `delay:10ms` (every one) or `reorder:10ms` (one in four), PEMI §4.5.2's two
        /// enforcements without PEMI (use with `--pair cubic-down`).
        #[arg(long)]
        reply_hold: Option<crate::multi::ReplyHold>,
    },
    /// A scenario over a grid of settings; the gain of one variant over another, as a table and
    /// heat maps.
    Sweep {
        /// Scenario name or file.
        scenario: String,
        /// An axis `key=v1;v2;...` (repeat for up to 3 axes: across, up, panels).
        #[arg(long = "grid", required = true)]
        grid: Vec<String>,
        /// Fixed overrides at every point.
        #[arg(long = "set")]
        sets: Vec<String>,
        /// Reference variant.
        #[arg(long, default_value = "e2e")]
        base: String,
        /// Measured variant.
        #[arg(long, default_value = "sidekick")]
        variant: String,
        /// Metric compared (by medians).
        #[arg(long, default_value = "goodput_mbps")]
        metric: String,
        /// Trials per variant and point.
        #[arg(long, default_value_t = 3)]
        trials: usize,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the heat map (`<stem>.svg`, `<stem>.png`) in this directory.
        #[arg(long)]
        plots: Option<PathBuf>,
        /// File stem of the heat map (default: `sweep-<scenario>`).
        #[arg(long)]
        stem: Option<String>,
    },
}

fn scenario_path(name: &str) -> PathBuf {
    let p = Path::new(name);
    if p.exists() {
        return p.to_path_buf();
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../interop/scenarios")
        .join(format!("{name}.toml"))
}

fn write_json<T: serde::Serialize>(path: Option<&Path>, v: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(v)?;
    match path {
        Some(p) => std::fs::write(p, format!("{text}\n"))
            .with_context(|| format!("writing {}", p.display()))?,
        None => println!("{text}"),
    }
    Ok(())
}

/// Runs a study from its command line.
pub fn run(study: Study) -> anyhow::Result<()> {
    match study {
        Study::Scale {
            flows,
            sessions,
            seconds,
            start_over,
            flow_pps,
            session_pps,
            seed,
            json,
        } => {
            let mut rows = Vec::new();
            for &f in &flows {
                for &s in &sessions {
                    let spec = scale::ScaleSpec {
                        flows: f,
                        sessions: s,
                        seconds,
                        start_over,
                        flow_pps,
                        session_pps,
                        seed,
                    };
                    let r = scale::run_scale(&spec)
                        .with_context(|| format!("{f} flows, {s} sessions"))?;
                    eprintln!("{}", r.line());
                    rows.push(r);
                }
            }
            eprint!("{}", scale::table(&rows));
            write_json(json.as_deref(), &rows)?;
        }
        Study::Fairness {
            pair,
            rate,
            delay,
            loss,
            plain,
            queue,
            shared_lan,
            seconds,
            trials,
            seed,
            json,
            plots,
            reply_hold,
        } => {
            let split = |s: &str| -> Vec<String> {
                s.split(';')
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(String::from)
                    .collect()
            };
            let spec = fairness::FairnessSpec {
                pair,
                rates: split(&rate),
                delays: split(&delay),
                losses: split(&loss),
                plain,
                queue,
                shared_lan,
                seconds,
                trials,
                seed,
                reply_hold,
            };
            let r = fairness::run_grid(&spec, true)?;
            eprint!("{}", r.table());
            if let Some(dir) = plots {
                for p in r.plot(&dir)? {
                    eprintln!("wrote {}", p.display());
                }
            }
            write_json(json.as_deref(), &r)?;
        }
        Study::Sweep {
            scenario,
            grid,
            sets,
            base,
            variant,
            metric,
            trials,
            seed,
            json,
            plots,
            stem,
        } => {
            let axes = grid
                .iter()
                .map(|g| sidekick_lab::sweep::parse_axis(g))
                .collect::<Result<Vec<_>, _>>()?;
            let spec = sweep::SweepSpec {
                scenario: scenario_path(&scenario),
                sets,
                axes,
                base,
                variant,
                metric,
                trials,
                seed,
            };
            let r = sweep::run_sweep(&spec, true)?;
            eprint!("{}", r.table());
            if let Some(dir) = plots {
                let stem = stem.unwrap_or_else(|| format!("sweep-{}", r.scenario));
                for p in r.plot(&dir, &stem)? {
                    eprintln!("wrote {}", p.display());
                }
            }
            write_json(json.as_deref(), &r)?;
        }
    }
    Ok(())
}
