//! Several clients behind one ap, sharing the wan link (the bottleneck of the papers' fairness
//! set-ups), each on its own client link (its own lan port, with its own loss and queue), or all
//! on one shared client link (`shared_lan`: one medium, one queue and loss process each way, the
//! first client's link settings and proxy marking).
//!
//! ```text
//!  client k (quinn-proto [+ SDK]) ── lan k ──┐
//!     10.0.2.(2+k)                          ap ── wan (shared) ── server 10.0.1.1:(4433+k)
//!  client 0 ... ──────────────────── lan 0 ──┘   (one quinn-proto endpoint per client)
//! ```
//!
//! The proxy on the ap (if any) serves the ports of the clients marked `via_proxy`: sniffing, it
//! captures the frames crossing those ports and answers on its sidekick socket; bridging (PEMI),
//! every frame of those ports passes the core, which may delay it. Other clients' frames are
//! routed by the ap's kernel without the proxy seeing them (a plain CUBIC flow PEMI does not
//! touch, on another port). Everything else — links, stacks, SDK, proxy core — is the same code
//! as the single-client trial ([`crate::trial`]).

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngCore as _, SeedableRng};
use sidekick::integrations::quinn_cc::{PacubicFactory, SharedSignals};
use sidekick::keylog::KeyLogStore;
use sidekick::pacubic::PacubicConfig;
use sidekick::session::SidekickClient;
use sidekick_examples::transfer::TransferDirection;
use sidekick_examples::transfer::sidekick::{Mode, SidekickParams};
use sidekick_lab::link::LinkDirection as LinkDir;
use sidekick_lab::spec::LinkSpec;
use sidekick_proxy::config::Config as ProxyConfig;

use crate::net::{MAX_FRAME, SERVER_IP, icmp_echo_reply, rewrite_macs, udp_frame, udp_of};
use crate::proxy_node::{ProxyNode, ProxyOut, Verdict};
use crate::quic::{self, Peer, QuicError};
pub use crate::reply_hold::ReplyHold;
use crate::sched::{Clock, Scheduler};
use crate::sdk::{Out, SdkGlue};
use crate::transfer::{DownloadClient, DownloadServer, UploadClient, UploadServer};

/// Most clients of one run (addresses 10.0.2.2 – 10.0.2.201).
pub const MAX_CLIENTS: usize = 200;

/// One client of a multi-client run.
#[derive(Debug, Clone)]
pub struct ClientSpec {
    /// Its link to the ap (both directions).
    pub lan: LinkSpec,
    /// Its sidekick session, if it runs the SDK (Robin + PACUBIC on uploads, Packrat on
    /// downloads).
    pub sidekick: Option<SidekickParams>,
    /// Whether its ap port is the proxy's (captured or bridged by it).
    pub via_proxy: bool,
    /// When it connects.
    pub start: Duration,
    /// Its datagrams to the server are held at the ap at a fixed enforcement level.
    pub reply_hold: Option<ReplyHold>,
}

/// A multi-client run.
#[derive(Debug, Clone)]
pub struct MultiSetup {
    /// The shared ap — server link.
    pub wan: LinkSpec,
    /// The clients.
    pub clients: Vec<ClientSpec>,
    /// Which way the data flows (every client the same way).
    pub direction: TransferDirection,
    /// Bytes each client transfers (large for long-running flows).
    pub bytes: u64,
    /// Virtual time the run lasts.
    pub duration: Duration,
    /// Sampling period of the received bytes.
    pub sample_every: Duration,
    /// The proxy on the ap, if any.
    pub proxy: Option<ProxyConfig>,
    /// All clients share the first client's link (and its `via_proxy`).
    pub shared_lan: bool,
    /// Seeds the links' loss draws.
    pub link_seed: u64,
    /// Seeds the stacks.
    pub stack_seed: u64,
}

/// What a multi-client run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiOutcome {
    /// Sample times.
    pub times: Vec<Duration>,
    /// Per client, payload bytes its receiver held at each sample time.
    pub received: Vec<Vec<u64>>,
    /// Per client, its transfer's error, if any.
    pub errors: Vec<Option<String>>,
    /// Events processed.
    pub events: u64,
    /// The proxy's counters at the end (none without a proxy).
    pub proxy: Option<sidekick_proxy::metrics::Counters>,
}

