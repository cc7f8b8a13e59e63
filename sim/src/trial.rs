//! One trial: the topology, the stacks, the proxy and the event loop in virtual time.
//!
//! ```text
//!  client (quinn-proto + SDK) ── lan0 link ── ap (routes; proxy sniffs lan0) ── wan link ── server
//!     10.0.2.2                              10.0.2.1 | 10.0.1.2                         10.0.1.1
//! ```
//!
//! Each step pops the earliest deadline (a link delivering a frame, a connection's timer, the SDK's
//! or the proxy's timer), runs it at that virtual instant, then lets every node react until
//! nothing more happens at that instant, and re-announces every deadline.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;
use sidekick::integrations::quinn_cc::{PacubicFactory, SharedSignals};
use sidekick::keylog::KeyLogStore;
use sidekick::pacubic::PacubicConfig;
use sidekick::session::SidekickClient;
use sidekick_examples::transfer::sidekick::{Mode, SidekickParams, ack_frequency_config};
use sidekick_examples::transfer::{SenderStats, Stack, TransferDirection, TransferReport};
use sidekick_lab::spec::LinkSpec;
use sidekick_proxy::config::Config as ProxyConfig;

use crate::net::{
    self, Hop, IfCounters, Links, MAX_FRAME, client_addr, client_sidekick_addr, mac, server_addr,
    udp_frame, udp_of,
};
use crate::proxy_node::{ProxyNode, ProxyOut, Verdict};
use crate::quic::{self, Peer, QuicError};
use crate::rtc::{RtcClient, RtcServer};
use crate::sched::{Clock, Scheduler};
use crate::sdk::{Out, SdkGlue};
use crate::transfer::{DownloadClient, DownloadServer, UploadClient, UploadServer};

/// What one trial runs.
#[derive(Debug, Clone)]
pub struct TrialSetup {
    /// ap — server link (both directions).
    pub wan: LinkSpec,
    /// client — ap link (both directions).
    pub lan: LinkSpec,
    /// Which way the bulk data flows.
    pub direction: TransferDirection,
    /// Bytes to transfer.
    pub bytes: u64,
    /// Virtual-time limit of the transfer.
    pub timeout: Duration,
    /// The ap bridges its ports (`topology.ap = "bridge"`) instead of routing.
    pub ap_bridge: bool,
    /// The proxy on the ap, if the variant runs one.
    pub proxy: Option<ProxyConfig>,
    /// The client's sidekick session, if the variant runs the SDK (`--sidekick`).
    pub sidekick: Option<SidekickParams>,
    /// Seeds the links' loss draws (the same for every variant of a trial).
    pub link_seed: u64,
    /// Seeds the stacks (endpoint RNGs, connection IDs, keys).
    pub stack_seed: u64,
    /// A media application (`media`, `media-fec`) instead of the bulk transfer.
    pub media: Option<crate::media::MediaSetup>,
    /// A WebRTC call (`webrtc`) instead of the bulk transfer.
    pub webrtc: Option<crate::webrtc::WebrtcSetup>,
    /// RTC frames (`rtc`) for this long instead of the bulk transfer.
    pub rtc: Option<Duration>,
    /// A multicast stream (`multicast`) instead of the bulk transfer.
    pub multicast: Option<crate::multicast::MulticastSetup>,
    /// The client asks the server to ACK every N ack-eliciting packets without the sidekick
    /// (`--ack-frequency N`, Robin #3's end-to-end baseline).
    pub ack_frequency: Option<u32>,
}

/// What a trial produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialOutcome {
    /// The lab's metrics of the trial.
    pub metrics: BTreeMap<String, f64>,
    /// Why the trial failed, if it did.
    pub error: Option<String>,
    /// Events processed (for speed measurements; not part of the results).
    pub events: u64,
}

const HOPS: usize = 4;
const CLIENT_TIMER: usize = 4;
const SERVER_TIMER: usize = 5;
const SDK_TIMER: usize = 6;
const PROXY_TIMER: usize = 7;
const DELAYED: usize = 8;
const APP_TIMER: usize = 9;
const COMPONENTS: usize = 10;
/// Frames the bridging proxy holds for PEMI's reply delay at most (daemon.rs `DELAY_CAP`); beyond
/// it frames are forwarded at once.
const DELAY_CAP: usize = 4096;
/// A runaway guard: far more events than any scenario needs.
const MAX_EVENTS: u64 = 200_000_000;

