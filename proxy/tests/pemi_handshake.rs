//! PEMI handshake tracking on real handshakes (PEMI App. A, ReACKed QUICer (IMC '24)): an in-process quinn
//! pair and a quiche pair talk over loopback through a UDP relay that models the proxy's position
//! (client link delay `D_C`, server link delay `D_S`, one way) and records every datagram as it
//! passes the proxy. The recording is fed to the tracker; its initial RTTs must match the
//! relay-measured gaps and the configured path (2·D_C to the client, 2·D_S to the server, plus the
//! endpoints' processing time).

#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sidekick_proxy::Time;
use sidekick_proxy::engine::Direction;
use sidekick_proxy::pemi::handshake::{HandshakeTracker, PacketKind, coalesced};

const D_C: Duration = Duration::from_millis(10);
const D_S: Duration = Duration::from_millis(20);

type Recording = Arc<Mutex<Vec<(Instant, Direction, Vec<u8>)>>>;
/// Relay queue entry: (due, seq, stage, to_server, bytes); stage 0 = passes the proxy,
/// 1 = delivered.
type Queued = Reverse<(Instant, u64, u8, bool, Vec<u8>)>;

/// A delaying UDP relay. A datagram from the client passes the proxy `D_C` after the relay got it
/// and reaches the server `D_S` later; the reverse for server datagrams.
struct Relay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    rec: Recording,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    fn start(server: SocketAddr) -> Self {
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        front.set_nonblocking(true).unwrap();
        back.set_nonblocking(true).unwrap();
        let addr = front.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let rec: Recording = Arc::default();
        let (s, r) = (stop.clone(), rec.clone());
        let thread = std::thread::spawn(move || {
            let mut client: Option<SocketAddr> = None;
            let mut q: BinaryHeap<Queued> = BinaryHeap::new();
            let mut seq = 0;
            let mut buf = vec![0u8; 65536];
            while !s.load(Ordering::Relaxed) {
                let now = Instant::now();
                while let Ok((n, from)) = front.recv_from(&mut buf) {
                    client = Some(from);
                    seq += 1;
                    q.push(Reverse((now + D_C, seq, 0, true, buf[..n].to_vec())));
                }
                while let Ok((n, _)) = back.recv_from(&mut buf) {
                    seq += 1;
                    q.push(Reverse((now + D_S, seq, 0, false, buf[..n].to_vec())));
                }
                while q.peek().is_some_and(|Reverse(e)| e.0 <= now) {
                    let Reverse((due, sq, stage, up, bytes)) = q.pop().unwrap();
                    if stage == 0 {
                        let dir = if up {
                            Direction::FromClient
                        } else {
                            Direction::ToClient
                        };
                        r.lock().unwrap().push((due, dir, bytes.clone()));
                        let d = if up { D_S } else { D_C };
                        q.push(Reverse((due + d, sq, 1, up, bytes)));
                    } else if up {
                        let _ = back.send_to(&bytes, server);
                    } else if let Some(c) = client {
                        let _ = front.send_to(&bytes, c);
                    }
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        });
        Self {
            addr,
            stop,
            rec,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Vec<(Instant, Direction, Vec<u8>)> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        std::mem::take(&mut *self.rec.lock().unwrap())
    }
}

/// What the relay itself measured: first client Initial → first server long-header datagram,
/// and first server datagram with a Handshake packet → first client datagram with one.
fn relay_gaps(rec: &[(Instant, Direction, Vec<u8>)]) -> (Duration, Duration) {
    let has = |d: &[u8], f: fn(&PacketKind) -> bool| coalesced(d, 8).iter().any(f);
    let ci = rec
        .iter()
        .find(|(_, d, b)| {
            *d == Direction::FromClient && has(b, |k| matches!(k, PacketKind::Initial { .. }))
        })
        .unwrap()
        .0;
    let sf = rec
        .iter()
        .find(|(_, d, _)| *d == Direction::ToClient)
        .unwrap()
        .0;
    let sh = rec
        .iter()
        .find(|(_, d, b)| {
            *d == Direction::ToClient && has(b, |k| matches!(k, PacketKind::Handshake))
        })
        .unwrap()
        .0;
    let ch = rec
        .iter()
        .find(|(t, d, b)| {
            *d == Direction::FromClient && *t > sh && has(b, |k| matches!(k, PacketKind::Handshake))
        })
        .unwrap()
        .0;
    (sf - ci, ch - sh)
}

fn check(rec: &[(Instant, Direction, Vec<u8>)], stack: &str) {
    assert!(rec.len() >= 4, "{stack}: {} datagrams recorded", rec.len());
    let mut t = HandshakeTracker::new();
    // The tracker's clock counts from the first datagram the relay recorded.
    let origin = rec[0].0;
    for (at, dir, bytes) in rec {
        t.on_datagram(Time::since(origin, *at), *dir, bytes);
    }
    let r = t.rtts();
    let (gap_s, gap_c) = relay_gaps(rec);
    let to_server = r.to_server.expect("server RTT");
    let to_client = r.to_client.expect("client RTT");
    eprintln!(
        "{stack}: to_server {to_server:?} (relay {gap_s:?}), to_client {to_client:?} (relay {gap_c:?}), instant_ack {}",
        r.instant_ack
    );
    assert_eq!(to_server, gap_s, "{stack}");
    assert_eq!(to_client, gap_c, "{stack}");
    // The path: at least the link RTT, at most that plus processing (TLS signing, scheduling;
    // a debug build on a loaded 2-core CI machine can take tens of milliseconds). The exact
    // check is the equality with the relay's own gaps above.
    let slack = Duration::from_millis(80);
    assert!(
        to_server >= 2 * D_S && to_server <= 2 * D_S + slack,
        "{stack}: {to_server:?}"
    );
    assert!(
        to_client >= 2 * D_C && to_client <= 2 * D_C + slack,
        "{stack}: {to_client:?}"
    );
    // Neither stack sends an instant ACK: the ServerHello is coalesced with the server's ACK.
    assert!(!r.instant_ack, "{stack}");
    assert!(!r.retry, "{stack}");
    assert!(t.done());
}

fn self_signed() -> (Vec<u8>, Vec<u8>, String, String) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    (
        ck.cert.der().to_vec(),
        ck.signing_key.serialize_der(),
        ck.cert.pem(),
        ck.signing_key.serialize_pem(),
    )
}

#[test]
fn quinn_handshake_initial_rtts() {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (cert, key, _, _) = self_signed();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rec = rt.block_on(async move {
        let tls = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(cert.clone())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
            )
            .unwrap();
        let mut tls = tls;
        tls.alpn_protocols = vec![b"pemi".to_vec()];
        let scfg = quinn::ServerConfig::with_crypto(Arc::new(
            quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap(),
        ));
        let server = quinn::Endpoint::server(scfg, "127.0.0.1:0".parse().unwrap()).unwrap();
        let relay = Relay::start(server.local_addr().unwrap());
        let srv = tokio::spawn(async move {
            let conn = server.accept().await.unwrap().await.unwrap();
            let (mut s, mut r) = conn.accept_bi().await.unwrap();
            let got = r.read_to_end(1024).await.unwrap();
            s.write_all(&got).await.unwrap();
            s.finish().unwrap();
            conn.closed().await;
        });
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from(cert)).unwrap();
        let mut ctls = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        ctls.alpn_protocols = vec![b"pemi".to_vec()];
        let ccfg = quinn::ClientConfig::new(Arc::new(
            quinn::crypto::rustls::QuicClientConfig::try_from(ctls).unwrap(),
        ));
        let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        client.set_default_client_config(ccfg);
        let conn = client
            .connect(relay.addr, "localhost")
            .unwrap()
            .await
            .unwrap();
        let (mut s, mut r) = conn.open_bi().await.unwrap();
        s.write_all(b"hello pemi").await.unwrap();
        s.finish().unwrap();
        assert_eq!(r.read_to_end(1024).await.unwrap(), b"hello pemi");
        conn.close(0u32.into(), b"done");
        client.wait_idle().await;
        let _ = tokio::time::timeout(Duration::from_secs(2), srv).await;
        relay.finish()
    });
    check(&rec, "quinn");
}

