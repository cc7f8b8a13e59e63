//! A lying proxy against real clients in network namespaces (`SIDEKICK_LAB=1`, root): the
//! `lying-proxy-upload` and `lying-proxy-download` scenarios (two short trials of four variants
//! each, in alternation; docs/results.md has five-trial runs of every variant), libcurl and
//! WebRTC calls (about 4 minutes in all). Every lie must cost the
//! client no more than 10 % of its end-to-end transfer time (mean over the trials), and nothing
//! may leave the client on its loopback.
//!
//! The proxy binary must be a `testing` build (`--lie`): `cargo test --workspace` makes one,
//! since this package's dev-dependency on the proxy turns the feature on.

mod common;

use common::{run_trials, sidekick_bin_dir, skip};
use sidekick_lab::runner::RunResult;
use sidekick_lab::scenario::Scenario;
use std::path::PathBuf;
use std::process::Command;

/// Runs `trials` of the variants `keep` of a shipped scenario with `sets` (the scenario's other
/// variants are for longer runs: docs/results.md).
fn run(test: &str, scenario: &str, sets: &[&str], trials: usize, keep: &[&str]) -> RunResult {
    let bin_dir = sidekick_bin_dir(test);
    let help = Command::new(bin_dir.join("sidekick-proxy"))
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("{test}: sidekick-proxy --help: {e}"));
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("--lie"),
        "{test}: {} is not a testing build: cargo build -p sidekick-proxy --features testing",
        bin_dir.join("sidekick-proxy").display()
    );
    let sets: Vec<String> = sets.iter().map(|s| (*s).to_string()).collect();
    let mut scn = Scenario::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{scenario}.toml")),
        &sets,
    )
    .unwrap_or_else(|e| panic!("{test}: {e}"));
    scn.variants.retain(|v| keep.contains(&v.name.as_str()));
    assert_eq!(
        scn.variants.len(),
        keep.len(),
        "{test}: {scenario} lacks a variant"
    );
    run_trials(test, &scn, bin_dir, trials)
}

/// The mean transfer time (`duration_s`) of variant `name`; every trial completed.
fn mean_duration(test: &str, r: &RunResult, name: &str) -> f64 {
    let v = r
        .variants
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("{test}: no variant {name}"));
    let mut sum = 0.0;
    for t in &v.trials {
        assert!(t.error.is_none(), "{test}: {name}: {:?}", t.error);
        sum += t
            .metrics
            .get("duration_s")
            .copied()
            .unwrap_or(f64::INFINITY);
    }
    sum / v.trials.len().max(1) as f64
}

/// Every variant: a mean transfer time within 1.1× of e2e's (the runner alternates the
/// variants, and a trial's link drops are seeded alike for all of them), nothing on the
/// client's loopback; each trial of `name` has `metric` = 1 (the defence that caught the lie).
fn check(test: &str, r: &RunResult, caught_by: &[(&str, &str)]) {
    let e2e = mean_duration(test, r, "e2e");
    for v in &r.variants {
        let d = mean_duration(test, r, &v.name);
        eprintln!(
            "{test}: {}: mean transfer time {d:.2} s, {:.3}× e2e",
            v.name,
            d / e2e
        );
        assert!(
            d <= 1.1 * e2e,
            "{test}: {} took {d:.2} s, e2e {e2e:.2} s",
            v.name
        );
        for t in &v.trials {
            assert_eq!(
                t.metrics.get("cli0_lo_tx_packets").copied(),
                Some(0.0),
                "{test}: {}: the client sent on its loopback: {:?}",
                v.name,
                t.metrics
            );
        }
    }
    check_caught(test, r, caught_by);
}

