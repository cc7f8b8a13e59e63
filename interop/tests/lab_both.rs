//! Robin and Packrat on one session in the lab (needs root and `SIDEKICK_LAB=1`): one trial of
//! `scenarios/both-wifi.toml`'s `both` variant — the real proxy binary on the ap, a quinn client
//! uploading and downloading 1 MB at once on one connection (`sidekick-transfer client --both
//! --sidekick`) over Packrat WiFi's links with 4 % loss near the client both ways. Both engines
//! must act on the one session: quACKs reveal upload losses that the client resends, eACKs
//! reveal download losses that the proxy resends from its cache.

mod common;

use std::path::PathBuf;

use common::{one_trial, sidekick_bin_dir, skip};
use sidekick_lab::scenario::Scenario;

#[test]
fn robin_and_packrat_act_on_one_session() {
    let test = "robin_and_packrat_act_on_one_session";
    if skip(test) {
        return;
    }
    let bin_dir = sidekick_bin_dir(test);
    let sets = ["app.bytes=1000000".to_string(), "app.timeout_s=60.0".into()];
    let mut scn = Scenario::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/both-wifi.toml"),
        &sets,
    )
    .unwrap_or_else(|e| panic!("{test}: {e}"));
    scn.variants.retain(|v| v.name == "both");
    assert_eq!(scn.variants.len(), 1, "both-wifi has a `both` variant");
    let m = one_trial(test, &scn, bin_dir);
    // One connection moved the bytes both ways.
    assert_eq!(m["bytes"], 2_000_000.0, "{m:?}");
    for dir in ["up", "down"] {
        assert!(
            m[&format!("bytes_per_link_lan0_{dir}")] > 1_000_000.0,
            "{test}: {m:?}"
        );
        assert!(
            m[&format!("lan0_{dir}_dropped_loss")] > 0.0,
            "{test}: {m:?}"
        );
    }
    assert!(m["upload_goodput_mbps"] > 0.0 && m["download_goodput_mbps"] > 0.0);
    // One session, both engines, kept to the end.
    assert_eq!(m["proxy_discovery_replied_total"], 1.0, "{test}: {m:?}");
    assert_eq!(m["proxy_sessions"], 1.0, "{test}: {m:?}");
    assert_eq!(m["sidekick_mode_both"], 1.0, "{test}: {m:?}");
    assert_eq!(m["sidekick_active"], 1.0, "{test}: {m:?}");
    assert_eq!(m["sidekick_fallback"], 0.0, "{test}: {m:?}");
    // Robin: quACKs revealed near losses of the upload; the client resent them and PACUBIC
    // applied them.
    assert!(m["proxy_quacks_sent_total"] > 10.0, "{test}: {m:?}");
    assert!(m["sidekick_quacks"] > 10.0, "{test}: {m:?}");
    assert_eq!(m["sidekick_inconsistent_quacks"], 0.0, "{test}: {m:?}");
    assert!(m["sidekick_retransmissions"] > 0.0, "{test}: {m:?}");
    assert!(m["sidekick_cc_events"] > 0.0, "{test}: {m:?}");
    // Packrat: eACKs decoded at the proxy, which resent the download's near losses from its
    // cache and filled the client's gaps.
    assert!(m["sidekick_eacks_sent"] > 10.0, "{test}: {m:?}");
    assert!(m["proxy_eacks_decoded_total"] > 0.0, "{test}: {m:?}");
    assert!(m["proxy_retransmissions_total"] > 0.0, "{test}: {m:?}");
    assert!(m["sidekick_gaps_filled"] > 0.0, "{test}: {m:?}");
}
