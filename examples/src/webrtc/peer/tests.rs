//! Two [`PeerCore`]s in simulated time over an in-memory path (fixed delay, chosen losses): the
//! call's logic without sockets or a wall clock.

use std::collections::BTreeMap;

use super::*;
use crate::webrtc::call::source_config;
use crate::webrtc::rekey::{self, Offer};

const ONE_WAY: Duration = Duration::from_millis(20);

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A client and a server peer, offer/answer done at `t0`; the client sends when `upload`.
fn pair(t0: Instant, upload: bool, secs: u32) -> (PeerCore, PeerCore) {
    let (c, s) = (addr("10.0.2.2:5000"), addr("10.0.1.1:4433"));
    let role = if upload { Role::Sender } else { Role::Receiver };
    let offer = Offer::new(c, role, t0).unwrap();
    let (srtc, answer) = rekey::answer(s, &offer.sdp, t0).unwrap();
    let k = offer.accept(&answer).unwrap();
    let cfg = |role, client| PeerConfig {
        role,
        source: source_config(30, 1500, 60, 4.0),
        frames: 30 * secs,
        playout_delay: Duration::from_millis(100),
        linger: Duration::from_millis(500),
        seed: 1,
        stop_when_done: client,
        connect_timeout: Duration::from_secs(10),
        max_duration: Duration::from_secs(60),
        trace: None,
        vp8: None,
    };
    let wall = WallClock::at(t0, 1_764_000_000_000_000_000);
    let other = if upload { Role::Receiver } else { Role::Sender };
    (
        PeerCore::new(*k.rtc, c, k.mid, cfg(role, true), None, t0, wall),
        PeerCore::new(srtc, s, None, cfg(other, false), None, t0, wall),
    )
}

/// Runs the call; every `lose_every`-th SRTP datagram from the sender is lost; a key change at
/// `rekey_at`. Returns both reports.
fn run(upload: bool, lose_every: u64, rekey_at: Option<Duration>) -> (PeerReport, PeerReport) {
    run_with(upload, lose_every, rekey_at, Duration::ZERO)
}

