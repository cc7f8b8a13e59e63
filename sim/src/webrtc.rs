//! The WebRTC call (`sidekick-webrtc`, app kind `webrtc`) in virtual time: two str0m peers on
//! the lab's topology, the client sending (`upload`, Robin #1's setting) or playing
//! (`download`, Packrat's), with the client's sidekick when the variant runs `--sidekick`.
//!
//! Both peers are the example binary's own sans-IO [`PeerCore`] — str0m (ICE, DTLS, SRTP,
//! RTP/RTCP, NACK/RTX), the sender's paced frames, the receiver's jitter buffer and counters,
//! the sidekick and key changes — configured from the same flags with the same defaults
//! ([`args`]). What this file adds is what the binary gets from the operating system and its
//! signalling endpoint: sockets (frames on the simulated links), the clock (virtual time; the
//! wall clock is a fixed epoch plus virtual time, shared by both hosts as in the lab), the
//! offer/answer (handed over in memory instead of over HTTP) and the report's merge.
//!
//! Not seeded: str0m draws ICE credentials, SSRCs and DTLS randoms (and so the SRTP keys) from
//! the operating system's generator, so the authentication tags — the identifiers Robin's
//! quACKs carry — differ from run to run; the same seed gives the same link losses and timing,
//! not the same bytes.
//!
//! The network — links, the routing ap and its proxy sniffing `lan0` — is [`Network`].

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use sidekick::session::{SidekickClient, SidekickConfig};
use sidekick_examples::transfer::sidekick::Mode;
use sidekick_examples::webrtc::call::{CallShape, merge_reports};
use sidekick_examples::webrtc::peer::{PeerConfig, PeerCore, Role, Socket, WallClock};
use sidekick_examples::webrtc::rekey::{self, Offer};
use sidekick_examples::webrtc::sidekick::WebrtcSidekick;
use sidekick_examples::webrtc::source::SourceConfig;

use crate::net::{self, Hop, client_addr, client_sidekick_addr, server_addr, udp_of};
use crate::network::{NetTimers, Network};
use crate::sched::{Clock, Scheduler};
use crate::trial::{TrialOutcome, TrialSetup};

pub mod args;
pub use args::parse_client_args;

/// `CLOCK_REALTIME` at virtual zero, ns (any fixed value: only differences are reported).
const EPOCH_UNIX_NS: u64 = 1_764_000_000_000_000_000;
/// How long ICE and DTLS may take (the binary's `CONNECT_TIMEOUT`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A WebRTC trial: the call as the client's command line describes it.
#[derive(Debug, Clone)]
pub struct WebrtcSetup {
    /// The client's role (`app.direction`: upload = sender).
    pub role: Role,
    /// The source (`--fps`, `--kbps`, `--keyframe-interval`, `--keyframe-factor`).
    pub source: SourceConfig,
    /// Frames of the call (`--duration` × fps).
    pub frames: u32,
    /// `--playout-delay-ms`.
    pub playout_delay: Duration,
    /// `--linger-ms`.
    pub linger: Duration,
    /// `--seed` (frame sizes).
    pub seed: u64,
    /// `app.rekey_after_ms` (`--rekey-after-ms`).
    pub rekey_after: Option<Duration>,
    /// The client's SDK configuration (`--sidekick` and its flags), if any.
    pub sidekick: Option<SidekickConfig>,
    /// `--far-peer chromium`: a real browser answers, which cannot run here (the scenario is
    /// skipped; a trial refuses to fake it).
    pub browser: bool,
}

const HOPS: usize = 4;
const CLIENT_TIMER: usize = 4;
const SERVER_TIMER: usize = 5;
const PROXY_TIMER: usize = 6;
const REKEY: usize = 7;
const COMPONENTS: usize = 8;
const MAX_EVENTS: u64 = 50_000_000;

struct World {
    clock: Clock,
    t: Duration,
    sched: Scheduler,
    net: Network,
    client: PeerCore,
    server: PeerCore,
    call: CallShape,
    rekey_at: Option<Duration>,
    error: Option<String>,
}

