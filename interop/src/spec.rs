//! Link specifications and the unit syntax used by scenario files and `--set` overrides.
//!
//! A link joins two namespaces; both directions get the same [`LinkSpec`] (as a mininet `TCLink`
//! configured with `tc`, which is how the papers set up their links: Sidekick (NSDI '24) §6.1, Packrat (CoNEXT '26)
//! §7.1, PEMI §6.1.3), each direction with its own queue, loss state and RNG.

use crate::droprule::DropRules;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Errors of link specification parsing.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SpecError {
    /// A value could not be parsed with the expected unit.
    #[error("invalid {what} `{value}`: {why}")]
    Invalid {
        /// What was being parsed (delay, rate, ...).
        what: &'static str,
        /// The offending text.
        value: String,
        /// Why it was rejected.
        why: &'static str,
    },
    /// A key that is not a link property.
    #[error("unknown link key `{0}`")]
    UnknownKey(String),
}

fn invalid(what: &'static str, value: &str, why: &'static str) -> SpecError {
    SpecError::Invalid {
        what,
        value: value.to_string(),
        why,
    }
}

fn split_number(s: &str) -> (&str, &str) {
    let s = s.trim();
    let idx = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(s.len());
    (s[..idx].trim(), s[idx..].trim())
}

fn parse_f64(what: &'static str, full: &str, num: &str) -> Result<f64, SpecError> {
    let v: f64 = num
        .parse()
        .map_err(|_| invalid(what, full, "not a number"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(invalid(what, full, "must be finite and non-negative"));
    }
    Ok(v)
}

/// Parses a duration such as `25ms`, `1.5 ms`, `250us`, `2s`; a bare number means milliseconds.
///
/// ```
/// use sidekick_lab::spec::parse_duration;
/// assert_eq!(parse_duration("25ms").unwrap().as_micros(), 25_000);
/// assert_eq!(parse_duration("250us").unwrap().as_micros(), 250);
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, SpecError> {
    let (num, unit) = split_number(s);
    let v = parse_f64("duration", s, num)?;
    let secs = match unit.to_ascii_lowercase().as_str() {
        "" | "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "ns" => v / 1e9,
        "s" => v,
        _ => return Err(invalid("duration", s, "unit must be s, ms, us or ns")),
    };
    if secs > 3600.0 {
        return Err(invalid("duration", s, "longer than an hour"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a rate in bits per second: `10Mbit`, `100 mbps`, `1.5Gbit`, `800kbit`; a bare number
/// means bit/s. `0` or `unlimited` means no rate limit (returned as 0).
pub fn parse_rate(s: &str) -> Result<u64, SpecError> {
    if s.trim().eq_ignore_ascii_case("unlimited") {
        return Ok(0);
    }
    let (num, unit) = split_number(s);
    let v = parse_f64("rate", s, num)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" | "bps" => 1.0,
        "kbit" | "kbps" | "k" => 1e3,
        "mbit" | "mbps" | "m" => 1e6,
        "gbit" | "gbps" | "g" => 1e9,
        _ => {
            return Err(invalid(
                "rate",
                s,
                "unit must be bit, kbit, Mbit or Gbit (per second)",
            ));
        }
    };
    let bps = v * mult;
    if bps > 1e12 {
        return Err(invalid("rate", s, "above 1 Tbit/s"));
    }
    Ok(bps.round() as u64)
}

/// Parses a probability: `2.5%` or a fraction `0.025`.
pub fn parse_prob(s: &str) -> Result<f64, SpecError> {
    let (num, unit) = split_number(s);
    let v = parse_f64("probability", s, num)?;
    let p = match unit {
        "%" => v / 100.0,
        "" => v,
        _ => {
            return Err(invalid(
                "probability",
                s,
                "write a fraction or a percentage",
            ));
        }
    };
    if p > 1.0 {
        return Err(invalid("probability", s, "above 100%"));
    }
    Ok(p)
}

/// Packet loss model of one link direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LossModel {
    /// No loss.
    #[default]
    None,
    /// Independent (Bernoulli) loss with probability `p` per packet.
    Random {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert–Elliott two-state Markov loss, evaluated per packet like `tc netem loss gemodel`
    /// (PEMI §6.1.4): first the state transition, then a loss draw with the state's loss
    /// probability.
    GilbertElliott {
        /// Good→bad transition probability per packet.
        p: f64,
        /// Bad→good transition probability per packet.
        r: f64,
        /// Loss probability in the good state.
        loss_good: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
    },
}

impl LossModel {
    /// The stationary (long-run average) loss probability.
    ///
    /// For Gilbert–Elliott, the bad state has stationary probability `p / (p + r)`.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Random { p } => p,
            LossModel::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                if p + r == 0.0 {
                    loss_good
                } else {
                    let pi_bad = p / (p + r);
                    pi_bad * loss_bad + (1.0 - pi_bad) * loss_good
                }
            }
        }
    }
}

/// The emulated properties of one link direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinkSpec {
    /// One-way propagation delay, added after serialisation at `rate`.
    pub delay: Duration,
    /// Bottleneck rate in bit/s of Ethernet frame bytes (0 = unlimited).
    pub rate_bps: u64,
    /// Loss model, applied when a frame enters the link (before the queue, as netem does).
    pub loss: LossModel,
    /// Queue limit in packets (frames waiting for or in serialisation).
    pub queue_packets: usize,
    /// Optional queue limit in bytes (0 = none).
    pub queue_bytes: usize,
    /// Datagram-index drop rules (`drop = ["down:2"]`, [`crate::droprule`]); applied by the
    /// userspace element only.
    #[serde(default)]
    pub drop: DropRules,
}

