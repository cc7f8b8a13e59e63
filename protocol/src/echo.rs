//! What a client accepts back from a proxy it cannot authenticate.
//!
//! Discovery is answered by whoever is on the path (Sidekick (NSDI '24) §4.1), so the
//! configuration echoed in an InitAck or a Config reply may come from an impostor. The client
//! obeys it only as far as a genuine proxy could have changed the request: every field of the
//! echo must be a *clamp* of what was asked — the proxy may ask for less work from itself and
//! from the client, never for more.
//!
//! | field | a genuine proxy may | outside the range |
//! |---|---|---|
//! | mode (Robin, Packrat) | drop one | refused ([`EchoField::Modes`]) |
//! | identifier (mode, offset, width, key) | nothing | refused |
//! | `threshold` t | lower it, ≥ 1 | refused |
//! | `interval_ms`, `interval_packets` (quACK cadence) | make it sparser (0 = never stays 0) | refused |
//! | `quack_on_gap_percent` | turn it off or raise it | refused |
//! | `local_symbols`, `cache_capacity_bytes` | lower them, ≥ 1 | refused |
//! | `multicast_group` | nothing | refused |
//! | `eack_interval_ms`, `eack_interval_packets` (the client's eACK cadence) | make it sparser | clamped to the request |
//! | `reorder_delay_ms` (the client's hold) | lower it | clamped to the request |
//!
//! Fields both ends must agree on are refused when out of range (a clamped copy would
//! disagree with what the proxy does, e.g. quACKs of another t); fields only the client acts on
//! are clamped and counted. A refused echo makes the client fall back to end-to-end operation:
//! an impostor can do no more than a box that drops the sidekick's packets.

use crate::messages::{PackratConfig, RobinConfig, SessionConfig};

/// The field of an echoed configuration that no genuine proxy would have sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EchoField {
    /// A mode the client did not ask for, or no mode at all.
    Modes,
    /// The identifier specification differs from the request.
    Identifier,
    /// Robin threshold t above the request (or 0).
    Threshold,
    /// Robin time-driven quACK interval below the request (more quACKs than asked).
    QuackIntervalMs,
    /// Robin count-driven quACK interval below the request.
    QuackIntervalPackets,
    /// quACK-on-gap turned on or made more eager than asked.
    QuackOnGap,
    /// Packrat local symbols above the request (or 0).
    LocalSymbols,
    /// Packrat cache above the request (or 0).
    CacheCapacity,
    /// Packrat multicast group differs from the request.
    MulticastGroup,
    /// eACK time interval below the request (clamped, not refused).
    EackIntervalMs,
    /// eACK packet interval below the request (clamped, not refused).
    EackIntervalPackets,
    /// Reorder (ACK-withholding) delay above the request (clamped, not refused).
    ReorderDelay,
}

/// An echoed configuration that is not a clamp of the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("echoed {field:?} = {echoed} is outside what the request ({requested}) allows")]
pub struct EchoError {
    /// Which field.
    pub field: EchoField,
    /// The requested value (0 when the field is not numeric).
    pub requested: u64,
    /// The echoed value (0 when the field is not numeric).
    pub echoed: u64,
}

/// The outcome of [`check_echo`]: the configuration the client may act on and the fields it
/// had to clamp.
#[derive(Clone, Debug, PartialEq)]
pub struct AcceptedEcho {
    /// The echo with client-only fields clamped into range.
    pub config: SessionConfig,
    /// Fields that were clamped (each at most once).
    pub clamped: Vec<EchoField>,
}

fn refuse(field: EchoField, requested: u64, echoed: u64) -> EchoError {
    EchoError {
        field,
        requested,
        echoed,
    }
}

/// "Sparser or equal": for an interval where 0 means "never", `echoed` asks for at most as many
/// events as `requested`.
fn sparser_or_equal(requested: u32, echoed: u32) -> bool {
    match (requested, echoed) {
        (0, e) => e == 0,
        (_, 0) => true,
        (r, e) => e >= r,
    }
}