impl MultiOutcome {
    /// Client `k`'s throughput (Mbit/s of payload) between the samples nearest `from` and the
    /// last one.
    pub fn throughput_mbps(&self, k: usize, from: Duration) -> Option<f64> {
        let i = self.times.iter().position(|t| *t >= from)?;
        let j = self.times.len().checked_sub(1)?;
        let r = self.received.get(k)?;
        let dt = self.times[j].checked_sub(self.times[i])?.as_secs_f64();
        (dt > 0.0).then(|| (r[j] - r[i]) as f64 * 8.0 / dt / 1e6)
    }
}

/// The address of client `k`.
pub fn client_ip(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 2, 2 + k as u8)
}

fn client_addr(k: usize) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(client_ip(k), crate::net::CLIENT_PORT))
}

fn client_sidekick_addr(k: usize) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(
        client_ip(k),
        crate::net::CLIENT_SIDEKICK_PORT,
    ))
}

fn server_addr(k: usize) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(
        SERVER_IP,
        crate::net::SERVER_PORT + k as u16,
    ))
}

fn client_mac(k: usize) -> [u8; 6] {
    [0x02, 0, 0, 0, 5, 1 + k as u8]
}

use crate::net::mac;

/// The client of `ip`, if it is one.
fn client_of(ip: Ipv4Addr) -> Option<usize> {
    let o = ip.octets();
    (o[..3] == [10, 0, 2] && o[3] >= 2 && usize::from(o[3] - 2) < MAX_CLIENTS)
        .then(|| usize::from(o[3] - 2))
}

/// The IPv4 destination of an Ethernet frame.
fn frame_dst(frame: &[u8]) -> Option<Ipv4Addr> {
    let b: [u8; 4] = frame.get(30..34)?.try_into().ok()?;
    (frame.get(12..14)? == [0x08, 0x00]).then(|| Ipv4Addr::from(b))
}

#[derive(Debug)]
enum App {
    Upload(UploadClient, UploadServer),
    Download(DownloadClient, DownloadServer),
}

impl App {
    fn received(&self) -> u64 {
        match self {
            App::Upload(_, s) => s.received(),
            App::Download(c, _) => c.received(),
        }
    }

    fn error(&self) -> Option<String> {
        match self {
            App::Upload(c, s) => c.error.clone().or_else(|| s.error.clone()),
            App::Download(c, s) => c.error.clone().or_else(|| s.error.clone()),
        }
    }
}

struct Client {
    spec: ClientSpec,
    pending: Option<(quinn_proto::Endpoint, quinn_proto::ClientConfig)>,
    peer: Option<Peer>,
    server: Peer,
    app: App,
    sdk: Option<SdkGlue>,
    up: LinkDir,
    down: LinkDir,
    /// Its datagrams to the server so far (the count [`ReplyHold`] goes by).
    replies: u64,
}

/// Per-client components: lan up, lan down, client timer, server timer, SDK timer, start.
const PER: usize = 6;

struct World {
    clock: Clock,
    t: Duration,
    sched: Scheduler,
    clients: Vec<Client>,
    wan_up: LinkDir,
    wan_down: LinkDir,
    proxy: Option<ProxyNode>,
    bridge: bool,
    delayed: VecDeque<(Duration, Option<usize>, Vec<u8>)>,
    proxy_out: Vec<ProxyOut>,
    just_ran: Option<usize>,
    shared_lan: bool,
}

impl World {
    fn shared(&self) -> usize {
        self.clients.len() * PER
    }

    /// The client link client `i` is on.
    fn li(&self, i: usize) -> usize {
        if self.shared_lan { 0 } else { i }
    }

    /// The client a frame from the ap is for (on a shared link: by its IPv4 destination).
    fn addressee(&self, link: usize, f: &[u8]) -> Option<usize> {
        if self.shared_lan {
            frame_dst(f)
                .and_then(client_of)
                .filter(|i| *i < self.clients.len())
        } else {
            Some(link)
        }
    }

