//! Engine tests: synthetic handshakes and flows through one [`PemiEngine`].

use super::*;
use crate::packet::{LinkType, build_udp_ip, parse_frame};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn long(ty: u8, len: usize) -> Vec<u8> {
    let mut p = vec![0xc0 | (ty << 4), 0, 0, 0, 1, 0, 0];
    if ty == 0 {
        p.push(0);
    }
    p.push(0x40 | (len >> 8) as u8);
    p.push(len as u8);
    p.extend(std::iter::repeat_n(0xaa, len));
    p
}

fn feed(e: &mut PemiEngine, now: Time, dir: Direction, payload: &[u8], out: &mut Vec<Action>) {
    let (c, s) = (
        "10.0.0.2:5000".parse().unwrap(),
        "10.0.0.9:443".parse().unwrap(),
    );
    let (src, dst) = match dir {
        Direction::FromClient => (c, s),
        Direction::ToClient => (s, c),
    };
    let frame = build_udp_ip(src, dst, payload, 64);
    let udp = parse_frame(&frame, LinkType::RawIp).unwrap();
    let pkt = Packet {
        frame: &frame,
        udp: &udp,
        payload: udp.payload(&frame),
        whole_frame: true,
    };
    e.on_packet(now, dir, &pkt, out);
}

/// Client Initial at `t0`, server Initial + Handshake 40 ms later, client Handshake 10 ms
/// after that: server RTT 40 ms, client RTT 10 ms.
fn handshake(e: &mut PemiEngine, t0: Time, out: &mut Vec<Action>) {
    feed(e, t0, Direction::FromClient, &long(0, 1180), out);
    let mut sh = long(0, 150);
    sh.extend(long(2, 1000));
    feed(e, t0 + ms(40), Direction::ToClient, &sh, out);
    feed(e, t0 + ms(50), Direction::FromClient, &long(2, 60), out);
}

/// Handshake (server RTT 40 ms, client RTT 10 ms), then `bursts` flights of 10 packets in
/// direction `data`, 30 ms apart, each answered by a small reply after the receiver's RTT.
fn flow(data: Direction, bursts: u64) -> (PemiEngine, Time) {
    let t0 = Time::ZERO;
    let mut e = PemiEngine::new(PemiConfig::default(), t0);
    let mut out = Vec::new();
    handshake(&mut e, t0, &mut out);
    let rtt = if data == Direction::ToClient {
        ms(10)
    } else {
        ms(40)
    };
    let mut evs: Vec<(Time, Direction, usize)> = Vec::new();
    for b in 0..bursts {
        for i in 0..10 {
            let t = t0 + ms(60 + 30 * b) + Duration::from_micros(500 * i);
            evs.push((t, data, 1200));
            evs.push((t + rtt, data.reverse(), 50));
        }
    }
    evs.sort_by_key(|e| e.0);
    for (t, d, len) in evs {
        feed(&mut e, t, d, &[0x41; 2000][..len], &mut out);
    }
    assert!(
        out.is_empty(),
        "nothing lost, nothing injected: {out:?} {:?}",
        e.stats
    );
    (e, t0 + ms(60 + 30 * bursts))
}

