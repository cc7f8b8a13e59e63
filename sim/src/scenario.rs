//! The lab's scenario files, read with the lab's own parser ([`sidekick_lab::scenario`]), and the
//! check that the simulator models every key a scenario sets: a key it does not model is an error
//! naming the key, never silently ignored. What the simulator cannot host at all (another QUIC
//! stack) makes the variants skipped, with the reason, as the lab skips a missing binary.

use sidekick_examples::transfer::sidekick::SidekickParams;
use sidekick_lab::scenario::{Scenario, ScenarioError, Variant};

use crate::proxy_node::{self, ProxyArgError};
use crate::trial::TrialSetup;

/// Errors of scenario translation.
#[derive(Debug, thiserror::Error)]
pub enum SimScenarioError {
    /// The lab's parser refused the scenario.
    #[error(transparent)]
    Lab(#[from] ScenarioError),
    /// A key the simulator does not model.
    #[error("scenario key `{key}` is not modelled by the simulator{why}")]
    NotModelled {
        /// The key, as a dotted path (`app.http3`, `variants.sidekick.kill_proxy_at`).
        key: String,
        /// Why, if there is more to say (starts with `: `).
        why: String,
    },
    /// A bad client argument.
    #[error("variant `{variant}`: client argument `{arg}`: {why}")]
    ClientArg {
        /// The variant.
        variant: String,
        /// The argument.
        arg: String,
        /// What is wrong.
        why: String,
    },
    /// A bad proxy command line.
    #[error("variant `{variant}`: {source}")]
    Proxy {
        /// The variant.
        variant: String,
        /// The problem.
        source: ProxyArgError,
    },
}

fn not_modelled(key: impl Into<String>, why: &str) -> SimScenarioError {
    SimScenarioError::NotModelled {
        key: key.into(),
        why: if why.is_empty() {
            String::new()
        } else {
            format!(": {why}")
        },
    }
}

/// Top-level keys and what the simulator does with them.
const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "clients",
    "trials",
    "metrics",
    "wan",
    "lan",
    "app",
    "variants",
    "topology",
    // The lab's scenarios document the sidekick parameters the variants' command lines set in a
    // `[sidekick]` table that the lab itself never reads ("informative for the proxy/SDK"); the
    // simulator reads the command lines, like the lab.
    "sidekick",
];

const APP_KEYS: &[&str] = &[
    "kind",
    "stack",
    "client_stack",
    "direction",
    "bytes",
    "duration_s",
    "timeout_s",
    "http3",
    "client_args",
    "rekey_after_ms",
];

/// The media applications the simulator runs ([`crate::media`]).
const MEDIA_KINDS: &[&str] = &["media", "media-fec"];

/// The UDP applications: no QUIC stack, a routing ap, `duration_s` not `bytes`.
fn udp_app(kind: &str) -> bool {
    MEDIA_KINDS.contains(&kind) || matches!(kind, "webrtc" | "multicast")
}

const VARIANT_KEYS: &[&str] = &["name", "proxy", "set", "client_args", "kill_proxy_at"];