/// The application of the trial: both ends of the bulk transfer.
#[derive(Debug)]
enum App {
    Upload(UploadClient, UploadServer),
    Download(DownloadClient, DownloadServer),
    Rtc(RtcClient, RtcServer),
}

impl App {
    fn done(&self) -> bool {
        match self {
            App::Upload(c, _) => c.done(),
            App::Download(c, _) => c.done(),
            App::Rtc(c, _) => c.done(),
        }
    }

    fn error(&self) -> Option<String> {
        match self {
            App::Upload(c, s) => c.error.clone().or_else(|| s.error.clone()),
            App::Download(c, s) => c.error.clone().or_else(|| s.error.clone()),
            App::Rtc(c, s) => c.error.clone().or_else(|| s.error.clone()),
        }
    }

    fn drive_client(&mut self, t: Duration, now: Instant, conn: &mut quinn_proto::Connection) {
        match self {
            App::Upload(c, _) => c.drive(t, now, conn),
            App::Download(c, _) => c.drive(t, now, conn),
            App::Rtc(c, _) => c.drive(t, now, conn),
        }
    }

    fn drive_server(&mut self, t: Duration, conn: &mut quinn_proto::Connection) {
        match self {
            App::Upload(_, s) => s.drive(t, conn),
            App::Download(_, s) => s.drive(conn),
            App::Rtc(_, s) => s.drive(t, conn),
        }
    }

    /// When the application itself must run (the RTC server's next frame).
    fn next_timer(&self) -> Option<Duration> {
        match self {
            App::Rtc(_, s) => s.next_timer(),
            _ => None,
        }
    }

    /// Duration and the data sender's statistics, as the lab's client reports them.
    fn report(&self) -> Option<(Duration, SenderStats)> {
        match self {
            App::Rtc(..) => None,
            App::Upload(c, s) => {
                let (sent, lost) = c.stats?;
                let summary = c.summary?;
                Some((
                    s.last_byte?.saturating_sub(c.started?),
                    SenderStats {
                        sent_packets: sent,
                        lost_packets: lost,
                        retransmissions: lost,
                        receiver_sent_packets: summary.sent_packets,
                        sender_unknown: false,
                    },
                ))
            }
            App::Download(c, _) => {
                let summary = c.summary?;
                Some((
                    c.last_byte?.saturating_sub(c.started?),
                    SenderStats {
                        sent_packets: summary.sent_packets,
                        lost_packets: summary.lost_packets,
                        retransmissions: summary.retransmissions,
                        receiver_sent_packets: c.sent_packets?,
                        sender_unknown: false,
                    },
                ))
            }
        }
    }
}

/// Interface counters, in the lab's naming.
#[derive(Debug, Default)]
struct Interfaces {
    cli0: IfCounters,
    ap_lan0: IfCounters,
    ap_wan0: IfCounters,
    srv: IfCounters,
}

struct World {
    clock: Clock,
    t: Duration,
    sched: Scheduler,
    links: Links,
    ifs: Interfaces,
    client: Peer,
    server: Peer,
    app: App,
    sdk: Option<SdkGlue>,
    proxy: Option<ProxyNode>,
    client_out: Vec<(SocketAddr, Vec<u8>)>,
    server_out: Vec<(SocketAddr, Vec<u8>)>,
    sdk_out: Vec<Out>,
    proxy_out: Vec<ProxyOut>,
    oversize_drops: u64,
    /// Bridged ap: frames go client ↔ server at layer 2, through the proxy when it bridges.
    bridge: bool,
    /// Frames the bridging proxy delays: (release time, towards the client, frame), FIFO.
    delayed: std::collections::VecDeque<(Duration, bool, Vec<u8>)>,
    /// The timer component that ran last, at the current instant.
    just_ran: Option<usize>,
}

/// Runs one trial.
pub fn run_trial(setup: &TrialSetup) -> TrialOutcome {
    if let Some(m) = &setup.media {
        return crate::media::run_trial(setup, m);
    }
    if let Some(m) = &setup.multicast {
        return crate::multicast::run_trial(setup, m);
    }
    if let Some(w) = &setup.webrtc {
        return crate::webrtc::run_trial(setup, w);
    }
    match World::new(setup) {
        Ok(mut w) => {
            let (error, events) = w.run(setup.timeout);
            let metrics = w.metrics(setup);
            TrialOutcome {
                metrics,
                error,
                events,
            }
        }
        Err(e) => TrialOutcome {
            metrics: BTreeMap::new(),
            error: Some(e.to_string()),
            events: 0,
        },
    }
}