    fn new(s: &MultiSetup) -> Result<Self, QuicError> {
        let clock = Clock::new(Instant::now());
        let mut rng = StdRng::seed_from_u64(s.stack_seed);
        let seed = |i: u64| {
            s.link_seed
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .wrapping_add(i)
        };
        let mode = Mode::for_direction(s.direction);
        let mut clients = Vec::new();
        for (k, c) in s.clients.iter().enumerate() {
            let (sep, scfg) = quic::server_endpoint(&mut rng, quic::transport_config())?;
            let server = Peer::server(sep, scfg, server_addr(k));
            let mut transport = quic::transport_config();
            let mut sdk_parts = None;
            if let Some(p) = &c.sidekick {
                let signals = SharedSignals::new();
                if mode == Mode::Robin {
                    transport.congestion_controller_factory(Arc::new(PacubicFactory::new(
                        PacubicConfig::default(),
                        signals.clone(),
                    )));
                }
                sdk_parts = Some((KeyLogStore::new(64), signals, *p));
            }
            let keylog = sdk_parts
                .as_ref()
                .map(|(k, _, _)| Arc::new(k.clone()) as Arc<dyn rustls::KeyLog>);
            let (cep, ccfg) = quic::client_endpoint(&mut rng, transport, keylog)?;
            let sdk = sdk_parts.map(|(keylog, signals, p)| {
                SdkGlue::new(
                    SidekickClient::new(p.config(s.direction)),
                    keylog,
                    (mode == Mode::Robin).then_some(signals),
                    server_addr(k),
                    mode,
                )
            });
            clients.push(Client {
                spec: c.clone(),
                pending: Some((cep, ccfg)),
                peer: None,
                server,
                app: match s.direction {
                    TransferDirection::Upload => {
                        App::Upload(UploadClient::new(s.bytes), UploadServer::new())
                    }
                    TransferDirection::Download => {
                        App::Download(DownloadClient::new(s.bytes), DownloadServer::new())
                    }
                },
                sdk,
                up: LinkDir::new(c.lan, seed(10 + 2 * k as u64)),
                down: LinkDir::new(c.lan, seed(11 + 2 * k as u64)),
                replies: 0,
            });
        }
        let proxy = s
            .proxy
            .as_ref()
            .map(|c| ProxyNode::new(c, (rng.next_u64(), rng.next_u64()), clock));
        let n = clients.len() * PER + 4;
        let mut w = Self {
            clock,
            t: Duration::ZERO,
            sched: Scheduler::new(n),
            bridge: proxy.as_ref().is_some_and(ProxyNode::bridges),
            clients,
            wan_up: LinkDir::new(s.wan, seed(1)),
            wan_down: LinkDir::new(s.wan, seed(2)),
            proxy,
            delayed: VecDeque::new(),
            proxy_out: Vec::new(),
            just_ran: None,
            shared_lan: s.shared_lan,
        };
        for (k, c) in s.clients.iter().enumerate() {
            w.sched.set(k * PER + 5, Some(c.start));
        }
        Ok(w)
    }

    fn run(&mut self, s: &MultiSetup) -> MultiOutcome {
        let mut out = MultiOutcome {
            times: Vec::new(),
            received: vec![Vec::new(); self.clients.len()],
            errors: vec![None; self.clients.len()],
            events: 0,
            proxy: None,
        };
        let every = s.sample_every.max(Duration::from_millis(1));
        let mut next_sample = Duration::ZERO;
        let mut same = 0u32;
        while let Some((t, k)) = self.sched.pop() {
            while next_sample <= t.min(s.duration) {
                out.times.push(next_sample);
                for (i, c) in self.clients.iter().enumerate() {
                    out.received[i].push(c.app.received());
                }
                next_sample += every;
            }
            if t > s.duration {
                break;
            }
            out.events += 1;
            if t <= self.t {
                same += 1;
                if same > 100_000 {
                    out.errors[0] = Some(format!("stuck at {:?} (component {k})", self.t));
                    break;
                }
            } else {
                same = 0;
            }
            self.t = self.t.max(t);
            self.step(k);
            self.just_ran = Some(k);
            self.settle();
            self.just_ran = None;
        }
        for (i, c) in self.clients.iter().enumerate() {
            if out.errors[i].is_none() {
                out.errors[i] = c.app.error();
            }
        }
        out.proxy = self.proxy.as_ref().map(ProxyNode::counters);
        out
    }

