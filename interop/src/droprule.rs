//! Datagram-index drop rules: drop chosen UDP datagrams of each flow by direction and index.
//!
//! ReACKed QUICer (IMC '24) §3 emulates loss not as a random share but by dropping particular
//! datagrams of the handshake (§4.2: the server's 2nd and 3rd datagram, or the client's second
//! flight, Table 4), so that the cost of one lost flight can be measured. A link's `drop` key
//! does the same:
//!
//! ```toml
//! [lan]
//! drop = ["down:2", "down:3"]   # the server's 2nd and 3rd datagram of every flow
//! ```
//!
//! or `--set lan.drop=down:2,down:3`. `down` is server → client (the a→b direction of the lab's
//! links, `w-srv → w-ap` and `l-ap → l-cli`), `up` client → server. Indices are 1-based and
//! counted **per flow**: per UDP 5-tuple and direction, so every new connection (new client
//! port) meets the rule again and other UDP traffic of the run (a sidekick session, DNS) does not
//! shift the count. Indices run from 1 to [`MAX_INDEX`]. Only UDP over IPv4/IPv6 is counted;
//! other frames (ARP, neighbour discovery) pass untouched. The flow table holds at most
//! [`MAX_FLOWS`] flows per direction; datagrams of flows beyond it are never dropped by a rule.
//! Frames a proxy injects on the link (replays, retransmissions) are counted like any other
//! datagram of their flow. The netem backend refuses drop rules (netem has no such rule), and the
//! simulator (`sim/`) does not apply them.

use crate::spec::SpecError;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Largest datagram index a rule may name.
pub const MAX_INDEX: u32 = 64;
/// Flows whose datagrams one direction counts (a cap: later flows are not counted).
pub const MAX_FLOWS: usize = 4096;

/// Drop rules of one link: bit `i - 1` of `down`/`up` set = drop the `i`-th datagram of each flow
/// in that direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DropRules {
    /// Server → client mask.
    pub down: u64,
    /// Client → server mask.
    pub up: u64,
}

fn invalid(value: &str, why: &'static str) -> SpecError {
    SpecError::Invalid {
        what: "drop",
        value: value.to_string(),
        why,
    }
}

impl DropRules {
    /// Whether no datagram is dropped.
    pub fn is_empty(&self) -> bool {
        self.down == 0 && self.up == 0
    }

    /// Parses one rule `down:N` / `up:N` and adds it.
    fn add(&mut self, item: &str) -> Result<(), SpecError> {
        let t = item.trim().trim_matches(|c| c == '"' || c == '\'').trim();
        let (dir, idx) = t
            .split_once(':')
            .ok_or_else(|| invalid(item, "expected down:N or up:N"))?;
        let n: u32 = idx
            .trim()
            .parse()
            .map_err(|_| invalid(item, "the index must be a positive integer"))?;
        if !(1..=MAX_INDEX).contains(&n) {
            return Err(invalid(item, "the index must lie between 1 and 64"));
        }
        let bit = 1u64 << (n - 1);
        match dir.trim().to_ascii_lowercase().as_str() {
            "down" => self.down |= bit,
            "up" => self.up |= bit,
            _ => return Err(invalid(item, "the direction must be down or up")),
        }
        Ok(())
    }

    /// Parses a list given as a string: `down:2,down:3`, `["down:2", "up:4"]`, or empty/`none`.
    ///
    /// ```
    /// use sidekick_lab::droprule::DropRules;
    /// let r = DropRules::parse_str("down:2, down:3").unwrap();
    /// assert_eq!((r.down, r.up), (0b110, 0));
    /// assert!(DropRules::parse_str("sideways:2").is_err());
    /// ```
    pub fn parse_str(s: &str) -> Result<Self, SpecError> {
        let inner = s.trim().trim_start_matches('[').trim_end_matches(']');
        let mut r = DropRules::default();
        if inner.trim().is_empty() || inner.trim().eq_ignore_ascii_case("none") {
            return Ok(r);
        }
        for item in inner.split(',') {
            if item.trim().is_empty() {
                return Err(invalid(s, "empty rule in the list"));
            }
            r.add(item)?;
        }
        Ok(r)
    }

