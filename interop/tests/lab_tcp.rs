//! Lab tests of the TCP baselines (issue 24, point 8): the bulk transfer over kernel TCP end to
//! end (`tcp-e2e`) and through the transparent split-TCP proxy on the ap (`tcp-split`,
//! `sidekick-tcp-split`), on a routed ap (Robin #2's links, an upload) and on a bridged one
//! (PEMI file's links, a download), in real network namespaces. They run with `SIDEKICK_LAB=1`
//! as root (else they print why they skip and pass) and need `sidekick-transfer` and
//! `sidekick-tcp-split` (`cargo build -p sidekick-examples`) and `nft`.

mod common;

use common::{run_trials, skip};
use sidekick_lab::runner::Trial;
use sidekick_lab::scenario::Scenario;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

/// The request (`Request::LEN`) and the server's summary (`Summary::LEN`) around the payload.
const REQUEST_BYTES: f64 = 13.0;
const SUMMARY_BYTES: f64 = 52.0;

/// Runs `scenario`'s `tcp-split` and `tcp-e2e` variants (in that order: the end-to-end trial
/// after the split one also shows that the splitter left the ap as it was) once each with
/// 1 MB, and returns each variant's trial metrics.
fn run_tcp_variants(test: &str, scenario: &str) -> BTreeMap<String, BTreeMap<String, f64>> {
    let lab = PathBuf::from(env!("CARGO_BIN_EXE_sidekick-lab"));
    let dir = lab.parent().map(PathBuf::from).unwrap_or_default();
    for bin in ["sidekick-transfer", "sidekick-tcp-split"] {
        assert!(
            dir.join(bin).exists(),
            "{test}: {bin} not built in {} (cargo build -p sidekick-examples)",
            dir.display()
        );
    }
    let sets = vec!["app.bytes=1000000".to_string(), "app.timeout_s=60.0".into()];
    let mut scn = Scenario::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{scenario}.toml")),
        &sets,
    )
    .unwrap_or_else(|e| panic!("{test}: {e}"));
    scn.variants.retain(|v| v.name.starts_with("tcp-"));
    scn.variants.sort_by_key(|v| v.name != "tcp-split");
    assert_eq!(scn.variants.len(), 2, "{test}: the scenario's TCP variants");
    let r = run_trials(test, &scn, dir, 1);
    r.variants
        .iter()
        .map(|v| {
            assert!(v.skipped.is_none(), "{test}: {}: {:?}", v.name, v.skipped);
            let t: &Trial = &v.trials[0];
            eprintln!("{test}: {}: {:?}", v.name, t.metrics);
            assert!(t.error.is_none(), "{test}: {}: {:?}", v.name, t.error);
            (v.name.clone(), t.metrics.clone())
        })
        .collect()
}

/// Both variants moved every byte over TCP with a goodput below the bottleneck; the split one
/// through exactly one spliced connection, whose handshake the ap answered (one lan round trip,
/// well under the wan's one-way delay), while the end-to-end handshake took the whole path's
/// round trip.
fn check(test: &str, m: &BTreeMap<String, BTreeMap<String, f64>>, upload: bool, wan_ms: f64) {
    for (name, t) in m {
        assert_eq!(t["bytes"], 1_000_000.0, "{test}: {name}");
        let g = t["goodput_mbps"];
        assert!(g > 0.1 && g < 10.0, "{test}: {name}: goodput {g}");
    }
    let (split, e2e) = (&m["tcp-split"], &m["tcp-e2e"]);
    assert_eq!(split["proxy_log_accepted"], 1.0, "{test}: {split:?}");
    assert_eq!(split["proxy_log_connected"], 1.0, "{test}: {split:?}");
    assert_eq!(split["proxy_log_failed"], 0.0, "{test}: {split:?}");
    let (to_server, to_client) = if upload {
        (1_000_000.0 + REQUEST_BYTES, SUMMARY_BYTES)
    } else {
        (REQUEST_BYTES, 1_000_000.0 + SUMMARY_BYTES)
    };
    assert_eq!(split["proxy_log_bytes_to_server"], to_server, "{test}");
    assert_eq!(split["proxy_log_bytes_to_client"], to_client, "{test}");
    assert!(
        split["connect_ms"] < wan_ms,
        "{test}: split handshake {} ms",
        split["connect_ms"]
    );
    assert!(
        e2e["connect_ms"] > 2.0 * wan_ms,
        "{test}: end-to-end handshake {} ms",
        e2e["connect_ms"]
    );
    assert!(!e2e.contains_key("proxy_log_accepted"), "{test}: {e2e:?}");
    // The data sender's counters of the split download are the server's lossless half; the
    // ap's half repairs the last hop and reports its own.
    assert!(
        split.contains_key("proxy_log_client_side_retrans"),
        "{test}: {split:?}"
    );
}

#[test]
fn tcp_split_on_a_routed_ap_upload() {
    let test = "tcp_split_on_a_routed_ap_upload";
    if skip(test) {
        return;
    }
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let m = run_tcp_variants(test, "robin-2-upload");
    check(test, &m, true, 25.0);
}

#[test]
fn tcp_split_on_a_bridged_ap_download() {
    let test = "tcp_split_on_a_bridged_ap_download";
    if skip(test) {
        return;
    }
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let m = run_tcp_variants(test, "pemi-file");
    check(test, &m, false, 25.0);
}
