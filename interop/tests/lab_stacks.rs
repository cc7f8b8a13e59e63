//! Lab tests of the transfer stacks beyond quinn and quiche: one download per new server ×
//! client pair (quic-go and ngtcp2 against each other and against quinn and quiche) across the
//! PEMI file scenario's links, end to end, in real network namespaces; and the aioquic client
//! through PEMI, whose late-paired replies make the gap signal walk back. They run with
//! `SIDEKICK_LAB=1` as root (else they print why they skip and pass) and need the quic-go
//! binary (scripts/build-quicgo.sh), Debian's ngtcp2 programs (scripts/setup.sh) and the aioquic
//! client (scripts/build-aioquic.sh); a missing one fails the test rather than skipping it.

use sidekick_lab::scenario::Scenario;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

mod common;
use common::{one_trial, skip};

static SERIAL: Mutex<()> = Mutex::new(());

/// The directory of the lab's binaries (beside this test's `sidekick-lab`), checked for the
/// binaries and programs the stacks need.
fn bin_dir(test: &str, stacks: &[&str]) -> PathBuf {
    let lab = PathBuf::from(env!("CARGO_BIN_EXE_sidekick-lab"));
    let dir = lab.parent().map(PathBuf::from).unwrap_or_default();
    for s in stacks {
        let (bin, hint) = match *s {
            "quic-go" => ("sidekick-transfer-quicgo", "scripts/build-quicgo.sh"),
            "aioquic" => ("sidekick-transfer-aioquic", "scripts/build-aioquic.sh"),
            "kwik" => ("sidekick-transfer-kwik", "scripts/build-kwik.sh"),
            "ngtcp2" => (
                "sidekick-transfer-ngtcp2",
                "cargo build -p sidekick-examples",
            ),
            _ => ("sidekick-transfer", "cargo build -p sidekick-examples"),
        };
        assert!(
            dir.join(bin).exists(),
            "{test}: {bin} not built in {} ({hint})",
            dir.display()
        );
        if *s == "ngtcp2" {
            for prog in ["gtlsserver", "gtlsclient"] {
                assert!(
                    Command::new(prog).arg("--help").output().is_ok(),
                    "{test}: {prog} not installed (Debian's ngtcp2-server/ngtcp2-client: scripts/setup.sh)"
                );
            }
        }
    }
    dir
}

/// The metrics of one trial of `variant` of pemi-file with `sets` applied (its binaries from
/// `dir`); panics naming `test` if the scenario does not load or the trial fails.
fn pemi_file_trial(
    test: &str,
    dir: PathBuf,
    sets: &[String],
    variant: &str,
) -> BTreeMap<String, f64> {
    let mut scn = Scenario::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/pemi-file.toml"),
        sets,
    )
    .unwrap_or_else(|e| panic!("{test}: {e}"));
    scn.variants.retain(|v| v.name == variant);
    assert_eq!(scn.variants.len(), 1, "{test}: no variant {variant}");
    one_trial(test, &scn, dir)
}

/// One 1 MB HTTP/3 download from `server` to each of `clients` over pemi-file's links (1 %
/// loss on the last hop), end to end; checks that each completed with a plausible goodput and
/// that the payload crossed the lossy link.
fn downloads(test: &str, server: &str, clients: &[&str]) {
    if skip(test) {
        return;
    }
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut all = clients.to_vec();
    all.push(server);
    let dir = bin_dir(test, &all);
    for client in clients {
        let sets: Vec<String> = [
            format!("app.stack={server}"),
            format!("app.client_stack={client}"),
            "app.http3=true".into(),
            "app.bytes=1000000".into(),
            "app.timeout_s=60.0".into(),
        ]
        .into();
        let m = pemi_file_trial(test, dir.clone(), &sets, "e2e");
        assert_eq!(m["bytes"], 1_000_000.0);
        let g = m["goodput_mbps"];
        // Below the 10 Mbit/s wide-area bottleneck, and not absurdly slow.
        assert!(
            g > 0.2 && g < 10.0,
            "{test}: {server} -> {client}: goodput {g}"
        );
        assert!(
            m["bytes_per_link_lan0_down"] > 1_000_000.0,
            "{test}: {server} -> {client}: {m:?}"
        );
    }
}

#[test]
fn quicgo_server_downloads_to_every_client() {
    downloads(
        "quicgo_server_downloads_to_every_client",
        "quic-go",
        &["quinn", "quiche", "quic-go", "ngtcp2"],
    );
}

