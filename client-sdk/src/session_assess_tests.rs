//! Tests of the engines' assessments of their proxy (session_assess.rs), on the lab of
//! session_tests.rs.

use super::*;

/// A Packrat lab whose lens reads incoming packets sealed under `secret`.
fn packrat_lab_with_keys(secret: &[u8]) -> Lab {
    let mut config = SidekickConfig::packrat();
    (config.hold_assessment_gaps, config.min_repaired_fraction) = (16, 0.25);
    let mut lab = connect(config);
    let lens = lab.client.lens_mut();
    lens.set_secret(crate::lens::DatagramDirection::Incoming, secret);
    lens.set_dcid_len(crate::lens::DatagramDirection::Incoming, 4);
    lab
}

#[test]
fn an_injected_packet_cannot_make_the_client_hold_genuine_traffic() {
    let secret = [3u8; 48];
    let mut lab = packrat_lab_with_keys(&secret);
    lab.client.on_base_received(lab.t0, test_packet(&secret, 0));
    // An on-path injector's datagram: a plausible header, any packet number, no valid AEAD.
    let mut forged = test_packet(&[9u8; 48], 200);
    forged[1..5].copy_from_slice(&[1, 2, 3, 4]);
    lab.client.on_base_received(lab.t0, forged);
    for pn in 1..5 {
        lab.client
            .on_base_received(lab.t0, test_packet(&secret, pn));
    }
    assert_eq!(std::iter::from_fn(|| lab.client.poll_deliver()).count(), 6);
    let p = lab.client.packrat().unwrap();
    assert_eq!((p.held(), p.open_gaps(), p.stats().held), (0, 0, 0));
    let lens = lab
        .client
        .lens()
        .stats(crate::lens::DatagramDirection::Incoming);
    assert_eq!((lens.read, lens.unauthenticated), (5, 1));
    // Nor does it enter the eACK: the proxy never forwarded it, so the eACKs' difference
    // would not decode.
    assert_eq!(p.stats().received, 5);
    assert_eq!(lab.client.stats().unauthenticated_datagrams, 1);
}

#[test]
fn holds_never_repaired_make_the_client_fall_back() {
    let secret = [3u8; 48];
    let mut lab = packrat_lab_with_keys(&secret);
    // Every other packet lost and never repaired: each gap holds its successor for the window.
    let mut now = lab.t0;
    for pn in (0..80u8).step_by(2) {
        now += ms(40);
        lab.client.handle_timeout(now);
        lab.client.on_base_received(now, test_packet(&secret, pn));
        if lab.client.fallback_cause().is_some() {
            break;
        }
    }
    assert_eq!(
        lab.client.fallback_cause(),
        Some(FallbackCause::HoldsUnrepaired)
    );
    let st = lab.client.stats();
    assert_eq!((st.holds_repaired, st.holds_unrepaired), (0, 16));
    assert!(lab.client.packrat().is_none());
    assert!(
        lab.events()
            .contains(&SdkEvent::Fallback(FallbackCause::HoldsUnrepaired))
    );
}

#[test]
fn repairs_arriving_after_the_hold_keep_the_session() {
    let secret = [3u8; 48];
    let mut lab = packrat_lab_with_keys(&secret);
    // Every other packet lost; the proxy's repair of each arrives 35 ms later, after the
    // 30 ms hold has expired (a genuine proxy on a path where the hold is short).
    let mut now = lab.t0;
    let mut pn = 0u8;
    while pn < 120 {
        now += ms(40);
        lab.client.handle_timeout(now);
        lab.client
            .on_base_received(now, test_packet(&secret, pn + 1));
        lab.client.handle_timeout(now + ms(35));
        lab.client
            .on_base_received(now + ms(35), test_packet(&secret, pn));
        pn += 2;
    }
    assert_eq!(lab.client.fallback_cause(), None);
    assert!(lab.client.packrat().is_some());
    let st = lab.client.stats();
    assert!(st.holds_repaired >= 32, "{st:?}");
    assert_eq!(st.holds_unrepaired, 0, "{st:?}");
}