/// Checks `echoed` (from an InitAck or a Config reply) against `requested`; see the module docs
/// for the rule of every field.
pub fn check_echo(
    requested: &SessionConfig,
    echoed: &SessionConfig,
) -> Result<AcceptedEcho, EchoError> {
    let modes_ok = (echoed.robin.is_some() || echoed.packrat.is_some())
        && (echoed.robin.is_none() || requested.robin.is_some())
        && (echoed.packrat.is_none() || requested.packrat.is_some());
    if !modes_ok {
        return Err(refuse(
            EchoField::Modes,
            u64::from(requested.capabilities()),
            u64::from(echoed.capabilities()),
        ));
    }
    if echoed.identifier != requested.identifier {
        return Err(refuse(EchoField::Identifier, 0, 0));
    }
    let mut out = echoed.clone();
    let mut clamped = Vec::new();
    if let (Some(r), Some(e)) = (&requested.robin, &echoed.robin) {
        check_robin(r, e)?;
    }
    if let (Some(r), Some(e)) = (&requested.packrat, out.packrat.as_mut()) {
        check_packrat(r, e, &mut clamped)?;
    }
    Ok(AcceptedEcho {
        config: out,
        clamped,
    })
}

fn check_robin(r: &RobinConfig, e: &RobinConfig) -> Result<(), EchoError> {
    if e.threshold == 0 || e.threshold > r.threshold {
        return Err(refuse(
            EchoField::Threshold,
            r.threshold.into(),
            e.threshold.into(),
        ));
    }
    if !sparser_or_equal(r.interval_ms, e.interval_ms) {
        return Err(refuse(
            EchoField::QuackIntervalMs,
            r.interval_ms.into(),
            e.interval_ms.into(),
        ));
    }
    if !sparser_or_equal(r.interval_packets, e.interval_packets) {
        return Err(refuse(
            EchoField::QuackIntervalPackets,
            r.interval_packets.into(),
            e.interval_packets.into(),
        ));
    }
    if !sparser_or_equal(r.quack_on_gap_percent, e.quack_on_gap_percent) {
        return Err(refuse(
            EchoField::QuackOnGap,
            r.quack_on_gap_percent.into(),
            e.quack_on_gap_percent.into(),
        ));
    }
    Ok(())
}