#[test]
fn gap_signal_retransmits_at_once_and_holds_replies() {
    let (mut e, t) = flow(Direction::ToClient, 4);
    let mut out = Vec::new();
    let pkt = |i: u8| [0x41, i].repeat(600);
    let at = |i: u64| t + ms(i);
    // Packets 1 ms apart, answered 10 ms later with 50-byte ACKs; packet 5 is lost after
    // the proxy, so the reply to 6 carries one more ACK range (52 bytes) until the repair's
    // ACK arrives.
    let mut evs: Vec<(Time, Direction, Vec<u8>)> = Vec::new();
    for i in 0..10u8 {
        evs.push((at(u64::from(i)), Direction::ToClient, pkt(i)));
        if i != 5 {
            let len = if i > 5 { 52 } else { 50 };
            evs.push((
                at(u64::from(i) + 10),
                Direction::FromClient,
                vec![0x41; len],
            ));
        }
    }
    evs.sort_by_key(|e| e.0);
    let mut held = Vec::new();
    for (now, dir, p) in evs {
        feed(&mut e, now, dir, &p, &mut out);
        for a in out.drain(..) {
            match a {
                Action::Inject { frame, .. } => {
                    let udp = parse_frame(&frame, LinkType::RawIp).unwrap();
                    // At once, on the first grown reply, and the lost packet itself.
                    assert_eq!(now, at(16));
                    assert_eq!(udp.payload(&frame), &pkt(5)[..]);
                }
                Action::Delay { until } => held.push((now, until)),
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    assert_eq!(e.stats.gap_retransmissions, 1, "{:?}", e.stats);
    assert_eq!(e.stats.retransmissions, 1, "{:?}", e.stats);
    // Every grown reply so far is held, for at most 1.5 RTTs + 1 ms after the signal.
    assert_eq!(held.len(), 4, "{held:?}");
    assert!(held.iter().all(|&(_, u)| u <= at(16) + ms(16)));
    // The repair's ACK (back to 50 bytes) goes at once.
    feed(&mut e, at(20), Direction::FromClient, &[0x41; 50], &mut out);
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(e.stats.replies_held, 4);
}

#[test]
fn initial_rtts_and_dominant_direction() {
    let (e, _) = flow(Direction::ToClient, 20);
    assert_eq!(e.stats.handshakes, 1);
    assert_eq!(e.dominant(), Some(Direction::ToClient));
    assert!(e.rtt_to(Direction::ToClient).unwrap().abs_diff(ms(10)) < ms(1));
    assert_eq!(e.rtt_to(Direction::FromClient), Some(ms(40)));
    assert!(e.stats.rtt_samples > 100);
    assert_eq!(e.stats.inferred_lost, 0);
    // An upload: the client's direction dominates, replies come from the server.
    let (u, _) = flow(Direction::FromClient, 20);
    assert_eq!(u.dominant(), Some(Direction::FromClient));
    assert!(u.stats.rtt_samples > 100);
    assert!(u.rtt_to(Direction::FromClient).unwrap().abs_diff(ms(40)) < ms(1));
}

#[test]
fn spin_bit_edges_calibrate_each_side() {
    let t0 = Time::ZERO;
    let mut e = PemiEngine::new(PemiConfig::default(), t0);
    let mut out = Vec::new();
    handshake(&mut e, t0, &mut out);
    let spin = |b: bool| [if b { 0x60 } else { 0x40 }, 1, 2, 3];
    feed(
        &mut e,
        t0 + ms(60),
        Direction::ToClient,
        &spin(false),
        &mut out,
    );
    feed(
        &mut e,
        t0 + ms(61),
        Direction::FromClient,
        &spin(false),
        &mut out,
    );
    // The server's edge passes at 100 ms, the client reflects it 12 ms later, the server
    // answers that edge 45 ms later.
    feed(
        &mut e,
        t0 + ms(100),
        Direction::ToClient,
        &spin(true),
        &mut out,
    );
    feed(
        &mut e,
        t0 + ms(112),
        Direction::FromClient,
        &spin(true),
        &mut out,
    );
    feed(
        &mut e,
        t0 + ms(157),
        Direction::ToClient,
        &spin(false),
        &mut out,
    );
    assert_eq!(e.stats.spin_samples, 2);
    let c = e.rtt_to(Direction::ToClient).unwrap();
    let s = e.rtt_to(Direction::FromClient).unwrap();
    assert!(c > ms(10) && c <= ms(12), "{c:?}");
    assert!(s > ms(40) && s <= ms(45), "{s:?}");
    // A randomised spin bit (edges every packet, 0.1 ms apart) yields no accepted sample.
    for i in 0..40u64 {
        let t = t0 + ms(200) + Duration::from_micros(100 * i);
        let d = if i % 2 == 0 {
            Direction::ToClient
        } else {
            Direction::FromClient
        };
        feed(&mut e, t, d, &spin(i % 4 < 2), &mut out);
    }
    assert_eq!(e.stats.spin_samples, 2);
}

#[test]
fn icmp_probes_once_per_end_to_end_rtt() {
    let (mut e, t) = flow(Direction::ToClient, 20);
    // No identifier from the core: no probing.
    assert_eq!(e.take_probe(t), None);
    e.set_probe_id(9);
    // End-to-end RTT ≈ 10 + 40 ms: one probe, then none until 50 ms have passed.
    assert_eq!(e.take_probe(t), Some((9, 1)));
    assert_eq!(e.take_probe(t + ms(30)), None);
    assert_eq!(e.take_probe(t + ms(51)), Some((9, 2)));
    // The reply to probe 2 after 11 ms is a sample of the client side; unknown ones are not.
    e.on_probe_reply(t + ms(62), 7);
    assert_eq!(e.stats.icmp_samples, 0);
    e.on_probe_reply(t + ms(62), 2);
    assert_eq!((e.stats.icmp_probes, e.stats.icmp_samples), (2, 1));
    assert!(e.rtt_to(Direction::ToClient).unwrap() > ms(10));
    // Answered once only.
    e.on_probe_reply(t + ms(63), 2);
    assert_eq!(e.stats.icmp_samples, 1);
    // Turned off in the configuration: never.
    let mut off = PemiEngine::new(
        PemiConfig {
            icmp_calibration: false,
            ..PemiConfig::default()
        },
        t,
    );
    off.set_probe_id(1);
    assert_eq!(off.take_probe(t), None);
}

#[test]
fn a_handshake_without_the_client_rtt_is_calibrated_by_the_first_echo() {
    let t0 = Time::ZERO;
    let mut e = PemiEngine::new(PemiConfig::default(), t0);
    e.set_probe_id(3);
    let mut out = Vec::new();
    feed(&mut e, t0, Direction::FromClient, &long(0, 1180), &mut out);
    // The server's Initial alone (its Handshake datagrams never passed the proxy), then the
    // client's 1-RTT: the handshake is over with no client-side RTT.
    feed(
        &mut e,
        t0 + ms(40),
        Direction::ToClient,
        &long(0, 150),
        &mut out,
    );
    feed(
        &mut e,
        t0 + ms(52),
        Direction::FromClient,
        &[0x41; 50],
        &mut out,
    );
    assert_eq!(e.rtt_to(Direction::ToClient), None);
    // A download. Without the client's RTT nothing is protected, but the probe may go once
    // the protected direction is known.
    let mut probe = None;
    for i in 0..200u64 {
        let t = t0 + ms(60) + Duration::from_micros(500 * i);
        feed(&mut e, t, Direction::ToClient, &[0x41; 1200], &mut out);
        if probe.is_none() {
            probe = e.take_probe(t).map(|p| (p, t));
        }
    }
    assert_eq!(e.stats.protected, 0);
    let ((id, seq), sent) = probe.expect("a probe once the protected direction is known");
    assert_eq!(id, 3);
    e.on_probe_reply(sent + ms(10), seq);
    assert_eq!(e.rtt_to(Direction::ToClient), Some(ms(10)));
    // From the first sample on, the download is protected.
    let t = t0 + ms(200);
    feed(&mut e, t, Direction::ToClient, &[0x41; 1200], &mut out);
    assert_eq!(e.stats.protected, 1);
}

#[test]
fn calibration_resets_on_large_deviation() {
    let (mut e, t) = flow(Direction::ToClient, 20);
    // Within Δ_margin: smoothed in.
    let before = e.rtt_to(Direction::ToClient).unwrap();
    e.on_calibration_sample(t, Direction::ToClient, before + Duration::from_micros(100));
    assert_eq!(e.stats.rtt_resets, 0);
    // 30 ms against ≈ 10 ms: reset to the sample (App. A).
    e.on_calibration_sample(t, Direction::ToClient, ms(30));
    assert_eq!(e.stats.rtt_resets, 1);
    assert_eq!(e.rtt_to(Direction::ToClient), Some(ms(30)));
}

/// A receiver whose replies the timing inference cannot read (one ACK per four packets, a
/// `max_ack_delay` late, as the s2n-quic client's; nothing is lost): the flowlet matching names
/// most packets lost, and once the flow's recent record is implausible as a whole its timing
/// retransmissions stop. With the per-flow judgement off (an implausible share of 1), the
/// per-flowlet guard alone lets many spurious copies through.
#[test]
fn a_flow_whose_replies_cannot_be_read_is_forwarded_as_it_is() {
    let run = |implausible_loss: f64| {
        let t0 = Time::ZERO;
        // Timing inference alone: on this client the gap signal never measures (its replies
        // do not grow by a range per gap).
        let cfg = PemiConfig {
            implausible_loss,
            gap_signal: false,
            ..PemiConfig::default()
        };
        let mut e = PemiEngine::new(cfg, t0);
        let mut out = Vec::new();
        handshake(&mut e, t0, &mut out);
        let mut evs: Vec<(Time, Direction, usize)> = Vec::new();
        for b in 0..120u64 {
            for i in 0..10u64 {
                let t = t0 + ms(60 + 30 * b) + Duration::from_micros(500 * i);
                evs.push((t, Direction::ToClient, 1200));
                if i % 4 == 3 {
                    // 10 ms back to the receiver and 20 ms of ACK delay.
                    evs.push((t + ms(30), Direction::FromClient, 45));
                }
            }
        }
        evs.sort_by_key(|e| e.0);
        let mut injected = 0;
        for (t, d, len) in evs {
            feed(&mut e, t, d, &[0x41; 2000][..len], &mut out);
            injected += out
                .drain(..)
                .filter(|a| matches!(a, Action::Inject { .. }))
                .count();
        }
        (e.stats, injected)
    };
    let (with, injected) = run(0.5);
    assert!(with.inferred_lost > with.protected / 2, "{with:?}");
    assert!(with.giveup_unreadable_flow > 10, "{with:?}");
    let (without, injected_without) = run(1.0);
    assert_eq!(without.giveup_unreadable_flow, 0, "{without:?}");
    eprintln!("copies: {injected} with the judgement, {injected_without} without");
    assert!(
        injected * 4 <= injected_without,
        "{injected} vs {injected_without}"
    );
}
