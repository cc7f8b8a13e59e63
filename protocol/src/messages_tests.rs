//! Unit tests of the message bodies (messages.rs).
use super::*;

pub(crate) fn sample_config() -> SessionConfig {
    SessionConfig {
        robin: Some(RobinConfig {
            interval_ms: 30,
            interval_packets: 0,
            threshold: 10,
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
        identifier: Some(IdentifierSpec::quic_default()),
    }
}

#[test]
fn config_validation() {
    let good = sample_config();
    assert_eq!(good.validate(), Ok(()));
    assert_eq!(good.capabilities(), CAP_ALL);
    let mut c = good.clone();
    c.identifier.as_mut().unwrap().width = 3;
    assert_eq!(c.validate(), Err(ConfigError::BadWidth(3)));
    let mut c = good.clone();
    c.robin.as_mut().unwrap().threshold = 0;
    assert_eq!(c.validate(), Err(ConfigError::BadThreshold(0)));
    let mut c = good.clone();
    c.robin.as_mut().unwrap().quack_on_gap_percent = MIN_GAP_PERCENT - 1;
    assert_eq!(
        c.validate(),
        Err(ConfigError::BadGapPercent(MIN_GAP_PERCENT - 1))
    );
    c.robin.as_mut().unwrap().quack_on_gap_percent = 150;
    assert_eq!(c.validate(), Ok(()));
    let mut c = good.clone();
    c.identifier.as_mut().unwrap().mode = IdentifierMode::KeyedHash as i32;
    assert_eq!(c.validate(), Err(ConfigError::BadHashKey(0)));
    c.identifier.as_mut().unwrap().hash_key = vec![1; 16];
    assert_eq!(c.validate(), Ok(()));
    let mut c = good.clone();
    c.identifier.as_mut().unwrap().mode = 9;
    assert_eq!(c.validate(), Err(ConfigError::BadMode(9)));
    let mut c = good.clone();
    c.packrat.as_mut().unwrap().eack_interval_ms = 0;
    c.packrat.as_mut().unwrap().eack_interval_packets = 0;
    assert_eq!(c.validate(), Err(ConfigError::NoInterval));
    let c = SessionConfig {
        robin: None,
        packrat: None,
        identifier: Some(IdentifierSpec::quic_default()),
    };
    assert_eq!(c.validate(), Err(ConfigError::NoMode));
}

#[test]
fn multicast_groups_are_multicast_addresses_and_ports() {
    let mut c = sample_config();
    let p = c.packrat.as_mut().unwrap();
    for g in ["239.1.2.3:5004", "[ff3e::1234]:9000"] {
        let a: std::net::SocketAddr = g.parse().unwrap();
        p.multicast_group = PackratConfig::encode_multicast_group(a);
        assert_eq!(p.multicast_group_addr(), Ok(Some(a)));
    }
    assert_eq!(c.validate(), Ok(()));
    let p = c.packrat.as_mut().unwrap();
    p.multicast_group = PackratConfig::encode_multicast_group("10.0.0.1:5004".parse().unwrap());
    assert_eq!(c.validate(), Err(ConfigError::BadMulticastGroup(6)));
    c.packrat.as_mut().unwrap().multicast_group = vec![239, 1, 2];
    assert_eq!(c.validate(), Err(ConfigError::BadMulticastGroup(3)));
    c.packrat.as_mut().unwrap().multicast_group.clear();
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(c.packrat.as_ref().unwrap().multicast_group_addr(), Ok(None));
}

#[test]
fn every_message_round_trips() {
    let msgs = vec![
        Message::Init(Init {
            capabilities: CAP_ALL,
            config: Some(sample_config()),
        }),
        Message::InitAck(InitAck {
            accepted: true,
            capabilities: CAP_ROBIN,
            config: Some(sample_config()),
            path_challenge: u64::MAX - 3,
            epoch: 0,
            reject_code: 0,
        }),
        Message::Config(Config {
            config_id: 7,
            config: Some(sample_config()),
            accepted: true,
            epoch: 3,
        }),
        Message::Reset(Reset {
            epoch: 9,
            reason: 3,
        }),
        Message::Quack(Quack {
            epoch: 2,
            data: vec![1, 2, 3, 4, 5],
        }),
        Message::Eack(Eack {
            epoch: 2,
            data: vec![9; 300],
            open_gaps: 3,
            number: 17,
        }),
        Message::EackOutcome(EackOutcome {
            epoch: 2,
            resent: 0,
            eack_number: 17,
        }),
        Message::Close(Close { reason: 0 }),
        Message::Error(ErrorMsg {
            code: 5,
            detail: "bad".into(),
        }),
        Message::Refresh(Refresh {
            path_response: 42,
            want_reply: true,
        }),
        Message::Challenge(Challenge { token: 77 }),
    ];
    for m in msgs {
        let body = m.encode_body();
        assert_eq!(Message::decode_body(m.msg_type(), &body), Ok(m.clone()));
        fuzz_decode_body(&[&[m.msg_type()], body.as_slice()].concat());
    }
}

#[test]
fn unknown_fields_are_tolerated() {
    let m = Quack {
        epoch: 5,
        data: vec![1, 2],
    };
    let mut body = m.encode_to_vec();
    // Field 99, varint: key = (99 << 3) | 0 = 792 → varint 0x98 0x06; value 1.
    body.extend_from_slice(&[0x98, 0x06, 0x01]);
    // Field 100, length-delimited, 3 bytes.
    body.extend_from_slice(&[0xa2, 0x06, 0x03, 0xaa, 0xbb, 0xcc]);
    assert_eq!(
        Message::decode_body(msg_type::QUACK, &body),
        Ok(Message::Quack(m))
    );
}

/// An eACK from a client that does not report its gaps (no field 3) reads as "none open", and
/// the outcome only travels from the proxy.
#[test]
fn eack_gaps_default_to_none_and_outcomes_go_to_the_client() {
    let old = Eack {
        epoch: 1,
        data: vec![7; 10],
        open_gaps: 0,
        number: 0,
    };
    let mut body = old.encode_to_vec();
    assert!(!body.contains(&0x18), "field 3 absent when 0");
    assert_eq!(
        Message::decode_body(msg_type::EACK, &body),
        Ok(Message::Eack(old.clone()))
    );
    body.extend_from_slice(&[0x18, 0x05]); // field 3 = 5
    assert!(matches!(
        Message::decode_body(msg_type::EACK, &body),
        Ok(Message::Eack(Eack { open_gaps: 5, .. }))
    ));
    assert!(Message::allowed(
        msg_type::EACK_OUTCOME,
        FrameDirection::ProxyToClient
    ));
    assert!(!Message::allowed(
        msg_type::EACK_OUTCOME,
        FrameDirection::ClientToProxy
    ));
}

#[test]
fn malformed_bodies_are_typed_errors() {
    assert_eq!(
        Message::decode_body(200, &[]),
        Err(Error::UnknownMessageType(200))
    );
    // Truncated length-delimited field.
    assert!(matches!(
        Message::decode_body(msg_type::QUACK, &[0x12, 0x05, 1]),
        Err(Error::Decode(_))
    ));
    // Init without a config.
    assert_eq!(
        Message::decode_body(msg_type::INIT, &[]),
        Err(Error::InvalidConfig(ConfigError::NoMode))
    );
    // Oversized error detail.
    let e = ErrorMsg {
        code: 1,
        detail: "x".repeat(MAX_ERROR_DETAIL + 1),
    };
    assert!(matches!(
        Message::decode_body(msg_type::ERROR, &e.encode_to_vec()),
        Err(Error::Oversized { .. })
    ));
}

#[test]
fn directions() {
    assert!(Message::allowed(
        msg_type::EACK,
        FrameDirection::ClientToProxy
    ));
    assert!(!Message::allowed(
        msg_type::EACK,
        FrameDirection::ProxyToClient
    ));
    assert!(!Message::allowed(
        msg_type::QUACK,
        FrameDirection::ClientToProxy
    ));
    assert!(Message::allowed(
        msg_type::RESET,
        FrameDirection::ClientToProxy
    ));
    assert!(!Message::allowed(0, FrameDirection::ClientToProxy));
}