impl World {
    fn new(s: &TrialSetup) -> Result<Self, QuicError> {
        let clock = Clock::new(Instant::now());
        let now = clock.at(Duration::ZERO);
        let mut rng = StdRng::seed_from_u64(s.stack_seed);
        let mut server_transport = quic::transport_config();
        let mut transport = quic::transport_config();
        if s.rtc.is_some() {
            // sidekick-rtc: frames in the order written; a client allowing 1000 open frame
            // streams.
            server_transport.send_fairness(false);
            transport.max_concurrent_uni_streams(quinn_proto::VarInt::from_u32(
                sidekick_examples::rtc::QUINN_CLIENT_MAX_CONCURRENT_UNI,
            ));
        }
        let (sep, scfg) = quic::server_endpoint(&mut rng, server_transport)?;
        let server = Peer::server(sep, scfg, server_addr());
        let mut sdk_parts = None;
        let mode = Mode::for_direction(s.direction);
        if let Some(p) = &s.sidekick {
            let signals = SharedSignals::new();
            // Uploads: PACUBIC replaces the client's controller (Robin #2).
            if mode == Mode::Robin {
                transport.congestion_controller_factory(Arc::new(PacubicFactory::new(
                    PacubicConfig::default(),
                    signals.clone(),
                )));
            }
            if let Some(n) = p.ack_reduction.filter(|_| mode == Mode::Robin) {
                transport.ack_frequency_config(Some(ack_frequency_config(n)));
                signals.set_ack_reduction(true);
            }
            sdk_parts = Some((KeyLogStore::new(64), signals, *p));
        }
        if let Some(n) = s.ack_frequency.filter(|_| s.sidekick.is_none()) {
            transport.ack_frequency_config(Some(ack_frequency_config(n)));
        }
        let keylog = sdk_parts
            .as_ref()
            .map(|(k, _, _)| Arc::new(k.clone()) as Arc<dyn rustls::KeyLog>);
        let (cep, ccfg) = quic::client_endpoint(&mut rng, transport, keylog)?;
        let client = Peer::client(cep, ccfg, client_addr(), server_addr(), now)?;
        let sdk = sdk_parts.map(|(keylog, signals, p)| {
            SdkGlue::new(
                SidekickClient::new(p.config(s.direction)),
                keylog,
                (mode == Mode::Robin).then_some(signals),
                server_addr(),
                mode,
            )
        });
        let proxy = s.proxy.as_ref().map(|c| {
            use rand::RngCore as _;
            ProxyNode::new(c, (rng.next_u64(), rng.next_u64()), clock)
        });
        Ok(Self {
            clock,
            t: Duration::ZERO,
            sched: Scheduler::new(COMPONENTS),
            links: Links::new(s.wan, s.lan, s.link_seed),
            ifs: Interfaces::default(),
            client,
            server,
            app: match (s.rtc, s.direction) {
                (Some(d), _) => App::Rtc(
                    RtcClient::new(d),
                    RtcServer::new(sidekick_examples::rtc::FrameParams::default()),
                ),
                (None, TransferDirection::Upload) => {
                    App::Upload(UploadClient::new(s.bytes), UploadServer::new())
                }
                (None, TransferDirection::Download) => {
                    App::Download(DownloadClient::new(s.bytes), DownloadServer::new())
                }
            },
            sdk,
            proxy,
            client_out: Vec::new(),
            server_out: Vec::new(),
            sdk_out: Vec::new(),
            proxy_out: Vec::new(),
            oversize_drops: 0,
            bridge: s.ap_bridge,
            delayed: std::collections::VecDeque::new(),
            just_ran: None,
        })
    }

    fn now(&self) -> Instant {
        self.clock.at(self.t)
    }