    fn step(&mut self, k: usize) {
        let now = self.clock.at(self.t);
        let sh = self.shared();
        if k < sh {
            let (i, what) = (k / PER, k % PER);
            match what {
                0 => {
                    while let Some(f) = self.clients[i].up.pop_due(self.t) {
                        self.ap_from_lan(i, f);
                    }
                }
                1 => {
                    while let Some(f) = self.clients[i].down.pop_due(self.t) {
                        if let Some(to) = self.addressee(i, &f) {
                            self.client_from_lan(to, &f);
                        }
                    }
                }
                2 => {
                    if let Some(p) = self.clients[i].peer.as_mut() {
                        p.handle_timeout(now);
                    }
                }
                3 => self.clients[i].server.handle_timeout(now),
                4 => {
                    let mut o = Vec::new();
                    if let Some(s) = self.clients[i].sdk.as_mut() {
                        s.handle_timeout(now, &mut o);
                    }
                    self.send_sdk_out(i, o);
                }
                _ => {
                    let c = &mut self.clients[i];
                    if let Some((ep, cfg)) = c.pending.take() {
                        match Peer::client(ep, cfg, client_addr(i), server_addr(i), now) {
                            Ok(p) => c.peer = Some(p),
                            Err(e) => {
                                let msg = Some(format!("connect: {e}"));
                                match &mut c.app {
                                    App::Upload(a, _) => a.error = msg,
                                    App::Download(a, _) => a.error = msg,
                                }
                            }
                        }
                    }
                }
            }
            return;
        }
        match k - sh {
            0 => {
                while let Some(f) = self.wan_up.pop_due(self.t) {
                    if let Some((_, dst, payload)) = udp_of(&f)
                        && let Some(i) = (dst.ip() == SERVER_IP)
                            .then(|| usize::from(dst.port() - crate::net::SERVER_PORT))
                            .filter(|i| *i < self.clients.len())
                    {
                        let c = &mut self.clients[i];
                        let mut o = Vec::new();
                        c.server.receive(now, udp_src(&f), payload, &mut o);
                        for (d, b) in o {
                            self.server_send(i, d, &b);
                        }
                    }
                }
            }
            1 => {
                while let Some(f) = self.wan_down.pop_due(self.t) {
                    self.ap_from_wan(f);
                }
            }
            2 => {
                if let Some(p) = self.proxy.as_mut() {
                    p.handle_timeout(now, &mut self.proxy_out);
                }
                self.handle_proxy_out();
            }
            _ => {
                while self.delayed.front().is_some_and(|d| d.0 <= self.t) {
                    if let Some((_, to, f)) = self.delayed.pop_front() {
                        self.ap_out(to, f);
                    }
                }
            }
        }
    }

    fn settle(&mut self) {
        let now = self.clock.at(self.t);
        loop {
            let mut busy = false;
            for i in 0..self.clients.len() {
                let mut cout = Vec::new();
                let mut sout = Vec::new();
                let mut kout = Vec::new();
                let t = self.t;
                let c = &mut self.clients[i];
                let Some(peer) = c.peer.as_mut() else {
                    continue;
                };
                if let Some(s) = c.sdk.as_mut() {
                    while let Some((from, d)) = s.deliver() {
                        peer.receive(now, from, &d, &mut cout);
                    }
                }
                if let Some(conn) = peer.connection() {
                    match &mut c.app {
                        App::Upload(a, _) => a.drive(t, now, conn),
                        App::Download(a, _) => a.drive(t, now, conn),
                    }
                }
                peer.poll(now, &mut cout);
                if let Some(conn) = c.server.connection() {
                    match &mut c.app {
                        App::Upload(_, s) => s.drive(t, conn),
                        App::Download(_, s) => s.drive(conn),
                    }
                }
                c.server.poll(now, &mut sout);
                for (dst, d) in cout {
                    busy = true;
                    if let Some(s) = self.clients[i].sdk.as_mut()
                        && dst == server_addr(i)
                    {
                        s.on_sent(now, &d, &mut kout);
                    }
                    self.client_send(i, client_addr(i), dst, &d);
                    self.send_sdk_out(i, std::mem::take(&mut kout));
                }
                for (dst, d) in sout {
                    busy = true;
                    self.server_send(i, dst, &d);
                }
            }
            if !busy {
                break;
            }
        }
        self.reschedule();
    }

