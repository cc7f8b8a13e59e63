//! A real browser as the far WebRTC peer (`SIDEKICK_LAB=1`, root): headless Chromium in the
//! server namespace receives the real VP8 stream that `sidekick-webrtc` sends over Robin #1's
//! lossy uplink (scenario `webrtc-browser`), e2e and with the sidekick, and reports its own
//! `getStats()`. The browser is the first receiver of the SDK's early resends that nobody here
//! wrote: they must reach its SRTP and RTP stack and count as received.

mod common;

use common::{run_trials, sidekick_bin_dir, skip};
use sidekick_lab::scenario::Scenario;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One 8 s call of each variant (alternated by the runner); asserts that the browser decoded
/// the call in both and returns each variant's metrics.
fn browser_calls(test: &str) -> (BTreeMap<String, f64>, BTreeMap<String, f64>) {
    let bin_dir = sidekick_bin_dir(test);
    assert!(
        bin_dir.join("sidekick-webrtc").exists(),
        "{test}: sidekick-webrtc not built: cargo build -p sidekick-examples first"
    );
    assert!(
        std::process::Command::new("chromium")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "{test}: chromium not installed (scripts/setup.sh installs it)"
    );
    let scn = Scenario::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/webrtc-browser.toml"),
        &["app.duration_s=8.0".into(), "app.timeout_s=90.0".into()],
    )
    .unwrap_or_else(|e| panic!("{test}: {e}"));
    let r = run_trials(test, &scn, bin_dir, 1);
    let mut out = Vec::new();
    for v in &r.variants {
        assert!(v.skipped.is_none(), "{test} {}: {:?}", v.name, v.skipped);
        let t = &v.trials[0];
        eprintln!("{test} {}: {:?}", v.name, t.metrics);
        assert!(t.error.is_none(), "{test} {}: {:?}", v.name, t.error);
        let m = t.metrics.clone();
        // 8 s at 30 fps, all sent; the browser decoded (nearly) all of them at the encoded size:
        // NACK/RTX or the sidekick repaired the near-link losses.
        assert_eq!(m["frames_sent"], 240.0, "{test} {}: {m:?}", v.name);
        assert!(
            m["browser_frames_decoded"] >= 228.0,
            "{test} {}: {m:?}",
            v.name
        );
        assert_eq!(m["browser_frame_width"], 640.0, "{test} {}: {m:?}", v.name);
        assert!(m["lan0_up_dropped_loss"] > 0.0, "{test} {}: {m:?}", v.name);
        out.push(m);
    }
    let sidekick = out.pop().unwrap_or_default();
    let e2e = out.pop().unwrap_or_default();
    (e2e, sidekick)
}

/// Chromium receives the call e2e and with the sidekick; with the sidekick, the identical SRTP
/// datagrams Robin resends on quACK evidence reach the browser and count as received on the
/// media stream: the browser's `packetsLost` (RTX repairs are not counted as received there)
/// falls to under half of the e2e call's, which NACK/RTX alone repaired.
#[test]
fn chromium_receives_the_sidekick_assisted_uplink() {
    let test = "chromium_receives_the_sidekick_assisted_uplink";
    if skip(test) {
        return;
    }
    let (e2e, sk) = browser_calls(test);
    // End to end: the near link's losses reach the browser, NACK/RTX repairs them.
    assert!(e2e["browser_packets_lost"] > 10.0, "{test}: {e2e:?}");
    assert!(e2e["browser_nack_count"] > 10.0, "{test}: {e2e:?}");
    assert!(
        e2e["browser_retransmitted_packets_received"] > 10.0,
        "{test}: {e2e:?}"
    );
    // With the sidekick: quACKs revealed the losses and the early resends reached the browser.
    assert_eq!(sk["sidekick_active"], 1.0, "{test}: {sk:?}");
    assert!(sk["sidekick_retransmissions"] > 10.0, "{test}: {sk:?}");
    assert!(
        sk["browser_packets_lost"] < 0.5 * e2e["browser_packets_lost"],
        "{test}: browser packetsLost {} (sidekick) vs {} (e2e)",
        sk["browser_packets_lost"],
        e2e["browser_packets_lost"]
    );
}
