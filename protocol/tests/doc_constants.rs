//! The constants table of `docs/protocol.md` §10 matches the code: every row names a constant or
//! default of the crate, and its value is the one the code uses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use sidekick_protocol::messages::{
    CAP_PACKRAT, CAP_ROBIN, MAX_ERROR_DETAIL, MAX_OFFSET, MAX_SYMBOLS, MAX_THRESHOLD,
};
use sidekick_protocol::{ClientConfig, ProxyPolicy, SessionConfig, discovery, frame, keys, replay};

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

fn code_values() -> BTreeMap<String, String> {
    let c = ClientConfig::new(SessionConfig::default());
    let p = ProxyPolicy::new("192.0.2.1:7000".parse().unwrap());
    let hex = |v: u8| format!("{v:#04x}");
    let rows: Vec<(&str, String)> = vec![
        ("DISCOVERY_LEN", discovery::DISCOVERY_LEN.to_string()),
        ("FIRST_BYTE_MASK", hex(discovery::FIRST_BYTE_MASK)),
        ("FIRST_BYTE_VALUE", hex(discovery::FIRST_BYTE_VALUE)),
        ("REPLY_TAG_LEN", discovery::REPLY_TAG_LEN.to_string()),
        ("SESSION_ID_LEN", keys::SESSION_ID_LEN.to_string()),
        ("NONCE_LEN", keys::NONCE_LEN.to_string()),
        ("PUBLIC_KEY_LEN", keys::PUBLIC_KEY_LEN.to_string()),
        ("SESSION_KEY_LEN", keys::SESSION_KEY_LEN.to_string()),
        ("PROTOCOL_VERSION", frame::PROTOCOL_VERSION.to_string()),
        ("HEADER_LEN", frame::HEADER_LEN.to_string()),
        ("MAX_DATAGRAM", frame::MAX_DATAGRAM.to_string()),
        ("FLAG_TAG32", hex(frame::FLAG_TAG32)),
        ("FLAG_FROM_PROXY", hex(frame::FLAG_FROM_PROXY)),
        ("PADDING_FIELD", frame::PADDING_FIELD.to_string()),
        ("MIN_INIT_DATAGRAM", frame::MIN_INIT_DATAGRAM.to_string()),
        ("REPLAY_WINDOW", replay::REPLAY_WINDOW.to_string()),
        ("CAP_ROBIN", CAP_ROBIN.to_string()),
        ("CAP_PACKRAT", CAP_PACKRAT.to_string()),
        ("MAX_THRESHOLD", MAX_THRESHOLD.to_string()),
        ("MAX_SYMBOLS", MAX_SYMBOLS.to_string()),
        ("MAX_OFFSET", MAX_OFFSET.to_string()),
        ("MAX_ERROR_DETAIL", MAX_ERROR_DETAIL.to_string()),
        ("ClientConfig.discovery_retry", ms(c.discovery_retry)),
        (
            "ClientConfig.discovery_attempts",
            c.discovery_attempts.to_string(),
        ),
        ("ClientConfig.init_retry", ms(c.init_retry)),
        ("ClientConfig.init_attempts", c.init_attempts.to_string()),
        ("ClientConfig.control_retry", ms(c.control_retry)),
        (
            "ClientConfig.control_attempts",
            c.control_attempts.to_string(),
        ),
        ("ClientConfig.max_backoff", ms(c.max_backoff)),
        ("ClientConfig.quota_window", c.quota_window.to_string()),
        ("ClientConfig.refresh_interval", ms(c.refresh_interval)),
        ("ClientConfig.idle_timeout", ms(c.idle_timeout)),
        ("ClientConfig.outbox_cap", c.outbox_cap.to_string()),
        ("ProxyPolicy.max_threshold", p.max_threshold.to_string()),
        (
            "ProxyPolicy.min_quack_interval_ms",
            p.min_quack_interval_ms.to_string(),
        ),
        ("ProxyPolicy.max_symbols", p.max_symbols.to_string()),
        ("ProxyPolicy.max_cache_bytes", p.max_cache_bytes.to_string()),
        ("ProxyPolicy.max_sessions", p.max_sessions.to_string()),
        ("ProxyPolicy.max_half_open", p.max_half_open.to_string()),
        ("ProxyPolicy.half_open_timeout", ms(p.half_open_timeout)),
        ("ProxyPolicy.idle_timeout", ms(p.idle_timeout)),
        (
            "ProxyPolicy.amplification_factor",
            p.amplification_factor.to_string(),
        ),
        ("ProxyPolicy.discovery_rate", p.discovery_rate.to_string()),
        ("ProxyPolicy.discovery_burst", p.discovery_burst.to_string()),
        ("ProxyPolicy.reset_retry", ms(p.reset_retry)),
        ("ProxyPolicy.reset_attempts", p.reset_attempts.to_string()),
        ("ProxyPolicy.outbox_cap", p.outbox_cap.to_string()),
        ("ProxyPolicy.max_events", p.max_events.to_string()),
        (
            "ProxyPolicy.max_sessions_per_station",
            p.max_sessions_per_station.to_string(),
        ),
        (
            "ProxyPolicy.max_half_open_per_station",
            p.max_half_open_per_station.to_string(),
        ),
        (
            "ProxyPolicy.station_discovery_rate",
            p.station_discovery_rate.to_string(),
        ),
        (
            "ProxyPolicy.station_discovery_burst",
            p.station_discovery_burst.to_string(),
        ),
        ("ProxyPolicy.max_stations", p.max_stations.to_string()),
        ("ProxyPolicy.control_rate", p.control_rate.to_string()),
        ("ProxyPolicy.control_burst", p.control_burst.to_string()),
    ];
    rows.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

fn doc_values() -> BTreeMap<String, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md");
    let doc = std::fs::read_to_string(path).expect("docs/protocol.md");
    let section = doc
        .split("## 10. Constants")
        .nth(1)
        .expect("constants section")
        .split("\n## ")
        .next()
        .unwrap();
    section
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            let [name, value] = cells.as_slice() else {
                return None;
            };
            let name = name.strip_prefix('`')?.strip_suffix('`')?;
            Some((name.to_owned(), (*value).to_owned()))
        })
        .collect()
}

#[test]
fn constants_table_matches_the_code() {
    let doc = doc_values();
    let code = code_values();
    assert_eq!(doc.len(), code.len(), "rows: doc {:?}", doc.keys());
    for (name, want) in &code {
        assert_eq!(doc.get(name), Some(want), "{name}");
    }
}
