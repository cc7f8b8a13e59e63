//! The packet-number lens against real quinn connections: a quinn client and server on loopback
//! talk through a UDP relay that records every datagram; the lens, fed the client's rustls key
//! log, must read packet numbers 0, 1, 2, … of the 1-RTT packets in both directions.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "quinn")]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use sidekick::keylog::KeyLogStore;
use sidekick::lens::{DatagramDirection, PacketNumberLens, Role, Suite};
use tokio::net::UdpSocket;

type Capture = Arc<Mutex<Vec<(DatagramDirection, Vec<u8>)>>>;

/// The ring provider, restricted to `suites` (in preference order) unless empty.
fn provider(suites: &[rustls::SupportedCipherSuite]) -> Arc<rustls::crypto::CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    if !suites.is_empty() {
        p.cipher_suites = suites.to_vec();
    }
    Arc::new(p)
}

/// Relays datagrams between the first client address seen and `server`, recording them from the
/// client's point of view.
async fn relay(socket: UdpSocket, server: SocketAddr, capture: Capture) {
    let mut client: Option<SocketAddr> = None;
    let mut buf = vec![0u8; 65536];
    loop {
        let Ok((n, from)) = socket.recv_from(&mut buf).await else {
            return;
        };
        let data = buf[..n].to_vec();
        if from == server {
            if let Some(c) = client {
                capture
                    .lock()
                    .unwrap()
                    .push((DatagramDirection::Incoming, data.clone()));
                let _ = socket.send_to(&data, c).await;
            }
        } else {
            client = Some(from);
            capture
                .lock()
                .unwrap()
                .push((DatagramDirection::Outgoing, data.clone()));
            let _ = socket.send_to(&data, server).await;
        }
    }
}

async fn run(suite: &[rustls::SupportedCipherSuite]) -> (Capture, KeyLogStore) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert_der = cert.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        cert.signing_key.serialize_der(),
    ));
    let server_tls = rustls::ServerConfig::builder_with_provider(provider(suite))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert_der.clone()], key)
        .unwrap();
    let server_cfg = quinn::ServerConfig::with_crypto(Arc::new(
        quinn::crypto::rustls::QuicServerConfig::try_from(server_tls).unwrap(),
    ));
    let server = quinn::Endpoint::server(server_cfg, "127.0.0.1:0".parse().unwrap()).unwrap();
    let server_addr = server.local_addr().unwrap();

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der).unwrap();
    let keylog = KeyLogStore::new(64);
    let mut client_tls = rustls::ClientConfig::builder_with_provider(provider(suite))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client_tls.key_log = Arc::new(keylog.clone());
    let client_cfg = quinn::ClientConfig::new(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(client_tls).unwrap(),
    ));

    let capture: Capture = Arc::default();
    let relay_socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let relay_addr = relay_socket.local_addr().unwrap();
    let relay_task = tokio::spawn(relay(relay_socket, server_addr, capture.clone()));

    let server_task = tokio::spawn(async move {
        let conn = server.accept().await.unwrap().await.unwrap();
        let (mut send, mut recv) = conn.accept_bi().await.unwrap();
        let got = recv.read_to_end(1 << 20).await.unwrap();
        send.write_all(&vec![7u8; 100_000]).await.unwrap();
        send.finish().unwrap();
        conn.closed().await;
        got.len()
    });

    let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    client.set_default_client_config(client_cfg);
    let conn = client
        .connect(relay_addr, "localhost")
        .unwrap()
        .await
        .unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(&vec![1u8; 200_000]).await.unwrap();
    send.finish().unwrap();
    let back = recv.read_to_end(1 << 20).await.unwrap();
    assert_eq!(back.len(), 100_000);
    conn.close(0u32.into(), b"done");
    assert_eq!(server_task.await.unwrap(), 200_000);
    client.wait_idle().await;
    relay_task.abort();
    (capture, keylog)
}

fn check(capture: &Capture, keylog: &KeyLogStore, expect_suite: Suite) {
    let mut lens = PacketNumberLens::new(Role::Client);
    assert_eq!(keylog.drain_into(&mut lens), 2, "both 1-RTT secrets logged");
    let mut numbers = [Vec::new(), Vec::new()];
    for (dir, datagram) in capture.lock().unwrap().iter() {
        if let Ok(pn) = lens.observe(*dir, datagram) {
            numbers[usize::from(*dir == DatagramDirection::Incoming)].push(pn);
        }
    }
    assert_eq!(lens.suite(), Some(expect_suite));
    for (name, pns) in ["client→server", "server→client"].iter().zip(&numbers) {
        assert!(pns.len() > 20, "{name}: only {} packets read", pns.len());
        // 1-RTT numbering starts at 0 (the first packets may share a datagram with a long
        // header and still be read); it only increases, and skips are rare and small.
        assert!(pns[0] <= 2, "{name}: first pn {} of {pns:?}", pns[0]);
        let skips: u64 = pns
            .windows(2)
            .map(|w| {
                assert!(w[1] > w[0], "{name}: {} then {}", w[0], w[1]);
                w[1] - w[0] - 1
            })
            .sum();
        assert!(
            skips * 20 < pns.len() as u64,
            "{name}: {skips} skipped of {}",
            pns.len()
        );
    }
}

#[tokio::test]
async fn quinn_default_suite_aes256() {
    let (capture, keylog) = run(&[]).await;
    check(&capture, &keylog, Suite::Aes256Gcm);
}

#[tokio::test]
async fn quinn_aes128_identified_by_trial() {
    let (capture, keylog) =
        run(&[rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256]).await;
    check(&capture, &keylog, Suite::Aes128Gcm);
}

#[tokio::test]
async fn quinn_chacha20_identified_by_trial() {
    // AES-128-GCM stays available: QUIC Initial packets need it.
    let (capture, keylog) = run(&[
        rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
        rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256,
    ])
    .await;
    check(&capture, &keylog, Suite::ChaCha20Poly1305);
}