/// Each trial of variant `name` completed and has `metric` = 1: the defence that caught the lie
/// is named in the client's report.
fn check_caught(test: &str, r: &RunResult, caught_by: &[(&str, &str)]) {
    for (name, metric) in caught_by {
        let v = r
            .variants
            .iter()
            .find(|v| v.name == *name)
            .unwrap_or_else(|| panic!("{test}: no variant {name}"));
        for t in &v.trials {
            assert!(t.error.is_none(), "{test}: {name}: {:?}", t.error);
            assert_eq!(
                t.metrics.get(*metric).copied(),
                Some(1.0),
                "{test}: {name}: {metric}: {:?}",
                t.metrics
            );
        }
    }
}

#[test]
fn a_lying_proxy_costs_a_robin_upload_no_more_than_end_to_end() {
    let test = "a_lying_proxy_costs_a_robin_upload_no_more_than_end_to_end";
    if skip(test) {
        return;
    }
    let r = run(
        test,
        "lying-proxy-upload",
        &["app.bytes=2000000"],
        2,
        &["e2e", "false-loss", "extreme-echo", "victim-addr"],
    );
    check(
        test,
        &r,
        &[
            ("extreme-echo", "sidekick_fallback"),
            ("victim-addr", "sidekick_fallback"),
        ],
    );
}

#[test]
fn a_lying_proxy_costs_a_packrat_download_no_more_than_end_to_end() {
    let test = "a_lying_proxy_costs_a_packrat_download_no_more_than_end_to_end";
    if skip(test) {
        return;
    }
    let r = run(
        test,
        "lying-proxy-download",
        // ~45 drops: enough for one assessment of the holds' worth (32 settled gaps).
        &["app.bytes=1500000", "lan.loss=3%"],
        2,
        &["e2e", "never-repair", "forged-packets", "loopback-addr"],
    );
    check(
        test,
        &r,
        &[
            ("never-repair", "sidekick_fallback_cause_holds_unrepaired"),
            (
                "loopback-addr",
                "sidekick_fallback_cause_sidekick_addr_refused",
            ),
        ],
    );
}

/// libcurl through the C adapter (its relay runs on the client's loopback, so the loopback
/// count does not apply): every lie leaves the download complete, with the reason in the
/// adapter's report.
#[test]
fn a_lying_proxy_leaves_a_curl_download_complete_with_the_reason() {
    let test = "a_lying_proxy_leaves_a_curl_download_complete_with_the_reason";
    if skip(test) {
        return;
    }
    let dir = sidekick_bin_dir(test);
    assert!(
        dir.join("sidekick-curl").exists(),
        "{test}: sidekick-curl not built in {}: run scripts/build-sidekick-curl.sh",
        dir.display()
    );
    let r = run(
        test,
        "lying-proxy-download",
        &[
            "app.http3=true",
            "app.client_stack=curl",
            "app.bytes=1500000",
            "lan.loss=3%",
        ],
        1,
        &["e2e", "never-repair", "extreme-echo", "loopback-addr"],
    );
    for v in &r.variants {
        let d = mean_duration(test, &r, &v.name);
        eprintln!("{test}: {}: transfer time {d:.2} s", v.name);
    }
    check_caught(
        test,
        &r,
        &[
            ("never-repair", "sidekick_fallback_cause_holds_unrepaired"),
            (
                "loopback-addr",
                "sidekick_fallback_cause_sidekick_addr_refused",
            ),
            ("extreme-echo", "sidekick_fallback_cause_bad_echo"),
        ],
    );
}

