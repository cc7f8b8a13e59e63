//! Unit tests of the handshake rescue with QUIC v1 long-header datagrams built by hand (the
//! cleartext fields only; the protected parts are zeros, as the rescue never reads them).

use super::*;
use proptest::prelude::*;
use std::net::SocketAddr;

const ODCID: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
const SCID: [u8; 8] = [9; 8];

fn key(port: u16) -> FlowKey {
    FlowKey {
        client: SocketAddr::from(([10, 0, 2, 2], port)),
        server: SocketAddr::from(([10, 0, 0, 1], 443)),
    }
}

/// A long-header packet of type bits `ty` (v1: 0 Initial, 2 Handshake, 3 Retry) with a Length
/// field covering `body` zero bytes.
fn long(ty: u8, dcid: &[u8], scid: &[u8], body: usize) -> Vec<u8> {
    let mut p = vec![0xc0 | (ty << 4), 0, 0, 0, 1, dcid.len() as u8];
    p.extend_from_slice(dcid);
    p.push(scid.len() as u8);
    p.extend_from_slice(scid);
    if ty == 3 {
        p.extend_from_slice(&[0; 24]);
        return p;
    }
    if ty == 0 {
        p.push(0); // token length
    }
    p.extend_from_slice(&[0x40 | (body >> 8) as u8, body as u8]);
    p.resize(p.len() + body, 0);
    p
}

fn client_initial(dcid: &[u8]) -> Vec<u8> {
    let mut d = long(0, dcid, &[7; 8], 300);
    d.resize(1200, 0);
    d
}

/// The server's first flight: Initial + Handshake, then two Handshake datagrams.
fn server_flight() -> Vec<Vec<u8>> {
    let mut d1 = long(0, &[7; 8], &SCID, 120);
    d1.extend(long(2, &[7; 8], &SCID, 1000));
    vec![
        d1,
        long(2, &[7; 8], &SCID, 1150),
        long(2, &[7; 8], &SCID, 900),
    ]
}

/// The client's Initial ACK (addressed to the server's SCID), padded as RFC 9000 §14.1 asks.
fn client_ack() -> Vec<u8> {
    let mut d = long(0, &SCID, &[7; 8], 40);
    d.resize(1200, 0);
    d
}

/// A client's Handshake-level ACK alone, unpadded (what Debian's ngtcp2 client answers the
/// server's first datagram with: 61 bytes in the lab).
fn client_handshake_ack() -> Vec<u8> {
    long(2, &SCID, &[7; 8], 30)
}

fn short() -> Vec<u8> {
    let mut d = vec![0x40];
    d.extend_from_slice(&SCID);
    d.resize(60, 0);
    d
}

struct Rig {
    r: HandshakeRescue,
    budget: MemoryBudget,
    out: InjectQueue,
    t0: Time,
}

impl Rig {
    fn new(budget: usize) -> Self {
        Self {
            r: HandshakeRescue::new(RescueConfig::default()),
            budget: MemoryBudget::new(budget),
            out: InjectQueue::default(),
            t0: Time::ZERO,
        }
    }
    fn at(&self, ms: u64) -> Time {
        self.t0 + Duration::from_millis(ms)
    }
    fn feed(&mut self, ms: u64, dir: Direction, k: FlowKey, d: &[u8]) {
        self.feed_us(ms * 1000, dir, k, d);
    }
    fn feed_us(&mut self, us: u64, dir: Direction, k: FlowKey, d: &[u8]) {
        let now = self.t0 + Duration::from_micros(us);
        let dg = Datagram {
            dir,
            key: k,
            frame: d,
            payload: d,
            udp: &bare_udp(d.len()),
            csum: false,
        };
        self.r.on_datagram(now, dg, &mut self.budget, &mut self.out);
    }
    fn tick(&mut self, ms: u64) {
        self.tick_us(ms * 1000);
    }
    fn tick_us(&mut self, us: u64) {
        let now = self.t0 + Duration::from_micros(us);
        self.r.handle_timeout(now, &mut self.budget, &mut self.out);
    }
    fn drained(&mut self) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        while let Some(super::super::output::Transmit::Inject { dir, frame }) = self.out.pop() {
            assert_eq!(dir, Direction::ToClient);
            v.push(frame);
        }
        v
    }
    /// Client Initial at 0, the server's flight at 10/11/12 ms, the client's ACK at 13 ms
    /// (r = 3 ms).
    fn handshake_until_first_ack(&mut self) {
        self.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
        for (i, d) in server_flight().iter().enumerate() {
            self.feed(10 + i as u64, Direction::ToClient, key(1), d);
        }
        self.feed(13, Direction::FromClient, key(1), &client_ack());
    }
}