/// Checks every key of the (overridden) scenario table against what the simulator models.
pub fn check_keys(scn: &Scenario) -> Result<(), SimScenarioError> {
    let t = &scn.table;
    for k in t.keys() {
        if !TOP_KEYS.contains(&k.as_str()) {
            return Err(not_modelled(k.clone(), "unknown key"));
        }
    }
    if let Some(topo) = t.get("topology").and_then(toml::Value::as_table) {
        for k in topo.keys() {
            // `ap` itself (router or bridge) is checked by the lab's parser.
            if k != "ap" {
                return Err(not_modelled(format!("topology.{k}"), "unknown key"));
            }
        }
    }
    if scn.clients != 1 {
        return Err(not_modelled("clients", "one client per trial"));
    }
    if let Some(app) = t.get("app").and_then(toml::Value::as_table) {
        for k in app.keys() {
            if !APP_KEYS.contains(&k.as_str()) {
                return Err(not_modelled(format!("app.{k}"), "unknown key"));
            }
        }
    }
    let app = &scn.app;
    if !udp_app(&app.kind) && !matches!(app.kind.as_str(), "transfer" | "rtc") {
        return Err(not_modelled(
            "app.kind",
            &format!(
                "`{}` (the simulator runs `transfer`, `media`, `media-fec`, `multicast`, `rtc` \
                 and `webrtc`)",
                app.kind
            ),
        ));
    }
    if udp_app(&app.kind) {
        if app.bytes != 0 {
            return Err(not_modelled("app.bytes", "media streams last `duration_s`"));
        }
        if scn.ap_bridge {
            return Err(not_modelled(
                "topology.ap",
                "media runs with a routing ap (the proxy sniffing lan0)",
            ));
        }
    }
    if app.http3 {
        return Err(not_modelled(
            "app.http3",
            "HTTP/3 is not modelled (raw stream only)",
        ));
    }
    if app
        .client_stack
        .as_deref()
        .is_some_and(|c| app.kind != "rtc" || c != app.stack)
    {
        return Err(not_modelled(
            "app.client_stack",
            "the simulator's RTC client is the server's stack",
        ));
    }
    if app.kind == "rtc" && app.bytes != 0 {
        return Err(not_modelled("app.bytes", "RTC runs last `duration_s`"));
    }
    if let Some(vs) = t.get("variants").and_then(toml::Value::as_array) {
        for v in vs {
            let name = v.get("name").and_then(toml::Value::as_str).unwrap_or("?");
            for k in v.as_table().into_iter().flat_map(toml::Table::keys) {
                if !VARIANT_KEYS.contains(&k.as_str()) {
                    return Err(not_modelled(format!("variants.{name}.{k}"), "unknown key"));
                }
            }
        }
    }
    for v in &scn.variants {
        if v.kill_proxy_at.is_some() {
            return Err(not_modelled(
                format!("variants.{}.kill_proxy_at", v.name),
                "killing the proxy mid-transfer is not modelled",
            ));
        }
    }
    Ok(())
}

/// Why a variant cannot run in the simulator at all, if so (reported as skipped).
pub fn skip_reason(scn: &Scenario) -> Option<String> {
    if scn.app.direction == "both" {
        return Some(
            "an upload beside a download on one connection (app.direction = \"both\") runs in \
             the lab only"
                .into(),
        );
    }
    if scn.app.kind == "webrtc" {
        // A real browser is a separate binary; str0m runs here.
        let browser = |args: &[String]| {
            args.windows(2)
                .any(|w| w[0] == "--far-peer" && w[1] != "str0m")
        };
        return (browser(&scn.app.client_args)
            || scn.variants.iter().any(|v| browser(&v.client_args)))
        .then(|| {
            "the far peer is a real browser (headless Chromium), which runs in the lab only".into()
        });
    }
    if udp_app(&scn.app.kind) {
        // UDP applications: no QUIC stack.
        return None;
    }
    match scn.app.stack.as_str() {
        "quinn" => None,
        "quiche" => Some(
            "quiche reads the clock itself (Instant::now inside the connection), so it cannot \
             run in virtual time"
                .into(),
        ),
        "tcp" => Some("kernel TCP (the TCP baselines) runs in the lab only".into()),
        other => Some(format!("stack `{other}` runs as a separate binary")),
    }
}

