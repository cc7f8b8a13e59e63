//! The client session through the C API against the real protocol proxy state machine
//! (`sidekick_protocol::ProxySessionTable`): discovery inline on the base path, Init/InitAck on
//! the sidekick socket, a quACK that reveals a near-segment loss, the early retransmission on
//! the base socket.

// Test code: a failed expectation is a test failure; the C API is called as C would.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::net::SocketAddr;
use std::ptr::null_mut;
use std::time::Duration;

use quack::PowerSumQuack;
use sidekick_capi::*;
use sidekick_protocol::{BaseFlow, ProxyEvent, ProxyPolicy, ProxySessionTable, SessionId, Time};

const PROXY: &str = "192.0.2.1:7000";

fn sockaddr_in(a: SocketAddr) -> libc::sockaddr_in {
    let SocketAddr::V4(a) = a else {
        panic!("IPv4 only here")
    };
    // SAFETY: all-zero bytes are a valid sockaddr_in.
    let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = a.port().to_be();
    s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    s
}

struct Lab {
    client: *mut SkClient,
    proxy: ProxySessionTable,
    base: BaseFlow,
    sid: Option<SessionId>,
}

impl Lab {
    /// The caller's clock: microseconds with an arbitrary origin.
    fn us(at: Duration) -> u64 {
        7_000_000 + u64::try_from(at.as_micros()).unwrap()
    }

    /// Pops every datagram the client wants to send.
    fn transmits(&mut self) -> Vec<(SkDestination, Vec<u8>, Option<u16>)> {
        let mut out = Vec::new();
        loop {
            let mut buf = vec![0u8; 2048];
            let (mut len, mut alen) = (0usize, 0usize);
            let mut dest = SkDestination::Base;
            // SAFETY: all-zero bytes are a valid sockaddr_storage.
            let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            // SAFETY: valid buffers and outputs; `client` is live.
            let s = unsafe {
                sk_client_poll_transmit(
                    self.client,
                    buf.as_mut_ptr(),
                    buf.len(),
                    &raw mut len,
                    &raw mut dest,
                    &raw mut addr,
                    &raw mut alen,
                )
            };
            if s == SkStatus::Empty {
                return out;
            }
            assert_eq!(s, SkStatus::Ok);
            buf.truncate(len);
            let port = (dest == SkDestination::Sidekick).then(|| {
                assert_eq!(alen, size_of::<libc::sockaddr_in>());
                // SAFETY: the API wrote a sockaddr_in into the storage.
                let sin = unsafe { *(&raw const addr).cast::<libc::sockaddr_in>() };
                u16::from_be(sin.sin_port)
            });
            out.push((dest, buf, port));
        }
    }

    fn deliver_from_proxy(&mut self, at: Duration, bytes: &[u8]) {
        let from = sockaddr_in(PROXY.parse().unwrap());
        // SAFETY: valid address and datagram; `client` is live.
        let s = unsafe {
            sk_client_on_sidekick_received(
                self.client,
                Self::us(at),
                (&raw const from).cast(),
                size_of::<libc::sockaddr_in>(),
                bytes.as_ptr(),
                bytes.len(),
            )
        };
        assert_eq!(s, SkStatus::Ok);
    }

    /// Client frames to the proxy, proxy frames back, until quiet.
    fn shuttle(&mut self, at: Duration) {
        for _ in 0..10 {
            for (dest, bytes, port) in self.transmits() {
                assert_eq!(dest, SkDestination::Sidekick);
                assert_eq!(port, Some(7000));
                let ev = self
                    .proxy
                    .handle_datagram(Time::ZERO + at, self.base.client, &bytes);
                if let Ok(ProxyEvent::SessionEstablished { id, .. }) = ev {
                    self.sid = Some(id);
                }
            }
            while let Some(t) = self.proxy.poll_transmit() {
                self.deliver_from_proxy(at, &t.bytes);
            }
        }
    }

    fn quack<T: quack::Identifier>(&mut self, at: Duration, seen: &PowerSumQuack<T>) {
        let sid = self.sid.expect("session established");
        let t = self
            .proxy
            .send_quack(Time::ZERO + at, &sid, &seen.to_bytes())
            .unwrap();
        self.deliver_from_proxy(at, &t.bytes);
    }

