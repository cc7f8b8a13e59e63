//! Scenario files (TOML) and `--set key=value` overrides.
//!
//! ```toml
//! name = "robin-2-upload"
//! trials = 10
//! metrics = ["goodput_mbps"]
//! [wan]                      # server — ap
//! delay = "25ms"
//! rate = "10Mbit"
//! [lan]                      # ap — client(s)
//! delay = "1ms"
//! rate = "100Mbit"
//! loss = "1%"
//! [app]
//! kind = "transfer"          # sidekick-transfer (quinn or quiche)
//! stack = "quinn"
//! direction = "upload"
//! bytes = 10000000
//! [[variants]]
//! name = "e2e"
//! ```
//!
//! A variant may carry its own overrides (`set = ["lan.loss=0%"]`) and a proxy command run in
//! the ap namespace (`proxy = ["sidekick-proxy", "..."]`, the binary looked up next to the lab's,
//! started and ready before the trial's client and stopped after it), extra client arguments
//! (`client_args = ["--sidekick"]`) and `kill_proxy_at = 0.3` (SIGKILL the proxy at 30 % of the
//! transfer).

use crate::spec::{LinkSpec, SpecError};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Scenario errors.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// TOML syntax.
    #[error("scenario TOML: {0}")]
    Toml(#[from] toml::de::Error),
    /// Reading the file.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A bad link property.
    #[error("link `{link}`: {source}")]
    Link {
        /// `wan` or `lan`.
        link: String,
        /// The error.
        source: SpecError,
    },
    /// A malformed `--set`.
    #[error("--set `{0}`: expected key.path=value")]
    BadSet(String),
    /// A semantic error.
    #[error("{0}")]
    Invalid(String),
}

/// The application of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppSpec {
    /// `transfer` (bulk QUIC transfer with sidekick-transfer), `media` / `media-fec` (Robin and
    /// Packrat media), `rtc` (PEMI RTC frames with sidekick-rtc) or `webrtc` (a WebRTC video call
    /// on str0m with sidekick-webrtc; `direction` says who sends).
    pub kind: String,
    /// QUIC stack of the server: `transfer` takes `quinn`, `quiche`, `quic-go` and `ngtcp2`
    /// (HTTP/3 only; see [`crate::apps::TRANSFER_STACKS`]), or `tcp` (kernel TCP with CUBIC, the
    /// papers' baseline; client and server both `tcp`, raw protocol); `rtc` takes `quinn`, `quiche` and
    /// `quic-go` (the quic-go server, examples/quic-go, measured by the `client_stack` client).
    #[serde(default = "default_stack")]
    pub stack: String,
    /// `rtc`: the stack of the measuring `sidekick-rtc` client (`quinn` or `quiche`; its ACKs
    /// are the replies PEMI matches) when it differs from the server's; unset: `stack`, and
    /// quinn for `quic-go`. `transfer`: the client's stack (unset: `stack`): `quinn`, `quiche`,
    /// `quic-go`, `ngtcp2`, or `curl` (libcurl, `sidekick-curl`, bindings/curl, over HTTP/3).
    /// Pairs that cannot talk are refused when the scenario loads
    /// ([`crate::apps::transfer_pair`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_stack: Option<String>,
    /// `download` (server → client), `upload`, or `both` (`transfer` on quinn's raw stream: an
    /// upload and a download of `bytes` each at once on one connection,
    /// `sidekick-transfer client --both`).
    #[serde(default = "default_direction")]
    pub direction: String,
    /// Bytes to transfer.
    #[serde(default)]
    pub bytes: u64,
    /// Stream length in seconds for the media kinds (`media`, `media-fec`, `rtc`, `webrtc`:
    /// their client's `--duration`); unused by `transfer`.
    #[serde(default = "default_duration")]
    pub duration_s: f64,
    /// Per-trial timeout in seconds.
    #[serde(default = "default_timeout")]
    pub timeout_s: f64,
    /// `transfer`: speak HTTP/3 (`--http3` on both ends: GET/POST over h3, Sidekick (NSDI '24) §6.2 and
    /// Packrat (CoNEXT '26) §7.2.1 ran HTTP/3) instead of the raw stream protocol.
    #[serde(default)]
    pub http3: bool,
    /// Extra client arguments.
    #[serde(default)]
    pub client_args: Vec<String>,
    /// Extra server arguments (e.g. `--set 'app.server_args=["--trace","rx.csv"]'` for the
    /// WebRTC receiver's per-packet trace on an upload).
    #[serde(default)]
    pub server_args: Vec<String>,
    /// `transfer`: pad the server's certificate to at least this many bytes
    /// (`sidekick-transfer server --cert-bytes`; ReACKed QUICer (IMC '24) §3 used 5113 B to hit
    /// the anti-amplification limit); 0: unpadded.
    #[serde(default)]
    pub cert_bytes: u64,
    /// `transfer`: the server holds each connection's first Initial this long before answering
    /// (`--hello-delay-ms`, the paper's Δt before the ServerHello); 0: none.
    #[serde(default)]
    pub hello_delay_ms: u64,
    /// `transfer`: client runs before the measured one in each trial, through the same proxy —
    /// a client coming back to the access point, so what the proxy learns per client carries
    /// over (the handshake rescue's client pace). Each must succeed; their reports are
    /// discarded. The interface counters and the proxy's counters (`proxy_*_total`) are of the
    /// measured run alone; 0: none.
    #[serde(default)]
    pub prior_connections: u32,
    /// `webrtc`: change SRTP keys this long after the call started (`sidekick-webrtc client
    /// --rekey-after-ms`: a new DTLS handshake on the same sockets); 0: never.
    #[serde(default)]
    pub rekey_after_ms: u64,
}

