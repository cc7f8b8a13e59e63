//! A quiche client wrapped in `SidekickQuiche` downloads through an in-memory Packrat proxy:
//! the proxy (real protocol table + rIBLT eACK + a bounded cache) forwards server datagrams,
//! the proxy→client link drops every 20th, and the proxy retransmits what the client's eACKs
//! show missing. A second run kills the proxy mid-transfer; the download still completes and the
//! client falls back.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "quiche")]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use eack::ProxyEack;
use sidekick::integrations::quiche_conn::SidekickQuiche;
use sidekick::session::{SidekickClient, SidekickConfig, Transmit};
use sidekick_protocol::{BaseFlow, ProxyEvent, ProxyPolicy, ProxySessionTable, SessionId, Time};

const SIZE: usize = 1_500_000;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn config(cert: Option<(&std::path::Path, &std::path::Path)>) -> quiche::Config {
    let mut cfg = quiche::Config::new(quiche::PROTOCOL_VERSION).unwrap();
    if let Some((c, k)) = cert {
        cfg.load_cert_chain_from_pem_file(c.to_str().unwrap())
            .unwrap();
        cfg.load_priv_key_from_pem_file(k.to_str().unwrap())
            .unwrap();
    }
    cfg.verify_peer(false);
    cfg.set_application_protos(&[b"sidekick-test"]).unwrap();
    cfg.set_initial_max_data(50_000_000);
    cfg.set_initial_max_stream_data_bidi_local(50_000_000);
    cfg.set_initial_max_stream_data_bidi_remote(50_000_000);
    cfg.set_initial_max_streams_bidi(10);
    cfg.set_max_idle_timeout(10_000);
    cfg.log_keys();
    cfg
}

struct Proxy {
    /// The table's clock counts from here.
    origin: Instant,
    table: ProxySessionTable,
    sid: Option<SessionId>,
    eack: ProxyEack,
    cache: VecDeque<(u32, Vec<u8>)>,
    alive: bool,
    retransmitted: u64,
    eacks: u64,
    decode_failures: u64,
}

impl Proxy {
    /// The table's time at `now`.
    fn time(&self, now: Instant) -> Time {
        Time::since(self.origin, now)
    }
}

#[derive(Debug)]
struct Outcome {
    received: usize,
    eacks_sent: u64,
    held: u64,
    dropped: u64,
    proxy_retransmitted: u64,
    proxy_eacks: u64,
    fallback: Option<sidekick::session::FallbackCause>,
}

struct Addrs {
    client_addr: SocketAddr,
    server_addr: SocketAddr,
    client_sk: SocketAddr,
    proxy_sk: SocketAddr,
}