#[test]
fn ngtcp2_server_downloads_to_every_client() {
    downloads(
        "ngtcp2_server_downloads_to_every_client",
        "ngtcp2",
        &["quinn", "quiche", "quic-go", "ngtcp2"],
    );
}

#[test]
fn rust_servers_download_to_quicgo_and_ngtcp2_clients() {
    for server in ["quinn", "quiche"] {
        downloads(
            "rust_servers_download_to_quicgo_and_ngtcp2_clients",
            server,
            &["quic-go", "ngtcp2"],
        );
    }
}

/// A 2 MB download from the quinn server to the aioquic client through PEMI at 3 % loss on the
/// last hop. aioquic acknowledges 1 ms after the first unacknowledged packet, gap or not, so a
/// reply that reveals a gap comes about a packet spacing later than the RTT floor predicts. The
/// quinn sender is window-limited at this loss and sends in flights, whose ends and starts teach
/// the gap signal the receiver's wait; the first gaps, before that, walk back. Checks that the
/// transfer completed, that PEMI walked back and then named repairs in the learned wait's
/// windows, that repairs closed their gaps within the round (the A/B run of 28 Nov, 8 trials:
/// 72 window repairs and 34 gaps closed per trial by median), and that its retransmissions
/// stayed within PEMI's budget.
#[test]
fn pemi_learns_the_aioquic_client_s_wait() {
    let test = "pemi_learns_the_aioquic_client_s_wait";
    if skip(test) {
        return;
    }
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = bin_dir(test, &["quinn", "aioquic"]);
    let sets: Vec<String> = [
        "app.stack=quinn",
        "app.client_stack=aioquic",
        "app.http3=true",
        "app.bytes=2000000",
        "app.timeout_s=60.0",
        "lan.loss=3%",
    ]
    .map(String::from)
    .into();
    let m = pemi_file_trial(test, dir, &sets, "pemi");
    assert_eq!(m["bytes"], 2_000_000.0, "{test}: {m:?}");
    assert_eq!(m["proxy_pemi_handshakes_total"], 1.0, "{test}: {m:?}");
    assert!(m["proxy_pemi_gap_signals_total"] >= 5.0, "{test}: {m:?}");
    assert!(m["proxy_pemi_gap_walk_backs_total"] >= 1.0, "{test}: {m:?}");
    assert!(
        m["proxy_pemi_gap_timer_paired_total"] >= 1.0,
        "{test}: {m:?}"
    );
    assert!(m["proxy_pemi_gap_closed_total"] >= 1.0, "{test}: {m:?}");
    assert!(m["retx_amplification"] <= 1.1, "{test}: {m:?}");
}

/// 2 MB raw-stream downloads through PEMI at 1 % loss on the last hop with kwik (Java) as the
/// sender (to the quinn client) and as the receiver (from the quinn server): kwik acknowledges
/// every second packet and not at once on reordering, and runs NewReno. Checks that each
/// transfer completed, that PEMI saw the handshake and read the receiver's replies as gap
/// signals and repaired with them, within its retransmission budget.
#[test]
fn pemi_assists_kwik_as_sender_and_as_receiver() {
    let test = "pemi_assists_kwik_as_sender_and_as_receiver";
    if skip(test) {
        return;
    }
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = bin_dir(test, &["quinn", "kwik"]);
    for (server, client) in [("kwik", "quinn"), ("quinn", "kwik")] {
        let sets: Vec<String> = [
            format!("app.stack={server}"),
            format!("app.client_stack={client}"),
            "app.http3=false".into(),
            "app.bytes=2000000".into(),
            "app.timeout_s=60.0".into(),
        ]
        .into();
        let m = pemi_file_trial(test, dir.clone(), &sets, "pemi");
        let pair = format!("{server} -> {client}");
        assert_eq!(m["bytes"], 2_000_000.0, "{test}: {pair}: {m:?}");
        assert_eq!(
            m["proxy_pemi_handshakes_total"], 1.0,
            "{test}: {pair}: {m:?}"
        );
        assert!(
            m["proxy_pemi_gap_signals_total"] >= 1.0,
            "{test}: {pair}: {m:?}"
        );
        assert!(
            m["proxy_pemi_gap_retransmissions_total"] >= 1.0,
            "{test}: {pair}: {m:?}"
        );
        assert!(m["retx_amplification"] <= 1.1, "{test}: {pair}: {m:?}");
    }
}
