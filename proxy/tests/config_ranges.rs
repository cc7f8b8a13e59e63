//! Every numeric configuration key at extreme values: the configuration is refused (at parse
//! or by `validate`, naming the key) or the proxy runs with it — a core built from it
//! establishes a session, forwards, runs its timers days ahead — and nothing panics. The binary's
//! `--check-config FILE` refuses an out-of-range value with the key's name.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use sidekick_proxy::Time;

use common::{CLIENT, CLIENT_SK, PROXY, SERVER, addr, eth};
use proptest::prelude::*;
use sidekick_protocol::messages::{IdentifierSpec, PackratConfig, RobinConfig};
use sidekick_protocol::{ClientConfig, ClientSession, Destination, SessionConfig};
use sidekick_proxy::config::{Config, Mode};
use sidekick_proxy::core::{FrameMeta, ProxyCore, Transmit};
use sidekick_proxy::engine::Direction;
use sidekick_proxy::metrics::RenderPrometheus as _;
use sidekick_proxy::packet::{LinkType, build_udp_ip, parse_frame};
use sidekick_proxy::session::ProtocolSessions;
use sidekick_proxy::sys::RingOptions;

/// The values tried for a key whose range is `lo..=hi`: both ends, just outside them, and the
/// largest integers a TOML file can carry into a `u32` or a 64-bit field.
fn candidates(lo: u64, hi: u64) -> Vec<u64> {
    vec![
        0,
        1,
        lo.saturating_sub(1),
        lo,
        hi,
        hi + 1,
        u64::from(u32::MAX),
        i64::MAX as u64,
    ]
}

fn key_names() -> Vec<(&'static str, u64, u64)> {
    Config::default()
        .numeric_keys()
        .into_iter()
        .map(|(k, _, r)| (k, *r.start(), *r.end()))
        .collect()
}

/// A session asking for everything at its largest: the proxy's policy clamps it.
fn greedy_session() -> SessionConfig {
    SessionConfig {
        robin: Some(RobinConfig {
            interval_ms: 0,
            interval_packets: 1,
            threshold: sidekick_protocol::messages::MAX_THRESHOLD,
            quack_on_gap_percent: 110,
        }),
        packrat: Some(PackratConfig {
            eack_interval_ms: 1,
            eack_interval_packets: 1,
            local_symbols: sidekick_protocol::messages::MAX_SYMBOLS,
            cache_capacity_bytes: u64::MAX,
            reorder_delay_ms: u32::MAX,
            multicast_group: Vec::new(),
        }),
        identifier: Some(IdentifierSpec::quic_default()),
    }
}

/// Run a core built from `cfg`: a session, traffic both ways, timers up to 30 days ahead.
fn run(cfg: &Config) {
    let (frame_nr, len) = RingOptions {
        block_size: cfg.ring_block_size,
        block_nr: cfg.ring_blocks,
        ..RingOptions::default()
    }
    .layout()
    .expect("a valid configuration has a valid ring");
    assert!(frame_nr > 0 && len as u64 <= sidekick_proxy::config::MAX_RING_BYTES);
    let mut core: ProxyCore<ProtocolSessions> = sidekick_proxy::daemon::build_core(cfg);
    let mut client = ClientSession::new(ClientConfig::new(greedy_session()));
    let now = Time::ZERO;
    client.start(now).unwrap();
    for _ in 0..20 {
        while let Some(t) = client.poll_transmit() {
            match t.dest {
                Destination::Base => {
                    let f = eth(&build_udp_ip(addr(CLIENT), addr(SERVER), &t.bytes, 64));
                    core.handle_frame(now, Direction::FromClient, &f, FrameMeta::default());
                }
                Destination::Sidekick(_) => {
                    core.handle_sidekick(now, addr(CLIENT_SK), &t.bytes);
                }
            }
        }
        core.handle_timeout(now);
        while let Some(a) = core.poll_transmit() {
            match a {
                Transmit::Sidekick { bytes, .. } => {
                    let _ = client.handle_datagram(now, addr(PROXY), &bytes);
                }
                Transmit::Inject { frame, .. } => {
                    if let Ok(p) = parse_frame(&frame, LinkType::Ethernet) {
                        let _ = client.handle_base_datagram(now, p.payload(&frame));
                    }
                }
            }
        }
        while client.poll_event().is_some() {}
    }
    assert_eq!(core.flows().assisted_len(), 1, "no session established");
    for i in 0..200u32 {
        let mut p = vec![0x41u8; 1200];
        p.extend_from_slice(&i.to_le_bytes());
        let (src, dst, dir) = if i % 2 == 0 {
            (SERVER, CLIENT, Direction::ToClient)
        } else {
            (CLIENT, SERVER, Direction::FromClient)
        };
        let f = eth(&build_udp_ip(addr(src), addr(dst), &p, 64));
        core.handle_frame(now, dir, &f, FrameMeta::default());
    }
    for ahead in [
        Duration::ZERO,
        Duration::from_secs(1),
        Duration::from_secs(cfg.session_idle_timeout_s + 1),
        Duration::from_secs(cfg.idle_timeout_s + 1),
        Duration::from_secs(30 * 86_400),
    ] {
        let t = now + ahead;
        let _ = core.poll_timeout();
        core.handle_timeout(t);
        while core.poll_transmit().is_some() {}
    }
    let _ = core.snapshot().render_prometheus().unwrap();
}

