//! The committed fuzz seeds of the protocol's targets (`fuzz/corpus/{discovery, frame_open,
//! message_body, table}/`): a real discovery exchange, every message type sealed under the fuzz
//! key in its direction, every message body, and session-table scripts. Every seed runs through
//! its fuzz body here; `SIDEKICK_WRITE_FUZZ_SEEDS=1 cargo test -p sidekick-protocol --test
//! fuzz_corpus` rewrites them.
#![allow(clippy::unwrap_used)]

use sidekick_protocol::Time;

use sidekick_protocol::messages::{
    Challenge, Close, Config, Eack, EackOutcome, ErrorMsg, IdentifierSpec, Init, InitAck,
    PackratConfig, Quack, Refresh, Reset, RobinConfig, msg_type,
};
use sidekick_protocol::{
    BaseFlow, ClientConfig, ClientSession, FrameDirection, Message, ProxyPolicy, ProxySessionTable,
    SessionConfig, SessionId, SessionKey, TagLen, frame, fuzz, is_discovery_request,
};

/// The committed seeds of `target` (`fuzz/corpus/TARGET/`).
fn corpus(target: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

/// With `SIDEKICK_WRITE_FUZZ_SEEDS=1`, (re)writes the seeds of `target`; then runs every seed
/// of `target` through its fuzz body (a seed that once crashed stays a regression test).
fn seeds(target: &str, make: impl FnOnce() -> Vec<(&'static str, Vec<u8>)>, body: fn(&[u8])) {
    let dir = corpus(target);
    if std::env::var_os("SIDEKICK_WRITE_FUZZ_SEEDS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in make() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        body(&bytes);
        n += 1;
    }
    assert!(n > 0, "no seeds in {}", dir.display());
}

fn config() -> SessionConfig {
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

/// One message of every type, named, with the direction it travels in.
fn messages() -> Vec<(&'static str, FrameDirection, Message)> {
    use FrameDirection::{ClientToProxy as C, ProxyToClient as P};
    vec![
        (
            "init",
            C,
            Message::Init(Init {
                capabilities: 3,
                config: Some(config()),
            }),
        ),
        (
            "init-ack",
            P,
            Message::InitAck(InitAck {
                accepted: true,
                capabilities: 3,
                config: Some(config()),
                path_challenge: 0x1122_3344_5566_7788,
                epoch: 1,
                reject_code: 0,
            }),
        ),
        (
            "config",
            C,
            Message::Config(Config {
                config_id: 2,
                config: Some(config()),
                accepted: false,
                epoch: 0,
            }),
        ),
        (
            "reset",
            P,
            Message::Reset(Reset {
                epoch: 2,
                reason: 3,
            }),
        ),
        (
            "quack",
            P,
            Message::Quack(Quack {
                epoch: 1,
                data: vec![0x11, 0x02, 8, 0, 3, 0, 0, 0, 7, 7, 7, 7],
            }),
        ),
        (
            "eack",
            C,
            Message::Eack(Eack {
                epoch: 1,
                data: vec![1, 0, 0, 0, 4, 0, 0, 0, 9, 9, 9, 9],
                open_gaps: 0,
                number: 0,
            }),
        ),
        (
            "eack-gaps",
            C,
            Message::Eack(Eack {
                epoch: 1,
                data: vec![1, 0, 0, 0, 4, 0, 0, 0, 9, 9, 9, 9],
                open_gaps: 2,
                number: 3,
            }),
        ),
        (
            "eack-outcome",
            P,
            Message::EackOutcome(EackOutcome {
                epoch: 1,
                resent: 0,
                eack_number: 3,
            }),
        ),
        ("close", C, Message::Close(Close { reason: 0 })),
        (
            "error",
            P,
            Message::Error(ErrorMsg {
                code: 3,
                detail: "eACK did not decode".into(),
            }),
        ),
        (
            "refresh",
            C,
            Message::Refresh(Refresh {
                path_response: 0x1122_3344_5566_7788,
                want_reply: true,
            }),
        ),
        ("challenge", P, Message::Challenge(Challenge { token: 42 })),
    ]
}

fn discovery_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let now = Time::ZERO;
    let mut client = ClientSession::new(ClientConfig::new(config()));
    client.start(now).unwrap();
    let req = client.poll_transmit().unwrap().bytes;
    let mut proxy = ProxySessionTable::new(ProxyPolicy::new("192.0.2.1:7000".parse().unwrap()));
    let base = BaseFlow {
        client: "10.0.0.2:5000".parse().unwrap(),
        server: "203.0.113.5:443".parse().unwrap(),
    };
    let reply = proxy
        .handle_discovery(now, base, &is_discovery_request(&req).unwrap())
        .unwrap();
    vec![("request", req), ("reply", reply.bytes.to_vec())]
}

fn frame_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let key = SessionKey::from_bytes(&[0x5a; 32]);
    messages()
        .into_iter()
        .enumerate()
        .map(|(i, (name, dir, m))| {
            let tag = if i % 3 == 0 {
                TagLen::Long
            } else {
                TagLen::Short
            };
            let f = frame::seal(dir, tag, SessionId([7; 16]), i as u64 + 1, 64, &m, &key).unwrap();
            (name, f)
        })
        .collect()
}

fn body_seeds() -> Vec<(&'static str, Vec<u8>)> {
    messages()
        .into_iter()
        .map(|(name, _, m)| {
            let mut b = vec![m.msg_type()];
            b.extend_from_slice(&m.encode_body());
            (name, b)
        })
        .collect()
}

/// Scripts for the session-table body: `op, len, payload` with op 2 = a frame sealed under the
/// session key from the client (`payload` = type, quota/16, body), 4 = time, 5 = proxy sends.
fn table_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let step = |op: u8, payload: &[u8]| {
        let mut v = vec![op, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    };
    let framed = |ty: u8, m: &Message| {
        let mut p = vec![ty, 4];
        p.extend_from_slice(&m.encode_body());
        step(2, &p)
    };
    let mut refresh = framed(
        msg_type::REFRESH,
        &Message::Refresh(Refresh {
            path_response: 0,
            want_reply: true,
        }),
    );
    refresh.extend(step(4, &[]));
    refresh.extend(step(5, &[0, 1, 2, 3]));
    let mut reset = framed(
        msg_type::RESET,
        &Message::Reset(Reset {
            epoch: 2,
            reason: 0,
        }),
    );
    reset.extend(step(5, &[1]));
    let mut config_eack = framed(
        msg_type::CONFIG,
        &Message::Config(Config {
            config_id: 1,
            config: Some(config()),
            accepted: false,
            epoch: 0,
        }),
    );
    config_eack.extend(framed(
        msg_type::EACK,
        &Message::Eack(Eack {
            epoch: 1,
            data: vec![1, 2, 3],
            open_gaps: 0,
            number: 0,
        }),
    ));
    config_eack.extend(step(3, &[msg_type::CLOSE, 0]));
    let mut raw = step(0, b"not a frame");
    raw.extend(step(1, &[0x53, 0x4b, 1, 9]));
    vec![
        ("refresh", refresh),
        ("reset", reset),
        ("config-eack-close", config_eack),
        ("raw", raw),
    ]
}

#[test]
fn fuzz_seeds() {
    seeds("discovery", discovery_seeds, fuzz::fuzz_discovery);
    seeds("frame_open", frame_seeds, fuzz::fuzz_open);
    seeds("message_body", body_seeds, fuzz::fuzz_decode_body);
    seeds("table", table_seeds, fuzz::fuzz_table);
}