/// A WebRTC call of `scenario` (str0m) lasting `seconds`, end to end and through a proxy lying each way of
/// `lies`, two trials each in alternation (one 6 s trial's frozen time varies by several hundred
/// ms between variants that behave alike, so the checks compare means).
fn webrtc_run(test: &str, scenario: &str, lies: &[&str], seconds: f64) -> RunResult {
    let bin_dir = sidekick_bin_dir(test);
    assert!(
        bin_dir.join("sidekick-webrtc").exists(),
        "{test}: sidekick-webrtc not built: cargo build -p sidekick-examples first"
    );
    let mut scn = Scenario::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{scenario}.toml")),
        &[
            format!("app.duration_s={seconds}"),
            "app.timeout_s=60.0".into(),
        ],
    )
    .unwrap_or_else(|e| panic!("{test}: {e}"));
    let honest = scn
        .variants
        .iter()
        .find(|v| v.name == "sidekick")
        .cloned()
        .unwrap_or_else(|| panic!("{test}: {scenario} has no sidekick variant"));
    scn.variants.retain(|v| v.name == "e2e");
    for lie in lies {
        let mut v = honest.clone();
        v.name = (*lie).to_string();
        v.proxy.extend(["--lie".to_string(), (*lie).to_string()]);
        scn.variants.push(v);
    }
    run_trials(test, &scn, bin_dir, 2)
}

/// Every variant's calls ran to their end (all frames sent at 30 fps) and, on average over the
/// trials, the receiver completed at least 90 % of the share of frames end to end completed and
/// froze no more than 10 % longer per frame than end to end plus two 33 ms frames per second of
/// call plus what its expired holds cost by design (each delayed str0m's NACK by the 80 ms window
/// until the client judged the proxy; a full run failed by 0.6 ms per frame without that term:
/// never-repair 17.46 against e2e's 13.36, whose own mean varies from 13.4 to 17.3 between runs)
/// (a trial's link drops are seeded alike for all variants; one 6 s trial of a 10 %-loss call
/// varies by a few hundred ms of frozen time between variants that behave alike: a
/// never-repairing proxy froze 3 254 ms against end to end's 2 574 in one trial while completing
/// 158 frames against 145).
/// Shares and per-frame figures are of the frames the receiver saw: the sender starts once its
/// own DTLS handshake is done, and what it sends before the receiver's is done is lost to every
/// variant alike (before the first RTP datagram there is no session for a proxy to lie in).
/// Frames, not only frozen time, may lose a little to a proxy that never repairs: until the
/// client has seen 32 settled gaps (about 3 s at 10 % loss) each hold delays str0m's NACK by
/// the 80 ms window, and str0m gives a packet up after five NACKs (one trial: 149 frames against
/// end to end's 157, frozen time 2 916 against 2 907 ms).
type Metrics = std::collections::BTreeMap<String, f64>;

/// What [`check_calls`] reads of every trial.
const CALL_METRICS: [&str; 4] = [
    "frames_sent",
    "frames_complete",
    "frames_incomplete",
    "frozen_ms_total",
];

/// How long a Packrat receiver holds str0m's NACK for a gap (`sidekick-webrtc`'s
/// `--sidekick-reorder-ms` default, which the webrtc-downlink variants keep).
const HOLD_WINDOW_MS: f64 = 80.0;

/// The SDK's default `hold_assessment_gaps`: the client judges the proxy once this many gaps
/// have settled, so a proxy that never repairs lets at most this many holds expire per epoch
/// before the client falls back. The allowance stops there: a client whose fallback failed would
/// let holds expire without end, and must fail the bound.
const HOLD_ASSESSMENT_GAPS: f64 = 32.0;

