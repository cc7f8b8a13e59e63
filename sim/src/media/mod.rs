//! The media applications in virtual time: `sidekick-media` (Robin #1, app kind `media`: the
//! client sends, the server receives and NACKs) and `sidekick-media-fec` (Packrat media, app kind
//! `media-fec`: the server sends, the client plays with FEC and NACKs), over UDP on the lab's
//! topology.
//!
//! The applications are the example binaries' own sans-IO sessions
//! (`sidekick_examples::media_session`: [`SenderSession`], [`MediaReceiverSession`],
//! [`FecClientSession`] over [`MediaSender`] and the receivers), and the client's sidekick is
//! theirs too ([`MediaSidekickCore`]: Robin on the sender, the Packrat receiver on the player),
//! configured from the same flags with the same defaults. What this file adds is only what the
//! binaries get from the operating system: sockets (frames on the simulated links), the clock
//! (virtual time; `CLOCK_REALTIME` is a fixed epoch plus virtual time, shared by both hosts as in
//! the lab), and the servers' `--once` loops (wait for the first datagram, serve one session,
//! answer repeated FINs with the SUMMARY).
//!
//! The network — links, the routing ap and its proxy sniffing `lan0` — is [`Network`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngCore as _, SeedableRng as _};
use sidekick::session::{SidekickClient, SidekickConfig, Transmit};
use sidekick_examples::fec::{FecConfig, FecMetrics};
use sidekick_examples::media::{MediaConfig, MediaSender};
use sidekick_examples::media_io::parse_media_summary;
use sidekick_examples::media_session::{
    FecClientSession, FecReport, MediaReceiverSession, MediaReport, ReceiverTiming, SenderSession,
    Sent,
};
use sidekick_examples::media_sidekick::MediaSidekickCore;
use sidekick_examples::transfer::sidekick::Mode;
use sidekick_examples::wire::{Codec, Message};

use crate::net::{self, Hop, client_addr, client_sidekick_addr, server_addr, udp_of};
use crate::network::{NetTimers, Network};
use crate::sched::{Clock, Scheduler};
use crate::trial::{TrialOutcome, TrialSetup};

pub(crate) mod args;
pub use args::{MediaArgError, parse_client_args};

/// `CLOCK_REALTIME` at virtual zero, µs (any fixed value: only differences are reported).
const EPOCH_UNIX_US: u64 = 1_764_000_000_000_000;
/// How long `sidekick-media server --once` answers repeated FINs after its session.
const SERVER_FIN_GRACE: Duration = Duration::from_secs(1);

/// Which media application a trial runs.
#[derive(Debug, Clone)]
pub enum MediaApp {
    /// `sidekick-media`: the client streams `cfg` for `duration`, waits `summary_wait` for the
    /// receiver's SUMMARY; the server (receiver) has the binary's default timing.
    Robin {
        /// The stream (`--interval-ms`, `--payload`, `--initial-rtt-ms`).
        cfg: MediaConfig,
        /// `--summary-wait`.
        summary_wait: Duration,
    },
    /// `sidekick-media-fec`: the client plays `cfg` with `timing` (`--buffer-ms`,
    /// `--initial-rtt-ms`, `--linger-ms`).
    Fec {
        /// The player's configuration.
        cfg: FecConfig,
        /// The player's linger and idle times.
        timing: ReceiverTiming,
    },
}

/// A media trial: the application, its duration and the client's sidekick configuration.
#[derive(Debug, Clone)]
pub struct MediaSetup {
    /// The application.
    pub app: MediaApp,
    /// `--duration` (the scenario's `app.duration_s`).
    pub duration: Duration,
    /// The client's SDK configuration (`--sidekick` and its flags), if any.
    pub sidekick: Option<SidekickConfig>,
}

/// The client's application (one per trial: no point boxing the larger variant).
#[allow(clippy::large_enum_variant)]
enum Client {
    /// `sidekick-media client`: the sender.
    Sender {
        tx: MediaSender,
        session: SenderSession,
    },
    /// `sidekick-media-fec client`: the player; its metrics once it stopped.
    Player {
        session: Option<FecClientSession>,
        done: Option<FecMetrics>,
    },
}

/// The server's application.
enum Server {
    /// `sidekick-media server --once`: the receiver; its session started at the given time;
    /// then its SUMMARY, answered to FINs until the given time.
    Receiver {
        cfg: MediaConfig,
        session: Option<(Duration, MediaReceiverSession)>,
        done: Option<(Vec<u8>, Duration)>,
    },
    /// `sidekick-media-fec server --once`: the sender, streaming since the given time.
    Streamer {
        cfg: FecConfig,
        stream: Option<(Duration, MediaSender, SenderSession)>,
        nonce: u64,
    },
}

