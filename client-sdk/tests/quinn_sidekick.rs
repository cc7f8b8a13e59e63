//! A quinn client using the SDK (socket wrapper + PACUBIC) uploads through an in-process
//! sidekick proxy: a UDP relay that answers discovery with the real protocol proxy table,
//! drops some client datagrams before it sees them (near-segment loss), and sends quACKs of
//! what it forwarded. A second run kills the proxy mid-transfer: the upload still completes and
//! the client falls back.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "quinn")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quack::PowerSumQuack;
use sidekick::integrations::quinn_cc::{PacubicFactory, SharedSignals};
use sidekick::integrations::quinn_socket::SidekickSocket;
use sidekick::keylog::KeyLogStore;
use sidekick::pacubic::PacubicConfig;
use sidekick::session::{FallbackCause, SdkEvent, SidekickClient, SidekickConfig};
use sidekick_protocol::{
    BaseFlow, ProxyEvent, ProxyPolicy, ProxySessionTable, Time, is_discovery_request,
};
use tokio::net::UdpSocket;

struct ProxyStats {
    alive: AtomicBool,
    quacks: AtomicU64,
    dropped: AtomicU64,
}

/// The relay + proxy. Client datagrams arrive on `base`, go to `server`; sidekick frames on `sk`.
async fn proxy(base: UdpSocket, sk: UdpSocket, server: SocketAddr, stats: Arc<ProxyStats>) {
    let sk_addr = sk.local_addr().unwrap();
    let base_addr = base.local_addr().unwrap();
    let mut table = ProxySessionTable::new(ProxyPolicy::new(sk_addr));
    // The table's clock: time since the relay started.
    let origin = Instant::now();
    let now = || Time::since(origin, Instant::now());
    let mut client: Option<SocketAddr> = None;
    let mut session = None;
    let mut q = PowerSumQuack::<u32>::new(16);
    let mut since_quack = 0u32;
    let mut forwarded = 0u64;
    let (mut b1, mut b2) = (vec![0u8; 65536], vec![0u8; 65536]);
    loop {
        tokio::select! {
            r = base.recv_from(&mut b1) => {
                let Ok((n, from)) = r else { return };
                let d = &b1[..n];
                if from == server {
                    if let Some(c) = client { let _ = base.send_to(d, c).await; }
                    continue;
                }
                client = Some(from);
                let alive = stats.alive.load(Ordering::Relaxed);
                if let Some(req) = is_discovery_request(d) {
                    if alive {
                        let flow = BaseFlow { client: from, server: base_addr };
                        if let Ok(reply) = table.handle_discovery(now(), flow, &req) {
                            let _ = base.send_to(&reply.bytes, from).await;
                        }
                    }
                    continue;
                }
                forwarded += 1;
                let short = d[0] & 0x80 == 0;
                if short && session.is_some() && forwarded.is_multiple_of(40) {
                    stats.dropped.fetch_add(1, Ordering::Relaxed);
                    continue; // lost before the proxy: the quACK will show it
                }
                let _ = base.send_to(d, server).await;
                if let (Some(sid), true) = (session, alive) {
                    q.insert(u32::from_le_bytes(d[n - 4..].try_into().unwrap()));
                    since_quack += 1;
                    if since_quack >= 8 {
                        since_quack = 0;
                        if let Ok(t) = table.send_quack(now(), &sid, &q.to_bytes()) {
                            stats.quacks.fetch_add(1, Ordering::Relaxed);
                            let _ = sk.send_to(&t.bytes, t.to).await;
                        }
                    }
                }
            }
            r = sk.recv_from(&mut b2) => {
                let Ok((n, from)) = r else { return };
                if !stats.alive.load(Ordering::Relaxed) { continue; }
                match table.handle_datagram(now(), from, &b2[..n]) {
                    Ok(ProxyEvent::SessionEstablished { id, .. }) => session = Some(id),
                    Ok(ProxyEvent::Reset { .. }) => q = PowerSumQuack::new(16),
                    _ => {}
                }
                while let Some(t) = table.poll_transmit() {
                    let _ = sk.send_to(&t.bytes, t.to).await;
                }
            }
        }
    }
}