    fn events(&mut self) -> Vec<SkClientEvent> {
        let mut out = Vec::new();
        loop {
            let mut ev = std::mem::MaybeUninit::<SkClientEvent>::uninit();
            // SAFETY: `ev` is valid for a write; `client` is live.
            match unsafe { sk_client_poll_event(self.client, ev.as_mut_ptr()) } {
                // SAFETY: `Ok` means the event was written.
                SkStatus::Ok => out.push(unsafe { ev.assume_init() }),
                SkStatus::Empty => return out,
                other => panic!("poll_event: {other:?}"),
            }
        }
    }
}

fn dg(i: u32) -> Vec<u8> {
    let mut d = vec![0x42u8; 30];
    d.extend(i.to_le_bytes());
    d
}

#[test]
fn robin_session_through_the_c_api_finds_a_near_loss_and_retransmits() {
    let mut cfg = std::mem::MaybeUninit::<SkSessionConfig>::uninit();
    // SAFETY: valid output pointer.
    assert_eq!(
        unsafe { sk_session_config_robin(30, 8, cfg.as_mut_ptr()) },
        SkStatus::Ok
    );
    // SAFETY: written by the call above.
    let cfg = unsafe { cfg.assume_init() };
    let mut client = null_mut();
    // SAFETY: valid config and output pointer.
    assert_eq!(
        unsafe { sk_client_new(&raw const cfg, &raw mut client) },
        SkStatus::Ok
    );
    let base = BaseFlow {
        client: "10.0.0.2:5000".parse().unwrap(),
        server: "203.0.113.5:443".parse().unwrap(),
    };
    let mut lab = Lab {
        client,
        proxy: ProxySessionTable::new(ProxyPolicy::new(PROXY.parse().unwrap())),
        base,
        sid: None,
    };
    let ms = Duration::from_millis;

    // Discovery: the request goes inline on the base socket; the proxy answers on the path.
    // SAFETY: `client` is live.
    assert_eq!(
        unsafe { sk_client_start(lab.client, Lab::us(ms(0))) },
        SkStatus::Ok
    );
    let tx = lab.transmits();
    assert_eq!(tx.len(), 1);
    assert_eq!((tx[0].0, tx[0].1.len()), (SkDestination::Base, 128));
    let parsed = sidekick_protocol::is_discovery_request(&tx[0].1).unwrap();
    let reply = lab
        .proxy
        .handle_discovery(Time::ZERO, base, &parsed)
        .unwrap();
    // SAFETY: valid datagram; `client` is live.
    let s = unsafe {
        sk_client_on_base_received(
            lab.client,
            Lab::us(ms(0)),
            reply.bytes.as_ptr(),
            reply.bytes.len(),
        )
    };
    assert_eq!(s, SkStatus::Ok);
    let (mut buf, mut len) = ([0u8; 64], 0usize);
    // SAFETY: valid buffer and length output.
    let s =
        unsafe { sk_client_poll_deliver(lab.client, buf.as_mut_ptr(), buf.len(), &raw mut len) };
    assert_eq!(s, SkStatus::Empty, "the discovery reply is consumed");

    // Init / InitAck on the sidekick socket.
    lab.shuttle(ms(1));
    let ev = lab.events();
    assert_eq!(
        ev.first().map(|e| e.kind),
        Some(SkClientEventKind::Established)
    );
    let mut active = false;
    // SAFETY: valid output; null cause is allowed.
    unsafe { sk_client_state(lab.client, &raw mut active, null_mut()) };
    assert!(active);

    // The proxy's first quACK (nothing seen yet) is the epoch baseline.
    let mut seen = PowerSumQuack::<u32>::new(8);
    lab.quack(ms(2), &seen);
    // Ten datagrams on the base path; the proxy never sees number 4.
    for i in 0..10u32 {
        let d = dg(i);
        let mut logged = false;
        // SAFETY: valid datagram and output; `client` is live.
        let s = unsafe {
            sk_client_on_base_sent(
                lab.client,
                Lab::us(ms(3 + u64::from(i))),
                d.as_ptr(),
                d.len(),
                &raw mut logged,
            )
        };
        assert_eq!(s, SkStatus::Ok);
        assert!(
            logged,
            "Robin logs every identifiable datagram while active"
        );
        if i != 4 {
            seen.insert(i);
        }
    }
    lab.quack(ms(15), &seen);
    let ev = lab.events();
    let lost: Vec<_> = ev
        .iter()
        .filter(|e| e.kind == SkClientEventKind::NearLoss)
        .collect();
    assert_eq!(lost.len(), 1);
    assert_eq!(lost[0].id, 4);
    assert_eq!(lost[0].rule, SkLossRule::Reordering);
    assert_eq!(lost[0].sent_us, Lab::us(ms(7)));
    let delivered: u64 = ev
        .iter()
        .filter(|e| e.kind == SkClientEventKind::Delivered)
        .map(|e| e.delivered_bytes)
        .sum();
    assert_eq!(delivered, 9 * 34);
    // The identical datagram is queued for the base socket.
    let resent: Vec<_> = lab
        .transmits()
        .into_iter()
        .filter(|t| t.0 == SkDestination::Base)
        .map(|t| t.1)
        .collect();
    assert_eq!(resent, vec![dg(4)]);
    let mut stats = std::mem::MaybeUninit::<SkClientStats>::uninit();
    // SAFETY: valid output.
    assert_eq!(
        unsafe { sk_client_stats(lab.client, stats.as_mut_ptr()) },
        SkStatus::Ok
    );
    // SAFETY: written by the call above.
    let stats = unsafe { stats.assume_init() };
    assert_eq!((stats.quacks, stats.retransmissions), (2, 1));

    // Reconfiguration mid-session: a denser quACK cadence and a larger threshold, through the
    // protocol's Config; the proxy's echo starts a new epoch.
    let mut denser = std::mem::MaybeUninit::<SkSessionConfig>::uninit();
    // SAFETY: valid output pointer.
    assert_eq!(
        unsafe { sk_session_config_robin(10, 16, denser.as_mut_ptr()) },
        SkStatus::Ok
    );
    // SAFETY: written by the call above.
    let denser = unsafe { denser.assume_init() };
    let mut id = 0u32;
    // SAFETY: valid config and output; `client` is live.
    assert_eq!(
        unsafe {
            sk_client_reconfigure(lab.client, Lab::us(ms(20)), &raw const denser, &raw mut id)
        },
        SkStatus::Ok
    );
    assert_ne!(id, 0);
    lab.shuttle(ms(21));
    let mut stats = std::mem::MaybeUninit::<SkClientStats>::uninit();
    // SAFETY: valid output.
    assert_eq!(
        unsafe { sk_client_stats(lab.client, stats.as_mut_ptr()) },
        SkStatus::Ok
    );
    // SAFETY: written by the call above.
    let stats = unsafe { stats.assume_init() };
    assert_eq!(
        (stats.reconfigurations, stats.reconfigurations_refused),
        (1, 0)
    );
    let sid = lab.sid.expect("session");
    let robin = lab
        .proxy
        .session(&sid)
        .and_then(|s| s.config().robin.clone());
    assert_eq!(robin.map(|r| (r.interval_ms, r.threshold)), Some((10, 16)));
    // SAFETY: freed once.
    unsafe { sk_client_free(lab.client) };

    // Before a session exists there is nothing to reconfigure.
    let mut fresh = null_mut();
    // SAFETY: valid config and output pointer.
    assert_eq!(
        unsafe { sk_client_new(&raw const cfg, &raw mut fresh) },
        SkStatus::Ok
    );
    // SAFETY: valid config; `fresh` is live; a null id output is allowed.
    assert_eq!(
        unsafe { sk_client_reconfigure(fresh, 0, &raw const denser, std::ptr::null_mut()) },
        SkStatus::Protocol
    );
    // SAFETY: `fresh` is live; a null config is refused.
    assert_eq!(
        unsafe { sk_client_reconfigure(fresh, 0, std::ptr::null(), std::ptr::null_mut()) },
        SkStatus::NullPointer
    );
    // SAFETY: freed once.
    unsafe { sk_client_free(fresh) };
}