    /// Parses the TOML value of a `drop` key: an array of strings or one string.
    pub fn from_value(v: &toml::Value) -> Result<Self, SpecError> {
        match v {
            toml::Value::String(s) => Self::parse_str(s),
            toml::Value::Array(a) => {
                let mut r = DropRules::default();
                for item in a {
                    let s = item
                        .as_str()
                        .ok_or_else(|| invalid(&item.to_string(), "each rule is a string"))?;
                    r.add(s)?;
                }
                Ok(r)
            }
            other => Err(invalid(&other.to_string(), "a list such as [\"down:2\"]")),
        }
    }

    /// The rules as text (`down:2,down:3`), empty when none.
    pub fn to_text(&self) -> String {
        let mut v = Vec::new();
        for (name, mask) in [("down", self.down), ("up", self.up)] {
            for i in 0..64 {
                if mask & (1 << i) != 0 {
                    v.push(format!("{name}:{}", i + 1));
                }
            }
        }
        v.join(",")
    }
}

/// A UDP flow as seen in one direction: addresses and ports, IPv4 mapped into 16 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    src: [u8; 16],
    dst: [u8; 16],
    sport: u16,
    dport: u16,
}

/// The UDP flow of an Ethernet frame, `None` for anything that is not UDP over IPv4/IPv6 (IPv6
/// extension headers and IPv4 non-first fragments are not followed). Never panics.
pub fn udp_flow(frame: &[u8]) -> Option<FlowKey> {
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let ip = frame.get(14..)?;
    let (src, dst, l4) = match ethertype {
        0x0800 => {
            let ihl = usize::from(ip.first()? & 0x0f) * 4;
            if ip.first()? >> 4 != 4 || ihl < 20 || *ip.get(9)? != 17 {
                return None;
            }
            // Fragment offset non-zero: not the datagram's first fragment.
            if u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x1fff != 0 {
                return None;
            }
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s[12..].copy_from_slice(ip.get(12..16)?);
            d[12..].copy_from_slice(ip.get(16..20)?);
            (s, d, ip.get(ihl..)?)
        }
        0x86dd => {
            if ip.first()? >> 4 != 6 || *ip.get(6)? != 17 {
                return None;
            }
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(ip.get(8..24)?);
            d.copy_from_slice(ip.get(24..40)?);
            (s, d, ip.get(40..)?)
        }
        _ => return None,
    };
    Some(FlowKey {
        src,
        dst,
        sport: u16::from_be_bytes([*l4.first()?, *l4.get(1)?]),
        dport: u16::from_be_bytes([*l4.get(2)?, *l4.get(3)?]),
    })
}

/// Per-flow datagram counter of one direction, deciding which datagrams a mask drops.
#[derive(Debug, Default)]
pub struct DropCounter {
    mask: u64,
    seen: HashMap<FlowKey, u32>,
}

impl DropCounter {
    /// A counter applying `mask` (bit `i - 1` = drop datagram `i` of each flow).
    pub fn new(mask: u64) -> Self {
        DropCounter {
            mask,
            seen: HashMap::new(),
        }
    }

    /// Whether the frame is to be dropped; counts it when it is a UDP datagram.
    pub fn drop_frame(&mut self, frame: &[u8]) -> bool {
        if self.mask == 0 {
            return false;
        }
        let Some(key) = udp_flow(frame) else {
            return false;
        };
        if self.seen.len() >= MAX_FLOWS && !self.seen.contains_key(&key) {
            return false;
        }
        let n = self.seen.entry(key).or_insert(0);
        *n = n.saturating_add(1);
        (1..=MAX_INDEX).contains(n) && self.mask & (1u64 << (*n - 1)) != 0
    }
}