#[test]
fn no_loss_means_no_replay_and_memory_returns() {
    let mut g = Rig::new(1 << 20);
    g.handshake_until_first_ack();
    assert_eq!(g.r.stats.kept, 3);
    assert!(g.budget.reserved() > 3000);
    // The client completes (Handshake + 1-RTT) within one round trip of the last datagram.
    g.feed(15, Direction::FromClient, key(1), &completion());
    assert_eq!(g.r.stats.completed, 1);
    assert!(g.r.is_empty());
    // The kept datagrams' memory returns; what stays is the client's pace.
    assert_eq!(g.budget.reserved(), CLIENT_PACE_BYTES);
    g.tick(5000);
    assert!(g.drained().is_empty());
    assert_eq!(g.r.stats.replays, 0);
    assert_eq!(g.r.stats.wait_for_cert, 1);
}

#[test]
fn missing_completion_replays_the_flight_once() {
    let mut g = Rig::new(1 << 20);
    g.handshake_until_first_ack();
    // r = 3 ms: the deadline is 12 + 6 + 5 = 23 ms.
    assert_eq!(g.r.poll_timeout(), Some(g.at(23)));
    g.tick(22);
    assert!(g.drained().is_empty());
    g.tick(23);
    let replayed = g.drained();
    assert_eq!(replayed, server_flight(), "identical datagrams, in order");
    assert_eq!(g.r.stats.silence_triggers, 1);
    // Later probes and timers replay nothing again.
    g.feed(40, Direction::FromClient, key(1), &client_ack());
    g.tick(100);
    assert!(g.drained().is_empty());
    assert_eq!(g.r.stats.replays, 3);
    // A server retransmission is kept and may be replayed once, on its own silence.
    g.feed(
        60,
        Direction::ToClient,
        key(1),
        &long(2, &[7; 8], &SCID, 1150),
    );
    g.tick(60 + 6 + 5);
    assert_eq!(g.drained().len(), 1);
}

#[test]
fn repeated_first_initial_replays_at_once() {
    let mut g = Rig::new(1 << 20);
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    for (i, d) in server_flight().iter().enumerate() {
        g.feed(10 + i as u64, Direction::ToClient, key(1), d);
    }
    // The server's Initial never arrived: the client's PTO probe still uses its first DCID.
    // Its first datagram after the flight sets r; being a repeated first Initial it triggers
    // (here before the no-answer wait, as a client with a short PTO would).
    g.feed(15, Direction::FromClient, key(1), &client_initial(&ODCID));
    assert_eq!(g.drained().len(), 3);
    assert_eq!(g.r.stats.probe_triggers, 1);
    // The client completes at once: a probe round teaches no pace, however soon the answer.
    g.feed(16, Direction::FromClient, key(1), &completion());
    assert_eq!(g.r.stats.completed, 1);
    assert_eq!((g.r.stats.paces_learned, g.r.stats.spurious_rounds), (0, 0));
    assert_eq!(g.r.client_pace(key(1).client.ip()), None);
}

#[test]
fn slow_server_does_not_trigger_and_client_retransmissions_are_ignored() {
    let mut g = Rig::new(1 << 20);
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    // Δt: the client's own Initial retransmission before the server answered.
    g.feed(250, Direction::FromClient, key(1), &client_initial(&ODCID));
    assert!(g.drained().is_empty());
    assert_eq!(g.r.poll_timeout(), Some(g.at(3000)));
}