/// Moves the client's sidekick output to the proxy and the proxy's answers back, until quiet.
fn pump(
    client: &mut SidekickQuiche,
    proxy: &mut Proxy,
    server: &mut quiche::Connection,
    now: Instant,
    a: &Addrs,
) {
    let (client_addr, server_addr, client_sk, proxy_sk) =
        (a.client_addr, a.server_addr, a.client_sk, a.proxy_sk);
    let to_client = quiche::RecvInfo {
        from: server_addr,
        to: client_addr,
    };
    let to_server = quiche::RecvInfo {
        from: client_addr,
        to: server_addr,
    };
    for _ in 0..16 {
        let mut quiet = true;
        while let Some(t) = client.poll_transmit() {
            quiet = false;
            match t {
                Transmit::Base(d) => {
                    if let Some(req) = sidekick_protocol::is_discovery_request(&d) {
                        if proxy.alive {
                            let flow = BaseFlow {
                                client: client_addr,
                                server: server_addr,
                            };
                            if let Ok(r) = proxy.table.handle_discovery(proxy.time(now), flow, &req)
                            {
                                client.recv(now, &r.bytes, to_client).unwrap();
                            }
                        }
                    } else {
                        let mut d = d;
                        let _ = server.recv(&mut d, to_server);
                    }
                }
                Transmit::Sidekick(_, d) if proxy.alive => {
                    match proxy.table.handle_datagram(proxy.time(now), client_sk, &d) {
                        Ok(ProxyEvent::SessionEstablished { id, epoch, .. }) => {
                            proxy.sid = Some(id);
                            proxy.eack.reset(epoch);
                        }
                        Ok(ProxyEvent::Eack { data, .. }) => {
                            proxy.eacks += 1;
                            if let Ok(diff) = proxy.eack.on_eack(&data) {
                                for id in diff.missing {
                                    if let Some(pos) =
                                        proxy.cache.iter().position(|(i, _)| *i == id)
                                    {
                                        let (_, d) = proxy.cache.remove(pos).unwrap();
                                        proxy.retransmitted += 1;
                                        client.recv(now, &d, to_client).unwrap();
                                    }
                                }
                            } else {
                                // Undecodable: new epoch (Packrat (CoNEXT '26) §6.1).
                                proxy.decode_failures += 1;
                                let sid = proxy.sid.unwrap();
                                let code = sidekick_protocol::ErrorCode::DecodeFailure;
                                let e =
                                    proxy.table.send_reset(proxy.time(now), &sid, code).unwrap();
                                proxy.eack.reset(e);
                                proxy.cache.clear();
                            }
                        }
                        Ok(ProxyEvent::Reset { epoch, .. }) => proxy.eack.reset(epoch),
                        _ => {}
                    }
                }
                Transmit::Sidekick(..) => {}
            }
        }
        while let Some(t) = proxy.table.poll_transmit() {
            quiet = false;
            if proxy.alive {
                client.on_sidekick_datagram(now, proxy_sk, &t.bytes);
            }
        }
        if quiet {
            return;
        }
    }
}