/// A gap the proxy cannot fill (a packet number the sender skipped, RFC 9000 §21.4): the eACK
/// says the client holds it, the proxy's outcome for that eACK says it resent nothing, and the
/// client releases what the gap held at once instead of at the end of the reorder window.
#[test]
fn an_eack_outcome_releases_a_gap_nobody_will_fill() {
    let secret = [3u8; 48];
    let mut lab = packrat_lab_with_keys(&secret);
    let t = lab.t0 + ms(1);
    lab.client.on_base_received(t, test_packet(&secret, 0));
    lab.client.on_base_received(t, test_packet(&secret, 2)); // 1 was skipped
    assert!(lab.client.poll_deliver().is_some());
    assert!(lab.client.poll_deliver().is_none(), "2 is held");
    // The eACK falls due; it reaches the proxy with the open gap and its number.
    lab.client.handle_timeout(t + ms(10));
    let from = "10.0.0.2:5000".parse().unwrap();
    let mut number = None;
    while let Some(tx) = lab.client.poll_transmit() {
        if let Transmit::Sidekick(_, b) = tx
            && let Ok(ProxyEvent::Eack {
                open_gaps,
                number: n,
                ..
            }) = lab
                .proxy
                .handle_datagram(Time::since(lab.t0, t + ms(11)), from, &b)
            && open_gaps > 0
        {
            assert_eq!(open_gaps, 1);
            number = Some(n);
        }
    }
    let number = number.expect("an eACK with the open gap went out");
    let o = lab
        .proxy
        .send_eack_outcome(Time::since(lab.t0, t + ms(12)), &lab.sid, 0, number)
        .unwrap();
    lab.client
        .on_sidekick_datagram(t + ms(12), proxy_addr(), &o.bytes);
    assert!(
        lab.client.poll_deliver().is_some(),
        "released at 12 ms, not 31"
    );
    assert_eq!(lab.client.stats().eack_outcomes, 1);
    assert!(lab.client.is_active());
    // An outcome naming an eACK the client does not know releases nothing.
    lab.client
        .on_base_received(t + ms(13), test_packet(&secret, 4));
    let _ = lab.client.poll_deliver();
    let o = lab
        .proxy
        .send_eack_outcome(Time::since(lab.t0, t + ms(14)), &lab.sid, 0, number + 100)
        .unwrap();
    lab.client
        .on_sidekick_datagram(t + ms(14), proxy_addr(), &o.bytes);
    assert_eq!(lab.client.stats().eack_outcomes, 1);
}

#[test]
fn holds_the_proxy_repairs_keep_the_sidekick() {
    let secret = [3u8; 48];
    let mut lab = packrat_lab_with_keys(&secret);
    let mut now = lab.t0;
    for pn in (0..120u8).step_by(2) {
        now += ms(5);
        lab.client.on_base_received(now, test_packet(&secret, pn));
        if pn > 0 {
            // The proxy's retransmission of the missing one, within the window.
            lab.client
                .on_base_received(now + ms(2), test_packet(&secret, pn - 1));
        }
    }
    assert_eq!(lab.client.fallback_cause(), None);
    assert!(lab.client.stats().holds_repaired >= 48);
}

/// A Robin lab whose lens reads both directions: sent datagrams are packets sealed under
/// `out`, received ones under `inc`.
fn robin_lab_with_keys(out: &[u8], inc: &[u8]) -> Lab {
    let mut config = SidekickConfig::robin(30, 20);
    (config.resend_assessment, config.max_unneeded_fraction) = (16, 0.75);
    let mut lab = connect(config);
    let lens = lab.client.lens_mut();
    lens.set_secret(crate::lens::DatagramDirection::Outgoing, out);
    lens.set_dcid_len(crate::lens::DatagramDirection::Outgoing, 4);
    lens.set_secret(crate::lens::DatagramDirection::Incoming, inc);
    lens.set_dcid_len(crate::lens::DatagramDirection::Incoming, 4);
    lab.client.on_e2e_rtt(ms(50));
    lab
}

/// A received packet whose first frame acknowledges packet numbers 0..=largest.
fn ack_packet(secret: &[u8], pn: u8, largest: u8) -> Vec<u8> {
    sealed(secret, pn, &[0x02, largest, 0, 0, largest, 0x01])
}

/// Sends packets 0..40 at 1 ms intervals; a proxy claims 16 of them missing; returns when the
/// client resent them (ms after t0).
fn lying_quack_resends(lab: &mut Lab, out: &[u8]) -> u64 {
    let lies: Vec<u8> = (1..=16).map(|k| 2 * k).collect();
    for pn in 0..40u8 {
        let p = test_packet(out, pn);
        lab.client.on_base_sent(lab.t0 + ms(u64::from(pn)), &p);
        if !lies.contains(&pn) {
            let id = u32::from_le_bytes(p[p.len() - 4..].try_into().unwrap());
            lab.seen.insert(id);
        }
    }
    lab.quack(45);
    let resent = std::iter::from_fn(|| lab.client.poll_transmit())
        .filter(|t| matches!(t, Transmit::Base(_)))
        .count();
    assert_eq!(resent, 16);
    45
}