/// Fuzz body: the text before the first 0xff byte is parsed as rules (never panics); the rest,
/// split at 0xff bytes, goes through a counter as frames. Invariant: a counter drops only the
/// indices its mask names, so with an empty mask nothing is dropped.
pub fn fuzz_drop_rules(data: &[u8]) {
    let mut parts = data.split(|&b| b == 0xff);
    let text = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let rules = DropRules::parse_str(&text).unwrap_or_default();
    let mut c = DropCounter::new(rules.down);
    let mut none = DropCounter::new(0);
    for frame in parts {
        let _ = c.drop_frame(frame);
        assert!(!none.drop_frame(frame));
    }
    assert!(c.seen.len() <= MAX_FLOWS);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn udp4(sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 10];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[14 + 12..14 + 16].copy_from_slice(&[10, 0, 1, 1]);
        f[14 + 16..14 + 20].copy_from_slice(&[10, 0, 2, 2]);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    fn udp6(sport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + 8];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[14 + 6] = 17;
        f[54..56].copy_from_slice(&sport.to_be_bytes());
        f
    }

    #[test]
    fn parse_forms_and_errors_name_the_key() {
        let a: toml::Value =
            toml::from_str::<toml::Table>("d = [\"down:2\", \"up:1\", \"DOWN:3\"]").unwrap()["d"]
                .clone();
        let r = DropRules::from_value(&a).unwrap();
        assert_eq!((r.down, r.up), (0b110, 0b1));
        assert_eq!(r.to_text(), "down:2,down:3,up:1");
        assert_eq!(
            DropRules::parse_str("[\"down:2\",\"down:3\"]").unwrap(),
            DropRules::parse_str("down:2,down:3").unwrap()
        );
        assert!(DropRules::parse_str("").unwrap().is_empty());
        assert!(DropRules::parse_str("none").unwrap().is_empty());
        for bad in [
            "down:0",
            "down:65",
            "down:x",
            "left:2",
            "down",
            "down:2,,up:1",
        ] {
            let e = DropRules::parse_str(bad).unwrap_err().to_string();
            assert!(e.contains("drop"), "{bad}: {e}");
        }
        assert!(DropRules::from_value(&toml::Value::Integer(2)).is_err());
        assert!(DropRules::from_value(&toml::Value::Array(vec![toml::Value::Integer(2)])).is_err());
    }

    #[test]
    fn counts_per_flow_and_direction_mask() {
        let mut c = DropCounter::new(DropRules::parse_str("down:2,down:3").unwrap().down);
        let a: Vec<bool> = (0..5).map(|_| c.drop_frame(&udp4(443, 5000))).collect();
        assert_eq!(a, [false, true, true, false, false]);
        // A second connection (new client port) meets the rule again.
        let b: Vec<bool> = (0..4).map(|_| c.drop_frame(&udp4(443, 5001))).collect();
        assert_eq!(b, [false, true, true, false]);
        // IPv6 flows are counted too; non-UDP frames pass uncounted.
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!c.drop_frame(&arp));
        let v6: Vec<bool> = (0..3).map(|_| c.drop_frame(&udp6(9))).collect();
        assert_eq!(v6, [false, true, true]);
    }

    #[test]
    fn flow_table_is_capped() {
        let mut c = DropCounter::new(1);
        for p in 0..MAX_FLOWS as u16 {
            assert!(c.drop_frame(&udp4(p, 1)));
        }
        // Beyond the cap: not counted, never dropped.
        assert!(!c.drop_frame(&udp4(u16::MAX, 1)));
        assert_eq!(c.seen.len(), MAX_FLOWS);
    }

    proptest! {
        #[test]
        fn parser_never_panics(s in ".{0,40}") {
            let _ = DropRules::parse_str(&s);
        }

        #[test]
        fn text_roundtrip(down in any::<u64>(), up in any::<u64>()) {
            let r = DropRules { down, up };
            prop_assert_eq!(DropRules::parse_str(&r.to_text()).unwrap(), r);
        }

        #[test]
        fn drops_exactly_the_named_indices(idx in proptest::collection::btree_set(1u32..=64, 0..6), n in 1usize..80) {
            let text: Vec<String> = idx.iter().map(|i| format!("down:{i}")).collect();
            let r = DropRules::parse_str(&text.join(",")).unwrap();
            let mut c = DropCounter::new(r.down);
            for k in 1..=n as u32 {
                prop_assert_eq!(c.drop_frame(&udp4(1, 2)), idx.contains(&k));
            }
        }

        #[test]
        fn flow_parser_never_panics(f in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = udp_flow(&f);
        }

        #[test]
        fn fuzz_body_never_panics(d in proptest::collection::vec(any::<u8>(), 0..300)) {
            fuzz_drop_rules(&d);
        }
    }
}