fn check_calls(test: &str, r: &RunResult, seconds: f64) {
    // The mean over the variant's trials of `f` of a trial's metrics; every trial ran to its end
    // and reported the call's frame counts.
    let mean = |v: &str, f: &dyn Fn(&Metrics) -> f64| {
        let var = r
            .variants
            .iter()
            .find(|x| x.name == v)
            .unwrap_or_else(|| panic!("{test}: no variant {v}"));
        let mut sum = 0.0;
        for t in &var.trials {
            assert!(t.error.is_none(), "{test}: {v}: {:?}", t.error);
            for k in CALL_METRICS {
                assert!(
                    t.metrics.contains_key(k),
                    "{test}: {v}: no {k}: {:?}",
                    t.metrics
                );
            }
            sum += f(&t.metrics);
        }
        sum / var.trials.len().max(1) as f64
    };
    let seen = |m: &Metrics| m["frames_complete"] + m["frames_incomplete"];
    let complete_share = |m: &Metrics| m["frames_complete"] / seen(m).max(1.0);
    let frozen_per_frame = |m: &Metrics| m["frozen_ms_total"] / seen(m).max(1.0);
    // The cost a proxy that never repairs may impose by design: until the client has judged
    // enough settled gaps (the SDK's `hold_assessment_gaps`, 32), every hold that expired
    // delayed str0m's NACK by the hold window. Per frame seen, from the trial's own count,
    // capped at the assessment's gaps.
    let hold_cost_per_frame = |m: &Metrics| {
        let expired = m.get("sidekick_gaps_expired").copied().unwrap_or(0.0);
        expired.min(HOLD_ASSESSMENT_GAPS) * HOLD_WINDOW_MS / seen(m).max(1.0)
    };
    let e2e_share = mean("e2e", &complete_share);
    let e2e_frozen = mean("e2e", &frozen_per_frame);
    for v in &r.variants {
        let share = mean(&v.name, &complete_share);
        let frozen = mean(&v.name, &frozen_per_frame);
        let hold_cost = mean(&v.name, &hold_cost_per_frame);
        let expired = mean(&v.name, &|m: &Metrics| {
            m.get("sidekick_gaps_expired").copied().unwrap_or(0.0)
        });
        eprintln!(
            "{test}: {}: {:.1} frames seen, {:.1} % complete, {frozen:.2} ms frozen per frame, expired holds {expired:.1} ({hold_cost:.2} ms per frame) (e2e {:.1} %, {e2e_frozen:.2} ms)",
            v.name,
            mean(&v.name, &seen),
            100.0 * share,
            100.0 * e2e_share,
        );
        assert_eq!(
            mean(&v.name, &|m| m["frames_sent"]),
            (30.0 * seconds).round(),
            "{test}: {}",
            v.name
        );
        assert!(share >= 0.9 * e2e_share, "{test}: {}", v.name);
        assert!(
            frozen <= 1.1 * e2e_frozen + 2.0 * 33.0 / 30.0 + hold_cost,
            "{test}: {}: mean frozen {frozen} ms per frame, e2e {e2e_frozen} ms, expired holds {hold_cost} ms",
            v.name
        );
    }
}

/// A WebRTC receiver (Packrat's media links, 10 % loss) facing a proxy that never repairs or
/// forges packets: the call continues end to end; the holds that were never repaired are named.
#[test]
fn a_lying_proxy_leaves_a_webrtc_downlink_call_end_to_end() {
    let test = "a_lying_proxy_leaves_a_webrtc_downlink_call_end_to_end";
    if skip(test) {
        return;
    }
    // 12 s calls: until the client has judged 32 settled gaps (about 3 s at 10 % loss) every hold
    // delays str0m's NACK, and in a 6 s call that fixed cost was half the call (two trials: 134
    // frames complete against end to end's 156.5).
    let r = webrtc_run(
        test,
        "webrtc-downlink",
        &["never-repair", "forged-packets"],
        12.0,
    );
    check_calls(test, &r, 12.0);
    check_caught(
        test,
        &r,
        &[("never-repair", "sidekick_fallback_cause_holds_unrepaired")],
    );
}

/// A WebRTC sender (Robin #1's links) told of losses that never happened: the call continues;
/// the spurious resends are the lie's whole cost.
#[test]
fn a_lying_proxy_leaves_a_webrtc_uplink_call_end_to_end() {
    let test = "a_lying_proxy_leaves_a_webrtc_uplink_call_end_to_end";
    if skip(test) {
        return;
    }
    let r = webrtc_run(test, "webrtc-uplink", &["false-loss", "extreme-echo"], 6.0);
    check_calls(test, &r, 6.0);
    check_caught(test, &r, &[("extreme-echo", "sidekick_fallback")]);
}
