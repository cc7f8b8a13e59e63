//! Media applications end to end on loopback, through an in-process relay that drops chosen
//! datagrams, so the NACK/retransmission paths and the metrics are exercised for real.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sidekick_examples::fec::FecConfig;
use sidekick_examples::media::{MediaConfig, MediaSender, SendObserver};
use sidekick_examples::media_io::{
    ReceiverTiming, parse_media_summary, run_fec_client, run_sender, serve_fec, serve_media,
};
use sidekick_examples::wire::KIND_DATA;
use tokio::net::UdpSocket;

/// Relay between one client and `server`; drops DATA datagrams whose index (counting DATA in the
/// data direction only) satisfies `drop`. Returns the relay's address and the drop counter.
async fn relay(
    server: SocketAddr,
    drop: impl Fn(u64) -> bool + Send + 'static,
) -> (SocketAddr, Arc<AtomicU64>) {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let dropped = Arc::new(AtomicU64::new(0));
    let d2 = dropped.clone();
    tokio::spawn(async move {
        let mut client: Option<SocketAddr> = None;
        let mut data_idx = 0u64;
        let mut buf = vec![0u8; 65536];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf).await else {
                return;
            };
            let pkt = &buf[..n];
            let to = if from == server {
                match client {
                    Some(c) => c,
                    None => continue,
                }
            } else {
                client = Some(from);
                server
            };
            if pkt.first() == Some(&KIND_DATA) {
                let i = data_idx;
                data_idx += 1;
                if drop(i) {
                    d2.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
            let _ = sock.send_to(pkt, to).await;
        }
    });
    (addr, dropped)
}

#[derive(Default)]
struct Count(u64, u64);

impl SendObserver for Count {
    fn on_send(&mut self, _seq: u32, datagram: &[u8], retransmission: bool) {
        assert_eq!(datagram.len(), sidekick_examples::wire::DATA_OVERHEAD + 240);
        if retransmission {
            self.1 += 1;
        } else {
            self.0 += 1;
        }
    }
}

#[tokio::test]
async fn media_nack_recovers_every_loss() {
    let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let saddr = server.local_addr().unwrap();
    let cfg = MediaConfig::default();
    let scfg = cfg.clone();
    let srv = tokio::spawn(async move {
        let mut got = None;
        serve_media(&server, &scfg, ReceiverTiming::default(), true, |s| {
            got = Some(s.receiver.metrics());
        })
        .await
        .unwrap();
        got.unwrap()
    });
    // Drop original packets 5, 17, 29, ... (one in 12) and nothing else.
    let (raddr, dropped) = relay(saddr, |i| i % 12 == 5).await;
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut tx = MediaSender::new(&cfg, 1);
    let mut obs = Count::default();
    let out = run_sender(
        &sock,
        raddr,
        &mut tx,
        cfg.interval,
        Duration::from_millis(1500),
        None,
        &mut obs,
        Duration::from_secs(5),
    )
    .await;
    let summary = parse_media_summary(&out.summary.expect("summary")).unwrap();
    let server_side = srv.await.unwrap();
    // The client got the server's metrics (JSON round trip; floats to within printing precision).
    assert_eq!(summary.packets_received, server_side.packets_received);
    assert_eq!(summary.nacked_seqs, server_side.nacked_seqs);
    assert!((summary.dejitter_p99_ms - server_side.dejitter_p99_ms).abs() < 1e-9);
    assert!((summary.rtt_ms - server_side.rtt_ms).abs() < 1e-9);
    let c = tx.counters();
    assert!(
        (70..=80).contains(&c.packets_sent),
        "sent {}",
        c.packets_sent
    );
    assert_eq!(obs.0, c.packets_sent);
    assert_eq!(obs.1, c.retransmissions);
    let lost = dropped.load(Ordering::Relaxed);
    assert!(lost >= 5);
    // Every loss NACKed and recovered; dropping by DATA index may also hit a retransmission.
    assert_eq!(summary.packets_received, c.packets_sent);
    assert_eq!(summary.packets_missing, 0);
    assert!(c.retransmissions >= lost - 1 && c.retransmissions <= lost + 2);
    assert!(summary.nacked_seqs >= lost - 1);
    // A lost packet is NACKed when its successor arrives and retransmitted one (loopback) RTT
    // later: its successor waits about one RTT in the de-jitter buffer; the lost packet itself
    // arrives one interval (20 ms) late, which shows in the latency tail (1 in 12 > 1 %).
    assert!(
        summary.dejitter_max_ms > 0.0 && summary.dejitter_max_ms < 10.0,
        "{summary:?}"
    );
    assert_eq!(summary.dejitter_p50_ms, 0.0);
    assert!(summary.latency_p50_ms < 10.0, "{summary:?}");
    assert!(
        summary.latency_p99_ms > 15.0 && summary.latency_p99_ms < 40.0,
        "{summary:?}"
    );
    assert!(summary.rtt_ms < 20.0);
}

#[tokio::test]
async fn media_fec_recovers_single_losses_and_nacks_double_losses() {
    let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let saddr = server.local_addr().unwrap();
    let cfg = FecConfig::default();
    let scfg = cfg.clone();
    let srv = tokio::spawn(async move {
        serve_fec(&server, &scfg, Duration::from_secs(60), true)
            .await
            .unwrap();
    });
    // Drop packet 10 alone (FEC repairs it) and packets 30, 31 (frame 30 must be NACKed).
    let (raddr, dropped) = relay(saddr, |i| i == 10 || i == 30 || i == 31).await;
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let out = run_fec_client(
        &sock,
        raddr,
        &cfg,
        Duration::from_millis(1500),
        ReceiverTiming::default(),
    )
    .await
    .unwrap();
    srv.await.unwrap();
    let m = out.metrics;
    assert_eq!(dropped.load(Ordering::Relaxed), 3);
    assert!((70..=80).contains(&m.packets_expected), "{m:?}");
    assert_eq!(m.frames_missing, 0);
    assert_eq!(m.frames_received, m.packets_expected);
    // Frames 10 and 31 came from the next packet; frame 30 from the retransmitted packet 30.
    assert_eq!(m.frames_from_fec, 2, "{m:?}");
    assert_eq!(m.nacked_frames, 1, "{m:?}");
    assert_eq!(m.packets_received + 2, m.packets_expected, "{m:?}");
    // Frame latency on loopback ≈ 20 ms (the frame's own duration) + tiny delay.
    assert!(m.latency_p50_ms >= 19.0 && m.latency_p50_ms < 30.0, "{m:?}");
    // Frame 30 arrives one packet interval late (revealed by packet 32) plus a loopback RTT:
    // ~20 ms after its turn at most, against a 40 ms buffer: no stall longer than that.
    assert!(m.stall_ms_total >= 15.0 && m.stall_ms_total < 60.0, "{m:?}");
}