/// A client made from `cfg` with its session established against the real protocol proxy.
fn established(cfg: &SkSessionConfig) -> Lab {
    let mut client = null_mut();
    // SAFETY: valid config and output pointer.
    assert_eq!(
        unsafe { sk_client_new(&raw const *cfg, &raw mut client) },
        SkStatus::Ok
    );
    let base = BaseFlow {
        client: "10.0.0.2:5000".parse().unwrap(),
        server: "203.0.113.5:443".parse().unwrap(),
    };
    let mut lab = Lab {
        client,
        proxy: ProxySessionTable::new(ProxyPolicy::new(PROXY.parse().unwrap())),
        base,
        sid: None,
    };
    // SAFETY: `client` is live.
    assert_eq!(
        unsafe { sk_client_start(lab.client, Lab::us(Duration::ZERO)) },
        SkStatus::Ok
    );
    let tx = lab.transmits();
    let parsed = sidekick_protocol::is_discovery_request(&tx[0].1).unwrap();
    let reply = lab
        .proxy
        .handle_discovery(Time::ZERO, base, &parsed)
        .unwrap();
    // SAFETY: valid datagram; `client` is live.
    let s = unsafe {
        sk_client_on_base_received(
            lab.client,
            Lab::us(Duration::ZERO),
            reply.bytes.as_ptr(),
            reply.bytes.len(),
        )
    };
    assert_eq!(s, SkStatus::Ok);
    lab.shuttle(Duration::from_millis(1));
    assert_eq!(
        lab.events().first().map(|e| e.kind),
        Some(SkClientEventKind::Established)
    );
    lab
}