    /// Runs until the client is done or the time limit; returns the error and the event count.
    fn run(&mut self, timeout: Duration) -> (Option<String>, u64) {
        let mut events = 0u64;
        let mut same_instant = 0u32;
        self.settle();
        loop {
            if self.app.done() && self.client_closed() {
                break;
            }
            let Some((t, k)) = self.sched.pop() else {
                return (Some("simulation stalled: nothing pending".into()), events);
            };
            if t > timeout {
                return (Some("client timed out".into()), events);
            }
            events += 1;
            if events > MAX_EVENTS {
                return (Some("event limit reached".into()), events);
            }
            if t <= self.t {
                same_instant += 1;
                if same_instant > 100_000 {
                    return (
                        Some(format!(
                            "simulation stuck at {:?}: component {k} keeps its deadline",
                            self.t
                        )),
                        events,
                    );
                }
            } else {
                same_instant = 0;
            }
            self.t = self.t.max(t);
            self.step(k);
            self.just_ran = Some(k);
            self.settle();
            self.just_ran = None;
        }
        (self.app.error(), events)
    }

    fn client_closed(&mut self) -> bool {
        self.client.connection().is_none_or(|c| c.is_closed())
    }

    fn step(&mut self, k: usize) {
        let now = self.now();
        match k {
            0..HOPS => {
                let hop = Hop::ALL[k];
                while let Some(frame) = self.links.hop(hop).pop_due(self.t) {
                    match hop {
                        Hop::LanUp => self.ap_from_lan(frame),
                        Hop::LanDown => self.client_from_lan(&frame),
                        Hop::WanUp => self.server_from_wan(&frame),
                        Hop::WanDown => self.ap_from_wan(frame),
                    }
                }
            }
            CLIENT_TIMER => self.client.handle_timeout(now),
            SERVER_TIMER => self.server.handle_timeout(now),
            SDK_TIMER => {
                if let Some(s) = self.sdk.as_mut() {
                    s.handle_timeout(now, &mut self.sdk_out);
                }
                self.send_sdk_out();
            }
            PROXY_TIMER => {
                if let Some(p) = self.proxy.as_mut() {
                    p.handle_timeout(now, &mut self.proxy_out);
                }
                self.handle_proxy_out();
            }
            // The application runs in `settle`.
            APP_TIMER => {}
            _ => {
                while self.delayed.front().is_some_and(|d| d.0 <= self.t) {
                    if let Some((_, to_client, f)) = self.delayed.pop_front() {
                        self.bridge_out(to_client, f);
                    }
                }
            }
        }
    }

    /// Lets every node react at the current instant until quiet, then re-announces deadlines.
    fn settle(&mut self) {
        let now = self.now();
        loop {
            let mut busy = false;
            if let Some(s) = self.sdk.as_mut() {
                while let Some((from, d)) = s.deliver() {
                    self.client.receive(now, from, &d, &mut self.client_out);
                }
            }
            if let Some(c) = self.client.connection() {
                self.app.drive_client(self.t, now, c);
            }
            self.client.poll(now, &mut self.client_out);
            for (dst, d) in std::mem::take(&mut self.client_out) {
                busy = true;
                if let Some(s) = self.sdk.as_mut()
                    && dst == server_addr()
                {
                    s.on_sent(now, &d, &mut self.sdk_out);
                }
                self.client_send(client_addr(), dst, &d);
                self.send_sdk_out();
            }
            if let Some(c) = self.server.connection() {
                self.app.drive_server(self.t, c);
            }
            self.server.poll(now, &mut self.server_out);
            for (dst, d) in std::mem::take(&mut self.server_out) {
                busy = true;
                self.server_send(dst, &d);
            }
            if !busy {
                break;
            }
        }
        self.reschedule();
    }

    fn reschedule(&mut self) {
        for (i, hop) in Hop::ALL.iter().enumerate() {
            let due = self.links.next_due(*hop);
            self.sched.set(i, due);
        }
        let t = self.t;
        // A timer still due right after it ran (a component that acts only once the clock has
        // passed its deadline, as PEMI's flowlet timers do) runs again a microsecond later, as a
        // real-time loop would soon after; otherwise virtual time would stand still.
        let just_ran = self.just_ran;
        let c = self.clock;
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
        let ct = off(CLIENT_TIMER, self.client.poll_timeout());
        self.sched.set(CLIENT_TIMER, ct);
        let st = off(SERVER_TIMER, self.server.poll_timeout());
        self.sched.set(SERVER_TIMER, st);
        let kt = off(SDK_TIMER, self.sdk.as_ref().and_then(SdkGlue::poll_timeout));
        self.sched.set(SDK_TIMER, kt);
        let pt = off(
            PROXY_TIMER,
            self.proxy.as_ref().and_then(ProxyNode::poll_timeout),
        );
        self.sched.set(PROXY_TIMER, pt);
        let dt = self.delayed.front().map(|d| d.0.max(t));
        self.sched.set(DELAYED, dt);
        let at = self.app.next_timer().map(|d| d.max(t));
        self.sched.set(APP_TIMER, at);
    }

