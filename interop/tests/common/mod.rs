//! Helpers shared by the lab test files (network namespaces, root, `SIDEKICK_LAB=1`).
#![allow(dead_code)] // each test file uses its own subset

use sidekick_lab::netem::LinkBackend;
use sidekick_lab::runner::{self, RunOptions, RunResult};
use sidekick_lab::scenario::Scenario;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Lab tests run only when `SIDEKICK_LAB=1` (the lab stage of `scripts/test.sh`); they then need
/// root and ethtool and fail, rather than skip, without them.
pub fn skip(test: &str) -> bool {
    if std::env::var("SIDEKICK_LAB").as_deref() != Ok("1") {
        eprintln!("{test}: skipped (run with SIDEKICK_LAB=1 as root)");
        return true;
    }
    assert!(
        is_root(),
        "{test}: SIDEKICK_LAB=1 needs root for network namespaces"
    );
    assert!(
        Command::new("ethtool").arg("--version").output().is_ok(),
        "{test}: ethtool not installed (scripts/setup.sh installs it)"
    );
    false
}

pub fn transfer_bin_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SIDEKICK_SIDEKICK_TRANSFER")
        .map(PathBuf::from)
        .filter(|p| p.exists())
    {
        return p.parent().map(PathBuf::from);
    }
    let lab = PathBuf::from(env!("CARGO_BIN_EXE_sidekick-lab"));
    let dir = lab.parent()?.to_path_buf();
    dir.join("sidekick-transfer").exists().then_some(dir)
}

/// Directory holding `sidekick-transfer` and `sidekick-proxy` of this build (the lab stage of
/// scripts/test.sh builds both next to `sidekick-lab`).
pub fn sidekick_bin_dir(test: &str) -> PathBuf {
    let Some(dir) = transfer_bin_dir() else {
        panic!("{test}: sidekick-transfer not built: cargo build -p sidekick-examples first");
    };
    let proxy = std::env::var_os("SIDEKICK_SIDEKICK_PROXY")
        .map_or_else(|| dir.join("sidekick-proxy"), PathBuf::from);
    assert!(
        proxy.exists(),
        "{test}: {} not built: cargo build -p sidekick-proxy first",
        proxy.display()
    );
    dir
}

/// Runs `trials` of every variant of `scn` in alternation with the binaries of `bin_dir` on the
/// user-space link element.
pub fn run_trials(test: &str, scn: &Scenario, bin_dir: PathBuf, trials: usize) -> RunResult {
    let opts = RunOptions {
        trials: Some(trials),
        first_trial: 0,
        bin_dir,
        stop: Arc::new(AtomicBool::new(false)),
        progress: true,
        check_links: false,
        link_backend: LinkBackend::Userspace,
    };
    runner::run(scn, &opts, |_, _| {}).unwrap_or_else(|e| panic!("{test}: {e}"))
}

/// Runs one trial of `scn`'s first variant with the binaries of `bin_dir`; asserts that it ran
/// and completed, and returns its metrics.
pub fn one_trial(test: &str, scn: &Scenario, bin_dir: PathBuf) -> BTreeMap<String, f64> {
    let r = run_trials(test, scn, bin_dir, 1);
    let v = &r.variants[0];
    assert!(v.skipped.is_none(), "{:?}", v.skipped);
    let t = v.trials[0].clone();
    eprintln!("{test}: {:?}", t.metrics);
    assert!(t.error.is_none(), "{test}: {:?}", t.error);
    t.metrics
}