/// Runs one WebRTC trial.
pub fn run_trial(s: &TrialSetup, w: &WebrtcSetup) -> TrialOutcome {
    let world = if w.browser {
        Err(anyhow::anyhow!(
            "a real browser as the far peer runs in the lab only"
        ))
    } else {
        World::new(s, w)
    };
    let mut world = match world {
        Ok(world) => world,
        Err(e) => {
            return TrialOutcome {
                metrics: BTreeMap::new(),
                error: Some(format!("{e:#}")),
                events: 0,
            };
        }
    };
    let (end, events) = world.run(s.timeout);
    let metrics = world.finish(s, end);
    TrialOutcome {
        metrics: metrics.0,
        error: metrics.1,
        events,
    }
}

/// The binary's peer configuration for one side.
fn peer_config(w: &WebrtcSetup, role: Role, client: bool, max: Duration) -> PeerConfig {
    PeerConfig {
        role,
        source: w.source,
        frames: w.frames,
        playout_delay: w.playout_delay,
        linger: w.linger,
        seed: w.seed,
        stop_when_done: client,
        connect_timeout: CONNECT_TIMEOUT,
        max_duration: max,
        trace: None,
        vp8: None,
    }
}

impl World {
    fn new(s: &TrialSetup, w: &WebrtcSetup) -> anyhow::Result<Self> {
        let clock = Clock::new(Instant::now());
        let now = clock.at(Duration::ZERO);
        let wall = WallClock::at(now, EPOCH_UNIX_NS);
        // The offer/answer the binary posts to the server's endpoint, in memory.
        let offer = Offer::new(client_addr(), w.role, now)?;
        let (server_rtc, answer) = rekey::answer(server_addr(), &offer.sdp, now)?;
        let k = offer.accept(&answer)?;
        let side = w.sidekick.as_ref().map(|c| {
            let mut client = SidekickClient::new(c.clone());
            client.set_base_peer(server_addr());
            client.add_local_addrs([IpAddr::V4(net::CLIENT_IP)]);
            let mode = match w.role {
                Role::Sender => Mode::Robin,
                Role::Receiver => Mode::Packrat,
            };
            WebrtcSidekick::new(client, mode)
        });
        let server_role = match w.role {
            Role::Sender => Role::Receiver,
            Role::Receiver => Role::Sender,
        };
        let client = PeerCore::new(
            *k.rtc,
            client_addr(),
            k.mid,
            peer_config(w, w.role, true, s.timeout),
            side,
            now,
            wall,
        );
        let server = PeerCore::new(
            server_rtc,
            server_addr(),
            None,
            peer_config(w, server_role, false, s.timeout),
            None,
            now,
            wall,
        );
        Ok(Self {
            clock,
            t: Duration::ZERO,
            sched: Scheduler::new(COMPONENTS),
            net: Network::new(s, clock, (s.stack_seed, s.stack_seed ^ 0x5eed)),
            client,
            server,
            call: CallShape {
                role: w.role,
                frames: w.frames,
                fps: w.source.fps,
                kbps: w.source.kbps,
            },
            rekey_at: w.rekey_after,
            error: None,
        })
    }

    fn now(&self) -> Instant {
        self.clock.at(self.t)
    }

    fn fail(&mut self, r: anyhow::Result<()>) {
        if let Err(e) = r
            && self.error.is_none()
        {
            self.error = Some(format!("{e:#}"));
        }
    }

