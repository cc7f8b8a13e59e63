//! The media headline gains of docs/results.md as tests in virtual time (Robin #1, Packrat
//! satellite, PEMI RTC), their 0 % loss controls, and one seed, one result for the media and
//! RTC applications.
//! The scenarios are the lab's files, unchanged but for the overrides named here.

mod common;

use common::{assert_repairs_cover, ratio, run_scenario};

/// Robin #1 (Sidekick (NSDI '24) §6.2, Fig. 4a): 240 B every 20 ms for 30 s over a 3.6 % lossy
/// near link; the sidekick (quACK every 64 packets and on each silence) cuts the p99 de-jitter
/// delay by at least 80 %, at most 10 % link overhead.
#[test]
fn robin1_media_p99_dejitter_80_percent_lower() {
    let r = run_scenario("robin-1-media", &[], 5, 1);
    let (g, s, e) = ratio(&r, "sidekick", "e2e", "dejitter_p99_ms");
    eprintln!("robin-1-media: p99 de-jitter sidekick {s:.2} vs e2e {e:.2} ms = {g:.3}x");
    assert!(
        g <= 0.2,
        "p99 de-jitter sidekick {s:.2} ms vs e2e {e:.2} ms: only {:.0} % lower",
        100.0 * (1.0 - g)
    );
    // The gain comes from the sidekick: quACKs revealed the near-link losses, the sender
    // resent them early, at a link overhead within 10 %.
    let dropped = r.median("sidekick", "lan0_up_dropped_loss").unwrap_or(0.0);
    let early = r
        .median("sidekick", "sidekick_retransmissions")
        .unwrap_or(0.0);
    assert!(
        dropped > 0.0 && early >= 0.8 * dropped,
        "{early} early resends for {dropped} near-link drops"
    );
    let overhead = r
        .median("sidekick", "sidekick_overhead_pct")
        .unwrap_or(f64::NAN);
    assert!(overhead <= 10.0, "link overhead {overhead:.1} %");
    assert_eq!(r.median("sidekick", "packets_missing"), Some(0.0));
}

/// Packrat satellite (Packrat (CoNEXT '26) §7.2.2, Fig. 6b): FEC media over a 10 % lossy last
/// hop behind a 50 ms wan; the proxy's repairs from its cache cut the total stall time by at
/// least 50 %.
#[test]
fn packrat_satellite_stalls_50_percent_lower() {
    let r = run_scenario("packrat-satellite", &[], 5, 1);
    let (g, s, e) = ratio(&r, "sidekick", "e2e", "stall_ms_total");
    eprintln!("packrat-satellite: stall time sidekick {s:.0} vs e2e {e:.0} ms = {g:.3}x");
    assert!(
        g <= 0.5,
        "stall time sidekick {s:.0} ms vs e2e {e:.0} ms: only {:.0} % lower",
        100.0 * (1.0 - g)
    );
    // The proxy repaired the last hop's drops from its cache.
    assert_repairs_cover(&r, "sidekick", 0.8);
}

/// Without loss the sidekick costs the media nothing: one-way latency within 2 %, no de-jitter
/// delay, no stall, nothing missing.
#[test]
fn media_zero_loss_within_2_percent() {
    let r = run_scenario("robin-1-media", &["lan.loss=0%", "app.duration_s=10"], 2, 1);
    let (g, s, e) = ratio(&r, "sidekick", "e2e", "latency_p99_ms");
    eprintln!("robin-1-media 0 %: latency p99 sidekick {s:.2} vs e2e {e:.2} ms = {g:.3}x");
    assert!((g - 1.0).abs() <= 0.02, "latency p99 {g:.3}x");
    for v in ["e2e", "sidekick"] {
        assert_eq!(r.median(v, "dejitter_p99_ms"), Some(0.0), "{v}");
        assert_eq!(r.median(v, "packets_missing"), Some(0.0), "{v}");
    }
    let r = run_scenario(
        "packrat-satellite",
        &["lan.loss=0%", "app.duration_s=10"],
        2,
        1,
    );
    let (g, s, e) = ratio(&r, "sidekick", "e2e", "latency_p99_ms");
    eprintln!("packrat-satellite 0 %: latency p99 sidekick {s:.2} vs e2e {e:.2} ms = {g:.3}x");
    assert!((g - 1.0).abs() <= 0.02, "latency p99 {g:.3}x");
    for v in ["e2e", "sidekick"] {
        assert_eq!(r.median(v, "stall_ms_total"), Some(0.0), "{v}");
        assert_eq!(r.median(v, "frames_missing"), Some(0.0), "{v}");
    }
}

