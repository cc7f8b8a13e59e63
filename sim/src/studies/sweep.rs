//! Large sweeps: a scenario over a grid of settings (the lab's `--grid key=v1;v2;...` axes,
//! `sidekick_lab::sweep`), one simulated run per point, and the gain of one variant over another
//! at every point, drawn as heat maps (first axis across, second up, one panel per value of a
//! third axis).
//!
//! ```text
//! sidekick-sim study sweep robin-2-upload --grid 'lan.loss=0%;1%;2%' --grid 'wan.delay=10ms;25ms' \
//!     --base e2e --variant sidekick --trials 3 --plots docs/plots
//! ```

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use sidekick_lab::scenario::{Scenario, ScenarioError};
use sidekick_lab::sweep::{Axis, points};

use super::heatmap::{Heatmap, Panel};
use crate::run::{SimOptions, run};
use crate::scenario::SimScenarioError;

/// Errors of a sweep.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The scenario or a grid value is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The simulator cannot run a point.
    #[error(transparent)]
    Sim(#[from] SimScenarioError),
    /// A variant the sweep compares is not in the scenario.
    #[error("scenario has no variant `{0}`")]
    NoVariant(String),
    /// Wrong number of axes.
    #[error("a sweep needs 1 to 3 axes (--grid), got {0}")]
    Axes(usize),
}

/// What to sweep.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    /// The scenario file.
    pub scenario: std::path::PathBuf,
    /// Fixed overrides applied at every point.
    pub sets: Vec<String>,
    /// The grid's axes (1 to 3).
    pub axes: Vec<Axis>,
    /// The reference variant (the denominator of the gain).
    pub base: String,
    /// The variant whose gain is measured.
    pub variant: String,
    /// The metric (a lab key), compared by its medians.
    pub metric: String,
    /// Trials per variant and point.
    pub trials: usize,
    /// The seed of every point's run.
    pub seed: u64,
}

/// One point of the grid.
#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    /// The point's overrides (`key=value`, one per axis).
    pub sets: Vec<String>,
    /// Median of the metric, reference variant.
    pub base: Option<f64>,
    /// Median of the metric, measured variant.
    pub variant: Option<f64>,
    /// `variant / base`.
    pub gain: Option<f64>,
    /// Trials that failed (both variants).
    pub failed_trials: usize,
}

/// A whole sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepResult {
    /// Scenario name.
    pub scenario: String,
    /// Metric compared.
    pub metric: String,
    /// Reference and measured variants.
    pub variants: (String, String),
    /// Trials per variant and point.
    pub trials: usize,
    /// Seed.
    pub seed: u64,
    /// The axes (key, values).
    pub axes: Vec<(String, Vec<String>)>,
    /// The points, first axis slowest.
    pub points: Vec<SweepPoint>,
}