/// Robin through the C API at identifier width `W` bytes (`SkIdentifier::width`; Sidekick
/// (NSDI '24) §3): the session negotiates that width with the real protocol proxy, and a quACK of
/// that width names the one datagram the proxy missed, reported with its full identifier.
fn c_api_robin_at_width<T: quack::Identifier>(width: u8, id_of: fn(u64) -> T, wide: fn(T) -> u64) {
    let mut cfg = std::mem::MaybeUninit::<SkSessionConfig>::uninit();
    // SAFETY: valid output pointer.
    assert_eq!(
        unsafe { sk_session_config_robin(30, 8, cfg.as_mut_ptr()) },
        SkStatus::Ok
    );
    // SAFETY: written by the call above.
    let mut cfg = unsafe { cfg.assume_init() };
    assert_eq!(cfg.identifier.width, 4, "the default width");
    cfg.identifier.width = width;
    cfg.identifier.offset = -i32::from(width);
    let mut lab = established(&cfg);
    let sid = lab.sid.expect("session");
    let granted = lab
        .proxy
        .session(&sid)
        .and_then(|s| s.config().identifier.clone());
    assert_eq!(granted.map(|i| i.width), Some(u32::from(width)));
    let mut seen = PowerSumQuack::<T>::new(8);
    let ms = Duration::from_millis;
    lab.quack(ms(2), &seen);
    for i in 0..10u64 {
        let mut d = vec![0x42u8; 30];
        let id = id_of(i);
        d.extend_from_slice(&wide(id).to_le_bytes()[..usize::from(width)]);
        let mut logged = false;
        // SAFETY: valid datagram and output; `client` is live.
        let s = unsafe {
            sk_client_on_base_sent(
                lab.client,
                Lab::us(ms(3 + i)),
                d.as_ptr(),
                d.len(),
                &raw mut logged,
            )
        };
        assert_eq!(s, SkStatus::Ok);
        assert!(logged);
        if i != 4 {
            seen.insert(id);
        }
    }
    lab.quack(ms(15), &seen);
    let lost: Vec<u64> = lab
        .events()
        .iter()
        .filter(|e| e.kind == SkClientEventKind::NearLoss)
        .map(|e| e.id)
        .collect();
    assert_eq!(lost, vec![wide(id_of(4))], "width {width}");
    // SAFETY: freed once.
    unsafe { sk_client_free(lab.client) };
}