fn default_stack() -> String {
    "quinn".into()
}
fn default_direction() -> String {
    "download".into()
}
fn default_duration() -> f64 {
    30.0
}
fn default_timeout() -> f64 {
    120.0
}

/// One variant to compare.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    /// Name (`e2e`, `sidekick`, `pemi`, ...).
    pub name: String,
    /// Command for the ap namespace (proxy), if any.
    #[serde(default)]
    pub proxy: Vec<String>,
    /// Overrides applied for this variant only.
    #[serde(default)]
    pub set: Vec<String>,
    /// Extra client arguments for this variant only, appended after `app.client_args`
    /// (e.g. `["--sidekick"]`: the client runs the sidekick SDK). Nothing is added implicitly:
    /// a variant named `sidekick` without it runs a plain client next to the proxy.
    #[serde(default)]
    pub client_args: Vec<String>,
    /// Kill the proxy with SIGKILL once the data sender has sent this fraction of `app.bytes`
    /// (e.g. `0.3`), to show that the transfer completes without it (fail-open).
    #[serde(default)]
    pub kill_proxy_at: Option<f64>,
}

/// A parsed scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// Human description (with the paper reference).
    pub description: String,
    /// Clients (each behind its own lan link).
    pub clients: usize,
    /// Trials per variant.
    pub trials: usize,
    /// Metrics to summarise and plot first.
    pub metrics: Vec<String>,
    /// server—ap link.
    pub wan: LinkSpec,
    /// ap—client link.
    pub lan: LinkSpec,
    /// `[topology] ap = "bridge"`: the ap forwards at layer 2 (for bridging proxies such as
    /// PEMI's), see [`crate::topo::ApMode`].
    pub ap_bridge: bool,
    /// The application.
    pub app: AppSpec,
    /// Variants, run in alternation.
    pub variants: Vec<Variant>,
    /// The table after overrides (kept for variant overrides and the results file).
    pub table: toml::Table,
}

/// Parses the value of a `--set`: integer, float, boolean, else string.
fn parse_value(s: &str) -> toml::Value {
    // An array in TOML's own syntax (`app.client_args=["--receivers", "8"]`).
    if s.starts_with('[')
        && let Ok(mut t) = toml::from_str::<toml::Table>(&format!("v = {s}"))
        && let Some(v @ toml::Value::Array(_)) = t.remove("v")
    {
        return v;
    }
    if let Ok(i) = s.parse::<i64>() {
        toml::Value::Integer(i)
    } else if let Ok(f) = s.parse::<f64>() {
        toml::Value::Float(f)
    } else if let Ok(b) = s.parse::<bool>() {
        toml::Value::Boolean(b)
    } else {
        toml::Value::String(s.to_string())
    }
}