    /// Runs until the client's call is over; returns how it ended and the events processed.
    fn run(&mut self, timeout: Duration) -> (&'static str, u64) {
        let mut events = 0u64;
        let now = self.now();
        let r = self.client.handle_timeout(now);
        self.fail(r);
        let r = self.server.handle_timeout(now);
        self.fail(r);
        self.settle();
        loop {
            let now = self.now();
            if self.error.is_some() {
                return ("error", events);
            }
            if let Some(end) = self.client.finished(now) {
                return (end, events);
            }
            if self.client.connect_timed_out(now) {
                self.error = Some(format!(
                    "ICE/DTLS did not complete within {CONNECT_TIMEOUT:?}"
                ));
                return ("error", events);
            }
            let (t, k) = match self.sched.next_event(timeout, &mut events, MAX_EVENTS) {
                Ok(e) => e,
                Err(e) => {
                    self.error = Some(e.into());
                    return ("error", events);
                }
            };
            self.t = self.t.max(t);
            self.net.set_time(self.t);
            self.step(k);
            self.settle();
        }
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
            CLIENT_TIMER => {
                let r = self.client.handle_timeout(now);
                self.fail(r);
            }
            SERVER_TIMER => {
                let r = self.server.handle_timeout(now);
                self.fail(r);
            }
            REKEY => {
                self.rekey_at = None;
                let r = self.rekey(now);
                self.fail(r);
            }
            _ => self.net.proxy_timeout(),
        }
    }

    /// A key change, its offer and answer handed over at once (the binary posts them to the
    /// server's endpoint).
    fn rekey(&mut self, now: Instant) -> anyhow::Result<()> {
        let offer = Offer::new(client_addr(), self.call.role, now)?;
        let (rtc, answer) = rekey::answer(server_addr(), &offer.sdp, now)?;
        self.server.handle_rekey(
            now,
            rekey::Rekey {
                rtc: Box::new(rtc),
                mid: None,
            },
        )?;
        let k = offer.accept(&answer)?;
        self.client.handle_rekey(now, k)
    }

    /// Sends what both peers queued, then re-announces every deadline.
    fn settle(&mut self) {
        while let Some(d) = self.client.poll_transmit() {
            let src = match d.socket {
                Socket::Base => client_addr(),
                Socket::Sidekick => client_sidekick_addr(),
            };
            self.net.client_send(src, d.to, &d.data);
        }
        while let Some(d) = self.server.poll_transmit() {
            if d.socket == Socket::Base {
                self.net.server_send(d.to, &d.data);
            }
        }
        let timers = NetTimers {
            proxy: PROXY_TIMER,
            delayed: None,
        };
        self.net.schedule(&mut self.sched, timers, None);
        // A deadline that is still due right after it ran comes round again 1 µs later, as a
        // real-time loop would.
        let t = self.t;
        let c = self.clock;
        let due = |i: Instant| {
            let d = c.offset(i);
            if d <= t {
                t + Duration::from_micros(1)
            } else {
                d
            }
        };
        self.sched
            .set(CLIENT_TIMER, Some(due(self.client.poll_timeout())));
        self.sched
            .set(SERVER_TIMER, Some(due(self.server.poll_timeout())));
        self.sched.set(REKEY, self.rekey_at.map(|r| r.max(t)));
    }

    // --- The hosts --------------------------------------------------------------------------

    fn client_from_lan(&mut self, frame: &[u8]) {
        let now = self.now();
        let Some((src, dst, payload)) = udp_of(frame) else {
            return;
        };
        let r = if dst == client_sidekick_addr() {
            self.client.handle_sidekick_datagram(now, src, payload)
        } else if dst == client_addr() {
            self.client.handle_datagram(now, src, payload.to_vec())
        } else {
            Ok(())
        };
        self.fail(r);
    }

    fn server_from_wan(&mut self, frame: &[u8]) {
        let now = self.now();
        let Some((src, dst, payload)) = udp_of(frame) else {
            return;
        };
        if dst != server_addr() {
            return;
        }
        let r = self.server.handle_datagram(now, src, payload.to_vec());
        self.fail(r);
    }

    // --- The report -----------------------------------------------------------------------

    /// Ends the call (the client's report, then the server's, as `POST /report` stops it) and
    /// gives the lab's metrics with the trial's error, if any.
    fn finish(self, s: &TrialSetup, end: &'static str) -> (BTreeMap<String, f64>, Option<String>) {
        let mut m = BTreeMap::new();
        self.net.metrics(&mut m);
        if self.error.is_some() {
            return (m, self.error);
        }
        let elapsed = self.t;
        let mine = self.client.into_report(end);
        let theirs = serde_json::to_value(self.server.into_report("stopped"))
            .unwrap_or(serde_json::Value::Null);
        let j = merge_reports(&self.call, elapsed, &mine, theirs);
        sidekick_lab::runner::add_client_json(&mut m, &j);
        sidekick_lab::runner::derive_metrics(&mut m, s.direction.name());
        (m, None)
    }
}