impl Default for LinkSpec {
    fn default() -> Self {
        // 1000 packets: the default `limit` of netem and of mininet's TCLink queues.
        LinkSpec {
            delay: Duration::ZERO,
            rate_bps: 0,
            loss: LossModel::None,
            queue_packets: 1000,
            queue_bytes: 0,
            drop: DropRules::default(),
        }
    }
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl LinkSpec {
    /// Builds a spec from a scenario TOML table such as
    /// `{ delay = "25ms", rate = "10Mbit", loss = "1%", queue = 1000 }`.
    ///
    /// Keys: `delay`, `rate`, `loss` (random), `ge_p`, `ge_r`, `ge_loss_good`, `ge_loss_bad`
    /// (Gilbert–Elliott; `ge_p` set selects it), `queue` (packets), `queue_bytes`, `drop`
    /// (datagram-index rules such as `["down:2", "down:3"]`, [`crate::droprule`]).
    pub fn from_table(t: &toml::Table) -> Result<Self, SpecError> {
        let mut spec = LinkSpec::default();
        let mut random = 0.0;
        let (mut ge_p, mut ge_r, mut ge_good, mut ge_bad) = (None, 0.0, 0.0, 1.0);
        for (k, v) in t {
            let s = value_text(v);
            match k.as_str() {
                "delay" => spec.delay = parse_duration(&s)?,
                "rate" => spec.rate_bps = parse_rate(&s)?,
                "loss" => random = parse_prob(&s)?,
                "ge_p" => ge_p = Some(parse_prob(&s)?),
                "ge_r" => ge_r = parse_prob(&s)?,
                "ge_loss_good" => ge_good = parse_prob(&s)?,
                "ge_loss_bad" => ge_bad = parse_prob(&s)?,
                "queue" => {
                    spec.queue_packets = s
                        .trim()
                        .parse()
                        .map_err(|_| invalid("queue", &s, "packets, an integer"))?;
                }
                "queue_bytes" => {
                    spec.queue_bytes = s
                        .trim()
                        .parse()
                        .map_err(|_| invalid("queue_bytes", &s, "an integer"))?;
                }
                "drop" => spec.drop = DropRules::from_value(v)?,
                "description" | "name" => {}
                other => return Err(SpecError::UnknownKey(other.to_string())),
            }
        }
        spec.loss = match ge_p {
            Some(p) => LossModel::GilbertElliott {
                p,
                r: ge_r,
                loss_good: ge_good,
                loss_bad: ge_bad,
            },
            None if random > 0.0 => LossModel::Random { p: random },
            None => LossModel::None,
        };
        if spec.queue_packets == 0 {
            return Err(invalid("queue", "0", "must hold at least one packet"));
        }
        Ok(spec)
    }

    /// Serialisation time of `bytes` at this link's rate (zero when unlimited).
    pub fn serialization(&self, bytes: usize) -> Duration {
        ((bytes as u64 * 8).saturating_mul(1_000_000_000))
            .checked_div(self.rate_bps)
            .map_or(Duration::ZERO, Duration::from_nanos)
    }
}

impl std::fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "delay {:.3} ms", self.delay.as_secs_f64() * 1e3)?;
        if self.rate_bps > 0 {
            write!(f, ", {:.3} Mbit/s", self.rate_bps as f64 / 1e6)?;
        }
        match self.loss {
            LossModel::None => {}
            LossModel::Random { p } => write!(f, ", loss {:.3}%", p * 100.0)?,
            LossModel::GilbertElliott { p, r, .. } => {
                write!(
                    f,
                    ", GE loss p={p} r={r} (mean {:.3}%)",
                    self.loss.mean_loss() * 100.0
                )?;
            }
        }
        write!(f, ", queue {} pkts", self.queue_packets)?;
        if !self.drop.is_empty() {
            write!(f, ", drop {}", self.drop.to_text())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn units() {
        assert_eq!(
            parse_duration("1.5ms").unwrap(),
            Duration::from_micros(1500)
        );
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("40").unwrap(), Duration::from_millis(40));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-3ms").is_err());
        assert_eq!(parse_rate("10Mbit").unwrap(), 10_000_000);
        assert_eq!(parse_rate("1.5 Gbit").unwrap(), 1_500_000_000);
        assert_eq!(parse_rate("unlimited").unwrap(), 0);
        assert!(parse_rate("10 furlongs").is_err());
        assert!((parse_prob("2.5%").unwrap() - 0.025).abs() < 1e-12);
        assert!((parse_prob("0.1").unwrap() - 0.1).abs() < 1e-12);
        assert!(parse_prob("150%").is_err());
    }

    #[test]
    fn table_to_spec() {
        let t: toml::Table =
            toml::from_str("delay = \"25ms\"\nrate = \"10Mbit\"\nloss = \"1%\"\nqueue = 50")
                .unwrap();
        let s = LinkSpec::from_table(&t).unwrap();
        assert_eq!(s.delay, Duration::from_millis(25));
        assert_eq!(s.rate_bps, 10_000_000);
        assert_eq!(s.loss, LossModel::Random { p: 0.01 });
        assert_eq!(s.queue_packets, 50);
        assert_eq!(s.serialization(1250), Duration::from_millis(1));
        let bad: toml::Table = toml::from_str("dleay = \"25ms\"").unwrap();
        assert_eq!(
            LinkSpec::from_table(&bad),
            Err(SpecError::UnknownKey("dleay".into()))
        );
    }

    #[test]
    fn gilbert_elliott_mean() {
        // PEMI §6.1.4: p = 0.069 %, r = 6.93 %, bad state loses everything.
        let t: toml::Table = toml::from_str("ge_p = \"0.069%\"\nge_r = \"6.93%\"").unwrap();
        let s = LinkSpec::from_table(&t).unwrap();
        let m = s.loss.mean_loss();
        assert!((m - 0.00069 / (0.00069 + 0.0693)).abs() < 1e-12, "{m}");
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in ".{0,20}") {
            let _ = parse_duration(&s);
            let _ = parse_rate(&s);
            let _ = parse_prob(&s);
        }

        #[test]
        fn duration_roundtrip(us in 0u64..10_000_000) {
            let d = parse_duration(&format!("{us}us")).unwrap();
            prop_assert_eq!(d.as_micros() as u64, us);
        }
    }
}