#[test]
fn a_client_silent_after_the_flight_gets_it_again() {
    let mut g = Rig::new(1 << 20);
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    for (i, d) in server_flight().iter().enumerate() {
        g.feed(10 + i as u64, Direction::ToClient, key(1), d);
    }
    // Nothing from the client: the round trip is unknown, the wait is `no_answer_wait`.
    assert_eq!(g.r.poll_timeout(), Some(g.at(12 + 20)));
    g.tick(32);
    assert_eq!(g.drained().len(), 3);
    assert_eq!(g.r.stats.silence_triggers, 1);
}

#[test]
fn retry_and_version_negotiation_end_the_entry() {
    let mut g = Rig::new(1 << 20);
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    g.feed(5, Direction::ToClient, key(1), &long(3, &[7; 8], &SCID, 0));
    assert!(g.r.is_empty());
    let mut vn = vec![0x80, 0, 0, 0, 0, 8];
    vn.extend_from_slice(&[7; 8]);
    vn.push(8);
    vn.extend_from_slice(&ODCID);
    vn.extend_from_slice(&[0, 0, 0, 1]);
    g.feed(10, Direction::FromClient, key(2), &client_initial(&ODCID));
    g.feed(11, Direction::ToClient, key(2), &vn);
    assert!(g.r.is_empty());
    assert_eq!(g.r.stats.retry_or_vn, 2);
    assert_eq!(g.budget.reserved(), 0);
}

#[test]
fn only_flows_opened_by_a_client_initial_are_kept() {
    let mut g = Rig::new(1 << 20);
    // Server datagrams towards an address that sent no Initial: nothing kept.
    for d in server_flight() {
        g.feed(1, Direction::ToClient, key(9), &d);
    }
    // A short Initial (not padded to 1200 bytes) opens nothing; nor does a short header.
    g.feed(
        2,
        Direction::FromClient,
        key(3),
        &long(0, &ODCID, &[7; 8], 300),
    );
    g.feed(2, Direction::FromClient, key(4), &short());
    assert!(g.r.is_empty());
    assert_eq!(g.r.stats.kept, 0);
    // A spoofed Initial from another address opens its own entry only: the real client's
    // flight is not kept under it, and its replays would go to the spoofed address' flow only
    // if the server answered that address.
    g.feed(3, Direction::FromClient, key(5), &client_initial(&ODCID));
    for d in server_flight() {
        g.feed(4, Direction::ToClient, key(6), &d);
    }
    assert_eq!(g.r.stats.kept, 0);
    g.tick(4000);
    assert!(g.drained().is_empty());
    assert_eq!(g.r.stats.expired, 1);
}

#[test]
fn caps_and_budget_bound_what_is_kept() {
    // A budget smaller than the flight: the rest is refused, counted, and never replayed.
    let mut g = Rig::new(2500);
    g.handshake_until_first_ack();
    assert!(g.budget.reserved() <= 2500);
    assert!(g.r.stats.refused >= 1);
    g.tick(1000);
    let n = g.drained().len() as u64;
    assert_eq!(n, g.r.stats.kept);
    // The entry table is capped too.
    let mut g = Rig::new(1 << 20);
    g.r = HandshakeRescue::new(RescueConfig {
        max_flows: 2,
        ..RescueConfig::default()
    });
    for p in 0..5 {
        g.feed(0, Direction::FromClient, key(p), &client_initial(&ODCID));
    }
    assert_eq!(g.r.len(), 2);
}

#[test]
fn replays_stay_within_three_times_the_client_bytes() {
    let mut g = Rig::new(1 << 20);
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    // A flight of four full datagrams (4 × ~1200 B) against one 1200-byte Initial: three fit.
    for i in 0..4 {
        g.feed(
            10 + i,
            Direction::ToClient,
            key(1),
            &long(2, &[7; 8], &SCID, 1150),
        );
    }
    g.tick(1000);
    assert_eq!(g.drained().len(), 3);
    assert_eq!(g.r.stats.amplification_refused, 1);
    // The client's probe raises its allowance: the fourth goes out, once.
    g.feed(1001, Direction::FromClient, key(1), &client_initial(&ODCID));
    assert_eq!(g.drained().len(), 1);
    g.feed(1002, Direction::FromClient, key(1), &client_initial(&ODCID));
    assert!(g.drained().is_empty());
}