#[test]
fn robin_session_through_the_c_api_at_every_identifier_width() {
    c_api_robin_at_width::<u16>(2, |i| 0xa000 + i as u16 * 0x0101, u64::from);
    c_api_robin_at_width::<u32>(4, |i| 0xa000_0000 + i as u32 * 0x0101_0101, u64::from);
    c_api_robin_at_width::<u64>(
        8,
        |i| 0xa000_0000_0000_0000 + i * 0x0101_0101_0101_0101,
        |v| v,
    );
    // A width the protocol does not have is refused before any session.
    let mut cfg = std::mem::MaybeUninit::<SkSessionConfig>::uninit();
    // SAFETY: valid output pointer.
    assert_eq!(
        unsafe { sk_session_config_robin(30, 8, cfg.as_mut_ptr()) },
        SkStatus::Ok
    );
    // SAFETY: written by the call above.
    let mut cfg = unsafe { cfg.assume_init() };
    cfg.identifier.width = 3;
    let mut client = null_mut();
    // SAFETY: valid config and output pointer.
    assert_eq!(
        unsafe { sk_client_new(&raw const cfg, &raw mut client) },
        SkStatus::InvalidArgument
    );
}

/// Packrat for a multicast stream through the C API (Packrat (CoNEXT '26) §6.1): the group set with
/// `sk_session_config_set_multicast_group` reaches the real protocol proxy in Init; a unicast
/// configuration sends none; an address that is not multicast is refused.
#[test]
fn packrat_session_through_the_c_api_asks_for_its_multicast_group() {
    let group: SocketAddr = "239.1.2.3:5004".parse().unwrap();
    let mut cfg: SkSessionConfig = unsafe { std::mem::zeroed() };
    // SAFETY: valid output pointer.
    assert_eq!(
        unsafe { sk_session_config_packrat(&raw mut cfg) },
        SkStatus::Ok
    );
    assert_eq!(cfg.multicast_family, 0, "unicast by default");
    let g = sockaddr_in(group);
    let len = size_of::<libc::sockaddr_in>();
    // SAFETY: valid config and address.
    let s =
        unsafe { sk_session_config_set_multicast_group(&raw mut cfg, (&raw const g).cast(), len) };
    assert_eq!(s, SkStatus::Ok);
    assert_eq!((cfg.multicast_family, cfg.multicast_port), (4, 5004));
    let lab = established(&cfg);
    let session = lab.proxy.session(&lab.sid.unwrap()).unwrap();
    let p = session.config().packrat.clone().unwrap();
    assert_eq!(p.multicast_group_addr(), Ok(Some(group)));
    // SAFETY: freed once.
    unsafe { sk_client_free(lab.client) };

    // A unicast address is refused and leaves the configuration as it was.
    let u = sockaddr_in("10.0.0.1:5004".parse().unwrap());
    // SAFETY: valid config and address.
    let s =
        unsafe { sk_session_config_set_multicast_group(&raw mut cfg, (&raw const u).cast(), len) };
    assert_eq!(s, SkStatus::InvalidArgument);
    assert_eq!(cfg.multicast_family, 4);
    // Null clears it: a unicast session again.
    // SAFETY: valid config; a null group is allowed.
    let s = unsafe { sk_session_config_set_multicast_group(&raw mut cfg, std::ptr::null(), 0) };
    assert_eq!(s, SkStatus::Ok);
    let lab = established(&cfg);
    let p = lab
        .proxy
        .session(&lab.sid.unwrap())
        .unwrap()
        .config()
        .packrat
        .clone()
        .unwrap();
    assert_eq!(p.multicast_group_addr(), Ok(None));
    // SAFETY: freed once.
    unsafe { sk_client_free(lab.client) };
}