/// Applies one `key.path=value` override to a table, creating intermediate tables. The value
/// is an integer, a float, a boolean, an array in TOML syntax, or else a string.
///
/// ```
/// let mut t = toml::Table::new();
/// sidekick_lab::scenario::apply_set(&mut t, "lan.loss=2.5%").unwrap();
/// assert_eq!(t["lan"]["loss"].as_str(), Some("2.5%"));
/// sidekick_lab::scenario::apply_set(&mut t, r#"app.client_args=["--receivers", "8"]"#).unwrap();
/// assert_eq!(t["app"]["client_args"][1].as_str(), Some("8"));
/// ```
pub fn apply_set(table: &mut toml::Table, kv: &str) -> Result<(), ScenarioError> {
    let (key, value) = kv
        .split_once('=')
        .ok_or_else(|| ScenarioError::BadSet(kv.into()))?;
    let parts: Vec<&str> = key.trim().split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(ScenarioError::BadSet(kv.into()));
    }
    let mut t = table;
    for p in &parts[..parts.len() - 1] {
        let entry = t
            .entry((*p).to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = entry
            .as_table_mut()
            .ok_or_else(|| ScenarioError::BadSet(kv.into()))?;
    }
    t.insert(
        parts[parts.len() - 1].to_string(),
        parse_value(value.trim()),
    );
    Ok(())
}