#[test]
fn a_server_at_its_amplification_limit_is_given_time() {
    let mut g = Rig::new(1 << 20);
    // Client Initial at 0; the server answers at 40 ms (proxy–server RTT 40 ms) with three full
    // datagrams: 3× the client's bytes, it must wait for the client.
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    for i in 0..3 {
        g.feed(
            40 + i,
            Direction::ToClient,
            key(1),
            &long(2, &[7; 8], &SCID, 1150),
        );
    }
    // The client acknowledges at 43 ms (r = 3 ms), which unblocks the server: the rest of the
    // flight reaches the proxy at 83 ms, long after 42 + 2 r + 5 ms.
    g.feed(43, Direction::FromClient, key(1), &client_ack());
    g.tick(60);
    assert!(
        g.drained().is_empty(),
        "no replay while the server is blocked"
    );
    g.feed(
        83,
        Direction::ToClient,
        key(1),
        &long(2, &[7; 8], &SCID, 900),
    );
    g.feed(86, Direction::FromClient, key(1), &short());
    g.tick(5000);
    assert!(g.drained().is_empty());
    assert_eq!(g.r.stats.completed, 1);
    // Had the rest been lost, the replay comes one server round trip after the unblocking.
    let mut g = Rig::new(1 << 20);
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    for i in 0..3 {
        g.feed(
            40 + i,
            Direction::ToClient,
            key(1),
            &long(2, &[7; 8], &SCID, 1150),
        );
    }
    g.feed(43, Direction::FromClient, key(1), &client_ack());
    assert_eq!(g.r.poll_timeout(), Some(g.at(43 + 40 + 6 + 5)));
}

#[test]
fn never_completing_handshake_expires() {
    let mut g = Rig::new(1 << 20);
    g.handshake_until_first_ack();
    g.tick(23);
    g.drained();
    g.tick(3000);
    assert!(g.r.is_empty());
    assert_eq!(g.budget.reserved(), 0);
    assert_eq!(g.r.poll_timeout(), None);
}

#[test]
fn instant_ack_is_recognised() {
    let mut g = Rig::new(1 << 20);
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    g.feed(5, Direction::ToClient, key(1), &long(0, &[7; 8], &SCID, 30));
    assert_eq!((g.r.stats.instant_acks, g.r.stats.wait_for_cert), (1, 0));
}

/// Behind an instant ACK the round trip is timed from the ServerHello, which the client
/// answers, not from the ACK, which it does not: a server that takes 8 ms to send its flight
/// after the ACK must not make the silence wait 16 ms longer.
#[test]
fn an_instant_ack_does_not_stretch_the_round_trip() {
    let mut g = Rig::new(1 << 20);
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    // The quic-go client's ClientHello spans two Initials.
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    g.feed(2, Direction::ToClient, key(1), &long(0, &[7; 8], &SCID, 30));
    for (i, d) in server_flight().iter().enumerate() {
        g.feed(10 + i as u64, Direction::ToClient, key(1), d);
    }
    // The client acknowledges the ServerHello 3 ms after it passed: r = 3 ms, not 11.
    g.feed(13, Direction::FromClient, key(1), &client_ack());
    assert_eq!(g.r.stats.instant_acks, 1);
    assert_eq!(g.r.poll_timeout(), Some(g.at(12 + 2 * 3 + 5)));
    g.tick(23);
    assert_eq!(g.drained().len(), 4, "the ACK and the flight, once each");
}