    fn reschedule(&mut self) {
        let t = self.t;
        let c = self.clock;
        let just_ran = self.just_ran;
        let off = |k: usize, i: Option<Instant>| {
            i.map(|i| {
                let d = c.offset(i).max(t);
                if just_ran == Some(k) && d <= t {
                    t + Duration::from_micros(1)
                } else {
                    d
                }
            })
        };
        for i in 0..self.clients.len() {
            let b = i * PER;
            let cl = &mut self.clients[i];
            let (up, down) = (cl.up.next_due(), cl.down.next_due());
            let ct = off(b + 2, cl.peer.as_mut().and_then(Peer::poll_timeout));
            let st = off(b + 3, cl.server.poll_timeout());
            let kt = off(b + 4, cl.sdk.as_ref().and_then(SdkGlue::poll_timeout));
            self.sched.set(b, up);
            self.sched.set(b + 1, down);
            self.sched.set(b + 2, ct);
            self.sched.set(b + 3, st);
            self.sched.set(b + 4, kt);
        }
        let sh = self.shared();
        self.sched.set(sh, self.wan_up.next_due());
        self.sched.set(sh + 1, self.wan_down.next_due());
        let pt = off(
            sh + 2,
            self.proxy.as_ref().and_then(ProxyNode::poll_timeout),
        );
        self.sched.set(sh + 2, pt);
        let dt = self.delayed.front().map(|d| d.0.max(t));
        self.sched.set(sh + 3, dt);
    }

    fn send_sdk_out(&mut self, i: usize, o: Vec<Out>) {
        for o in o {
            match o {
                Out::Base(d) => self.client_send(i, client_addr(i), server_addr(i), &d),
                Out::Sidekick(to, d) => self.client_send(i, client_sidekick_addr(i), to, &d),
            }
        }
    }

    fn client_send(&mut self, i: usize, src: SocketAddr, dst: SocketAddr, payload: &[u8]) {
        let f = udp_frame(client_mac(i), mac::AP_LAN, src, dst, payload);
        if f.len() <= MAX_FRAME {
            let l = self.li(i);
            self.clients[l].up.offer(self.t, f);
        }
    }

    fn server_send(&mut self, _i: usize, dst: SocketAddr, payload: &[u8]) {
        let src = SocketAddr::V4(SocketAddrV4::new(SERVER_IP, 0));
        let src = match dst {
            SocketAddr::V4(d) => client_of(*d.ip()).map_or(src, server_addr),
            SocketAddr::V6(_) => src,
        };
        let f = udp_frame(mac::SERVER, mac::AP_WAN, src, dst, payload);
        if f.len() <= MAX_FRAME {
            self.wan_down.offer(self.t, f);
        }
    }

    fn proxied(&self, i: usize) -> bool {
        self.proxy.is_some() && self.clients[self.li(i)].spec.via_proxy
    }

    /// A frame leaves the ap: towards client `to`, or the wan.
    fn ap_out(&mut self, to: Option<usize>, mut f: Vec<u8>) {
        if let Some(i) = to {
            rewrite_macs(&mut f, mac::AP_LAN, client_mac(i));
            let l = self.li(i);
            self.clients[l].down.offer(self.t, f);
        } else {
            rewrite_macs(&mut f, mac::AP_WAN, mac::SERVER);
            self.wan_up.offer(self.t, f);
        }
    }

    fn ap_from_lan(&mut self, i: usize, f: Vec<u8>) {
        let now = self.clock.at(self.t);
        if self.proxied(i)
            && let Some(p) = self.proxy.as_mut()
        {
            let v = p.on_frame(now, true, &f, &mut self.proxy_out);
            self.handle_proxy_out();
            if self.bridge {
                return self.forward(v, None, f);
            }
            if let Some(p) = self.proxy.as_mut()
                && p.sidekick_frame(now, &f, &mut self.proxy_out)
            {
                self.handle_proxy_out();
                return;
            }
        }
        if frame_dst(&f) == Some(SERVER_IP) {
            if let Some(until) = self.reply_hold(&f) {
                return self.forward(Verdict::Delay(until), None, f);
            }
            self.ap_out(None, f);
        }
    }

    /// When a client's datagram to the server leaves the ap under its [`ReplyHold`], if held.
    fn reply_hold(&mut self, f: &[u8]) -> Option<Instant> {
        let src: [u8; 4] = f.get(26..30)?.try_into().ok()?;
        let i = client_of(Ipv4Addr::from(src)).filter(|i| *i < self.clients.len())?;
        let now = self.clock.at(self.t);
        let c = &mut self.clients[i];
        let hold = c.spec.reply_hold?;
        c.replies += 1;
        hold.enforcement
            .hold(hold.delay, c.replies)
            .map(|d| now + d)
    }

    fn forward(&mut self, v: Verdict, to: Option<usize>, f: Vec<u8>) {
        match v {
            Verdict::Delay(until) if self.delayed.len() < 4096 => {
                let at = self.clock.offset(until).max(self.t);
                self.delayed.push_back((at, to, f));
            }
            _ => self.ap_out(to, f),
        }
    }