/// Runs the sweep; `progress` prints a line per point to stderr.
pub fn run_sweep(spec: &SweepSpec, progress: bool) -> Result<SweepResult, SweepError> {
    if spec.axes.is_empty() || spec.axes.len() > 3 {
        return Err(SweepError::Axes(spec.axes.len()));
    }
    let grid = points(&spec.axes)?;
    let mut out = Vec::with_capacity(grid.len());
    let mut name = String::new();
    for (i, pt) in grid.iter().enumerate() {
        let mut sets = spec.sets.clone();
        sets.extend(pt.iter().cloned());
        let mut scn = Scenario::load(&spec.scenario, &sets)?;
        name.clone_from(&scn.name);
        for v in [&spec.base, &spec.variant] {
            if !scn.variants.iter().any(|x| &x.name == v) {
                return Err(SweepError::NoVariant(v.clone()));
            }
        }
        scn.variants
            .retain(|v| v.name == spec.base || v.name == spec.variant);
        let r = run(
            &scn,
            &SimOptions {
                trials: Some(spec.trials),
                first_trial: 0,
                seed: spec.seed,
                progress: false,
            },
        )?;
        let base = r.median(&spec.base, &spec.metric);
        let variant = r.median(&spec.variant, &spec.metric);
        let gain = base
            .zip(variant)
            .and_then(|(b, v)| (b > 0.0).then_some(v / b));
        let failed_trials = r
            .variants
            .iter()
            .flat_map(|v| &v.trials)
            .filter(|t| t.error.is_some())
            .count();
        if progress {
            eprintln!(
                "[{}/{}] {:<40} {} {:>8} {} {:>8}  gain {}",
                i + 1,
                grid.len(),
                pt.join(" "),
                spec.base,
                fmt(base),
                spec.variant,
                fmt(variant),
                gain.map_or_else(|| "-".into(), |g| format!("{g:.2}x"))
            );
        }
        out.push(SweepPoint {
            sets: pt.clone(),
            base,
            variant,
            gain,
            failed_trials,
        });
    }
    Ok(SweepResult {
        scenario: name,
        metric: spec.metric.clone(),
        variants: (spec.base.clone(), spec.variant.clone()),
        trials: spec.trials,
        seed: spec.seed,
        axes: spec
            .axes
            .iter()
            .map(|a| (a.key.clone(), a.values.clone()))
            .collect(),
        points: out,
    })
}

fn fmt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.3}"))
}

impl SweepResult {
    /// The gain at the point with these value indices (one per axis).
    pub fn gain_at(&self, idx: &[usize]) -> Option<f64> {
        let mut flat = 0usize;
        for (a, i) in self.axes.iter().zip(idx) {
            flat = flat * a.1.len() + i;
        }
        self.points.get(flat).and_then(|p| p.gain)
    }

    /// The heat map of the gains: first axis across, second up (a single row for one axis),
    /// one panel per value of the third.
    pub fn heatmap(&self) -> Heatmap {
        let x = self.axes[0].clone();
        let y = self
            .axes
            .get(1)
            .cloned()
            .unwrap_or_else(|| (String::new(), vec![String::new()]));
        let panels_of = self
            .axes
            .get(2)
            .cloned()
            .unwrap_or_else(|| (String::new(), vec![String::new()]));
        let panels = panels_of
            .1
            .iter()
            .enumerate()
            .map(|(k, pv)| Panel {
                title: if panels_of.0.is_empty() {
                    String::new()
                } else {
                    format!("{} = {pv}", panels_of.0)
                },
                cells: (0..y.1.len())
                    .map(|j| {
                        (0..x.1.len())
                            .map(|i| {
                                let idx: Vec<usize> =
                                    [i, j, k].into_iter().take(self.axes.len()).collect();
                                self.gain_at(&idx)
                            })
                            .collect()
                    })
                    .collect(),
            })
            .collect();
        Heatmap {
            title: format!(
                "{}: {} {} / {} (median of {} trials)",
                self.scenario, self.metric, self.variants.1, self.variants.0, self.trials
            ),
            x,
            y,
            panels,
        }
    }

    /// A Markdown table: one row per point.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let keys: Vec<&str> = self.axes.iter().map(|a| a.0.as_str()).collect();
        let _ = write!(
            s,
            "| {} | {} | {} | gain |\n|{}---|---|---|\n",
            keys.join(" | "),
            self.variants.0,
            self.variants.1,
            "---|".repeat(keys.len())
        );
        for p in &self.points {
            let vals: Vec<&str> = p
                .sets
                .iter()
                .map(|kv| kv.split_once('=').map_or(kv.as_str(), |x| x.1))
                .collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                vals.join(" | "),
                fmt(p.base),
                fmt(p.variant),
                p.gain.map_or_else(|| "-".into(), |g| format!("{g:.2}×"))
            );
        }
        s
    }

    /// Writes the heat map as `<stem>.svg` and `<stem>.png` in `dir`.
    pub fn plot(
        &self,
        dir: &Path,
        stem: &str,
    ) -> Result<Vec<std::path::PathBuf>, super::heatmap::HeatmapError> {
        self.heatmap().write(dir, stem)
    }
}
