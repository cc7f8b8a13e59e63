use super::*;
use proptest::prelude::*;
use quack::PowerSumQuack;

fn dg(i: u32) -> Vec<u8> {
    let mut d = vec![0xabu8; 20];
    d.extend(i.to_le_bytes());
    d
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

struct Setup {
    t0: Instant,
    robin: RobinSender,
    proxy: PowerSumQuack<u32>,
}

fn setup(t: usize) -> Setup {
    let mut s = unsynced(t);
    s.quack(0).unwrap();
    assert!(s.robin.is_synced());
    s
}

fn unsynced(t: usize) -> Setup {
    Setup {
        t0: Instant::now(),
        robin: RobinSender::new(RobinSenderConfig {
            threshold: t,
            quack_interval: ms(10),
            ..RobinSenderConfig::default()
        }),
        proxy: PowerSumQuack::new(t),
    }
}

impl Setup {
    /// Sends ids `range` at t0 + id ms; the proxy receives all except `drop`.
    fn send(&mut self, range: std::ops::Range<u32>, drop: &[u32]) {
        for i in range {
            let now = self.t0 + ms(u64::from(i));
            self.robin.on_sent(now, &dg(i), Some(u64::from(i)));
            if !drop.contains(&i) {
                self.proxy.insert(i);
            }
        }
    }

    fn quack(&mut self, at: u64) -> Result<(), QuackError> {
        self.robin
            .on_quack(self.t0 + ms(at), &self.proxy.to_bytes())
    }

    fn events(&mut self) -> Vec<RobinEvent> {
        self.robin.poll_events().collect()
    }
}

fn lost_pns(events: &[RobinEvent]) -> Vec<(u64, LossRule)> {
    events
        .iter()
        .filter_map(|e| match e {
            RobinEvent::Lost(l) => Some((l.packet_number.unwrap(), l.rule)),
            _ => None,
        })
        .collect()
}

#[test]
fn hole_with_three_later_receipts_is_lost_and_resent() {
    let mut s = setup(8);
    s.send(0..10, &[3]);
    s.quack(15).unwrap();
    let ev = s.events();
    assert_eq!(lost_pns(&ev), vec![(3, LossRule::Reordering)]);
    assert!(ev.contains(&RobinEvent::Retransmit(dg(3))));
    assert!(ev.contains(&RobinEvent::Delivered {
        bytes: 9 * 24,
        newest_sent: s.t0 + ms(9)
    }));
    assert_eq!(s.robin.stats().delivered, 9);
    // The resend is logged again; when the proxy sees it the next quACK confirms it.
    assert_eq!(s.robin.outstanding(), 1);
    s.proxy.insert(3);
    s.quack(20).unwrap();
    assert_eq!(s.robin.outstanding(), 0);
    assert_eq!(s.robin.stats().retransmitted, 1);
}

#[test]
fn first_quack_of_an_epoch_is_the_baseline() {
    // The proxy started counting at packet 3 (its Init arrived while 0..3 were in flight) and
    // packet 5 was lost: the baseline cannot tell the two apart, so it settles 0..=9 without
    // verdicts; later losses are found normally.
    let mut s = unsynced(8);
    for i in 0..10 {
        s.robin.on_sent(s.t0, &dg(i), Some(u64::from(i)));
        if i >= 3 && i != 5 {
            s.proxy.insert(i);
        }
    }
    s.quack(10).unwrap();
    assert!(s.robin.is_synced());
    assert_eq!(s.robin.outstanding(), 0);
    assert!(lost_pns(&s.events()).is_empty());
    s.send(10..20, &[12]);
    s.quack(25).unwrap();
    assert_eq!(lost_pns(&s.events()), vec![(12, LossRule::Reordering)]);
    // After a reset the log is kept and the next quACK synchronises again.
    s.robin.reset();
    assert!(!s.robin.is_synced());
    s.proxy = PowerSumQuack::new(8);
    s.send(20..24, &[]);
    s.quack(30).unwrap();
    assert!(s.robin.is_synced());
    assert_eq!(s.robin.stats().syncs, 2);
}

/// A fresh engine's first quACK may name a send from before it logged anything (the proxy
/// started counting when the Init arrived, the engine when the InitAck did): deferred while
/// the count fits in those sends, an inconsistency beyond.
#[test]
fn a_first_quack_naming_a_send_from_before_the_engine_waits_for_the_next() {
    let mut s = unsynced(8);
    s.robin.set_unlogged_sends(2);
    // Ids 100 and 101 went out between Init and InitAck; the proxy counted both.
    s.proxy.insert(100);
    s.proxy.insert(101);
    s.quack(1).unwrap();
    assert!(!s.robin.is_synced());
    assert_eq!(s.robin.stats().syncs_deferred, 1);
    assert_eq!(s.robin.stats().unknown_last, 0);
    // The engine's own sends reach the proxy; the next quACK names one and is the baseline.
    s.send(0..5, &[]);
    s.quack(6).unwrap();
    assert!(s.robin.is_synced());
    assert_eq!(s.robin.outstanding(), 0);
    assert!(lost_pns(&s.events()).is_empty());
    s.send(5..12, &[7]);
    s.quack(15).unwrap();
    assert_eq!(lost_pns(&s.events()), vec![(7, LossRule::Reordering)]);

    // A proxy counting more unknown sends than went out before the engine is inconsistent.
    let mut s = unsynced(8);
    s.robin.set_unlogged_sends(2);
    for id in 100..103 {
        s.proxy.insert(id);
    }
    assert_eq!(s.quack(1), Err(QuackError::UnknownLast));
    assert_eq!(s.robin.stats().unknown_last, 1);
    // After a Reset the log holds every send: nothing is deferred.
    let mut s = unsynced(8);
    s.robin.set_unlogged_sends(2);
    s.robin.reset();
    s.proxy.insert(100);
    assert_eq!(s.quack(1), Err(QuackError::UnknownLast));
}

/// After a Reset the proxy's first quACK may be empty while packets it saw in the old epoch are
/// still in the log: they must not come back as losses once the new epoch counts later packets.
#[test]
fn an_empty_quack_after_a_reset_does_not_turn_old_receipts_into_losses() {
    let mut s = setup(8);
    s.send(0..10, &[]); // the proxy saw all of them, in the epoch about to end
    s.robin.reset();
    s.proxy = PowerSumQuack::new(8);
    s.quack(12).unwrap(); // the new epoch's first quACK: nothing counted yet
    assert!(
        !s.robin.is_synced(),
        "an empty quACK with sends outstanding is no baseline"
    );
    s.send(10..20, &[]);
    s.quack(25).unwrap(); // the baseline: settles 0..=19
    assert!(s.robin.is_synced());
    s.send(20..30, &[23]);
    s.quack(40).unwrap();
    assert_eq!(lost_pns(&s.events()), vec![(23, LossRule::Reordering)]);
    assert_eq!(s.robin.stats().retransmitted, 1);
}

/// A resend is made only while the receiver would still accept its packet number: behind more
/// than `resend_window` later sends it would be discarded as a possible duplicate.
#[test]
fn a_loss_found_too_far_behind_the_newest_send_is_not_resent() {
    let mut s = setup(8);
    s.send(0..200, &[5, 190]);
    s.quack(250).unwrap();
    let lost = lost_pns(&s.events());
    assert_eq!(
        lost,
        vec![(5, LossRule::Reordering), (190, LossRule::Reordering)]
    );
    let st = s.robin.stats();
    // 194 packets were sent after packet 5, 9 after packet 190 (window 128).
    assert_eq!((st.retransmitted, st.resends_too_late), (1, 1));
    // With no window, both are resent.
    let mut s = unsynced(8);
    s.robin = RobinSender::new(RobinSenderConfig {
        threshold: 8,
        quack_interval: ms(10),
        resend_window: 0,
        ..RobinSenderConfig::default()
    });
    s.quack(0).unwrap();
    s.send(0..200, &[5, 190]);
    s.quack(250).unwrap();
    let st = s.robin.stats();
    assert_eq!((st.retransmitted, st.resends_too_late), (2, 0));
}

#[test]
fn reordered_packet_is_not_lost_with_fewer_than_three_later() {
    let mut s = setup(8);
    s.send(0..10, &[8]);
    s.quack(12).unwrap();
    assert!(lost_pns(&s.events()).is_empty());
    assert_eq!(s.robin.outstanding(), 1);
    // Packet 8 arrives late (reordered): the next quACK resolves it as received.
    s.proxy.insert(8);
    s.quack(13).unwrap();
    assert!(lost_pns(&s.events()).is_empty());
    assert_eq!(s.robin.outstanding(), 0);
    assert_eq!(s.robin.stats().delivered, 10);
}

#[test]
fn time_rule_declares_a_tail_loss() {
    let mut s = setup(8);
    s.send(0..10, &[8]);
    s.quack(12).unwrap();
    s.events();
    // Near RTT sample: 12 ms − 9 ms = 3 ms; threshold 9/8·3 ms + 10 ms = 13.375 ms after send.
    let deadline = s.robin.poll_timeout().unwrap();
    assert_eq!(deadline, s.t0 + ms(8) + Duration::from_micros(13_375));
    s.robin.handle_timeout(deadline.checked_sub(ms(1)).unwrap());
    assert!(lost_pns(&s.events()).is_empty());
    s.robin.handle_timeout(deadline);
    assert_eq!(lost_pns(&s.events()), vec![(8, LossRule::Time)]);
    assert_eq!(s.robin.stats().lost_by_time, 1);
}

#[test]
fn near_rtt_and_ratio() {
    let mut s = setup(8);
    s.send(0..4, &[]);
    s.quack(7).unwrap(); // last element sent at 3 ms: sample 4 ms
    assert_eq!(s.robin.near_rtt().min(), Some(ms(4)));
    assert_eq!(s.robin.rtt_ratio(), None);
    s.robin.on_e2e_rtt(ms(40));
    assert_eq!(s.robin.rtt_ratio(), Some(0.1));
}

#[test]
fn stale_quack_is_ignored() {
    let mut s = setup(8);
    s.send(0..5, &[]);
    let old = s.proxy.to_bytes();
    s.send(5..10, &[]);
    s.quack(12).unwrap();
    let before = s.robin.stats();
    let err = s.robin.on_quack(s.t0 + ms(13), &old).unwrap_err();
    assert!(matches!(
        err,
        QuackError::Stale {
            count: 5,
            previous: 10
        }
    ));
    assert_eq!(s.robin.stats().stale, 1);
    assert_eq!(s.robin.stats().delivered, before.delivered);
}

#[test]
fn receipts_of_never_sent_packets_are_rejected() {
    let mut s = setup(8);
    s.send(0..5, &[]);
    for i in 100..103 {
        s.proxy.insert(i);
    }
    let err = s.quack(10).unwrap_err();
    assert!(matches!(err, QuackError::NeverSent { count: 8, sent: 5 }));
    assert_eq!(s.robin.stats().never_sent, 1);
    assert_eq!(s.robin.outstanding(), 5);
}

#[test]
fn forged_quack_is_undecodable_and_asks_for_reset() {
    let mut s = setup(4);
    s.send(0..10, &[]);
    // Same count and last element, different identifiers: the sums do not decode.
    let mut forged = PowerSumQuack::<u32>::new(4);
    for i in 0..9 {
        forged.insert(1000 + i);
    }
    forged.insert(9);
    let err = s
        .robin
        .on_quack(s.t0 + ms(11), &forged.to_bytes())
        .unwrap_err();
    assert!(matches!(err, QuackError::Undecodable(_)));
    assert!(s.events().contains(&RobinEvent::NeedReset));
    assert_eq!(
        s.robin.outstanding(),
        10,
        "a rejected quACK forgets nothing"
    );
}

#[test]
fn unknown_last_element_is_rejected() {
    let mut s = setup(4);
    s.send(0..3, &[]);
    let mut forged = PowerSumQuack::<u32>::new(4);
    forged.insert(77);
    assert_eq!(
        s.robin.on_quack(s.t0 + ms(5), &forged.to_bytes()),
        Err(QuackError::UnknownLast)
    );
}

#[test]
fn more_than_threshold_missing_needs_reset() {
    let mut s = setup(2);
    s.send(0..10, &[1, 2, 3]);
    assert!(matches!(
        s.quack(11),
        Err(QuackError::Undecodable(
            quack::DecodeError::TooManyMissing { .. }
        ))
    ));
    assert!(s.events().contains(&RobinEvent::NeedReset));
    s.robin.reset();
    assert!(!s.robin.is_synced());
    assert_eq!(s.robin.stats().resets, 1);
}

#[test]
fn malformed_and_threshold_mismatch() {
    let mut s = setup(4);
    assert!(matches!(
        s.robin.on_quack(s.t0, &[1, 2, 3]),
        Err(QuackError::Wire(_))
    ));
    let other = PowerSumQuack::<u32>::new(5);
    assert!(matches!(
        s.robin.on_quack(s.t0, &other.to_bytes()),
        Err(QuackError::Threshold { got: 5, want: 4 })
    ));
    assert_eq!(s.robin.stats().wire_errors, 1);
    assert_eq!(s.robin.stats().threshold_mismatch, 1);
}

#[test]
fn log_cap_evicts_and_asks_for_reset() {
    let t0 = Instant::now();
    let mut r = RobinSender::new(RobinSenderConfig {
        max_log: 4,
        ..RobinSenderConfig::default()
    });
    for i in 0..6 {
        r.on_sent(t0, &dg(i), None);
    }
    assert_eq!(r.outstanding(), 4);
    assert_eq!(r.stats().log_evicted, 2);
    assert!(r.poll_events().any(|e| e == RobinEvent::NeedReset));
    assert_eq!(r.on_sent(t0, &[1, 2], None), None);
    assert_eq!(r.stats().unidentifiable, 1);
}

#[test]
fn retransmit_buffer_is_bounded() {
    let t0 = Instant::now();
    let mut r = RobinSender::new(RobinSenderConfig {
        threshold: 8,
        retransmit_buffer_bytes: 48, // two 24-byte datagrams
        ..RobinSenderConfig::default()
    });
    let mut proxy = PowerSumQuack::<u32>::new(8);
    r.on_quack(t0, &proxy.to_bytes()).unwrap();
    for i in 0..10 {
        r.on_sent(t0, &dg(i), None);
        if i > 2 {
            proxy.insert(i);
        }
    }
    r.on_quack(t0 + ms(5), &proxy.to_bytes()).unwrap();
    let ev: Vec<_> = r.poll_events().collect();
    let resent = ev
        .iter()
        .filter(|e| matches!(e, RobinEvent::Retransmit(_)))
        .count();
    assert_eq!(resent, 2);
    assert_eq!(r.stats().retransmit_unavailable, 1);
}

proptest! {
    #[test]
    fn losses_are_exactly_the_dropped_with_three_later(
        drops in proptest::collection::btree_set(0u32..60, 0..6),
    ) {
        let mut s = setup(8);
        let drops: Vec<u32> = drops.into_iter().collect();
        s.send(0..60, &drops);
        s.quack(61).unwrap();
        let lost: Vec<u64> = lost_pns(&s.events()).into_iter().map(|(pn, _)| pn).collect();
        let expected: Vec<u64> = drops
            .iter()
            .filter(|&&d| (d + 1..60).filter(|i| !drops.contains(i)).count() >= 3)
            .map(|&d| u64::from(d))
            .collect();
        prop_assert_eq!(lost, expected);
    }

    #[test]
    fn arbitrary_quack_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..128)) {
        fuzz_quack(&data);
    }
}