#[test]
fn quiche_handshake_initial_rtts() {
    let (_, _, cert_pem, key_pem) = self_signed();
    let dir = std::env::temp_dir().join(format!("pemi-hs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cp, kp) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cp, cert_pem).unwrap();
    std::fs::write(&kp, key_pem).unwrap();
    let config = |server: bool| {
        let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).unwrap();
        c.set_application_protos(&[b"pemi"]).unwrap();
        c.set_max_idle_timeout(5000);
        c.set_max_recv_udp_payload_size(1350);
        c.set_max_send_udp_payload_size(1350);
        c.set_initial_max_data(1_000_000);
        c.set_initial_max_stream_data_bidi_local(100_000);
        c.set_initial_max_stream_data_bidi_remote(100_000);
        c.set_initial_max_streams_bidi(10);
        // The key-exchange groups of quiche 0.24's BoringSSL (the examples' TLS_GROUPS): the
        // BoringSSL of quiche 0.30 puts X25519MLKEM768 first, whose key share splits the
        // ClientHello over two Initial datagrams, and the server ACKs the first one alone.
        c.set_curves_list("X25519:P-256:P-384").unwrap();
        if server {
            c.load_cert_chain_from_pem_file(cp.to_str().unwrap())
                .unwrap();
            c.load_priv_key_from_pem_file(kp.to_str().unwrap()).unwrap();
        } else {
            c.verify_peer(false);
        }
        c
    };
    let ssock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let saddr = ssock.local_addr().unwrap();
    let relay = Relay::start(saddr);
    let mut scfg = config(true);
    let server = std::thread::spawn(move || {
        ssock
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        let mut buf = vec![0u8; 65536];
        let mut out = [0u8; 1500];
        let mut conn: Option<quiche::Connection> = None;
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut done_at: Option<Instant> = None;
        while Instant::now() < deadline
            && done_at.is_none_or(|t| t.elapsed() < Duration::from_millis(300))
        {
            if let Ok((n, from)) = ssock.recv_from(&mut buf) {
                if conn.is_none() {
                    let scid = quiche::ConnectionId::from_vec(vec![7; 16]);
                    conn = Some(quiche::accept(&scid, None, saddr, from, &mut scfg).unwrap());
                }
                let c = conn.as_mut().unwrap();
                let _ = c.recv(&mut buf[..n], quiche::RecvInfo { from, to: saddr });
            }
            if let Some(c) = conn.as_mut() {
                c.on_timeout();
                while let Ok((n, info)) = c.send(&mut out) {
                    ssock.send_to(&out[..n], info.to).unwrap();
                }
                if c.is_established() && done_at.is_none() {
                    done_at = Some(Instant::now());
                }
            }
        }
    });
    let csock = UdpSocket::bind("127.0.0.1:0").unwrap();
    csock
        .set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    let caddr = csock.local_addr().unwrap();
    let mut ccfg = config(false);
    let scid = quiche::ConnectionId::from_vec(vec![9; 16]);
    let mut c = quiche::connect(Some("localhost"), &scid, caddr, relay.addr, &mut ccfg).unwrap();
    let mut buf = vec![0u8; 65536];
    let mut out = [0u8; 1500];
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut established_at: Option<Instant> = None;
    while Instant::now() < deadline
        && established_at.is_none_or(|t| t.elapsed() < Duration::from_millis(200))
    {
        while let Ok((n, info)) = c.send(&mut out) {
            csock.send_to(&out[..n], info.to).unwrap();
        }
        if let Ok((n, from)) = csock.recv_from(&mut buf) {
            let _ = c.recv(&mut buf[..n], quiche::RecvInfo { from, to: caddr });
        }
        c.on_timeout();
        if c.is_established() && established_at.is_none() {
            established_at = Some(Instant::now());
        }
    }
    assert!(c.is_established(), "quiche handshake did not complete");
    server.join().unwrap();
    let rec = relay.finish();
    let _ = std::fs::remove_dir_all(&dir);
    check(&rec, "quiche");
}