/// An instant ACK padded to a full datagram (an Initial too long to be known as ACK-only from
/// its header) is recognised by the Initial that follows it, and the round trip is timed from
/// that ServerHello.
#[test]
fn a_padded_instant_ack_is_recognised_by_the_initial_after_it() {
    let mut g = Rig::new(1 << 20);
    // A ClientHello in two Initials (what makes servers answer with an instant ACK here).
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    g.feed(
        2,
        Direction::ToClient,
        key(1),
        &long(0, &[7; 8], &SCID, 1150),
    );
    assert_eq!((g.r.stats.instant_acks, g.r.stats.wait_for_cert), (0, 1));
    for (i, d) in server_flight().iter().enumerate() {
        g.feed(10 + i as u64, Direction::ToClient, key(1), d);
    }
    assert_eq!((g.r.stats.instant_acks, g.r.stats.wait_for_cert), (1, 0));
    g.feed(13, Direction::FromClient, key(1), &client_ack());
    assert_eq!(g.r.poll_timeout(), Some(g.at(12 + 2 * 3 + 5)));
    // A "wait for certificate" flight (Initial + Handshake first, Handshake after) stays one.
    let mut g = Rig::new(1 << 20);
    g.handshake_until_first_ack();
    assert_eq!((g.r.stats.instant_acks, g.r.stats.wait_for_cert), (0, 1));
}

/// The client's completion: its Handshake Finished with a 1-RTT packet.
fn completion() -> Vec<u8> {
    let mut fin = long(2, &SCID, &[7; 8], 60);
    fin.extend(short());
    fin
}

/// One handshake of flow `k` timed as Debian's ngtcp2 client against the quinn server in the lab
/// (`lan.drop=none`, 26 Nov 2026, captured on the last hop): the server's two kept datagrams at
/// 11.2 and 11.6 ms, the client's ACK at 13.9 ms (r = 2.7 ms; a Handshake packet, as that client
/// sends), the silence wait ticked at 22.0 ms (2 r + 5 ms after the last datagram, without a
/// learned pace), the client's completion (it held the whole flight) at `done_us`, 21.9 to
/// 22.1 ms in the capture. Returns the replays.
fn slow_client_handshake(g: &mut Rig, k: FlowKey, done_us: u64) -> usize {
    let flight = server_flight();
    g.feed(0, Direction::FromClient, k, &client_initial(&ODCID));
    g.feed_us(11_200, Direction::ToClient, k, &flight[0]);
    g.feed_us(11_600, Direction::ToClient, k, &flight[1]);
    g.feed_us(13_900, Direction::FromClient, k, &client_handshake_ack());
    g.tick_us(done_us.min(22_000));
    let replays = g.drained().len();
    g.feed_us(done_us, Direction::FromClient, k, &completion());
    replays
}

#[test]
fn a_slow_client_teaches_its_pace_from_completions_without_replay() {
    let mut g = Rig::new(1 << 20);
    let ip = key(1).client.ip();
    // First handshake: 2 r + 5 ms after the last datagram (11.6 + 5.4 + 5 = 22.0 ms) the client
    // has not completed; the round goes out, and the completion comes back 0.1 ms later, sooner
    // than a replay could be answered as `r` times it: a spurious round, counted, but a replayed
    // round teaches nothing.
    assert_eq!(slow_client_handshake(&mut g, key(1), 22_100), 2);
    assert_eq!(g.r.stats.spurious_rounds, 1);
    assert_eq!(g.r.stats.paces_learned, 0);
    assert_eq!(g.r.client_pace(ip), None);
    // Next handshake: the completion at 21.9 ms beats the wait, 4.9 ms beyond two round trips
    // (21.9 - 11.6 - 2 x 2.7): learned.
    assert_eq!(slow_client_handshake(&mut g, key(2), 21_900), 0);
    assert_eq!(g.r.client_pace(ip), Some(Duration::from_micros(4_900)));
    // The same client's next handshake waits that much longer: its 22.1 ms completion draws no
    // replay, and the longer sample counts at once.
    assert_eq!(slow_client_handshake(&mut g, key(3), 22_100), 0);
    assert_eq!(g.r.stats.replays, 2);
    assert_eq!(g.r.stats.paces_learned, 2);
    assert_eq!(g.r.client_pace(ip), Some(Duration::from_micros(5_100)));
    // Another client starts from nothing.
    let other = FlowKey {
        client: SocketAddr::from(([10, 0, 2, 3], 1)),
        ..key(1)
    };
    assert_eq!(g.r.client_pace(other.client.ip()), None);
    assert_eq!(slow_client_handshake(&mut g, other, 22_100), 2);
    assert!(g.r.is_empty());
    assert_eq!(g.budget.reserved(), g.r.charged_bytes());
}