#[test]
fn resends_the_receiver_did_not_need_make_the_client_fall_back() {
    let (out, inc) = ([5u8; 48], [6u8; 48]);
    let mut lab = robin_lab_with_keys(&out, &inc);
    let at = lying_quack_resends(&mut lab, &out);
    // The receiver acknowledges everything 5 ms after the resends: it had the originals.
    lab.client
        .on_base_received(lab.t0 + ms(at + 5), ack_packet(&inc, 0, 39));
    let st = lab.client.stats();
    assert_eq!((st.resends_assessed, st.resends_unneeded), (16, 16));
    assert_eq!(
        lab.client.fallback_cause(),
        Some(FallbackCause::ResendsUnneeded)
    );
}

#[test]
fn resends_that_repaired_losses_keep_the_sidekick() {
    let (out, inc) = ([5u8; 48], [6u8; 48]);
    let mut lab = robin_lab_with_keys(&out, &inc);
    let at = lying_quack_resends(&mut lab, &out);
    // The acknowledgment of the resent packets comes a full RTT after the resends.
    lab.client
        .on_base_received(lab.t0 + ms(at + 60), ack_packet(&inc, 0, 39));
    let st = lab.client.stats();
    assert_eq!((st.resends_assessed, st.resends_unneeded), (16, 0));
    assert_eq!(lab.client.fallback_cause(), None);
}

#[test]
fn the_peers_acks_give_the_rtt_that_bounds_holds_without_the_stacks_help() {
    let (out, inc) = ([5u8; 48], [6u8; 48]);
    let mut lab = packrat_lab_with_keys(&inc);
    let lens = lab.client.lens_mut();
    lens.set_secret(crate::lens::DatagramDirection::Outgoing, &out);
    lens.set_dcid_len(crate::lens::DatagramDirection::Outgoing, 4);
    // No RTT from the stack: the hold is the requested reorder window.
    assert_eq!(lab.client.packrat().unwrap().hold_window(), ms(30));
    for pn in 0..10u8 {
        lab.client
            .on_base_sent(lab.t0 + ms(u64::from(pn)), &test_packet(&out, pn));
    }
    // The peer acknowledges 0..=9 20 ms after 9 left: a 20 ms sample, so holds last at most
    // half of it.
    lab.client
        .on_base_received(lab.t0 + ms(29), ack_packet(&inc, 0, 9));
    assert_eq!(lab.client.packrat().unwrap().hold_window(), ms(10));
    // A later ACK of the same packet gives no longer sample (its send time is gone).
    lab.client
        .on_base_received(lab.t0 + ms(90), ack_packet(&inc, 1, 9));
    assert_eq!(lab.client.packrat().unwrap().hold_window(), ms(10));
}

#[test]
fn a_multicast_session_asks_for_its_group_and_a_unicast_one_for_none() {
    let g: SocketAddr = "239.1.2.3:5004".parse().unwrap();
    let lab = connect(SidekickConfig::packrat().with_multicast_group(g));
    // The proxy accepted the group; the echo carries it (a different echo is refused).
    let echoed = lab
        .client
        .session_config()
        .unwrap()
        .packrat
        .clone()
        .unwrap();
    assert_eq!(echoed.multicast_group_addr(), Ok(Some(g)));
    let unicast = connect(SidekickConfig::packrat());
    let p = unicast
        .client
        .session_config()
        .unwrap()
        .packrat
        .clone()
        .unwrap();
    assert_eq!(p.multicast_group_addr(), Ok(None));
    // A Robin-only configuration gains Packrat with its defaults.
    let c = SidekickConfig::robin(30, 8).with_multicast_group(g);
    let p = c.protocol.session.packrat.unwrap();
    assert_eq!(
        (p.local_symbols, p.multicast_group_addr()),
        (160, Ok(Some(g)))
    );
}