fn toml_for(mode_bridge: bool, picks: &[(usize, Option<usize>)]) -> (String, Vec<(String, u64)>) {
    let keys = key_names();
    let mut text = String::from("sidekick_advertise = \"10.0.0.1:7788\"\n");
    if mode_bridge {
        text.push_str("mode = \"bridge\"\nclient_interface = \"a0\"\nserver_interface = \"b0\"\n");
    } else {
        text.push_str("interface = \"a0\"\n");
    }
    let mut chosen = Vec::new();
    for &(k, pick) in picks {
        let (name, lo, hi) = keys[k];
        if let Some(i) = pick {
            let c = candidates(lo, hi);
            let v = c[i % c.len()];
            let _ = writeln!(text, "{name} = {v}");
            chosen.push((name.to_string(), v));
        }
    }
    (text, chosen)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Any mix of extreme values: refused or run, never a panic; a value outside its range is
    /// always refused, and the refusal names a key that is out of range.
    #[test]
    fn extreme_values_are_refused_or_run(
        bridge in any::<bool>(),
        picks in proptest::collection::vec(proptest::option::weighted(0.4, 0usize..8), 18),
    ) {
        let picks: Vec<(usize, Option<usize>)> = picks.into_iter().enumerate().collect();
        let (text, chosen) = toml_for(bridge, &picks);
        let ranges = key_names();
        let outside: Vec<&str> = chosen
            .iter()
            .filter(|(k, v)| ranges.iter().any(|(n, lo, hi)| n == k && !(lo..=hi).contains(&v)))
            .map(|(k, _)| k.as_str())
            .collect();
        let Ok(cfg) = Config::from_toml(&text) else {
            return Ok(()); // refused at parse (an integer too large for its field)
        };
        if let Err(e) = cfg.validate() {
            let msg = e.to_string();
            prop_assert!(
                outside.is_empty() || outside.iter().any(|k| msg.contains(&format!("`{k}`"))),
                "{msg} names none of {outside:?}"
            );
            return Ok(());
        }
        prop_assert!(outside.is_empty(), "accepted out-of-range {outside:?}:\n{text}");
        prop_assert_eq!(cfg.mode == Mode::Bridge, bridge);
        run(&cfg);
    }
}

/// Each key alone at each end of its range runs; one past either end is refused by name.
#[test]
fn every_key_at_both_ends_of_its_range() {
    for (name, lo, hi) in key_names() {
        for v in [lo, hi] {
            let text = format!(
                "interface = \"a0\"\nsidekick_advertise = \"10.0.0.1:7788\"\n{name} = {v}\n"
            );
            let cfg = Config::from_toml(&text).unwrap();
            match cfg.validate() {
                Ok(()) => run(&cfg),
                // A key whose end conflicts with another key's default (max_sessions > max_flows,
                // a ring over 1 GiB) is refused by the cross-check, which names both.
                Err(e) => assert!(e.to_string().contains(name), "{name} = {v}: {e}"),
            }
        }
        for v in [lo.checked_sub(1), Some(hi + 1)].into_iter().flatten() {
            let text = format!(
                "interface = \"a0\"\nsidekick_advertise = \"10.0.0.1:7788\"\n{name} = {v}\n"
            );
            let Ok(cfg) = Config::from_toml(&text) else {
                continue; // does not fit the field: refused at parse
            };
            let e = cfg.validate().expect_err(&format!("{name} = {v} accepted"));
            assert!(e.to_string().contains(&format!("`{name}`")), "{e}");
        }
    }
}

/// `sidekick-proxy --check-config FILE`: an out-of-range value is refused with the key's name
/// and a non-zero exit; the example configuration passes.
#[test]
fn check_config_refuses_out_of_range_values_by_name() {
    let bin = env!("CARGO_BIN_EXE_sidekick-proxy");
    let dir = std::env::temp_dir().join(format!("sidekick-check-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "interface = \"wlan0\"\nsidekick_advertise = \"10.0.0.1:7788\"\nring_blocks = 4294967295\n",
    )
    .unwrap();
    let out = Command::new(bin)
        .arg("--check-config")
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("`ring_blocks` = 4294967295 is outside its range 1..=65536"),
        "{err}"
    );
    let out = Command::new(bin)
        .args([
            "--check-config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/proxy.example.toml"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Flags are checked the same way.
    let out = Command::new(bin)
        .args(["--interface", "wlan0", "--sidekick-listen", "10.0.0.1:7788"])
        .args([
            "--session-idle-timeout-s",
            "18446744073709551615",
            "--check-config",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("`session_idle_timeout_s`"));
    let _ = std::fs::remove_dir_all(&dir);
}