/// One seed, one result: the media applications with their sidekicks and the proxy give
/// byte-identical JSON for the same seed, and another seed another result.
#[test]
fn same_seed_same_json_for_media() {
    for name in ["robin-1-media", "packrat-satellite"] {
        let sets = ["app.duration_s=10"];
        let a = serde_json::to_string(&run_scenario(name, &sets, 1, 5)).unwrap();
        let b = serde_json::to_string(&run_scenario(name, &sets, 1, 5)).unwrap();
        assert!(a == b, "{name}: two runs with seed 5 differ");
        let c = serde_json::to_string(&run_scenario(name, &sets, 1, 6)).unwrap();
        assert!(a != c, "{name}: seeds 5 and 6 gave the same results");
    }
}

/// A client flag the media binaries do not have is an error naming it.
#[test]
fn unknown_media_flag_is_an_error_naming_it() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../interop/scenarios/packrat-satellite.toml");
    // A Robin flag on the Packrat player.
    let text = std::fs::read_to_string(path).unwrap().replace(
        "kind = \"media-fec\"",
        "kind = \"media-fec\"\nclient_args = [\"--sidekick-quack-every-packets\", \"2\"]",
    );
    let scn = sidekick_lab::scenario::Scenario::parse(&text, &[]).unwrap();
    let e = sidekick_sim::run::run(&scn, &sidekick_sim::run::SimOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("`--sidekick-quack-every-packets`"), "{e}");
}

/// PEMI RTC frames (PEMI §6.1.2, §6.2.2, Fig. 10): 30 fps at 3 Mbit/s over quinn, one stream per
/// frame, 1 % loss behind the bridging box; PEMI's local repairs cut the p90 frame jitter by at
/// least 20 % (the paper's lower bound) within its 10 % retransmission budget.
#[test]
fn pemi_rtc_p90_jitter_20_percent_lower() {
    let r = run_scenario("pemi-rtc", &[], 3, 1);
    let (g, s, e) = ratio(&r, "pemi", "e2e", "frame_jitter_p90_ms");
    eprintln!("pemi-rtc: p90 frame jitter pemi {s:.2} vs e2e {e:.2} ms = {g:.3}x");
    assert!(
        g <= 0.8,
        "p90 frame jitter pemi {s:.2} ms vs e2e {e:.2} ms: only {:.0} % lower",
        100.0 * (1.0 - g)
    );
    let amp = r.median("pemi", "retx_amplification").unwrap_or(f64::NAN);
    assert!((1.0..=1.1).contains(&amp), "amplification {amp}");
    for v in ["e2e", "pemi"] {
        let sent = r.median(v, "frames_sent").unwrap_or(0.0);
        assert!(
            sent > 0.0 && r.median(v, "frames_received") == Some(sent),
            "{v}: frames"
        );
    }
}

/// The RTC application over quinn-proto with PEMI's timers: one seed, one result.
#[test]
fn same_seed_same_json_for_rtc() {
    let sets = ["app.duration_s=5"];
    let a = serde_json::to_string(&run_scenario("pemi-rtc", &sets, 1, 5)).unwrap();
    let b = serde_json::to_string(&run_scenario("pemi-rtc", &sets, 1, 5)).unwrap();
    assert!(a == b, "two runs with seed 5 differ");
    let c = serde_json::to_string(&run_scenario("pemi-rtc", &sets, 1, 6)).unwrap();
    assert!(a != c, "seeds 5 and 6 gave the same results");
}