/// [`run`], with the DTLS datagrams to the client `dtls_late` later than the rest.
fn run_with(
    upload: bool,
    lose_every: u64,
    rekey_at: Option<Duration>,
    dtls_late: Duration,
) -> (PeerReport, PeerReport) {
    let t0 = Instant::now();
    let (mut client, mut server) = pair(t0, upload, 2);
    // In flight: arrival time → (to the client?, from, datagram).
    let mut wire: BTreeMap<(Instant, u64), (bool, SocketAddr, Vec<u8>)> = BTreeMap::new();
    let (mut n, mut srtp_from_sender) = (0u64, 0u64);
    let mut now = t0;
    let mut rekey_at = rekey_at.map(|d| t0 + d);
    let (caddr, saddr) = (client.local, server.local);
    client.handle_timeout(now).unwrap();
    server.handle_timeout(now).unwrap();
    for _ in 0..1_000_000 {
        for (to_client, p) in [(false, &mut client), (true, &mut server)] {
            while let Some(d) = p.poll_transmit() {
                let from_sender = to_client != upload;
                if from_sender && matches!(classify(&d.data), Kind::Rtp { .. }) {
                    srtp_from_sender += 1;
                    if lose_every > 0 && srtp_from_sender % lose_every == 0 {
                        continue;
                    }
                }
                n += 1;
                let from = if to_client { saddr } else { caddr };
                let late = if to_client && matches!(classify(&d.data), Kind::Dtls) {
                    dtls_late
                } else {
                    Duration::ZERO
                };
                wire.insert((now + ONE_WAY + late, n), (to_client, from, d.data));
            }
        }
        if let Some(end) = client.finished(now) {
            return (client.into_report(end), server.into_report("stopped"));
        }
        let next_wire = wire.keys().next().map(|k| k.0);
        let next = [
            next_wire,
            Some(client.poll_timeout()),
            Some(server.poll_timeout()),
            rekey_at,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap();
        // A deadline already due comes round 1 µs later (time always moves on).
        now = next.max(now + Duration::from_micros(1));
        if rekey_at.is_some_and(|t| t <= now) {
            rekey_at = None;
            let role = if upload { Role::Sender } else { Role::Receiver };
            let offer = Offer::new(caddr, role, now).unwrap();
            let (rtc, answer) = rekey::answer(saddr, &offer.sdp, now).unwrap();
            let k = rekey::Rekey {
                rtc: Box::new(rtc),
                mid: None,
            };
            server.handle_rekey(now, k).unwrap();
            client
                .handle_rekey(now, offer.accept(&answer).unwrap())
                .unwrap();
        }
        while let Some((&k, _)) = wire.first_key_value() {
            if k.0 > now {
                break;
            }
            let (to_client, from, d) = wire.remove(&k).unwrap();
            if to_client {
                client.handle_datagram(now, from, d).unwrap();
            } else {
                server.handle_datagram(now, from, d).unwrap();
            }
        }
        client.handle_timeout(now).unwrap();
        server.handle_timeout(now).unwrap();
    }
    panic!("the call did not end");
}

fn complete(receiver: &PeerReport) -> u64 {
    receiver.playout.as_ref().map_or(0, |p| p.frames_complete)
}

#[test]
fn a_lossy_call_completes_through_nack_and_rtx() {
    let (client, server) = run(true, 25, None);
    assert_eq!(client.end, "done", "{client:?}");
    assert_eq!(client.frames_sent, Some(60));
    assert!(client.rtx_sent.unwrap() > 0, "{client:?}");
    assert_eq!(complete(&server), 60, "{server:?}");
}

#[test]
fn a_key_change_moves_the_media_to_new_keys() {
    for upload in [true, false] {
        let (client, server) = run(upload, 0, Some(Duration::from_secs(1)));
        let (sender, receiver) = if upload {
            (&client, &server)
        } else {
            (&server, &client)
        };
        assert_eq!((client.rekeys, server.rekeys), (1, 1));
        assert!(sender.media_after_rekey.unwrap_or(0) > 100, "{sender:?}");
        assert!(
            receiver.media_after_rekey.unwrap_or(0) > 100,
            "{receiver:?}"
        );
        assert_eq!(complete(receiver), 60, "{receiver:?}");
    }
}

/// The server finishes DTLS and streams while its last flight to the client is still on its
/// way (here: every DTLS datagram to the client 400 ms late): what arrives before the client has
/// its keys is kept and replayed, so the call's first frames are not lost.
#[test]
fn media_before_the_keys_is_kept_until_they_come() {
    let (client, server) = run_with(false, 0, None, Duration::from_millis(400));
    assert!(
        client.connect_ms.unwrap() > server.connect_ms.unwrap() + 300.0,
        "{client:?}"
    );
    assert_eq!(complete(&client), 60, "{client:?}");
    assert_eq!(server.packets_sent.map(|p| p > 0), Some(true));
}

/// The receiving sidekick numbers the stream from the offer/answer on, not from this side's DTLS
/// completion: what the far side streams before this side has its keys is numbered too, so
/// Packrat can see its losses (and the proxy repair them) while the keys are late.
#[test]
fn the_sidekick_numbers_the_stream_before_dtls_completes() {
    use crate::transfer::sidekick::Mode;
    use crate::webrtc::sidekick::{WebrtcSidekick, packrat_config};
    let t0 = Instant::now();
    let (c, s) = (addr("10.0.2.2:5000"), addr("10.0.1.1:4433"));
    let offer = Offer::new(c, Role::Receiver, t0).unwrap();
    let (_srtc, answer) = rekey::answer(s, &offer.sdp, t0).unwrap();
    let k = offer.accept(&answer).unwrap();
    let side = WebrtcSidekick::new(
        sidekick::session::SidekickClient::new(packrat_config(10, 4, 40, 8, 20_000, 60)),
        Mode::Packrat,
    );
    let (mut client, _) = pair(t0, false, 1);
    let expected = negotiated_vp8(&k.rtc).map(|(pt, _)| *pt);
    assert!(expected.is_some());
    client = PeerCore::new(
        *k.rtc,
        c,
        k.mid,
        client.cfg.clone(),
        Some(side),
        t0,
        client.wall,
    );
    assert!(!client.rtc.is_connected());
    assert_eq!(
        client.side.as_ref().and_then(WebrtcSidekick::media_pt),
        expected
    );
}