fn check_packrat(
    r: &PackratConfig,
    e: &mut PackratConfig,
    clamped: &mut Vec<EchoField>,
) -> Result<(), EchoError> {
    if e.local_symbols == 0 || e.local_symbols > r.local_symbols {
        return Err(refuse(
            EchoField::LocalSymbols,
            r.local_symbols.into(),
            e.local_symbols.into(),
        ));
    }
    if e.cache_capacity_bytes == 0 || e.cache_capacity_bytes > r.cache_capacity_bytes {
        return Err(refuse(
            EchoField::CacheCapacity,
            r.cache_capacity_bytes,
            e.cache_capacity_bytes,
        ));
    }
    if e.multicast_group != r.multicast_group {
        return Err(refuse(EchoField::MulticastGroup, 0, 0));
    }
    // The client's own cadence and hold: clamped to the request.
    if !sparser_or_equal(r.eack_interval_ms, e.eack_interval_ms) {
        e.eack_interval_ms = r.eack_interval_ms;
        clamped.push(EchoField::EackIntervalMs);
    }
    if !sparser_or_equal(r.eack_interval_packets, e.eack_interval_packets) {
        e.eack_interval_packets = r.eack_interval_packets;
        clamped.push(EchoField::EackIntervalPackets);
    }
    if e.eack_interval_ms == 0 && e.eack_interval_packets == 0 {
        // Both "never" is invalid: keep the request's cadence.
        e.eack_interval_ms = r.eack_interval_ms;
        e.eack_interval_packets = r.eack_interval_packets;
        clamped.push(EchoField::EackIntervalMs);
    }
    if e.reorder_delay_ms > r.reorder_delay_ms {
        e.reorder_delay_ms = r.reorder_delay_ms;
        clamped.push(EchoField::ReorderDelay);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProxyPolicy;
    use crate::messages::IdentifierSpec;
    use proptest::prelude::*;

    fn request() -> SessionConfig {
        SessionConfig {
            robin: Some(RobinConfig {
                interval_ms: 30,
                interval_packets: 0,
                threshold: 10,
                quack_on_gap_percent: 150,
            }),
            packrat: Some(PackratConfig {
                eack_interval_ms: 10,
                eack_interval_packets: 16,
                local_symbols: 160,
                cache_capacity_bytes: 48_000,
                reorder_delay_ms: 30,
                multicast_group: Vec::new(),
            }),
            identifier: Some(IdentifierSpec::quic_default()),
        }
    }

    #[test]
    fn the_request_itself_is_accepted_unchanged() {
        let r = request();
        let a = check_echo(&r, &r).unwrap();
        assert_eq!(a.config, r);
        assert!(a.clamped.is_empty());
    }

    #[test]
    fn impostor_echoes_of_the_issue_are_refused_or_clamped() {
        let r = request();
        // reorder_delay_ms of 2^32 - 1: clamped to the 30 ms asked.
        let mut e = r.clone();
        e.packrat.as_mut().unwrap().reorder_delay_ms = u32::MAX;
        let a = check_echo(&r, &e).unwrap();
        assert_eq!(a.config.packrat.unwrap().reorder_delay_ms, 30);
        assert_eq!(a.clamped, vec![EchoField::ReorderDelay]);
        // An eACK per packet: clamped to every 16 packets / 10 ms.
        let mut e = r.clone();
        e.packrat.as_mut().unwrap().eack_interval_packets = 1;
        e.packrat.as_mut().unwrap().eack_interval_ms = 1;
        let a = check_echo(&r, &e).unwrap();
        let p = a.config.packrat.unwrap();
        assert_eq!((p.eack_interval_ms, p.eack_interval_packets), (10, 16));
        // t = 1024: refused.
        let mut e = r.clone();
        e.robin.as_mut().unwrap().threshold = 1024;
        assert_eq!(check_echo(&r, &e).unwrap_err().field, EchoField::Threshold);
        // A mode not asked for.
        let robin_only = SessionConfig {
            packrat: None,
            ..r.clone()
        };
        assert_eq!(
            check_echo(&robin_only, &r).unwrap_err().field,
            EchoField::Modes
        );
        // Another identifier, another multicast group.
        let mut e = r.clone();
        e.identifier.as_mut().unwrap().offset = -8;
        assert_eq!(check_echo(&r, &e).unwrap_err().field, EchoField::Identifier);
        let mut e = r.clone();
        e.packrat.as_mut().unwrap().multicast_group =
            PackratConfig::encode_multicast_group("239.1.1.1:5000".parse().unwrap());
        assert_eq!(
            check_echo(&r, &e).unwrap_err().field,
            EchoField::MulticastGroup
        );
    }

    fn arb_robin() -> impl Strategy<Value = RobinConfig> {
        (
            0u32..200,
            0u32..200,
            1u32..=1024,
            prop_oneof![Just(0u32), 110u32..400],
        )
            .prop_map(|(ms, pk, t, gap)| RobinConfig {
                interval_ms: if ms == 0 && pk == 0 { 1 } else { ms },
                interval_packets: pk,
                threshold: t,
                quack_on_gap_percent: gap,
            })
    }

    fn arb_packrat() -> impl Strategy<Value = PackratConfig> {
        (
            0u32..100,
            0u32..100,
            1u32..=65_536,
            1u64..10_000_000,
            0u32..1000,
        )
            .prop_map(|(ms, pk, sym, cache, reorder)| PackratConfig {
                eack_interval_ms: if ms == 0 && pk == 0 { 1 } else { ms },
                eack_interval_packets: pk,
                local_symbols: sym,
                cache_capacity_bytes: cache,
                reorder_delay_ms: reorder,
                multicast_group: Vec::new(),
            })
    }

    fn arb_config() -> impl Strategy<Value = SessionConfig> {
        (
            proptest::option::of(arb_robin()),
            proptest::option::of(arb_packrat()),
        )
            .prop_filter("a mode", |(r, p)| r.is_some() || p.is_some())
            .prop_map(|(robin, packrat)| SessionConfig {
                robin,
                packrat,
                identifier: Some(IdentifierSpec::quic_default()),
            })
    }

    /// Every field of an accepted echo lies between what a proxy may lower it to and what was
    /// asked.
    fn assert_within(r: &SessionConfig, a: &SessionConfig) -> Result<(), TestCaseError> {
        prop_assert!(a.robin.is_some() || a.packrat.is_some());
        prop_assert_eq!(&a.identifier, &r.identifier);
        if let Some(ea) = &a.robin {
            let rr = r.robin.as_ref().ok_or(TestCaseError::fail("robin added"))?;
            prop_assert!((1..=rr.threshold).contains(&ea.threshold));
            prop_assert!(sparser_or_equal(rr.interval_ms, ea.interval_ms));
            prop_assert!(sparser_or_equal(rr.interval_packets, ea.interval_packets));
            prop_assert!(sparser_or_equal(
                rr.quack_on_gap_percent,
                ea.quack_on_gap_percent
            ));
        }
        if let Some(pa) = &a.packrat {
            let rp = r
                .packrat
                .as_ref()
                .ok_or(TestCaseError::fail("packrat added"))?;
            prop_assert!((1..=rp.local_symbols).contains(&pa.local_symbols));
            prop_assert!((1..=rp.cache_capacity_bytes).contains(&pa.cache_capacity_bytes));
            prop_assert!(pa.reorder_delay_ms <= rp.reorder_delay_ms);
            prop_assert!(sparser_or_equal(rp.eack_interval_ms, pa.eack_interval_ms));
            prop_assert!(sparser_or_equal(
                rp.eack_interval_packets,
                pa.eack_interval_packets
            ));
            prop_assert!(pa.eack_interval_ms != 0 || pa.eack_interval_packets != 0);
            prop_assert_eq!(&pa.multicast_group, &rp.multicast_group);
        }
        Ok(())
    }

    proptest! {
        /// Any echo at all: accepted only within range (after clamping), else a typed refusal.
        #[test]
        fn any_echo_is_a_clamp_or_refused(r in arb_config(), e in arb_config()) {
            match check_echo(&r, &e) {
                Ok(a) => assert_within(&r, &a.config)?,
                Err(err) => prop_assert!(err.requested != err.echoed || matches!(
                    err.field,
                    EchoField::Modes | EchoField::Identifier | EchoField::MulticastGroup
                )),
            }
        }

        /// Each field pushed to an extreme value on its own.
        #[test]
        fn extreme_single_fields(r in arb_config(), field in 0usize..11, v in prop_oneof![
            Just(0u64), Just(1u64), Just(u64::from(u32::MAX)), Just(u64::MAX), any::<u64>()
        ]) {
            let mut e = r.clone();
            let v32 = u32::try_from(v).unwrap_or(u32::MAX);
            match (field, e.robin.as_mut(), e.packrat.as_mut()) {
                (0, Some(x), _) => x.threshold = v32,
                (1, Some(x), _) => x.interval_ms = v32,
                (2, Some(x), _) => x.interval_packets = v32,
                (3, Some(x), _) => x.quack_on_gap_percent = v32,
                (4, _, Some(p)) => p.local_symbols = v32,
                (5, _, Some(p)) => p.cache_capacity_bytes = v,
                (6, _, Some(p)) => p.reorder_delay_ms = v32,
                (7, _, Some(p)) => p.eack_interval_ms = v32,
                (8, _, Some(p)) => p.eack_interval_packets = v32,
                (9, _, Some(p)) => p.multicast_group = v.to_be_bytes()[..6].to_vec(),
                (10, _, _) => e.identifier.as_mut().unwrap().width = v32,
                _ => {}
            }
            if let Ok(a) = check_echo(&r, &e) {
                assert_within(&r, &a.config)?;
            }
        }

        /// What a genuine proxy negotiates is always accepted as it is.
        #[test]
        fn genuine_negotiation_is_accepted(r in arb_config(), max_t in 1u32..100,
                min_iv in 1u32..50, max_sym in 1u32..5000, max_cache in 1u64..10_000_000) {
            let mut p = ProxyPolicy::new("192.0.2.1:7000".parse().unwrap());
            p.max_threshold = max_t;
            p.min_quack_interval_ms = min_iv;
            p.max_symbols = max_sym;
            p.max_cache_bytes = max_cache;
            let n = p.negotiate(&r).unwrap();
            let a = check_echo(&r, &n).unwrap();
            prop_assert_eq!(a.config, n);
            prop_assert!(a.clamped.is_empty());
        }
    }
}