/// Parses the client's arguments (`app.client_args` then the variant's `client_args`): the
/// `--sidekick` flags of `sidekick-transfer client`.
pub fn client_params(
    variant: &str,
    args: &[String],
) -> Result<Option<SidekickParams>, SimScenarioError> {
    let bad = |arg: &str, why: &str| SimScenarioError::ClientArg {
        variant: variant.into(),
        arg: arg.into(),
        why: why.into(),
    };
    let mut on = false;
    let mut p = SidekickParams::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--sidekick" {
            on = true;
            continue;
        }
        if a == "--sidekick-selective" {
            p.selective = true;
            continue;
        }
        let mut num = |what: &str| -> Result<u32, SimScenarioError> {
            it.next()
                .and_then(|v| v.parse::<u32>().ok())
                .ok_or_else(|| bad(a, &format!("expected {what}")))
        };
        match a.as_str() {
            "--sidekick-quack-interval-ms" => p.quack_interval_ms = Some(num("milliseconds")?),
            "--sidekick-quack-threshold" => p.quack_threshold = Some(num("a threshold")?),
            "--sidekick-quack-every-packets" => p.quack_packets = num("a packet count")?,
            "--sidekick-ack-reduction" => p.ack_reduction = Some(num("a packet count")?),
            "--sidekick-eack-interval-ms" => p.eack_interval_ms = num("milliseconds")?,
            "--sidekick-eack-packets" => p.eack_packets = num("a packet count")?,
            "--sidekick-eack-symbols" => p.eack_symbols = num("a symbol count")?,
            "--sidekick-cache-bytes" => p.cache_bytes = num("bytes")?,
            "--sidekick-reorder-ms" => p.reorder_ms = num("milliseconds")?,
            "--sidekick-eack-inflight" => p.eack_inflight = num("a packet count")?,
            "--sidekick-discovery-retry-ms" => p.discovery_retry_ms = num("milliseconds")?,
            "--sidekick-discovery-attempts" => p.discovery_attempts = num("a count")?,
            _ => return Err(bad(a, "not modelled by the simulator")),
        }
    }
    Ok(on.then_some(p))
}