const HOPS: usize = 4;
const CLIENT_TIMER: usize = 4;
const SERVER_TIMER: usize = 5;
const SDK_TIMER: usize = 6;
const PROXY_TIMER: usize = 7;
const COMPONENTS: usize = 8;
const MAX_EVENTS: u64 = 50_000_000;

struct World {
    clock: Clock,
    t: Duration,
    sched: Scheduler,
    net: Network,
    client: Client,
    server: Server,
    sk: Option<MediaSidekickCore>,
    duration: Duration,
    error: Option<String>,
}

/// Runs one media trial.
pub fn run_trial(s: &TrialSetup, m: &MediaSetup) -> TrialOutcome {
    let mut w = World::new(s, m);
    let (error, events) = w.run(s.timeout);
    let metrics = w.metrics(s);
    TrialOutcome {
        metrics,
        error,
        events,
    }
}

impl World {
    fn new(s: &TrialSetup, m: &MediaSetup) -> Self {
        let clock = Clock::new(Instant::now());
        let mut rng = StdRng::seed_from_u64(s.stack_seed);
        let (client, server, mode) = match &m.app {
            MediaApp::Robin { cfg, summary_wait } => (
                Client::Sender {
                    tx: MediaSender::new(cfg, rng.next_u64()),
                    session: SenderSession::new(
                        EPOCH_UNIX_US,
                        cfg.interval,
                        m.duration,
                        *summary_wait,
                    ),
                },
                Server::Receiver {
                    cfg: cfg.clone(),
                    session: None,
                    done: None,
                },
                Mode::Robin,
            ),
            MediaApp::Fec { cfg, timing } => (
                Client::Player {
                    session: Some(FecClientSession::new(cfg, m.duration, *timing)),
                    done: None,
                },
                Server::Streamer {
                    cfg: cfg.clone(),
                    stream: None,
                    nonce: rng.next_u64(),
                },
                Mode::Packrat,
            ),
        };
        let sk = m.sidekick.as_ref().map(|c| {
            MediaSidekickCore::new(
                SidekickClient::new(c.clone()),
                server_addr(),
                [std::net::IpAddr::V4(net::CLIENT_IP)],
                mode,
            )
        });
        let proxy_seeds = (rng.next_u64(), rng.next_u64());
        Self {
            clock,
            t: Duration::ZERO,
            sched: Scheduler::new(COMPONENTS),
            net: Network::new(s, clock, proxy_seeds),
            client,
            server,
            sk,
            duration: m.duration,
            error: None,
        }
    }

    fn now(&self) -> Instant {
        self.clock.at(self.t)
    }

    fn wall_us(&self) -> u64 {
        EPOCH_UNIX_US + u64::try_from(self.t.as_micros()).unwrap_or(u64::MAX)
    }

    fn client_done(&self) -> bool {
        match &self.client {
            Client::Sender { session, .. } => session.is_done(),
            Client::Player { done, .. } => done.is_some(),
        }
    }