async fn upload(
    kill_after: Option<Duration>,
) -> (
    Arc<ProxyStats>,
    sidekick::integrations::quinn_socket::SidekickHandle,
    SharedSignals,
) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert_der = cert.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        cert.signing_key.serialize_der(),
    ));
    let server_cfg = quinn::ServerConfig::with_single_cert(vec![cert_der.clone()], key).unwrap();
    let server = quinn::Endpoint::server(server_cfg, "127.0.0.1:0".parse().unwrap()).unwrap();
    let server_addr = server.local_addr().unwrap();

    let stats = Arc::new(ProxyStats {
        alive: AtomicBool::new(true),
        quacks: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
    });
    let relay = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let relay_addr = relay.local_addr().unwrap();
    let sk = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let proxy_task = tokio::spawn(proxy(relay, sk, server_addr, stats.clone()));

    const SIZE: usize = 3_000_000;
    let server_task = tokio::spawn(async move {
        let conn = server.accept().await.unwrap().await.unwrap();
        let (mut send, mut recv) = conn.accept_bi().await.unwrap();
        let got = recv.read_to_end(SIZE + 1).await.unwrap();
        send.write_all(b"ok").await.unwrap();
        send.finish().unwrap();
        let _ = conn.closed().await;
        got.len()
    });

    // Client: rustls key log, PACUBIC, the socket wrapper.
    let keylog = KeyLogStore::new(64);
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der).unwrap();
    // The provider named, not the process default: in a workspace build rustls has both ring
    // and aws-lc-rs enabled (s2n-quic's rustls provider asks for the latter), and then there
    // is no default to pick.
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.key_log = Arc::new(keylog.clone());
    let mut client_cfg = quinn::ClientConfig::new(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap(),
    ));
    let signals = SharedSignals::new();
    let mut transport = quinn::TransportConfig::default();
    transport.congestion_controller_factory(Arc::new(PacubicFactory::new(
        PacubicConfig::default(),
        signals.clone(),
    )));
    client_cfg.transport_config(Arc::new(transport));

    let mut sdk = SidekickConfig::robin(10, 16);
    sdk.protocol.idle_timeout = Duration::from_millis(400);
    sdk.protocol.refresh_interval = Duration::from_millis(100);
    let runtime = quinn::default_runtime().unwrap();
    let base = runtime
        .wrap_udp_socket(std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
        .unwrap();
    let sk_client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (socket, handle) = SidekickSocket::spawn(
        base,
        sk_client,
        relay_addr,
        SidekickClient::new(sdk),
        Some(keylog),
        Some(signals.clone()),
    )
    .unwrap();
    let mut endpoint = quinn::Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        None,
        socket,
        runtime,
    )
    .unwrap();
    endpoint.set_default_client_config(client_cfg);

    let conn = endpoint
        .connect(relay_addr, "localhost")
        .unwrap()
        .await
        .unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let chunk = vec![9u8; 10_000];
    let t0 = Instant::now();
    let mut killed = false;
    for _ in 0..SIZE / chunk.len() {
        send.write_all(&chunk).await.unwrap();
        if let Some(k) = kill_after
            && !killed
            && t0.elapsed() >= k
        {
            stats.alive.store(false, Ordering::Relaxed);
            killed = true;
        }
    }
    send.finish().unwrap();
    let reply = tokio::time::timeout(Duration::from_secs(60), recv.read_to_end(16))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reply, b"ok");
    conn.close(0u32.into(), b"");
    assert_eq!(server_task.await.unwrap(), SIZE, "the upload completed");
    if kill_after.is_some() {
        stats.alive.store(false, Ordering::Relaxed);
        // Past the idle timeout the client notices the proxy is gone.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    proxy_task.abort();
    (stats, handle, signals)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quinn_upload_with_sidekick_active() {
    let (stats, handle, signals) = upload(None).await;
    let events = handle.take_events();
    assert!(events.contains(&SdkEvent::Established), "{events:?}");
    let near_losses = events
        .iter()
        .filter(|e| matches!(e, SdkEvent::NearLoss(_)))
        .count();
    let (quacks, resent, pns) = handle.with_client(|c| {
        (
            c.stats().quacks,
            c.stats().retransmissions,
            c.lens()
                .stats(sidekick::lens::DatagramDirection::Outgoing)
                .read,
        )
    });
    eprintln!(
        "proxy quacks {} dropped {} | client quacks {quacks} near losses {near_losses} resent {resent} pns {pns} cc events {}",
        stats.quacks.load(Ordering::Relaxed),
        stats.dropped.load(Ordering::Relaxed),
        signals.quack_events_applied()
    );
    assert!(quacks > 10);
    assert!(stats.dropped.load(Ordering::Relaxed) > 0);
    assert!(near_losses > 0);
    assert!(resent > 0);
    assert!(pns > 100, "the lens read outgoing packet numbers");
    assert!(
        signals.quack_events_applied() > 0,
        "PACUBIC reacted to quACK losses"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quinn_upload_survives_proxy_death() {
    let (_stats, handle, _signals) = upload(Some(Duration::from_millis(30))).await;
    let events = handle.take_events();
    assert!(events.contains(&SdkEvent::Established), "{events:?}");
    let cause = handle.with_client(SidekickClient::fallback_cause);
    assert_eq!(
        cause,
        Some(FallbackCause::Protocol(
            sidekick_protocol::FallbackReason::IdleTimeout
        )),
        "{events:?}"
    );
}