/// A session with both engines whose lens reads sent packets under `out` and received ones
/// under `inc`; assessments after 16 gaps or resends.
fn both_lab_with_keys(out: &[u8], inc: &[u8]) -> Lab {
    let mut config = SidekickConfig::robin_and_packrat(30, 20);
    (config.hold_assessment_gaps, config.min_repaired_fraction) = (16, 0.25);
    (config.resend_assessment, config.max_unneeded_fraction) = (16, 0.75);
    let mut lab = connect(config);
    assert!(lab.client.robin().is_some() && lab.client.packrat().is_some());
    let lens = lab.client.lens_mut();
    lens.set_secret(crate::lens::DatagramDirection::Outgoing, out);
    lens.set_dcid_len(crate::lens::DatagramDirection::Outgoing, 4);
    lens.set_secret(crate::lens::DatagramDirection::Incoming, inc);
    lens.set_dcid_len(crate::lens::DatagramDirection::Incoming, 4);
    lab.client.on_e2e_rtt(ms(50));
    lab
}

impl Lab {
    /// Moves the client's sidekick frames to the proxy table and its answers back.
    fn exchange_with_proxy(&mut self, at: u64) {
        self.flush_to_proxy(at);
        while let Some(t) = self.proxy.poll_transmit() {
            self.client
                .on_sidekick_datagram(self.t0 + ms(at), proxy_addr(), &t.bytes);
        }
    }
}

#[test]
fn both_engines_come_up_on_one_session() {
    let lab = connect(SidekickConfig::robin_and_packrat(30, 10));
    let echo = lab.client.session_config().unwrap();
    assert!(echo.robin.is_some() && echo.packrat.is_some());
    assert!(lab.client.robin().is_some() && lab.client.packrat().is_some());
}

#[test]
fn unrepaired_holds_beside_robin_stop_packrat_only() {
    let (out, inc) = ([5u8; 48], [6u8; 48]);
    let mut lab = both_lab_with_keys(&out, &inc);
    // Every other received packet lost and never repaired (as in
    // `holds_never_repaired_make_the_client_fall_back`).
    let mut now = lab.t0;
    let mut received = 0;
    for pn in (0..80u8).step_by(2) {
        now += ms(40);
        lab.client.handle_timeout(now);
        lab.client.on_base_received(now, test_packet(&inc, pn));
        received += 1;
        if lab.client.packrat().is_none() {
            break;
        }
    }
    assert!(lab.client.packrat().is_none());
    assert!(lab.client.robin().is_some(), "Robin goes on");
    assert!(lab.client.is_active());
    assert_eq!(lab.client.fallback_cause(), None);
    assert!(lab.events().contains(&SdkEvent::EngineDropped(
        Engine::Packrat,
        FallbackCause::HoldsUnrepaired
    )));
    assert_eq!(lab.client.stats().engines_dropped, 1);
    // Nothing stays held: every datagram received reaches the stack.
    assert_eq!(
        std::iter::from_fn(|| lab.client.poll_deliver()).count(),
        received
    );
    // The proxy is asked to drop Packrat too: a new configuration, Robin only.
    let at = now.duration_since(lab.t0).as_millis() as u64;
    lab.exchange_with_proxy(at);
    assert_eq!(lab.client.stats().reconfigurations, 1);
    let echo = lab.client.session_config().unwrap();
    assert!(echo.robin.is_some() && echo.packrat.is_none(), "{echo:?}");
    assert!(lab.client.robin().is_some() && lab.client.packrat().is_none());
}

#[test]
fn unneeded_resends_beside_packrat_stop_robin_only() {
    let (out, inc) = ([5u8; 48], [6u8; 48]);
    let mut lab = both_lab_with_keys(&out, &inc);
    let at = lying_quack_resends(&mut lab, &out);
    // The receiver acknowledges everything 5 ms after the resends: it had the originals.
    lab.client
        .on_base_received(lab.t0 + ms(at + 5), ack_packet(&inc, 0, 39));
    assert!(lab.client.robin().is_none());
    assert!(lab.client.packrat().is_some(), "Packrat goes on");
    assert_eq!(lab.client.fallback_cause(), None);
    assert!(lab.events().contains(&SdkEvent::EngineDropped(
        Engine::Robin,
        FallbackCause::ResendsUnneeded
    )));
    lab.exchange_with_proxy(at + 5);
    let echo = lab.client.session_config().unwrap();
    assert!(echo.robin.is_none() && echo.packrat.is_some(), "{echo:?}");
    assert!(lab.client.robin().is_none() && lab.client.packrat().is_some());
    // A quACK in flight from before is ignored, not a reason to fall back.
    lab.quack(at + 10);
    assert!(lab.client.is_active());
}