    fn send_sdk_out(&mut self) {
        for o in std::mem::take(&mut self.sdk_out) {
            match o {
                Out::Base(d) => self.client_send(client_addr(), server_addr(), &d),
                Out::Sidekick(to, d) => self.client_send(client_sidekick_addr(), to, &d),
            }
        }
    }

    fn client_send(&mut self, src: SocketAddr, dst: SocketAddr, payload: &[u8]) {
        let next = if self.bridge {
            mac::SERVER
        } else {
            mac::AP_LAN
        };
        let f = udp_frame(mac::CLIENT, next, src, dst, payload);
        if f.len() > MAX_FRAME {
            self.oversize_drops += 1;
            return;
        }
        self.ifs.cli0.tx(f.len());
        self.links.hop(Hop::LanUp).offer(self.t, f);
    }

    fn server_send(&mut self, dst: SocketAddr, payload: &[u8]) {
        let next = if self.bridge {
            mac::CLIENT
        } else {
            mac::AP_WAN
        };
        let f = udp_frame(mac::SERVER, next, server_addr(), dst, payload);
        if f.len() > MAX_FRAME {
            self.oversize_drops += 1;
            return;
        }
        self.ifs.srv.tx(f.len());
        self.links.hop(Hop::WanDown).offer(self.t, f);
    }

    /// Bridged ap: the frame passes the bridging proxy (which may delay it) or the kernel bridge.
    fn bridge_in(&mut self, from_client: bool, frame: Vec<u8>) {
        let now = self.now();
        let mut verdict = Verdict::Forward;
        if let Some(p) = self.proxy.as_mut()
            && p.bridges()
        {
            verdict = p.on_frame(now, from_client, &frame, &mut self.proxy_out);
        }
        self.handle_proxy_out();
        match verdict {
            Verdict::Delay(until) if self.delayed.len() < DELAY_CAP => {
                let at = self.clock.offset(until).max(self.t);
                self.delayed.push_back((at, !from_client, frame));
            }
            _ => self.bridge_out(!from_client, frame),
        }
    }

    fn bridge_out(&mut self, to_client: bool, frame: Vec<u8>) {
        if to_client {
            self.ifs.ap_lan0.tx(frame.len());
            self.links.hop(Hop::LanDown).offer(self.t, frame);
        } else {
            self.ifs.ap_wan0.tx(frame.len());
            self.links.hop(Hop::WanUp).offer(self.t, frame);
        }
    }

    fn ap_from_lan(&mut self, mut frame: Vec<u8>) {
        let now = self.now();
        self.ifs.ap_lan0.rx(frame.len());
        if self.bridge {
            self.bridge_in(true, frame);
            return;
        }
        if let Some(p) = self.proxy.as_mut() {
            p.on_frame(now, true, &frame, &mut self.proxy_out);
        }
        self.handle_proxy_out();
        let Some((src, dst, payload)) = udp_of(&frame) else {
            return;
        };
        if let Some(p) = self.proxy.as_mut()
            && dst == p.listen()
        {
            p.on_sidekick(now, src, payload, &mut self.proxy_out);
            self.handle_proxy_out();
        } else if dst.ip() == net::SERVER_IP {
            net::rewrite_macs(&mut frame, mac::AP_WAN, mac::SERVER);
            self.ifs.ap_wan0.tx(frame.len());
            self.links.hop(Hop::WanUp).offer(self.t, frame);
        }
        // Anything else (the ap's own address without a proxy) is dropped, as the kernel would
        // (with an ICMP error nobody here reads).
    }

    fn ap_from_wan(&mut self, mut frame: Vec<u8>) {
        self.ifs.ap_wan0.rx(frame.len());
        if self.bridge {
            self.bridge_in(false, frame);
            return;
        }
        if udp_of(&frame).is_some_and(|(_, d, _)| d.ip() == net::CLIENT_IP) {
            net::rewrite_macs(&mut frame, mac::AP_LAN, mac::CLIENT);
            self.ap_lan_egress(frame, true);
        }
    }

