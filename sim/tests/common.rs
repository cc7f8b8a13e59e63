//! Shared helpers of the simulator's tests: the lab's scenario files, run in virtual time.

use sidekick_lab::scenario::Scenario;
use sidekick_sim::run::{SimOptions, SimResult, run};

/// Runs the lab scenario `name` with overrides.
pub fn run_scenario(name: &str, sets: &[&str], trials: usize, seed: u64) -> SimResult {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../interop/scenarios")
        .join(format!("{name}.toml"));
    let sets: Vec<String> = sets.iter().map(|s| (*s).to_string()).collect();
    let scn = Scenario::load(&path, &sets).unwrap_or_else(|e| panic!("{name}: {e}"));
    let r = run(
        &scn,
        &SimOptions {
            trials: Some(trials),
            first_trial: 0,
            seed,
            progress: false,
        },
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    for v in &r.variants {
        // The lab's TCP baselines run kernel TCP, which the simulator does not model.
        if v.name.starts_with("tcp-") {
            assert!(
                v.skipped
                    .as_deref()
                    .is_some_and(|s| s.contains("kernel TCP")),
                "{}: {:?}",
                v.name,
                v.skipped
            );
            continue;
        }
        assert!(v.skipped.is_none(), "{}: skipped: {:?}", v.name, v.skipped);
        for t in &v.trials {
            assert!(
                t.error.is_none(),
                "{} trial {}: {:?}",
                v.name,
                t.trial,
                t.error
            );
        }
    }
    r
}

/// The ratio of two variants' medians of `metric` (and the two medians).
#[allow(dead_code)] // each test binary compiles this module; not all use every helper
pub fn ratio(r: &SimResult, a: &str, b: &str, metric: &str) -> (f64, f64, f64) {
    let x = r
        .median(a, metric)
        .unwrap_or_else(|| panic!("{a}: no {metric}"));
    let y = r
        .median(b, metric)
        .unwrap_or_else(|| panic!("{b}: no {metric}"));
    (x / y, x, y)
}

/// Variant `variant`'s proxy repaired at least `share` of the last hop's drops (medians over
/// the trials; there were drops).
#[allow(dead_code)] // each test binary compiles this module; not all use every helper
pub fn assert_repairs_cover(r: &SimResult, variant: &str, share: f64) {
    let drops = r.median(variant, "lan0_down_dropped_loss").unwrap_or(0.0);
    let repairs = r
        .median(variant, "proxy_retransmissions_total")
        .unwrap_or(0.0);
    assert!(
        drops > 0.0 && repairs >= share * drops,
        "{variant}: {repairs} proxy retransmissions for {drops} last-hop drops"
    );
}