impl Scenario {
    /// Loads a scenario file and applies overrides in order.
    pub fn load(path: &Path, sets: &[String]) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Read {
            path: path.display().to_string(),
            source: e,
        })?;
        Self::parse(&text, sets)
    }

    /// Parses scenario text and applies overrides.
    pub fn parse(text: &str, sets: &[String]) -> Result<Self, ScenarioError> {
        let mut table: toml::Table = toml::from_str(text)?;
        for s in sets {
            apply_set(&mut table, s)?;
        }
        Self::from_table(table)
    }

    /// Builds a scenario from an (overridden) table.
    pub fn from_table(table: toml::Table) -> Result<Self, ScenarioError> {
        let link = |name: &str| -> Result<LinkSpec, ScenarioError> {
            let t = table
                .get(name)
                .and_then(toml::Value::as_table)
                .cloned()
                .unwrap_or_default();
            LinkSpec::from_table(&t).map_err(|e| ScenarioError::Link {
                link: name.into(),
                source: e,
            })
        };
        let get_str = |k: &str| {
            table
                .get(k)
                .and_then(toml::Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let get_usize = |k: &str, d: usize| -> Result<usize, ScenarioError> {
            match table.get(k) {
                None => Ok(d),
                Some(v) => v
                    .as_integer()
                    .and_then(|i| usize::try_from(i).ok())
                    .ok_or_else(|| {
                        ScenarioError::Invalid(format!("`{k}` must be a non-negative integer"))
                    }),
            }
        };
        let app: AppSpec = match table.get("app") {
            Some(v) => v
                .clone()
                .try_into()
                .map_err(|e: toml::de::Error| ScenarioError::Invalid(format!("[app]: {e}")))?,
            None => return Err(ScenarioError::Invalid("missing [app]".into())),
        };
        if !matches!(app.direction.as_str(), "download" | "upload" | "both") {
            return Err(ScenarioError::Invalid(format!(
                "app.direction `{}`: download, upload or both",
                app.direction
            )));
        }
        if app.prior_connections > 0 && app.kind != "transfer" {
            return Err(ScenarioError::Invalid(format!(
                "app.prior_connections needs app.kind = \"transfer\", not {:?}",
                app.kind
            )));
        }
        if app.rekey_after_ms > 0 && app.kind != "webrtc" {
            return Err(ScenarioError::Invalid(format!(
                "app.rekey_after_ms needs app.kind = \"webrtc\", not {:?}",
                app.kind
            )));
        }
        let both_stack = |s: &str| matches!(s, "quinn" | "quiche");
        if app.direction == "both"
            && (app.kind != "transfer"
                || !both_stack(&app.stack)
                || app.client_stack.as_deref().is_some_and(|c| !both_stack(c))
                || app.http3)
        {
            return Err(ScenarioError::Invalid(
                "app.direction = \"both\" (an upload beside a download on one connection) \
                 needs app.kind = \"transfer\", quinn or quiche for app.stack and \
                 app.client_stack, and app.http3 = false"
                    .into(),
            ));
        }
        if app.client_stack.as_deref() == Some(crate::apps::CURL)
            && (app.kind != "transfer" || !app.http3)
        {
            return Err(ScenarioError::Invalid(
                "app.client_stack = \"curl\" runs the transfer client over HTTP/3: needs \
                 app.kind = \"transfer\" and app.http3 = true"
                    .into(),
            ));
        }
        let variants: Vec<Variant> = match table.get("variants") {
            Some(v) => v.clone().try_into().map_err(|e: toml::de::Error| {
                ScenarioError::Invalid(format!("[[variants]]: {e}"))
            })?,
            None => vec![Variant {
                name: "e2e".into(),
                proxy: vec![],
                set: vec![],
                client_args: vec![],
                kill_proxy_at: None,
            }],
        };
        if variants.is_empty() {
            return Err(ScenarioError::Invalid("no variants".into()));
        }
        for v in &variants {
            // A variant may change the application (`set = ["app.stack=tcp", ...]`): its pair
            // is checked as it will run.
            let vapp = if v.set.iter().any(|s| s.trim_start().starts_with("app.")) {
                let mut t = table.clone();
                for s in &v.set {
                    apply_set(&mut t, s)?;
                }
                t.get("app")
                    .cloned()
                    .map(toml::Value::try_into::<AppSpec>)
                    .transpose()
                    .map_err(|e| {
                        ScenarioError::Invalid(format!("variant `{}`: [app]: {e}", v.name))
                    })?
                    .unwrap_or_else(|| app.clone())
            } else {
                app.clone()
            };
            if vapp.kind == "transfer" {
                let args: Vec<String> = vapp
                    .client_args
                    .iter()
                    .chain(&v.client_args)
                    .cloned()
                    .collect();
                crate::apps::transfer_pair(&vapp, &args)
                    .map_err(|e| ScenarioError::Invalid(format!("variant `{}`: {e}", v.name)))?;
            }
            if let Some(f) = v.kill_proxy_at
                && (v.proxy.is_empty() || !(f > 0.0 && f < 1.0))
            {
                return Err(ScenarioError::Invalid(format!(
                    "variant `{}`: kill_proxy_at needs a proxy and a fraction in (0, 1)",
                    v.name
                )));
            }
        }
        let metrics = table
            .get("metrics")
            .and_then(toml::Value::as_array)
            .map_or_else(
                || vec!["goodput_mbps".to_string()],
                |a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                },
            );
        let clients = get_usize("clients", 1)?;
        if clients == 0 {
            return Err(ScenarioError::Invalid("clients must be ≥ 1".into()));
        }
        let ap_bridge = match table
            .get("topology")
            .and_then(|t| t.get("ap"))
            .and_then(toml::Value::as_str)
        {
            None | Some("router") => false,
            Some("bridge") => true,
            Some(other) => {
                return Err(ScenarioError::Invalid(format!(
                    "topology.ap must be \"router\" or \"bridge\", not {other:?}"
                )));
            }
        };
        if ap_bridge && clients != 1 {
            return Err(ScenarioError::Invalid(
                "a bridged ap joins one client link".into(),
            ));
        }
        Ok(Scenario {
            name: get_str("name"),
            description: get_str("description"),
            clients,
            trials: get_usize("trials", 5)?.max(1),
            metrics,
            wan: link("wan")?,
            lan: link("lan")?,
            ap_bridge,
            app,
            variants,
            table,
        })
    }

    /// The scenario as a variant sees it (the variant's overrides applied; `variants` holds
    /// that variant only, since the others' settings need not fit its application).
    pub fn for_variant(&self, v: &Variant) -> Result<Scenario, ScenarioError> {
        let mut t = self.table.clone();
        for s in &v.set {
            apply_set(&mut t, s)?;
        }
        let only = toml::Value::try_from(vec![v.clone()])
            .map_err(|e| ScenarioError::Invalid(format!("variant `{}`: {e}", v.name)))?;
        t.insert("variants".into(), only);
        Self::from_table(t)
    }

    /// Keep only the variants named in `names` (in the scenario's order), e.g. to rerun the two
    /// variants a comparison needs. Unknown names are an error; an empty list keeps them all.
    pub fn keep_variants(&mut self, names: &[String]) -> Result<(), ScenarioError> {
        if names.is_empty() {
            return Ok(());
        }
        if let Some(unknown) = names
            .iter()
            .find(|n| !self.variants.iter().any(|v| &v.name == *n))
        {
            let known: Vec<&str> = self.variants.iter().map(|v| v.name.as_str()).collect();
            return Err(ScenarioError::Invalid(format!(
                "no variant {unknown:?} (the scenario has {})",
                known.join(", ")
            )));
        }
        self.variants.retain(|v| names.contains(&v.name));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const S: &str = r#"
name = "t"
trials = 3
[wan]
delay = "25ms"
rate = "10Mbit"
[lan]
delay = "1ms"
loss = "1%"
[app]
kind = "transfer"
direction = "upload"
bytes = 1000
[[variants]]
name = "e2e"
[[variants]]
name = "clean"
set = ["lan.loss=0%"]
"#;

    #[test]
    fn ap_topology_key() {
        assert!(!Scenario::parse(S, &[]).unwrap().ap_bridge);
        let b = Scenario::parse(S, &["topology.ap=bridge".into()]).unwrap();
        assert!(b.ap_bridge);
        assert!(
            !Scenario::parse(S, &["topology.ap=router".into()])
                .unwrap()
                .ap_bridge
        );
        assert!(Scenario::parse(S, &["topology.ap=hub".into()]).is_err());
        assert!(Scenario::parse(S, &["topology.ap=bridge".into(), "clients=2".into()]).is_err());
    }

    #[test]
    fn keep_variants_selects_by_name_and_refuses_unknown_names() {
        let mut s = Scenario::parse(S, &[]).unwrap();
        s.keep_variants(&[]).unwrap();
        assert_eq!(s.variants.len(), 2);
        let err = s.keep_variants(&["nope".into()]).unwrap_err();
        assert!(err.to_string().contains("e2e, clean"), "{err}");
        assert_eq!(s.variants.len(), 2);
        s.keep_variants(&["clean".into()]).unwrap();
        let names: Vec<_> = s.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["clean"]);
    }

    #[test]
    fn app_server_args_reach_the_spec() {
        let text = S.replace(
            "bytes = 1000\n",
            "bytes = 1000\nserver_args = [\"--trace\", \"rx.csv\"]\n",
        );
        let s = Scenario::parse(&text, &[]).unwrap();
        assert_eq!(s.app.server_args, ["--trace", "rx.csv"]);
        assert!(Scenario::parse(S, &[]).unwrap().app.server_args.is_empty());
    }

    #[test]
    fn parse_and_override() {
        let s = Scenario::parse(S, &["wan.delay=40ms".into(), "trials=7".into()]).unwrap();
        assert_eq!(s.wan.delay, Duration::from_millis(40));
        assert_eq!(s.trials, 7);
        assert_eq!(s.lan.loss.mean_loss(), 0.01);
        assert_eq!(s.app.stack, "quinn");
        assert_eq!(s.variants.len(), 2);
        let clean = s.for_variant(&s.variants[1]).unwrap();
        assert_eq!(clean.lan.loss.mean_loss(), 0.0);
        assert_eq!(clean.wan.delay, Duration::from_millis(40));
    }

    #[test]
    fn both_directions_only_on_the_quinn_and_quiche_raw_transfer() {
        let both = |extra: &[&str]| {
            let mut sets = vec!["app.direction=both".to_string()];
            sets.extend(extra.iter().map(|s| (*s).to_string()));
            Scenario::parse(S, &sets)
        };
        assert_eq!(both(&[]).unwrap().app.direction, "both");
        assert!(both(&["app.stack=quiche", "app.client_stack=quinn"]).is_ok());
        for bad in [
            "app.stack=quic-go",
            "app.client_stack=s2n-quic",
            "app.http3=true",
            "app.kind=media",
        ] {
            assert!(
                matches!(both(&[bad]), Err(ScenarioError::Invalid(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn bad_inputs() {
        assert!(matches!(
            Scenario::parse(S, &["nonsense".into()]),
            Err(ScenarioError::BadSet(_))
        ));
        assert!(matches!(
            Scenario::parse(S, &["lan.dleay=3ms".into()]),
            Err(ScenarioError::Link { .. })
        ));
        assert!(matches!(
            Scenario::parse(S, &["app.direction=sideways".into()]),
            Err(ScenarioError::Invalid(_))
        ));
        assert!(matches!(
            Scenario::parse(S, &["trials=-1".into()]),
            Err(ScenarioError::Invalid(_))
        ));
        assert!(Scenario::parse("[wan]\ndelay = \"1ms\"", &[]).is_err());
        // Setting into a scalar is rejected.
        let mut t: toml::Table = toml::from_str("a = 1").unwrap();
        assert!(apply_set(&mut t, "a.b=2").is_err());
    }

    #[test]
    fn sidekick_variant_fields() {
        let text = format!(
            "{S}[[variants]]\nname = \"sidekick\"\nproxy = [\"sidekick-proxy\", \"--mode\", \"sniff\"]\n\
             client_args = [\"--sidekick\"]\nkill_proxy_at = 0.3\n"
        );
        let s = Scenario::parse(&text, &[]).unwrap();
        let v = &s.variants[2];
        assert_eq!(v.client_args, vec!["--sidekick".to_string()]);
        assert_eq!(v.kill_proxy_at, Some(0.3));
        assert!(s.variants[0].client_args.is_empty());
        // A kill without a proxy, or outside (0, 1), is rejected.
        let bad = format!("{S}[[variants]]\nname = \"x\"\nkill_proxy_at = 0.3\n");
        assert!(matches!(
            Scenario::parse(&bad, &[]),
            Err(ScenarioError::Invalid(_))
        ));
        let bad = text.replace("0.3", "1.5");
        assert!(Scenario::parse(&bad, &[]).is_err());
    }

    #[test]
    fn transfer_pairs_are_checked_when_loading() {
        let sets = |v: &[&str]| v.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
        let e = Scenario::parse(S, &sets(&["app.stack=ngtcp2", "app.direction=download"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("app.stack") && e.contains("app.http3"), "{e}");
        let s = Scenario::parse(
            S,
            &sets(&[
                "app.stack=ngtcp2",
                "app.client_stack=quic-go",
                "app.http3=true",
                "app.direction=download",
            ]),
        )
        .unwrap();
        assert_eq!(s.app.client_stack.as_deref(), Some("quic-go"));
        // A variant asking for the SDK on a client without it.
        let text = S.replace(
            "name = \"clean\"",
            "name = \"clean\"\nclient_args = [\"--sidekick\"]",
        );
        let e = Scenario::parse(&text, &sets(&["app.client_stack=quic-go"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("variant `clean`") && e.contains("--sidekick"),
            "{e}"
        );
        assert!(Scenario::parse(&text, &sets(&["app.stack=quic-go"])).is_err());
        assert!(
            Scenario::parse(
                &text,
                &sets(&["app.stack=quic-go", "app.client_stack=quiche"])
            )
            .is_ok()
        );
    }

    #[test]
    fn a_variant_may_run_tcp_beside_sidekick_variants() {
        let text = format!(
            "{S}client_args = [\"--sidekick\"]\n[[variants]]\nname = \"tcp-e2e\"\n\
             set = [\"app.stack=tcp\", \"app.client_stack=tcp\", \"app.http3=false\"]\n"
        );
        // The `clean` variant asks for the SDK (quinn has it), `tcp-e2e` runs TCP.
        let s = Scenario::parse(&text, &["app.http3=true".into()]).unwrap();
        let tcp = s.for_variant(&s.variants[2]).unwrap();
        assert_eq!(tcp.app.stack, "tcp");
        assert!(!tcp.app.http3);
        assert_eq!(tcp.variants.len(), 1);
        assert_eq!(s.for_variant(&s.variants[1]).unwrap().app.stack, "quinn");
        // The SDK on the TCP variant is refused, naming it.
        let bad = text.replace(
            "name = \"tcp-e2e\"",
            "name = \"tcp-e2e\"\nclient_args = [\"--sidekick\"]",
        );
        let e = Scenario::parse(&bad, &[]).unwrap_err().to_string();
        assert!(
            e.contains("variant `tcp-e2e`") && e.contains("--sidekick"),
            "{e}"
        );
    }

    #[test]
    fn curl_client_needs_http3_transfer() {
        let sets = |v: &[&str]| v.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
        assert!(matches!(
            Scenario::parse(S, &sets(&["app.client_stack=curl"])),
            Err(ScenarioError::Invalid(_))
        ));
        let s = Scenario::parse(S, &sets(&["app.client_stack=curl", "app.http3=true"])).unwrap();
        assert_eq!(s.app.client_stack.as_deref(), Some("curl"));
        assert!(matches!(
            Scenario::parse(
                S,
                &sets(&["app.client_stack=curl", "app.http3=true", "app.kind=media"])
            ),
            Err(ScenarioError::Invalid(_))
        ));
        // The shipped curl scenario parses.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/curl-fail-open.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let s = Scenario::parse(&text, &[]).unwrap();
        assert_eq!(s.variants.len(), 4);
        assert!(s.variants.iter().any(|v| v.kill_proxy_at == Some(0.3)));
    }

    #[test]
    fn value_types() {
        let mut t = toml::Table::new();
        apply_set(&mut t, "x=3").unwrap();
        apply_set(&mut t, "y=2.5").unwrap();
        apply_set(&mut t, "z=true").unwrap();
        apply_set(&mut t, "w=10Mbit").unwrap();
        assert_eq!(t["x"].as_integer(), Some(3));
        assert_eq!(t["y"].as_float(), Some(2.5));
        assert_eq!(t["z"].as_bool(), Some(true));
        assert_eq!(t["w"].as_str(), Some("10Mbit"));
    }

    #[test]
    fn shipped_scenarios_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let s = Scenario::load(&p, &[]).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                assert!(!s.name.is_empty(), "{}", p.display());
                n += 1;
            }
        }
        assert!(n >= 9, "{n} scenarios");
    }

    #[test]
    fn handshake_loss_scenario_and_drop_overrides() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/handshake-loss.toml");
        let s = Scenario::load(&path, &[]).unwrap();
        assert_eq!(s.metrics.first().map(String::as_str), Some("ttfb_ms"));
        assert_eq!(s.lan.drop.down, 0b10);
        assert_eq!(s.app.bytes, 10_000);
        assert!(s.variants.iter().any(|v| {
            v.name == "rescue"
                && v.proxy
                    .windows(2)
                    .any(|w| w == ["--handshake-rescue", "true"])
        }));
        let sets = [
            "lan.drop=down:2,down:3".to_string(),
            "app.cert_bytes=5113".to_string(),
            "app.hello_delay_ms=200".to_string(),
        ];
        let s = Scenario::load(&path, &sets).unwrap();
        assert_eq!((s.lan.drop.down, s.lan.drop.up), (0b110, 0));
        assert_eq!((s.app.cert_bytes, s.app.hello_delay_ms), (5113, 200));
        let e = Scenario::load(&path, &["lan.drop=down:0".to_string()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("lan") && e.contains("drop"), "{e}");
        let s = Scenario::load(&path, &["app.prior_connections=2".to_string()]).unwrap();
        assert_eq!(s.app.prior_connections, 2);
    }

    #[test]
    fn key_changes_are_for_webrtc_calls_only() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let s = Scenario::load(
            &dir.join("webrtc-uplink.toml"),
            &["app.rekey_after_ms=15000".to_string()],
        )
        .unwrap();
        assert_eq!(s.app.rekey_after_ms, 15_000);
        let e = Scenario::load(
            &dir.join("robin-1-media.toml"),
            &["app.rekey_after_ms=1".to_string()],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("app.rekey_after_ms"), "{e}");
    }

    #[test]
    fn prior_connections_are_for_transfers_only() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/webrtc-uplink.toml");
        let e = Scenario::load(&path, &["app.prior_connections=1".to_string()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("app.prior_connections"), "{e}");
    }
}
