//! The packet-number lens against a real quiche connection: client and server run in memory,
//! every datagram passes through the test, and the client's `set_keylog` output feeds the lens.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "quiche")]

use std::net::SocketAddr;

use sidekick::keylog::KeyLogStore;
use sidekick::lens::{DatagramDirection, PacketNumberLens, Role};

/// Writes a self-signed certificate and key to a fresh temporary directory.
fn cert_files(tag: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("sidekick-lens-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, cert.cert.pem()).unwrap();
    std::fs::write(&k, cert.signing_key.serialize_pem()).unwrap();
    (c, k)
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
    cfg.set_initial_max_data(10_000_000);
    cfg.set_initial_max_stream_data_bidi_local(10_000_000);
    cfg.set_initial_max_stream_data_bidi_remote(10_000_000);
    cfg.set_initial_max_streams_bidi(10);
    cfg.set_max_idle_timeout(5_000);
    cfg.log_keys();
    cfg
}

#[test]
fn quiche_packet_numbers_both_directions() {
    let (cert, key) = cert_files("pn");
    let mut server_cfg = config(Some((&cert, &key)));
    let mut client_cfg = config(None);
    let client_addr: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    let server_addr: SocketAddr = "127.0.0.1:4433".parse().unwrap();
    let client_scid = quiche::ConnectionId::from_ref(&[0xc1; 16]);
    let server_scid = quiche::ConnectionId::from_ref(&[0x5e; 16]);
    let mut client = quiche::connect(
        Some("localhost"),
        &client_scid,
        client_addr,
        server_addr,
        &mut client_cfg,
    )
    .unwrap();
    let keylog = KeyLogStore::new(64);
    client.set_keylog(Box::new(keylog.clone()));
    let mut server = quiche::accept(
        &server_scid,
        None,
        server_addr,
        client_addr,
        &mut server_cfg,
    )
    .unwrap();

    let mut lens = PacketNumberLens::new(Role::Client);
    let mut numbers = [Vec::new(), Vec::new()];
    let mut buf = vec![0u8; 65535];
    let payload = vec![3u8; 300_000];
    let mut sent = 0usize;
    let mut received = 0usize;
    let mut echoed = 0usize;
    let mut got_back = 0usize;
    for _round in 0..20_000 {
        // Client → server.
        loop {
            let (n, _) = match client.send(&mut buf) {
                Ok(v) => v,
                Err(quiche::Error::Done) => break,
                Err(e) => panic!("client send: {e}"),
            };
            keylog.drain_into(&mut lens);
            if let Ok(pn) = lens.observe(DatagramDirection::Outgoing, &buf[..n]) {
                numbers[0].push(pn);
            }
            let info = quiche::RecvInfo {
                from: client_addr,
                to: server_addr,
            };
            server.recv(&mut buf[..n], info).unwrap();
        }
        // Server → client.
        loop {
            let (n, _) = match server.send(&mut buf) {
                Ok(v) => v,
                Err(quiche::Error::Done) => break,
                Err(e) => panic!("server send: {e}"),
            };
            keylog.drain_into(&mut lens);
            if let Ok(pn) = lens.observe(DatagramDirection::Incoming, &buf[..n]) {
                numbers[1].push(pn);
            }
            let info = quiche::RecvInfo {
                from: server_addr,
                to: client_addr,
            };
            client.recv(&mut buf[..n], info).unwrap();
        }
        if client.is_established()
            && sent < payload.len()
            && let Ok(n) = client.stream_send(0, &payload[sent..], false)
        {
            sent += n;
            if sent == payload.len() {
                client.stream_send(0, &[], true).unwrap();
            }
        }
        for id in server.readable() {
            while let Ok((n, _fin)) = server.stream_recv(id, &mut buf) {
                received += n;
            }
        }
        if received == payload.len()
            && echoed < 100_000
            && let Ok(n) = server.stream_send(0, &payload[..100_000 - echoed], false)
        {
            echoed += n;
        }
        for id in client.readable() {
            while let Ok((n, _)) = client.stream_recv(id, &mut buf) {
                got_back += n;
            }
        }
        if got_back >= 100_000 {
            break;
        }
    }
    assert_eq!(received, payload.len());
    assert_eq!(got_back, 100_000);
    assert!(lens.suite().is_some());
    for (name, pns) in ["client→server", "server→client"].iter().zip(&numbers) {
        assert!(pns.len() > 20, "{name}: only {} packets read", pns.len());
        // quiche numbers packets of all spaces from one counter: the first 1-RTT packet follows
        // the handful of Initial/Handshake packets of the handshake.
        assert!(pns[0] <= 8, "{name}: first pn {}", pns[0]);
        let skips: u64 = pns
            .windows(2)
            .map(|w| {
                assert!(w[1] > w[0], "{name}: {} then {}", w[0], w[1]);
                w[1] - w[0] - 1
            })
            .sum();
        // quiche numbers 1-RTT packets consecutively.
        assert!(
            skips * 20 < pns.len() as u64,
            "{name}: {skips} skipped of {}",
            pns.len()
        );
    }
    let _ = std::fs::remove_dir_all(cert.parent().unwrap());
}