/// The trial setup of variant `v` (its overrides already applied in `vs`), without seeds.
pub fn setup_for(vs: &Scenario, v: &Variant) -> Result<TrialSetup, SimScenarioError> {
    let mut args = vs.app.client_args.clone();
    args.extend(v.client_args.iter().cloned());
    let media = if MEDIA_KINDS.contains(&vs.app.kind.as_str()) {
        let d = std::time::Duration::try_from_secs_f64(vs.app.duration_s)
            .map_err(|e| not_modelled("app.duration_s", &e.to_string()))?;
        let m = crate::media::parse_client_args(vs.app.kind == "media", d, &args).map_err(|e| {
            SimScenarioError::ClientArg {
                variant: v.name.clone(),
                arg: e.arg,
                why: e.why,
            }
        })?;
        Some(m)
    } else {
        None
    };
    let webrtc = if vs.app.kind == "webrtc" {
        let d = std::time::Duration::try_from_secs_f64(vs.app.duration_s)
            .map_err(|e| not_modelled("app.duration_s", &e.to_string()))?;
        let rekey = (vs.app.rekey_after_ms > 0)
            .then(|| std::time::Duration::from_millis(vs.app.rekey_after_ms));
        let w = crate::webrtc::parse_client_args(vs.app.direction == "upload", d, rekey, &args)
            .map_err(|e| SimScenarioError::ClientArg {
                variant: v.name.clone(),
                arg: e.arg,
                why: e.why,
            })?;
        Some(w)
    } else {
        None
    };
    let multicast = if vs.app.kind == "multicast" {
        let d = std::time::Duration::try_from_secs_f64(vs.app.duration_s)
            .map_err(|e| not_modelled("app.duration_s", &e.to_string()))?;
        let m = crate::multicast::parse_client_args(d, &args).map_err(|e| {
            SimScenarioError::ClientArg {
                variant: v.name.clone(),
                arg: args.join(" "),
                why: e.0,
            }
        })?;
        Some(m)
    } else {
        None
    };
    let rtc = if vs.app.kind == "rtc" {
        if let Some(a) = args.first() {
            return Err(SimScenarioError::ClientArg {
                variant: v.name.clone(),
                arg: a.clone(),
                why: "sidekick-rtc client flags are not modelled by the simulator".into(),
            });
        }
        Some(
            std::time::Duration::try_from_secs_f64(vs.app.duration_s)
                .map_err(|e| not_modelled("app.duration_s", &e.to_string()))?,
        )
    } else {
        None
    };
    // `--ack-frequency N` is a transport option of the bulk transfer, with or without the SDK.
    let mut ack_frequency = None;
    if let Some(i) = args.iter().position(|a| a == "--ack-frequency") {
        let n = args
            .get(i + 1)
            .and_then(|v| v.parse::<u32>().ok())
            .ok_or_else(|| SimScenarioError::ClientArg {
                variant: v.name.clone(),
                arg: "--ack-frequency".into(),
                why: "expected a packet count".into(),
            })?;
        ack_frequency = Some(n);
        args.drain(i..i + 2);
    }
    let sidekick = if media.is_some() || rtc.is_some() || webrtc.is_some() || multicast.is_some() {
        None
    } else {
        client_params(&v.name, &args)?
    };
    let proxy = match v.proxy.split_first() {
        None => None,
        Some((prog, rest)) => {
            if prog != "sidekick-proxy" {
                return Err(not_modelled(
                    format!("variants.{}.proxy", v.name),
                    &format!("`{prog}` (the simulator runs the sidekick-proxy core)"),
                ));
            }
            let cfg = proxy_node::parse_args(rest).map_err(|e| SimScenarioError::Proxy {
                variant: v.name.clone(),
                source: e,
            })?;
            let bridging = cfg.mode == sidekick_proxy::config::Mode::Bridge;
            if bridging != vs.ap_bridge {
                return Err(not_modelled(
                    format!("variants.{}.proxy", v.name),
                    "a bridging proxy needs topology.ap = \"bridge\" and a sniffing one a \
                     routing ap",
                ));
            }
            Some(cfg)
        }
    };
    let direction = if vs.app.direction == "upload" {
        sidekick_examples::transfer::TransferDirection::Upload
    } else {
        sidekick_examples::transfer::TransferDirection::Download
    };
    Ok(TrialSetup {
        direction,
        ap_bridge: vs.ap_bridge,
        wan: vs.wan,
        lan: vs.lan,
        bytes: vs.app.bytes,
        timeout: std::time::Duration::from_secs_f64(vs.app.timeout_s + 10.0),
        media,
        webrtc,
        rtc,
        multicast,
        proxy,
        sidekick,
        ack_frequency,
        link_seed: 0,
        stack_seed: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = r#"
name = "t"
[wan]
delay = "25ms"
[lan]
delay = "1ms"
[app]
kind = "transfer"
direction = "upload"
bytes = 1000
[[variants]]
name = "e2e"
[[variants]]
name = "sidekick"
proxy = ["sidekick-proxy", "--mode", "sniff", "--interface", "lan0", "--sidekick-listen", "10.0.2.1:7788"]
client_args = ["--sidekick", "--sidekick-quack-threshold", "12"]
"#;

    #[test]
    fn modelled_scenario_translates() {
        let s = Scenario::parse(S, &[]).unwrap();
        check_keys(&s).unwrap();
        assert_eq!(skip_reason(&s), None);
        let v = &s.variants[1];
        let st = setup_for(&s.for_variant(v).unwrap(), v).unwrap();
        assert!(st.proxy.is_some());
        assert_eq!(st.sidekick.unwrap().quack_threshold, Some(12));
        let e2e = setup_for(&s, &s.variants[0]).unwrap();
        assert!(e2e.proxy.is_none() && e2e.sidekick.is_none());
    }

    #[test]
    fn unmodelled_keys_are_named() {
        for (set, key) in [
            ("app.http3=true", "app.http3"),
            ("app.frobs=3", "app.frobs"),
            ("colour=blue", "colour"),
            ("topology.wires=3", "topology.wires"),
        ] {
            let s = Scenario::parse(S, &[set.into()]).unwrap();
            let e = check_keys(&s).unwrap_err().to_string();
            assert!(e.contains(&format!("`{key}`")), "{set}: {e}");
        }
        let s = Scenario::parse(S, &["app.stack=quiche".into()]).unwrap();
        assert!(skip_reason(&s).unwrap().contains("clock"));
        // Not read as a download: skipped.
        let s = Scenario::parse(S, &["app.direction=both".into()]).unwrap();
        assert!(skip_reason(&s).unwrap().contains("both"));
        let e = client_params("v", &["--sidekick-wobble".into()]).unwrap_err();
        assert!(e.to_string().contains("--sidekick-wobble"), "{e}");
    }
}
