//! Lab tests in real network namespaces. They run with `SIDEKICK_LAB=1` and need root (and `ip`,
//! `ethtool`); without the variable each test prints why it is skipped and passes. They run one at a time (a shared lock) so that link
//! measurements do not compete for the CPU.

use sidekick_lab::probe;
use sidekick_lab::runner::{self, RunOptions};
use sidekick_lab::scenario::Scenario;
use sidekick_lab::spec::{LinkSpec, LossModel};
use sidekick_lab::topo::{self, TopoConfig, Topology};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn is_root() -> bool {
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
fn skip(test: &str) -> bool {
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

fn wifi_lan() -> LinkSpec {
    // Packrat WiFi last hop (seed 002 Table 3): 2 ms, 50 Mbit/s, 4 % loss.
    LinkSpec {
        delay: Duration::from_millis(2),
        rate_bps: 50_000_000,
        loss: LossModel::Random { p: 0.04 },
        ..LinkSpec::default()
    }
}

fn wifi_wan() -> LinkSpec {
    LinkSpec {
        delay: Duration::from_millis(30),
        rate_bps: 20_000_000,
        ..LinkSpec::default()
    }
}

#[test]
fn topology_up_down_leaves_nothing() {
    if skip("topology_up_down_leaves_nothing") {
        return;
    }
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let t = Topology::up(&TopoConfig {
        clients: 2,
        wan: wifi_wan(),
        lan: wifi_lan(),
        seed: 1,
    })
    .unwrap();
    let run = t.run_id().to_string();
    let state = t.state_dir().to_path_buf();
    let ours = |v: Vec<String>| {
        v.into_iter()
            .filter(|n| n.starts_with(&format!("{run}-")))
            .count()
    };
    // srv, wan, ap, and lan+cli per client.
    assert_eq!(ours(topo::lab_namespaces().unwrap()), 7);
    assert_eq!(t.namespaces().len(), 7);
    assert!(state.join("owner").exists());
    // UDP flows end to end (client 1 → ap → server crosses both links and the ap's routing).
    let r = probe::probe_train(
        &t.ns_client(1),
        "10.0.3.2:47100".parse().unwrap(),
        &t.ns_server(),
        "10.0.1.1:47101".parse().unwrap(),
        100,
        Duration::from_millis(1),
        Duration::from_millis(300),
    )
    .unwrap();
    // 4 % loss on the lan link: losing more than 20 of 100 is a ~1e-7 event.
    assert!(
        r.delays.len() >= 80,
        "{} of 100 probes arrived",
        r.delays.len()
    );
    let min = r.delays.iter().min().unwrap();
    assert!(
        *min >= Duration::from_millis(32),
        "one-way delay {min:?} below 2 ms + 30 ms"
    );
    t.down().unwrap();
    assert_eq!(ours(topo::lab_namespaces().unwrap()), 0);
    assert!(!state.exists());
    // A second drop-based teardown path: scope exit.
    {
        let t2 = Topology::up(&TopoConfig {
            clients: 1,
            wan: wifi_wan(),
            lan: wifi_lan(),
            seed: 1,
        })
        .unwrap();
        let run2 = t2.run_id().to_string();
        drop(t2);
        assert!(
            !topo::lab_namespaces()
                .unwrap()
                .iter()
                .any(|n| n.starts_with(&run2))
        );
    }
}

#[test]
fn link_properties_within_tolerance() {
    if skip("link_properties_within_tolerance") {
        return;
    }
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let t = Topology::up(&TopoConfig {
        clients: 1,
        wan: wifi_wan(),
        lan: wifi_lan(),
        seed: 3,
    })
    .unwrap();
    let checks = probe::check_links(&t, &wifi_wan(), &wifi_lan(), true).unwrap();
    t.down().unwrap();
    eprintln!("{}", probe::format_checks(&checks));
    // 2 links × 2 directions × (delay, loss, rate).
    assert_eq!(checks.len(), 12);
    let failed: Vec<_> = checks.iter().filter(|c| !c.pass).collect();
    assert!(failed.is_empty(), "out of tolerance: {failed:#?}");
}

fn transfer_bin_dir() -> Option<PathBuf> {
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

#[test]
fn quic_transfer_across_lossy_link() {
    if skip("quic_transfer_across_lossy_link") {
        return;
    }
    let Some(bin_dir) = transfer_bin_dir() else {
        panic!("sidekick-transfer not built: cargo build -p sidekick-examples first");
    };
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let scn = Scenario::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/demo.toml"),
        &["app.bytes=2000000".into(), "lan.loss=2%".into()],
    )
    .unwrap();
    let opts = RunOptions {
        trials: Some(1),
        bin_dir,
        stop: Arc::new(AtomicBool::new(false)),
        progress: true,
        check_links: false,
    };
    let r = runner::run(&scn, &opts, |_, _| {}).unwrap();
    for v in &r.variants {
        assert!(v.skipped.is_none(), "{:?}", v.skipped);
        let t = &v.trials[0];
        assert!(t.error.is_none(), "{}: {:?}", v.name, t.error);
        assert_eq!(t.metrics["bytes"], 2_000_000.0);
        let g = t.metrics["goodput_mbps"];
        // Below the 20 Mbit/s bottleneck, and not absurdly slow.
        assert!(g > 0.2 && g < 20.0, "{}: goodput {g}", v.name);
        // The server sent at least the payload in frames across the wan link.
        assert!(t.metrics["srv_tx_bytes"] > 2_000_000.0);
    }
    let clean = r.variants.iter().find(|v| v.name == "clean-lan").unwrap();
    let lossy = r.variants.iter().find(|v| v.name == "lossy-lan").unwrap();
    assert_eq!(clean.trials[0].metrics["lan0_down_dropped_loss"], 0.0);
    assert!(lossy.trials[0].metrics["lan0_down_dropped_loss"] > 0.0);
}

#[test]
fn killed_run_is_cleaned_up() {
    if skip("killed_run_is_cleaned_up") {
        return;
    }
    let _g = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let before = topo::lab_namespaces().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sidekick-lab"))
        .args([
            "check-links",
            concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/demo.toml"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut new = Vec::new();
    while Instant::now() < deadline {
        new = topo::lab_namespaces()
            .unwrap()
            .into_iter()
            .filter(|n| !before.contains(n))
            .collect();
        if new.len() >= 5 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        new.len() >= 5,
        "the run did not build its topology: {new:?}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // The run is dead but its namespaces remain.
    assert!(
        topo::lab_namespaces()
            .unwrap()
            .iter()
            .any(|n| new.contains(n))
    );
    let out = Command::new(env!("CARGO_BIN_EXE_sidekick-lab"))
        .arg("clean")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<_> = topo::lab_namespaces()
        .unwrap()
        .into_iter()
        .filter(|n| new.contains(n))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