/// Packrat through the C API at identifier width `width` bytes (`SkIdentifier::width`; Sidekick
/// (NSDI '24) §3): the real protocol proxy grants the session at that width, the datagrams the
/// client receives go into an eACK of that width (its header says so), and a proxy view of that
/// width decodes it to exactly the datagram the client missed.
fn c_api_packrat_at_width(width: u8) {
    let mut cfg = std::mem::MaybeUninit::<SkSessionConfig>::uninit();
    // SAFETY: valid output pointer.
    assert_eq!(
        unsafe { sk_session_config_packrat(cfg.as_mut_ptr()) },
        SkStatus::Ok
    );
    // SAFETY: written by the call above.
    let mut cfg = unsafe { cfg.assume_init() };
    cfg.identifier.width = width;
    cfg.identifier.offset = -i32::from(width);
    let mut lab = established(&cfg);
    let sid = lab.sid.expect("session");
    let granted = lab
        .proxy
        .session(&sid)
        .and_then(|s| s.config().identifier.clone());
    assert_eq!(granted.map(|i| i.width), Some(u32::from(width)));
    let w = match width {
        2 => quack::Width::U16,
        4 => quack::Width::U32,
        _ => quack::Width::U64,
    };
    let src = quack::IdSource::Offset(-isize::from(width));
    let ms = Duration::from_millis;
    let datagrams: Vec<Vec<u8>> = (0..20u64)
        .map(|i| {
            let mut d = vec![0x42u8; 30];
            d.extend_from_slice(
                &(0xb000_0000_0000_0000 + i * 0x0101_0101_0101_0101).to_le_bytes()
                    [..usize::from(width)],
            );
            d
        })
        .collect();
    for (i, d) in datagrams.iter().enumerate() {
        if i == 6 {
            continue; // lost on the last hop
        }
        // SAFETY: valid datagram; `client` is live.
        let s = unsafe {
            sk_client_on_base_received(lab.client, Lab::us(ms(2 + i as u64)), d.as_ptr(), d.len())
        };
        assert_eq!(s, SkStatus::Ok);
    }
    // SAFETY: `client` is live.
    assert_eq!(
        unsafe { sk_client_handle_timeout(lab.client, Lab::us(ms(40))) },
        SkStatus::Ok
    );
    let mut eacks = Vec::new();
    for (dest, bytes, _) in lab.transmits() {
        if dest != SkDestination::Sidekick {
            continue;
        }
        if let Ok(ProxyEvent::Eack { data, .. }) =
            lab.proxy
                .handle_datagram(Time::ZERO + ms(40), lab.base.client, &bytes)
        {
            eacks.push(data);
        }
    }
    let wire = eacks.last().expect("an eACK");
    assert_eq!(eack::peek_width(wire), Ok(w), "width {width}");
    let mut view = eack::WidthProxyEack::new(w, 160, 4096, eack::HashKey::DEFAULT);
    view.reset(u32::from_le_bytes(wire[2..6].try_into().unwrap()));
    for d in &datagrams {
        view.insert_from(&src, d).unwrap();
    }
    let d = view.on_eack(wire).unwrap();
    let want = datagrams[6][datagrams[6].len() - usize::from(width)..]
        .iter()
        .rev()
        .fold(0u64, |v, b| v << 8 | u64::from(*b));
    assert_eq!(d.missing, vec![want], "width {width}");
    // SAFETY: freed once.
    unsafe { sk_client_free(lab.client) };
}

#[test]
fn packrat_session_through_the_c_api_at_every_identifier_width() {
    c_api_packrat_at_width(2);
    c_api_packrat_at_width(4);
    c_api_packrat_at_width(8);
}

/// Robin and Packrat on one session through the C API: one call fills both halves of the
/// configuration, and the real protocol proxy grants both.
#[test]
fn robin_and_packrat_on_one_session_through_the_c_api() {
    let mut cfg: SkSessionConfig = unsafe { std::mem::zeroed() };
    // SAFETY: valid output pointer.
    assert_eq!(
        unsafe { sk_session_config_robin_and_packrat(30, 10, &raw mut cfg) },
        SkStatus::Ok
    );
    assert_eq!((cfg.robin, cfg.packrat), (1, 1));
    assert_eq!((cfg.quack_interval_ms, cfg.quack_threshold), (30, 10));
    assert_eq!((cfg.eack_interval_ms, cfg.reorder_delay_ms), (10, 30));
    assert_eq!(cfg.eack_inflight_allowance, 16);
    let lab = established(&cfg);
    let session = lab.proxy.session(&lab.sid.unwrap()).unwrap();
    let granted = session.config();
    assert!(granted.robin.is_some() && granted.packrat.is_some());
    // SAFETY: freed once.
    unsafe { sk_client_free(lab.client) };
}
