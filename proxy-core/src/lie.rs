//! A lying proxy, for tests of the clients' defences only (feature `testing`, never on by
//! default; `sidekick-proxy --lie MODE` or `lie = "MODE"` exist only in such a build).
//!
//! The proxy answers discovery, so it holds every session key: an impostor on the path can say
//! anything the protocol lets a proxy say. The client must make such a proxy no worse than one
//! that drops the sidekick's packets (docs/protocol.md §11.3): each mode here is one way of lying,
//! and the lab's `lying-proxy` scenario measures the client's transfer against end to end.
//! A sidekick address on loopback or at a victim needs no mode: `--sidekick-advertise` says it.

use sidekick_protocol::messages::{MAX_SYMBOLS, MAX_THRESHOLD, SessionConfig};

/// One way of lying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lie {
    /// Every InitAck echoes extreme values instead of the negotiated ones: the largest quACK
    /// threshold and symbol count, a quACK and an eACK per packet, the largest cache and a
    /// reorder delay of 2³²−1 ms. The session runs with what was negotiated.
    ExtremeEcho,
    /// Robin's quACKs leave out every [`FALSE_LOSS_EVERY`]-th packet of the flow: the client is
    /// told of losses that never happened (spurious resends, congestion responses).
    FalseLoss,
    /// Packrat decodes eACKs but never retransmits: every gap the client holds for stays open
    /// until its hold expires.
    NeverRepair,
    /// After every [`FORGED_EVERY`]-th datagram towards the client, a forged copy: same
    /// addresses and header, altered ciphertext, so the stack cannot authenticate it and its
    /// header-protected packet number reads as garbage (a lens that trusted it would see a
    /// large gap and hold genuine traffic).
    ForgedPackets,
}

impl Lie {
    /// Every mode, by the name the configuration file and the command line use.
    pub const NAMES: [(&'static str, Lie); 4] = [
        ("extreme-echo", Lie::ExtremeEcho),
        ("false-loss", Lie::FalseLoss),
        ("never-repair", Lie::NeverRepair),
        ("forged-packets", Lie::ForgedPackets),
    ];
}

impl std::str::FromStr for Lie {
    type Err = UnknownLie;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Lie::NAMES
            .iter()
            .find(|(name, _)| *name == s)
            .map(|&(_, lie)| lie)
            .ok_or_else(|| UnknownLie(s.to_owned()))
    }
}

/// A name that is not one of [`Lie::NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown lie {0:?} (one of extreme-echo, false-loss, never-repair, forged-packets)")]
pub struct UnknownLie(pub String);

/// [`Lie::FalseLoss`]: one packet in this many is left out of the quACKs. Below the usual quACK
/// thresholds per interval, so the quACKs still decode and the lie reaches the client.
pub const FALSE_LOSS_EVERY: u64 = 25;

/// [`Lie::ForgedPackets`]: one forged datagram after this many genuine ones.
pub const FORGED_EVERY: u64 = 8;

/// The core's lying state: the mode and a count of the assisted datagrams seen.
#[derive(Debug, Default)]
pub struct Lying {
    lie: Option<Lie>,
    packets: u64,
}

impl Lying {
    /// Lying this way (`None`: honest).
    pub fn new(lie: Option<Lie>) -> Self {
        Self { lie, packets: 0 }
    }

    /// Counts one datagram of an assisted flow; whether Robin must not see it
    /// ([`Lie::FalseLoss`]).
    pub fn hides_from_robin(&mut self) -> bool {
        if self.lie != Some(Lie::FalseLoss) {
            return false;
        }
        self.packets += 1;
        self.packets.is_multiple_of(FALSE_LOSS_EVERY)
    }

    /// Whether Packrat's retransmissions are dropped ([`Lie::NeverRepair`]).
    pub fn drops_repairs(&self) -> bool {
        self.lie == Some(Lie::NeverRepair)
    }