#[test]
fn withdrawn_sends_leave_no_trace() {
    let mut s = setup(8);
    s.send(0..5, &[]);
    s.robin.on_sent(s.t0, &dg(99), None);
    s.robin.withdraw_last(1);
    assert_eq!(s.robin.outstanding(), 5);
    assert_eq!(s.robin.stats().sent_logged, 5);
    s.quack(10).unwrap();
    assert!(lost_pns(&s.events()).is_empty());
    assert_eq!(s.robin.outstanding(), 0);
}

/// Found by the C API fuzz target (`c_api_calls`): a finite but huge time factor (or quACK
/// interval) from the application overflowed `Duration` computing the time rule's threshold,
/// and the deadline overflowed `Instant`.
#[test]
fn an_absurd_time_factor_never_fires_the_time_rule() {
    for (factor, interval) in [(1e300, ms(10)), (9.0 / 8.0, Duration::MAX)] {
        let t0 = Instant::now();
        let mut robin = RobinSender::new(RobinSenderConfig {
            threshold: 8,
            time_factor: factor,
            quack_interval: interval,
            ..RobinSenderConfig::default()
        });
        let mut proxy = PowerSumQuack::<u32>::new(8);
        robin.on_quack(t0, &proxy.to_bytes()).unwrap();
        for i in 0..10u32 {
            robin.on_sent(t0 + ms(u64::from(i)), &dg(i), Some(u64::from(i)));
            if i != 8 {
                proxy.insert(i);
            }
        }
        robin.on_quack(t0 + ms(12), &proxy.to_bytes()).unwrap();
        assert_eq!(
            robin.poll_timeout(),
            None,
            "the deadline is beyond the clock"
        );
        robin.handle_timeout(t0 + Duration::from_secs(3600));
        let events: Vec<RobinEvent> = robin.poll_events().collect();
        assert!(lost_pns(&events).is_empty());
    }
}