#[test]
fn a_pace_learned_on_one_core_reaches_the_others() {
    // Two cores (workers) of one access point: the client's first connection lands on `a`.
    let mut a = Rig::new(1 << 20);
    let mut b = Rig::new(1 << 20);
    assert_eq!(slow_client_handshake(&mut a, key(1), 21_900), 0);
    let lesson = a.r.poll_lesson().expect("a lesson");
    assert_eq!(a.r.poll_lesson(), None);
    assert_eq!(lesson.client, key(1).client.ip());
    assert_eq!(lesson.extra, Duration::from_micros(4_900));
    // Its next connection lands on `b`, which was told: no replay there either.
    b.r.handle_lesson(b.at(30), lesson, &mut b.budget);
    assert_eq!(
        b.r.poll_lesson(),
        None,
        "a lesson taught is not put out again"
    );
    assert_eq!(slow_client_handshake(&mut b, key(2), 22_100), 0);
    assert_eq!(b.budget.reserved(), b.r.charged_bytes());
}

#[test]
fn a_real_loss_teaches_nothing_and_keeps_the_next_rescue_as_early() {
    let mut g = Rig::new(1 << 20);
    // A lossless handshake: completion 3 ms after the last datagram (r = 3 ms): nothing beyond
    // two round trips.
    g.handshake_until_first_ack();
    g.feed(15, Direction::FromClient, key(1), &completion());
    let ip = key(1).client.ip();
    assert_eq!(g.r.client_pace(ip), Some(Duration::ZERO));
    // Its next handshakes lose a datagram on the last hop: the replay at 23 ms (12 + 2 x 3 + 5)
    // is what completes them, one round trip and 1 ms of work later. Nothing is learned, and
    // each rescue comes as early as the first.
    for port in 2..5 {
        g.feed(0, Direction::FromClient, key(port), &client_initial(&ODCID));
        for (i, d) in server_flight().iter().enumerate() {
            g.feed(10 + i as u64, Direction::ToClient, key(port), d);
        }
        g.feed(13, Direction::FromClient, key(port), &client_ack());
        assert_eq!(g.r.poll_timeout(), Some(g.at(23)));
        g.tick(23);
        assert_eq!(g.drained().len(), 3);
        g.feed(27, Direction::FromClient, key(port), &completion());
    }
    assert_eq!(g.r.stats.silence_triggers, 3);
    assert_eq!(g.r.stats.spurious_rounds, 0);
    assert_eq!(g.r.stats.paces_learned, 1);
    assert_eq!(g.r.client_pace(ip), Some(Duration::ZERO));
}

#[test]
fn a_faster_completion_lowers_the_pace_by_a_quarter_of_the_difference() {
    let mut g = Rig::new(1 << 20);
    assert_eq!(slow_client_handshake(&mut g, key(1), 21_900), 0);
    let ip = key(1).client.ip();
    assert_eq!(g.r.client_pace(ip), Some(Duration::from_micros(4_900)));
    // Completion 3 ms after the last datagram with r = 3 ms: a sample of zero.
    g.feed(100, Direction::FromClient, key(2), &client_initial(&ODCID));
    for (i, d) in server_flight().iter().enumerate() {
        g.feed(110 + i as u64, Direction::ToClient, key(2), d);
    }
    g.feed(113, Direction::FromClient, key(2), &client_ack());
    g.feed(115, Direction::FromClient, key(2), &completion());
    assert_eq!(g.r.client_pace(ip), Some(Duration::from_micros(3_675)));
}

