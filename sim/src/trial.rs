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

use crate::net::{self, Hop, client_addr, client_sidekick_addr, server_addr, udp_of};
use crate::network::{NetTimers, Network};
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

struct World {
    clock: Clock,
    t: Duration,
    sched: Scheduler,
    net: Network,
    client: Peer,
    server: Peer,
    app: App,
    sdk: Option<SdkGlue>,
    client_out: Vec<(SocketAddr, Vec<u8>)>,
    server_out: Vec<(SocketAddr, Vec<u8>)>,
    sdk_out: Vec<Out>,
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
        // The proxy's hash key: the stack seed's next two draws (only a proxy draws them).
        let proxy_seeds = match s.proxy {
            Some(_) => {
                use rand::RngCore as _;
                (rng.next_u64(), rng.next_u64())
            }
            None => (0, 0),
        };
        Ok(Self {
            clock,
            t: Duration::ZERO,
            sched: Scheduler::new(COMPONENTS),
            net: Network::new(s, clock, proxy_seeds),
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
            client_out: Vec::new(),
            server_out: Vec::new(),
            sdk_out: Vec::new(),
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
            let (t, k) = match self.sched.next_event(timeout, &mut events, MAX_EVENTS) {
                Ok(e) => e,
                Err(e) => return (Some(e.into()), events),
            };
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
            self.net.set_time(self.t);
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
                for frame in self.net.due_frames(hop) {
                    match hop {
                        Hop::LanDown => self.client_from_lan(&frame),
                        _ => self.server_from_wan(&frame),
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
            PROXY_TIMER => self.net.proxy_timeout(),
            // The application runs in `settle`.
            APP_TIMER => {}
            _ => self.net.release_delayed(),
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
        let timers = NetTimers {
            proxy: PROXY_TIMER,
            delayed: Some(DELAYED),
        };
        self.net.schedule(&mut self.sched, timers, self.just_ran);
        let t = self.t;
        // A timer still due right after it ran runs again a microsecond later, as a real-time
        // loop would soon after ([`Network::schedule`]); otherwise virtual time would stand still.
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
        self.net.client_send(src, dst, payload);
    }

    fn server_send(&mut self, dst: SocketAddr, payload: &[u8]) {
        self.net.server_send(dst, payload);
    }

    fn client_from_lan(&mut self, frame: &[u8]) {
        let now = self.now();
        let Some((src, dst, payload)) = udp_of(frame) else {
            // The client's kernel answers echo requests (PEMI's calibration probes).
            if let Some(r) = net::icmp_echo_reply(frame, net::CLIENT_IP) {
                self.net.client_send_frame(r);
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
        if let Some((src, dst, payload)) = udp_of(frame)
            && dst == server_addr()
        {
            self.server.receive(now, src, payload, &mut self.server_out);
        }
    }

    fn metrics(&mut self, s: &TrialSetup) -> BTreeMap<String, f64> {
        let mut m = BTreeMap::new();
        self.net.metrics(&mut m);
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