#[test]
fn end_to_end_acks_tell_needed_resends_from_unneeded_ones() {
    use crate::lens::AckRanges;
    let mut s = setup(8);
    s.robin.on_e2e_rtt(ms(50));
    // The proxy says 3 and 4 are missing; both are resent at 15 ms.
    s.send(0..10, &[3, 4]);
    s.quack(15).unwrap();
    assert_eq!(s.robin.stats().retransmitted, 2);
    let acks = |r: &[(u64, u64)]| AckRanges { ranges: r.to_vec() };
    // 20 ms after the resend the receiver already acknowledges 3: it had the original.
    s.robin.on_e2e_ack(s.t0 + ms(35), &acks(&[(0, 3), (5, 9)]));
    // 4 is acknowledged a full RTT after its resend: the resend was what arrived.
    s.robin.on_e2e_ack(s.t0 + ms(70), &acks(&[(0, 9)]));
    let st = s.robin.stats();
    assert_eq!((st.resends_assessed, st.resends_unneeded), (2, 1));
    // Acknowledged again: counted once.
    s.robin.on_e2e_ack(s.t0 + ms(80), &acks(&[(0, 9)]));
    assert_eq!(s.robin.stats().resends_assessed, 2);
}

/// Robin at 2 and 8 bytes (Sidekick (NSDI '24) §3): the sender logs identifiers of the session's
/// width, a proxy quACK of that width names the missing datagram, and a quACK of another width
/// is refused as malformed (it changes nothing).
#[test]
fn quacks_of_the_session_width_decode_and_others_are_refused() {
    fn at<T: quack::Identifier>(width: Width, id_of: fn(u64) -> T, wide: fn(T) -> u64) {
        let t0 = Instant::now();
        let mut r = RobinSender::new(RobinSenderConfig {
            threshold: 4,
            width,
            id_source: IdSource::Offset(-(width.bytes() as isize)),
            retransmit_buffer_bytes: 0,
            ..RobinSenderConfig::default()
        });
        let mut proxy = PowerSumQuack::<T>::new(4);
        assert!(r.on_quack(t0, &proxy.to_bytes()).is_ok(), "baseline");
        for i in 0..8u64 {
            let mut d = vec![0u8; 20];
            d.extend_from_slice(&wide(id_of(i)).to_le_bytes()[..width.bytes()]);
            r.on_sent(t0, &d, None);
            if i != 2 {
                proxy.insert(id_of(i));
            }
        }
        // A 4-byte quACK against a 2- or 8-byte session: malformed, nothing changes.
        if width != Width::U32 {
            let other = PowerSumQuack::<u32>::new(4);
            assert!(matches!(
                r.on_quack(t0, &other.to_bytes()),
                Err(QuackError::Wire(_))
            ));
        }
        r.on_quack(t0 + Duration::from_millis(5), &proxy.to_bytes())
            .unwrap();
        let lost: Vec<u64> = r
            .poll_events()
            .filter_map(|e| match e {
                RobinEvent::Lost(l) => Some(l.id),
                _ => None,
            })
            .collect();
        assert_eq!(lost, vec![wide(id_of(2))]);
        assert_eq!(r.stats().quack_bytes, 2 * proxy.to_bytes().len() as u64);
    }
    at::<u16>(Width::U16, |i| 0xb000 + i as u16, u64::from);
    at::<u32>(Width::U32, |i| 0xb000_0000 + i as u32, u64::from);
    at::<u64>(Width::U64, |i| 0xb000_0000_0000_0000 + i, |v| v);
}