    /// A datagram `payload` went towards the client: the payload of a forged copy to inject
    /// after it, when its turn has come ([`Lie::ForgedPackets`]).
    pub fn forge(&mut self, payload: &[u8]) -> Option<Vec<u8>> {
        if self.lie != Some(Lie::ForgedPackets) {
            return None;
        }
        self.packets += 1;
        if !self.packets.is_multiple_of(FORGED_EVERY) {
            return None;
        }
        forged_payload(payload)
    }
}

/// [`Lie::ExtremeEcho`]: the configuration echoed instead of `negotiated`.
pub fn extreme_echo(negotiated: &SessionConfig) -> SessionConfig {
    let mut c = negotiated.clone();
    if let Some(r) = c.robin.as_mut() {
        r.threshold = MAX_THRESHOLD;
        r.interval_ms = 0;
        r.interval_packets = 1;
        r.quack_on_gap_percent = 100;
    }
    if let Some(p) = c.packrat.as_mut() {
        p.eack_interval_ms = 0;
        p.eack_interval_packets = 1;
        p.local_symbols = MAX_SYMBOLS;
        p.cache_capacity_bytes = u64::MAX;
        p.reorder_delay_ms = u32::MAX;
    }
    c
}

/// [`Lie::ForgedPackets`]: a forged copy of a QUIC datagram `payload` (`None` when too short to
/// carry a packet): the first 21 bytes kept (the header form and any connection ID up to 20
/// bytes, so the copy reaches the same connection), every byte after them flipped (the
/// header-protection sample among them, so the packet number decodes under another mask).
pub fn forged_payload(payload: &[u8]) -> Option<Vec<u8>> {
    if payload.len() < 64 {
        return None;
    }
    let mut f = payload.to_vec();
    for b in f.iter_mut().skip(21) {
        *b ^= 0x5a;
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sidekick_protocol::messages::{PackratConfig, RobinConfig};

    #[test]
    fn every_name_parses_as_the_configuration_file_reads_it() {
        use serde::Deserialize as _;
        use serde::de::IntoDeserializer as _;
        for (name, lie) in Lie::NAMES {
            assert_eq!(name.parse::<Lie>(), Ok(lie));
            let de: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
                name.into_deserializer();
            assert_eq!(Lie::deserialize(de), Ok(lie));
        }
        assert!("never".parse::<Lie>().is_err());
    }

    #[test]
    fn the_extreme_echo_is_outside_what_any_client_asks() {
        let asked = SessionConfig {
            robin: Some(RobinConfig {
                interval_ms: 2,
                interval_packets: 0,
                threshold: 8,
                quack_on_gap_percent: 0,
            }),
            packrat: Some(PackratConfig {
                eack_interval_ms: 10,
                eack_interval_packets: 16,
                local_symbols: 160,
                cache_capacity_bytes: 48_000,
                reorder_delay_ms: 30,
                multicast_group: Vec::new(),
            }),
            identifier: None,
        };
        let lie = extreme_echo(&asked);
        let (r, p) = (lie.robin.unwrap(), lie.packrat.unwrap());
        assert_eq!((r.threshold, r.interval_packets), (MAX_THRESHOLD, 1));
        assert_eq!((p.reorder_delay_ms, p.eack_interval_packets), (u32::MAX, 1));
        assert_eq!(p.cache_capacity_bytes, u64::MAX);
    }

    #[test]
    fn a_forged_datagram_keeps_the_header_and_connection_id_and_alters_the_rest() {
        let genuine: Vec<u8> = (0..200u8).collect();
        let f = forged_payload(&genuine).unwrap();
        assert_eq!(f.len(), genuine.len());
        assert_eq!(f[..21], genuine[..21]);
        assert!(f.iter().zip(&genuine).skip(21).all(|(a, b)| a != b));
        assert!(forged_payload(&genuine[..63]).is_none());
    }
}