#[test]
fn remembered_clients_are_capped_and_charged_to_the_budget() {
    let mut g = Rig::new(1 << 20);
    g.r = HandshakeRescue::new(RescueConfig {
        max_clients: 2,
        ..RescueConfig::default()
    });
    for host in 1..=3u8 {
        let k = FlowKey {
            client: SocketAddr::from(([10, 0, 2, host], 1)),
            ..key(1)
        };
        g.t0 += Duration::from_secs(1);
        slow_client_handshake(&mut g, k, 21_900);
    }
    // The first client, taught longest ago, is forgotten.
    assert_eq!(
        g.r.client_pace(SocketAddr::from(([10, 0, 2, 1], 1)).ip()),
        None
    );
    assert!(
        g.r.client_pace(SocketAddr::from(([10, 0, 2, 3], 1)).ip())
            .is_some()
    );
    assert_eq!(g.budget.reserved(), 2 * CLIENT_PACE_BYTES);
    assert_eq!(g.budget.reserved(), g.r.charged_bytes());
    // With no room in the budget nothing is learned (and nothing is charged).
    let mut g = Rig::new(0);
    slow_client_handshake(&mut g, key(1), 21_900);
    assert_eq!(g.r.client_pace(key(1).client.ip()), None);
    assert_eq!(g.budget.reserved(), 0);
}

proptest! {
    #[test]
    fn fuzz_rescue_body(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
        fuzz_rescue(&data);
    }

    /// Real-looking flights with arbitrary timing and loss of the client's completion: replays
    /// never exceed what was kept, and every kept datagram is replayed at most once.
    #[test]
    fn replays_bounded(gaps in proptest::collection::vec(0u64..50, 3..12), complete in any::<bool>()) {
        let mut g = Rig::new(1 << 20);
        g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
        let mut t = 1;
        for (i, gap) in gaps.iter().enumerate() {
            t += gap;
            let d = &server_flight()[i % 3];
            g.feed(t, Direction::ToClient, key(1), d);
            g.tick(t);
            if i == 0 {
                g.feed(t + 1, Direction::FromClient, key(1), &client_ack());
            }
        }
        if complete {
            g.feed(t + 1, Direction::FromClient, key(1), &short());
        }
        g.tick(t + 10_000);
        let n = g.drained().len() as u64;
        prop_assert_eq!(n, g.r.stats.replays);
        prop_assert!(g.r.stats.replays <= g.r.stats.kept);
        // Kept datagrams return their memory; a learned client pace may stay.
        prop_assert_eq!(g.budget.reserved(), g.r.charged_bytes());
        prop_assert!(g.budget.reserved() <= CLIENT_PACE_BYTES);
    }
}

/// The quic-go client's timing in the lab (27 Nov 2026, the server's 2nd and 3rd datagrams lost
/// on the last hop): the server's ServerHello alone in an Initial at 10 ms, its two Handshake
/// datagrams at 11 and 12 ms, the client's Initial-only ACK 20 ms after the ServerHello on a
/// 1 ms last hop.
fn late_initial_ack(g: &mut Rig, k: FlowKey) {
    g.feed(0, Direction::FromClient, k, &client_initial(&ODCID));
    let server_hello = long(0, &[7; 8], &SCID, 1150);
    g.feed(10, Direction::ToClient, k, &server_hello);
    let flight = server_flight();
    g.feed(11, Direction::ToClient, k, &flight[1]);
    g.feed(12, Direction::ToClient, k, &flight[2]);
    g.feed(30, Direction::FromClient, k, &client_ack());
}