    /// A frame leaves the ap on lan0; the proxy captures it unless it injected it itself.
    fn ap_lan_egress(&mut self, frame: Vec<u8>, capture: bool) {
        if capture && let Some(p) = self.proxy.as_mut() {
            let now = self.clock.at(self.t);
            let _ = p.on_frame(now, false, &frame, &mut self.proxy_out);
        }
        self.ifs.ap_lan0.tx(frame.len());
        self.links.hop(Hop::LanDown).offer(self.t, frame);
        self.handle_proxy_out();
    }

    fn handle_proxy_out(&mut self) {
        while !self.proxy_out.is_empty() {
            for o in std::mem::take(&mut self.proxy_out) {
                match o {
                    ProxyOut::Sidekick { to, bytes } => {
                        let from = self.proxy.as_ref().map_or(to, ProxyNode::listen);
                        let f = udp_frame(mac::AP_LAN, mac::CLIENT, from, to, &bytes);
                        self.ap_lan_egress(f, true);
                    }
                    ProxyOut::Inject { to_client, frame } => {
                        if self.bridge {
                            self.bridge_out(to_client, frame);
                        } else {
                            self.ap_lan_egress(frame, false);
                        }
                    }
                }
            }
        }
    }

    fn client_from_lan(&mut self, frame: &[u8]) {
        let now = self.now();
        self.ifs.cli0.rx(frame.len());
        let Some((src, dst, payload)) = udp_of(frame) else {
            // The client's kernel answers echo requests (PEMI's calibration probes).
            if let Some(r) = net::icmp_echo_reply(frame, net::CLIENT_IP) {
                self.ifs.cli0.tx(r.len());
                self.links.hop(Hop::LanUp).offer(self.t, r);
            }
            return;
        };
        if dst == client_sidekick_addr() {
            if let Some(s) = self.sdk.as_mut() {
                s.on_sidekick(now, src, payload, &mut self.sdk_out);
            }
            self.send_sdk_out();
        } else if dst == client_addr() {
            if let Some(s) = self.sdk.as_mut() {
                s.on_base_received(now, src, payload, &mut self.sdk_out);
                self.send_sdk_out();
            } else {
                self.client.receive(now, src, payload, &mut self.client_out);
            }
        }
    }

    fn server_from_wan(&mut self, frame: &[u8]) {
        let now = self.now();
        self.ifs.srv.rx(frame.len());
        if let Some((src, dst, payload)) = udp_of(frame)
            && dst == server_addr()
        {
            self.server.receive(now, src, payload, &mut self.server_out);
        }
    }

    fn metrics(&mut self, s: &TrialSetup) -> BTreeMap<String, f64> {
        let mut m = BTreeMap::new();
        for (name, c) in [
            ("cli0", self.ifs.cli0),
            ("ap_lan0", self.ifs.ap_lan0),
            ("ap_wan0", self.ifs.ap_wan0),
            ("srv", self.ifs.srv),
        ] {
            m.insert(format!("{name}_tx_packets"), c.tx_packets as f64);
            m.insert(format!("{name}_tx_bytes"), c.tx_bytes as f64);
            m.insert(format!("{name}_rx_packets"), c.rx_packets as f64);
            m.insert(format!("{name}_rx_bytes"), c.rx_bytes as f64);
        }
        self.links.metrics(&mut m);
        if let Some(p) = &self.proxy {
            p.metrics(&mut m);
        }
        if self.oversize_drops > 0 {
            m.insert("sim_oversize_drops".into(), self.oversize_drops as f64);
        }
        if let Some((duration, stats)) = self.app.report() {
            let mut report =
                TransferReport::new(Stack::Quinn, s.direction, s.bytes, duration, stats);
            report.sidekick = self.sdk.as_ref().map(SdkGlue::counters);
            if let Ok(j) = serde_json::to_value(&report) {
                sidekick_lab::runner::add_client_json(&mut m, &j);
            }
            sidekick_lab::runner::derive_metrics(&mut m, s.direction.name());
        }
        if let App::Rtc(c, _) = &self.app
            && let Some(r) = c.report()
            && let Ok(j) = serde_json::to_value(&r)
        {
            sidekick_lab::runner::add_client_json(&mut m, &j);
            sidekick_lab::runner::derive_metrics(&mut m, s.direction.name());
        }
        m
    }
}
