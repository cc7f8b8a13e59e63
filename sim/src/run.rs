//! Runs a scenario's variants in virtual time and reports them with the lab's JSON layout
//! (`sidekick_lab::runner::RunResult`: per-trial metrics, per-variant median/IQR).

use std::collections::BTreeMap;

use serde::Serialize;
use sidekick_lab::runner::{RunResult, Trial, VariantResult};
use sidekick_lab::scenario::Scenario;
use sidekick_lab::stats::summarize;

use crate::scenario::{self, SimScenarioError};
use crate::trial::{TrialSetup, run_trial};

/// Options of a simulated run.
#[derive(Debug, Clone, Copy)]
pub struct SimOptions {
    /// Override of the scenario's trial count.
    pub trials: Option<usize>,
    /// The first trial's index (trial `i` draws its seeds from the run's seed and `i`, so
    /// `first_trial = 5, trials = 1` reruns the sixth trial of a run alone).
    pub first_trial: usize,
    /// The run's seed: the same seed gives the same results, byte for byte.
    pub seed: u64,
    /// Print one line per trial to stderr.
    pub progress: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            trials: None,
            first_trial: 0,
            seed: 1,
            progress: false,
        }
    }
}

/// A simulated run: the lab's result layout with `link_backend = "simulated"` and the seed.
#[derive(Debug, Clone, Serialize)]
pub struct SimResult {
    /// Scenario name.
    pub scenario: String,
    /// Scenario description.
    pub description: String,
    /// The scenario table after `--set` overrides.
    pub settings: serde_json::Value,
    /// Always `simulated`.
    pub link_backend: &'static str,
    /// The seed of the run.
    pub seed: u64,
    /// Link checks (none: the simulated links are the model itself).
    pub link_checks: Vec<serde_json::Value>,
    /// Per-variant results, in scenario order.
    pub variants: Vec<VariantResult>,
}

impl SimResult {
    /// The same results as the lab's type (for its tables and comparisons).
    pub fn as_lab(&self) -> RunResult {
        RunResult {
            scenario: self.scenario.clone(),
            description: self.description.clone(),
            settings: self.settings.clone(),
            link_backend: sidekick_lab::netem::LinkBackend::default(),
            link_checks: Vec::new(),
            variants: self.variants.clone(),
        }
    }

    /// The median of `metric` for `variant`, if it ran.
    pub fn median(&self, variant: &str, metric: &str) -> Option<f64> {
        self.variants
            .iter()
            .find(|v| v.name == variant)?
            .summary
            .get(metric)
            .map(|s| s.median)
    }
}

/// Mixes the run seed and a trial index into a seed (splitmix64).
fn mix(seed: u64, i: u64) -> u64 {
    let mut z = seed
        .wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Runs `scn`: every variant in alternation, trial by trial; a trial's seeds are the same for
/// every variant (the links draw the same losses for the same packet sequence, as in the lab).
pub fn run(scn: &Scenario, opts: &SimOptions) -> Result<SimResult, SimScenarioError> {
    scenario::check_keys(scn)?;
    let trials = opts.trials.unwrap_or(scn.trials).max(1);
    let skipped = scenario::skip_reason(scn);
    let mut setups: Vec<Option<TrialSetup>> = Vec::new();
    let mut results: Vec<VariantResult> = Vec::new();
    for v in &scn.variants {
        let vs = scn.for_variant(v)?;
        // A variant that moves to a stack the simulator does not run (the lab's `tcp-e2e` and
        // `tcp-split` on kernel TCP), or whose transfer it does not model (an upload beside a
        // download), is skipped with the reason, not checked against the model.
        let own_skip = scenario::skip_reason(&vs)
            .filter(|_| vs.app.stack != scn.app.stack || vs.app.direction == "both");
        if let Some(why) = own_skip {
            setups.push(None);
            results.push(VariantResult {
                name: v.name.clone(),
                skipped: Some(why),
                trials: Vec::new(),
                summary: BTreeMap::new(),
            });
            continue;
        }
        scenario::check_keys(&vs)?;
        let setup = scenario::setup_for(&vs, v)?;
        let skip = skipped.clone().or_else(|| scenario::skip_reason(&vs));
        setups.push(skip.is_none().then_some(setup));
        results.push(VariantResult {
            name: v.name.clone(),
            skipped: skip,
            trials: Vec::new(),
            summary: BTreeMap::new(),
        });
    }
    for t in opts.first_trial..opts.first_trial + trials {
        for (i, setup) in setups.iter().enumerate() {
            let Some(setup) = setup else { continue };
            let mut s = setup.clone();
            s.link_seed = mix(opts.seed, 2 * t as u64);
            s.stack_seed = mix(opts.seed, 2 * t as u64 + 1);
            let out = run_trial(&s);
            let trial = Trial {
                trial: t,
                metrics: out.metrics,
                error: out.error,
            };
            if opts.progress {
                let g = trial
                    .metrics
                    .get("goodput_mbps")
                    .map_or_else(|| "-".into(), |g| format!("{g:.2} Mbit/s"));
                eprintln!(
                    "[{}/{}] {:<12} {}{}",
                    t + 1,
                    opts.first_trial + trials,
                    results[i].name,
                    g,
                    trial
                        .error
                        .as_deref()
                        .map(|e| format!("  error: {e}"))
                        .unwrap_or_default()
                );
            }
            results[i].trials.push(trial);
        }
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
    Ok(SimResult {
        scenario: scn.name.clone(),
        description: scn.description.clone(),
        settings: serde_json::to_value(&scn.table).unwrap_or_default(),
        link_backend: "simulated",
        seed: opts.seed,
        link_checks: Vec::new(),
        variants: results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// both-wifi's transfer (an upload beside a download on one connection) is not modelled:
    /// every variant is reported as skipped, none is run as a download.
    #[test]
    fn an_upload_beside_a_download_is_skipped_not_misread() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../interop/scenarios/both-wifi.toml"
        );
        let scn = Scenario::load(path.as_ref(), &[]).unwrap();
        let r = run(&scn, &SimOptions::default()).unwrap();
        assert_eq!(r.variants.len(), 4);
        for v in &r.variants {
            assert!(
                v.skipped.as_deref().is_some_and(|w| w.contains("both")),
                "{}",
                v.name
            );
            assert!(v.trials.is_empty());
        }
    }
}