/// A client whose answers hold Initial packets only waits one of its round trips (20 ms here,
/// most of it the client's own ACK delay) after the flight, not two: the replay goes at 37 ms
/// (12 + 20 + 5) instead of 57 ms (12 + 2 x 20 + 5). The completion that follows it 4 ms later is
/// no sign that the client had the flight (it never said it held a Handshake packet), so no
/// spurious round is counted and no pace is learned from it.
#[test]
fn initial_only_answers_wait_one_round_trip_and_teach_nothing() {
    let mut g = Rig::new(1 << 20);
    late_initial_ack(&mut g, key(1));
    assert_eq!(g.r.poll_timeout(), Some(g.at(37)));
    g.tick(36);
    assert!(g.drained().is_empty());
    g.tick(37);
    assert_eq!(g.drained().len(), 3);
    g.feed(41, Direction::FromClient, key(1), &completion());
    assert!(g.r.is_empty());
    assert_eq!(g.r.stats.silence_triggers, 1);
    assert_eq!(g.r.stats.spurious_rounds, 0);
    assert_eq!(g.r.stats.paces_learned, 0);
    assert_eq!(g.r.client_pace(key(1).client.ip()), None);
    // The client's next handshake is rescued as early.
    late_initial_ack(&mut g, key(2));
    assert_eq!(g.r.poll_timeout(), Some(g.at(37)));
}

/// Once the client has sent a Handshake packet it is known to hold Handshake packets of the
/// flight and gets the full two round trips (a client's certificate check takes its time); and
/// where `2 r + slack` is the shorter wait, an Initial-only answer keeps it.
#[test]
fn a_handshake_answer_keeps_the_two_round_trip_wait() {
    let mut g = Rig::new(1 << 20);
    late_initial_ack(&mut g, key(1));
    g.feed(31, Direction::FromClient, key(1), &client_handshake_ack());
    assert_eq!(g.r.poll_timeout(), Some(g.at(12 + 2 * 20 + 5)));
    // r = 3 ms with an Initial-only answer: 2 r + slack (11 ms) is below the no-answer wait.
    let mut g = Rig::new(1 << 20);
    g.handshake_until_first_ack();
    assert_eq!(g.r.poll_timeout(), Some(g.at(12 + 2 * 3 + 5)));
    // A long last hop (r = 50 ms): one round trip and the slack, not the no-answer wait.
    let mut g = Rig::new(1 << 20);
    g.feed(0, Direction::FromClient, key(1), &client_initial(&ODCID));
    for (i, d) in server_flight().iter().enumerate() {
        g.feed(10 + i as u64, Direction::ToClient, key(1), d);
    }
    g.feed(60, Direction::FromClient, key(1), &client_ack());
    assert_eq!(g.r.poll_timeout(), Some(g.at(12 + 50 + 5)));
}

/// A client that delays its first ACK (aioquic: a 1 ms ACK timer and its event loop; here r
/// comes out 5 ms on a 1 ms last hop) and loses the server's second datagram on every handshake:
/// each replay is what completes the handshake, 3 ms later — within that `r`, so the completion
/// cannot be told from one already in flight. Such rounds teach nothing: the client's next
/// rescue comes as early as its first, however many handshakes it loses.
#[test]
fn real_losses_never_lengthen_an_ack_delaying_client_s_wait() {
    let mut g = Rig::new(1 << 20);
    let flight = server_flight();
    for port in 1..=6 {
        let k = key(port);
        let t = 100 * u64::from(port);
        g.feed(t, Direction::FromClient, k, &client_initial(&ODCID));
        g.feed(t + 10, Direction::ToClient, k, &flight[0]);
        g.feed(t + 11, Direction::ToClient, k, &flight[1]); // lost on the last hop
        g.feed(t + 12, Direction::ToClient, k, &flight[2]);
        // Its ACK of the first datagram (Initial + Handshake), 5 ms after it.
        let mut ack = long(0, &SCID, &[7; 8], 40);
        ack.extend(client_handshake_ack());
        ack.resize(1200, 0);
        g.feed(t + 15, Direction::FromClient, k, &ack);
        assert_eq!(
            g.r.poll_timeout(),
            Some(g.at(t + 12 + 2 * 5 + 5)),
            "handshake {port}"
        );
        g.tick(t + 27);
        assert_eq!(g.drained().len(), 3);
        g.feed(t + 30, Direction::FromClient, k, &completion());
    }
    assert_eq!(g.r.stats.silence_triggers, 6);
    assert_eq!(g.r.stats.paces_learned, 0);
    assert_eq!(g.r.client_pace(key(1).client.ip()), None);
}