fn run(kill_at_bytes: Option<usize>) -> Outcome {
    let dir = std::env::temp_dir().join(format!(
        "sidekick-packrat-{}-{}",
        std::process::id(),
        kill_at_bytes.unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cp, kp) = (dir.join("c.pem"), dir.join("k.pem"));
    std::fs::write(&cp, cert.cert.pem()).unwrap();
    std::fs::write(&kp, cert.signing_key.serialize_pem()).unwrap();

    let (client_addr, server_addr) = (addr("10.0.0.2:5000"), addr("203.0.113.5:443"));
    let (client_sk, proxy_sk) = (addr("10.0.0.2:6000"), addr("192.0.2.1:7000"));
    let mut scfg = config(Some((&cp, &kp)));
    let mut ccfg = config(None);
    let conn = quiche::connect(
        Some("localhost"),
        &quiche::ConnectionId::from_ref(&[0xc1; 16]),
        client_addr,
        server_addr,
        &mut ccfg,
    )
    .unwrap();
    let mut sdk = SidekickConfig::packrat();
    sdk.protocol.idle_timeout = Duration::from_millis(300);
    sdk.protocol.refresh_interval = Duration::from_millis(100);
    let mut client = SidekickQuiche::new(conn, SidekickClient::new(sdk));
    let mut server = quiche::accept(
        &quiche::ConnectionId::from_ref(&[0x5e; 16]),
        None,
        server_addr,
        client_addr,
        &mut scfg,
    )
    .unwrap();
    let mut proxy = Proxy {
        origin: Instant::now(),
        table: ProxySessionTable::new(ProxyPolicy::new(proxy_sk)),
        sid: None,
        eack: ProxyEack::new(160, 4096),
        cache: VecDeque::new(),
        alive: true,
        retransmitted: 0,
        eacks: 0,
        decode_failures: 0,
    };
    let to_client = quiche::RecvInfo {
        from: server_addr,
        to: client_addr,
    };
    let to_server = quiche::RecvInfo {
        from: client_addr,
        to: server_addr,
    };
    let addrs = Addrs {
        client_addr,
        server_addr,
        client_sk,
        proxy_sk,
    };
    let mut buf = vec![0u8; 65535];
    let payload = vec![5u8; SIZE];
    let (mut sent, mut received, mut forwarded, mut dropped) = (0usize, 0usize, 0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut requested = false;
    while received < SIZE {
        assert!(Instant::now() < deadline, "download stalled at {received}");
        let now = Instant::now();
        // Client → server (and the sidekick's own datagrams).
        while let Ok((n, _)) = client.send(now, &mut buf) {
            let _ = server.recv(&mut buf[..n], to_server);
        }
        pump(&mut client, &mut proxy, &mut server, now, &addrs);
        // Server → proxy → lossy link → client.
        while let Ok((n, _)) = server.send(&mut buf) {
            let d = buf[..n].to_vec();
            if proxy.alive && proxy.sid.is_some() {
                let id = u32::from_le_bytes(d[n - 4..].try_into().unwrap());
                proxy.eack.insert(id);
                proxy.cache.push_back((id, d.clone()));
                if proxy.cache.len() > 200 {
                    proxy.cache.pop_front();
                }
            }
            forwarded += 1;
            if d[0] & 0x80 == 0 && forwarded % 20 == 0 {
                dropped += 1;
                continue;
            }
            client.recv(now, &d, to_client).unwrap();
            // The near link has no delay here: the eACK reaches the proxy before the next
            // datagram, so the proxy's set holds no packets in flight to the client.
            pump(&mut client, &mut proxy, &mut server, now, &addrs);
        }
        // Application.
        if client.conn().is_established() && !requested {
            client.conn_mut().stream_send(0, b"GET", true).unwrap();
            requested = true;
        }
        for id in server.readable() {
            while server.stream_recv(id, &mut buf).is_ok() {}
        }
        if requested
            && sent < SIZE
            && let Ok(n) = server.stream_send(0, &payload[sent..], false)
        {
            sent += n;
        }
        for id in client.conn().readable().collect::<Vec<_>>() {
            while let Ok((n, _)) = client.conn_mut().stream_recv(id, &mut buf) {
                received += n;
            }
        }
        if kill_at_bytes.is_some_and(|k| received >= k) {
            proxy.alive = false;
        }
        // Timers.
        let now = Instant::now();
        if server.timeout().is_some_and(|t| t.is_zero()) {
            server.on_timeout();
        }
        if client.timeout_at(now).is_some_and(|t| t <= now) {
            let _ = client.handle_timeout(now, to_client);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    // Let the client notice a dead proxy.
    if kill_at_bytes.is_some() {
        let until = Instant::now() + Duration::from_millis(700);
        while Instant::now() < until {
            let now = Instant::now();
            let _ = client.handle_timeout(now, to_client);
            while client.poll_transmit().is_some() {}
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let s = client.sidekick();
    Outcome {
        received,
        eacks_sent: s.stats().eacks_sent,
        held: s.packrat().map_or(0, |p| p.stats().held),
        dropped,
        proxy_retransmitted: proxy.retransmitted,
        proxy_eacks: proxy.eacks,
        fallback: s.fallback_cause(),
    }
}

#[test]
fn quiche_download_with_packrat() {
    let o = run(None);
    eprintln!("{o:?}");
    assert_eq!(o.received, SIZE);
    assert!(o.dropped > 10);
    assert!(o.eacks_sent > 10 && o.proxy_eacks > 10);
    assert!(
        o.proxy_retransmitted > 0,
        "the proxy repaired losses from eACKs"
    );
    assert!(
        o.held > 0,
        "post-gap datagrams were held in the reorder window"
    );
    assert_eq!(o.fallback, None);
}

#[test]
fn quiche_download_survives_proxy_death() {
    let o = run(Some(SIZE / 3));
    eprintln!("{o:?}");
    assert_eq!(o.received, SIZE);
    assert!(o.eacks_sent > 0);
    // A dead proxy repairs none of the gaps the client holds for: the client sees that holds
    // cost without bringing anything and falls back (before the idle timeout would).
    assert!(
        matches!(
            o.fallback,
            Some(
                sidekick::session::FallbackCause::HoldsUnrepaired
                    | sidekick::session::FallbackCause::Protocol(
                        sidekick_protocol::FallbackReason::IdleTimeout
                    )
            )
        ),
        "{:?}",
        o.fallback
    );
}