    fn ap_from_wan(&mut self, f: Vec<u8>) {
        let Some(i) = frame_dst(&f)
            .and_then(client_of)
            .filter(|i| *i < self.clients.len())
        else {
            return;
        };
        let now = self.clock.at(self.t);
        if self.proxied(i)
            && let Some(p) = self.proxy.as_mut()
        {
            let v = p.on_frame(now, false, &f, &mut self.proxy_out);
            self.handle_proxy_out();
            return self.forward(if self.bridge { v } else { Verdict::Forward }, Some(i), f);
        }
        self.ap_out(Some(i), f);
    }

    fn handle_proxy_out(&mut self) {
        while !self.proxy_out.is_empty() {
            for o in std::mem::take(&mut self.proxy_out) {
                let now = self.clock.at(self.t);
                match o {
                    ProxyOut::Sidekick { to, bytes } => {
                        let Some(i) = (match to {
                            SocketAddr::V4(a) => client_of(*a.ip()),
                            SocketAddr::V6(_) => None,
                        })
                        .filter(|i| *i < self.clients.len()) else {
                            continue;
                        };
                        let from = self.proxy.as_ref().map_or(to, ProxyNode::listen);
                        let f = udp_frame(mac::AP_LAN, client_mac(i), from, to, &bytes);
                        if let Some(p) = self.proxy.as_mut() {
                            let _ = p.on_frame(now, false, &f, &mut self.proxy_out);
                        }
                        let l = self.li(i);
                        self.clients[l].down.offer(self.t, f);
                    }
                    ProxyOut::Inject { to_client, frame } => {
                        let to = frame_dst(&frame).and_then(client_of);
                        if to_client {
                            if let Some(i) = to.filter(|i| *i < self.clients.len()) {
                                let l = self.li(i);
                                self.clients[l].down.offer(self.t, frame);
                            }
                        } else {
                            self.wan_up.offer(self.t, frame);
                        }
                    }
                }
            }
        }
    }

    fn client_from_lan(&mut self, i: usize, f: &[u8]) {
        let now = self.clock.at(self.t);
        let Some((src, dst, payload)) = udp_of(f) else {
            if let Some(r) = icmp_echo_reply(f, client_ip(i)) {
                let l = self.li(i);
                self.clients[l].up.offer(self.t, r);
            }
            return;
        };
        let mut o = Vec::new();
        let c = &mut self.clients[i];
        if dst == client_sidekick_addr(i) {
            if let Some(s) = c.sdk.as_mut() {
                s.on_sidekick(now, src, payload, &mut o);
            }
        } else if dst == client_addr(i) {
            if let Some(s) = c.sdk.as_mut() {
                s.on_base_received(now, src, payload, &mut o);
            } else if let Some(p) = c.peer.as_mut() {
                let mut cout = Vec::new();
                p.receive(now, src, payload, &mut cout);
                for (d, b) in cout {
                    self.client_send(i, client_addr(i), d, &b);
                }
            }
        }
        self.send_sdk_out(i, o);
    }
}

fn udp_src(f: &[u8]) -> SocketAddr {
    udp_of(f).map_or_else(|| client_addr(0), |u| u.0)
}

/// Errors of a multi-client run.
#[derive(Debug, thiserror::Error)]
pub enum MultiError {
    /// Too many or no clients.
    #[error("a multi-client run needs 1 to {MAX_CLIENTS} clients, got {0}")]
    Clients(usize),
    /// Endpoint setup.
    #[error(transparent)]
    Quic(#[from] QuicError),
}

/// Runs `s` for its duration.
pub fn run_multi(s: &MultiSetup) -> Result<MultiOutcome, MultiError> {
    if s.clients.is_empty() || s.clients.len() > MAX_CLIENTS {
        return Err(MultiError::Clients(s.clients.len()));
    }
    let mut w = World::new(s)?;
    w.settle();
    Ok(w.run(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip() {
        for k in [0, 1, 57, MAX_CLIENTS - 1] {
            assert_eq!(client_of(client_ip(k)), Some(k));
        }
        assert_eq!(client_of(Ipv4Addr::new(10, 0, 2, 1)), None, "the ap");
        assert_eq!(client_of(SERVER_IP), None);
        let f = udp_frame(
            mac::SERVER,
            mac::AP_WAN,
            server_addr(3),
            client_addr(3),
            b"x",
        );
        assert_eq!(frame_dst(&f), Some(client_ip(3)));
    }
}