    fn run(&mut self, timeout: Duration) -> (Option<String>, u64) {
        let mut events = 0u64;
        self.client_timer();
        self.settle();
        while !self.client_done() && self.error.is_none() {
            let (t, k) = match self.sched.next_event(timeout, &mut events, MAX_EVENTS) {
                Ok(e) => e,
                Err(e) => return (Some(e.into()), events),
            };
            self.t = self.t.max(t);
            self.net.set_time(self.t);
            self.step(k);
            self.settle();
        }
        if self.error.is_none()
            && let Client::Sender { session, .. } = &self.client
            && session.summary().is_none()
        {
            self.error = Some("no summary from the receiver".into());
        }
        (self.error.clone(), events)
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
            CLIENT_TIMER => self.client_timer(),
            SERVER_TIMER => self.server_timer(),
            SDK_TIMER => {
                if let Some(s) = self.sk.as_mut() {
                    s.handle_timeout(now);
                }
            }
            _ => self.net.proxy_timeout(),
        }
    }

    /// Sends what the client's sidekick queued, then re-announces every deadline.
    fn settle(&mut self) {
        let now = self.now();
        if let Some(s) = self.sk.as_mut() {
            for t in s.poll_transmits(now) {
                match t {
                    Transmit::Base(d) => self.client_send(client_addr(), server_addr(), &d),
                    Transmit::Sidekick(to, d) => self.client_send(client_sidekick_addr(), to, &d),
                }
            }
        }
        let timers = NetTimers {
            proxy: PROXY_TIMER,
            delayed: None,
        };
        self.net.schedule(&mut self.sched, timers, None);
        let t = self.t;
        let c = self.clock;
        let ct = match &self.client {
            Client::Sender { session, .. } => session.next_deadline(t),
            Client::Player { session, .. } => session.as_ref().map(|s| s.next_deadline(t)),
        };
        self.sched.set(CLIENT_TIMER, ct.map(|d| d.max(t)));
        let st = match &self.server {
            Server::Receiver { session, .. } => {
                session.as_ref().map(|(t0, s)| *t0 + s.next_deadline())
            }
            Server::Streamer { stream, .. } => stream
                .as_ref()
                .and_then(|(t0, _, s)| Some(*t0 + s.next_deadline(t.saturating_sub(*t0))?)),
        };
        self.sched.set(SERVER_TIMER, st.map(|d| d.max(t)));
        let kt = self
            .sk
            .as_ref()
            .and_then(MediaSidekickCore::poll_timeout)
            .map(|i| c.offset(i).max(t));
        self.sched.set(SDK_TIMER, kt);
    }

    // --- The client -----------------------------------------------------------------------

    fn client_timer(&mut self) {
        let t = self.t;
        let mut sent = Vec::new();
        match &mut self.client {
            Client::Sender { tx, session } => session.on_timeout(t, tx, &mut sent),
            Client::Player { session, .. } => {
                if let Some(s) = session.as_mut() {
                    for d in s.on_timeout(t) {
                        sent.push(Sent::Control(d));
                    }
                }
            }
        }
        self.client_sends(sent);
        self.player_poll();
    }

    /// The player's loop head (`run_fec_client_with`): stop once finished, else HELLO if due.
    fn player_poll(&mut self) {
        let t = self.t;
        let Client::Player { session, done } = &mut self.client else {
            return;
        };
        let Some(s) = session.as_mut() else {
            return;
        };
        if s.is_finished(t) {
            if !s.started() {
                self.error = Some(format!("no media from {}", server_addr()));
            }
            if let Some(s) = session.take() {
                let (_, metrics, summary) = s.finish();
                *done = Some(metrics);
                self.client_sends(vec![Sent::Control(summary)]);
            }
        } else if let Some(h) = s.poll_hello(t) {
            self.client_sends(vec![Sent::Control(h)]);
        }
    }

    /// The client application's datagrams to the server, through its sidekick's hooks.
    fn client_sends(&mut self, sent: Vec<Sent>) {
        let now = self.now();
        let robin = matches!(self.client, Client::Sender { .. });
        for d in sent {
            let (bytes, media) = match d {
                Sent::Media { datagram, .. } => (datagram, true),
                Sent::Control(datagram) => (datagram, false),
            };
            self.client_send(client_addr(), server_addr(), &bytes);
            if let Some(s) = self.sk.as_mut() {
                match (robin, media) {
                    (true, true) => s.on_media_sent(now, &bytes),
                    (true, false) => s.on_control_sent(now, &bytes),
                    (false, _) => s.on_player_sent(now),
                }
            }
        }
    }

    fn client_from_lan(&mut self, frame: &[u8]) {
        let now = self.now();
        let t = self.t;
        let wall = self.wall_us();
        let Some((src, dst, payload)) = udp_of(frame) else {
            return;
        };
        if dst == client_sidekick_addr() {
            if let Some(s) = self.sk.as_mut() {
                s.on_sidekick_datagram(now, src, payload);
            }
            return;
        }
        if dst != client_addr() || src != server_addr() {
            return;
        }
        let mut sent = Vec::new();
        match &mut self.client {
            Client::Sender { tx, session } => {
                if self
                    .sk
                    .as_mut()
                    .is_some_and(|s| s.on_sender_received(now, payload))
                {
                    return;
                }
                if !session.is_done() {
                    session.on_datagram(payload, tx, &mut sent);
                }
            }
            Client::Player { session, .. } => {
                // The sequence number, as the binary's player hands it to its hooks
                // (NACK-driven eACKs use it as the packet number).
                let seq = sidekick_examples::media_io::data_seq(&Codec::new(0), payload);
                if self
                    .sk
                    .as_mut()
                    .is_some_and(|s| s.on_player_received_seq(now, payload, seq))
                {
                    return;
                }
                if let Some(s) = session.as_mut() {
                    s.set_nack_hold(self.sk.as_ref().and_then(MediaSidekickCore::nack_hold));
                    for d in s.on_datagram(payload, t, wall) {
                        sent.push(Sent::Control(d));
                    }
                }
            }
        }
        self.client_sends(sent);
        self.player_poll();
    }

    fn client_send(&mut self, src: SocketAddr, dst: SocketAddr, payload: &[u8]) {
        self.net.client_send(src, dst, payload);
    }

    // --- The server -----------------------------------------------------------------------

    fn server_timer(&mut self) {
        let t = self.t;
        let mut out = Vec::new();
        match &mut self.server {
            Server::Receiver { session, done, .. } => {
                if let Some((t0, s)) = session.as_mut() {
                    let now = t.saturating_sub(*t0);
                    if s.is_finished(now) {
                        let summary = s.summary();
                        out.push(summary.clone());
                        *done = Some((summary, t + SERVER_FIN_GRACE));
                        *session = None;
                    } else {
                        out.extend(s.on_timeout(now));
                    }
                }
            }
            Server::Streamer { stream, .. } => {
                if let Some((t0, tx, s)) = stream.as_mut() {
                    let mut sent = Vec::new();
                    s.on_timeout(t.saturating_sub(*t0), tx, &mut sent);
                    out.extend(sent.into_iter().map(|d| match d {
                        Sent::Media { datagram, .. } | Sent::Control(datagram) => datagram,
                    }));
                }
            }
        }
        for d in out {
            self.server_send(client_addr(), &d);
        }
    }

    fn server_from_wan(&mut self, frame: &[u8]) {
        let t = self.t;
        let wall = self.wall_us();
        let Some((src, dst, payload)) = udp_of(frame) else {
            return;
        };
        if dst != server_addr() || src != client_addr() {
            return;
        }
        let codec = Codec::new(0);
        let mut out = Vec::new();
        match &mut self.server {
            Server::Receiver { cfg, session, done } => {
                if let Some((t0, s)) = session.as_mut() {
                    let now = t.saturating_sub(*t0);
                    out.extend(s.on_datagram(payload, now, wall));
                    if s.is_finished(now) {
                        let summary = s.summary();
                        out.push(summary.clone());
                        *done = Some((summary, t + SERVER_FIN_GRACE));
                        *session = None;
                    }
                } else if let Some((summary, until)) = done {
                    // `serve_media --once`: repeated FINs get the SUMMARY again for a while.
                    if t < *until && matches!(codec.decode(payload), Ok(Message::Fin { .. })) {
                        out.push(summary.clone());
                    }
                } else if matches!(codec.decode(payload), Ok(Message::Data(_))) {
                    // The first DATA opens the session.
                    let mut s = MediaReceiverSession::new(cfg, ReceiverTiming::default(), t);
                    let now = Duration::ZERO;
                    out.extend(s.on_datagram(payload, now, wall));
                    *session = Some((t, s));
                }
            }
            Server::Streamer { cfg, stream, nonce } => {
                if let Some((_, tx, s)) = stream.as_mut() {
                    let mut sent = Vec::new();
                    s.on_datagram(payload, tx, &mut sent);
                    out.extend(sent.into_iter().map(|d| match d {
                        Sent::Media { datagram, .. } | Sent::Control(datagram) => datagram,
                    }));
                } else if let Ok(Message::Hello { duration_ms }) = codec.decode(payload) {
                    // `serve_fec --once` (max duration: its default, an hour).
                    let d = Duration::from_millis(u64::from(duration_ms))
                        .min(Duration::from_secs(3600));
                    let tx = MediaSender::new(&cfg.sender_config(), *nonce);
                    let s = SenderSession::new(wall, cfg.frame, d, Duration::from_secs(10));
                    *stream = Some((t, tx, s));
                }
            }
        }
        for d in out {
            self.server_send(client_addr(), &d);
        }
    }

    fn server_send(&mut self, dst: SocketAddr, payload: &[u8]) {
        self.net.server_send(dst, payload);
    }

    // --- The report -----------------------------------------------------------------------

    fn metrics(&self, s: &TrialSetup) -> BTreeMap<String, f64> {
        let mut m = BTreeMap::new();
        self.net.metrics(&mut m);
        let sidekick = self.sk.as_ref().map(MediaSidekickCore::counters);
        let duration_s = self.duration.as_secs_f64();
        let report = match &self.client {
            Client::Sender { tx, session } => session
                .summary()
                .and_then(|j| parse_media_summary(j).ok())
                .and_then(|receiver| {
                    serde_json::to_value(MediaReport {
                        app: "media",
                        duration_s,
                        sender: tx.counters(),
                        receiver,
                        sidekick,
                    })
                    .ok()
                }),
            Client::Player { done, .. } => done.clone().and_then(|metrics| {
                serde_json::to_value(FecReport {
                    app: "media-fec",
                    duration_s,
                    metrics,
                    sidekick,
                })
                .ok()
            }),
        };
        if let Some(j) = report {
            sidekick_lab::runner::add_client_json(&mut m, &j);
            sidekick_lab::runner::derive_metrics(&mut m, s.direction.name());
        }
        m
    }
}
