//! Packrat multicast in virtual time (`sidekick-multicast`, app kind `multicast`, Packrat
//! (CoNEXT '26) §6.2, §7.2.3): one server streams to a group, several receivers on the one
//! client host NACK what they miss, and with `--sidekick` each runs a Packrat session naming the
//! group, so that the proxy repairs from one cache of the group's stream.
//!
//! The server and the receivers are the example's own sans-IO machines
//! ([`MulticastServer`], [`MulticastReceiver`]), each receiver's sidekick the media applications'
//! [`MediaSidekickCore`], configured from the binary's own flags ([`MulticastClientArgs`]). As in
//! the lab, the receivers share the client host and its last hop: the ap carries the group's
//! frames onto the client link as the server sent them ([`Network`]), every receiver gets each
//! group frame that arrives — a frame the link drops is lost to all of them, and a repair the
//! proxy sends for one receiver reaches all (the others count it as a duplicate). Each receiver
//! has its own unicast and sidekick ports on the client's address.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngCore as _, SeedableRng as _};
use sidekick::session::{SidekickClient, Transmit};
use sidekick_examples::media::MediaConfig;
use sidekick_examples::media_session::ReceiverTiming;
use sidekick_examples::media_sidekick::{CoreHooks, MediaSidekickCore};
use sidekick_examples::multicast::{
    MulticastClientArgs, MulticastReceiver, MulticastReport, MulticastServer, ReceiverReport,
};
use sidekick_examples::transfer::sidekick::Mode;

use crate::net::{self, Hop, server_addr, udp_of};
use crate::network::{NetTimers, Network};
use crate::sched::{Clock, Scheduler};
use crate::trial::{TrialOutcome, TrialSetup};

/// `CLOCK_REALTIME` at virtual zero, µs (as the media trials').
const EPOCH_UNIX_US: u64 = 1_764_000_000_000_000;
/// The receivers' first unicast port (receiver `i`: `+ 2i`, its sidekick socket `+ 2i + 1`).
const RECEIVER_PORT_BASE: u16 = 41_000;
/// The most receivers a trial runs (their ports stay below 65 536).
pub const MAX_RECEIVERS: usize = 4_096;
/// `sidekick-multicast server`'s defaults (the lab passes none but `--once`).
const JOIN_WAIT: Duration = Duration::from_secs(1);
const MAX_DURATION: Duration = Duration::from_secs(3600);
const SUMMARY_WAIT: Duration = Duration::from_secs(10);
const MAX_EVENTS: u64 = 50_000_000;

const HOPS: usize = 4;
const PROXY_TIMER: usize = 4;
const SERVER_TIMER: usize = 5;
/// Receiver `i`'s timer is `FIRST_RECEIVER + 2i`, its sidekick's `+ 1`.
const FIRST_RECEIVER: usize = 6;

/// A multicast trial: the receivers' flags and the stream's duration.
#[derive(Debug, Clone)]
pub struct MulticastSetup {
    /// `sidekick-multicast client`'s flags (with `--connect` and `--duration` as the lab's).
    pub args: MulticastClientArgs,
    /// `--duration`.
    pub duration: Duration,
}

/// Why a scenario's client flags cannot run.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MulticastArgError(pub String);

/// Parses the scenario's client flags as `sidekick-multicast client` does, after the lab's own
/// (`--connect SERVER --duration D --json`).
///
/// # Errors
/// clap's message, naming the flag; more than [`MAX_RECEIVERS`] receivers.
pub fn parse_client_args(
    duration: Duration,
    args: &[String],
) -> Result<MulticastSetup, MulticastArgError> {
    let mut flags = vec![
        "--connect".to_string(),
        server_addr().to_string(),
        "--duration".into(),
        duration.as_secs_f64().to_string(),
        "--json".into(),
    ];
    flags.extend(args.iter().cloned());
    let a = MulticastClientArgs::parse_flags(&flags)
        .map_err(|e| MulticastArgError(e.to_string().trim().to_string()))?;
    if a.receivers > MAX_RECEIVERS {
        return Err(MulticastArgError(format!(
            "--receivers {}: the simulator runs at most {MAX_RECEIVERS}",
            a.receivers
        )));
    }
    if !a.group.ip().is_multicast() || !a.group.is_ipv4() {
        return Err(MulticastArgError(format!(
            "--group {}: an IPv4 multicast group",
            a.group
        )));
    }
    Ok(MulticastSetup { args: a, duration })
}

/// One receiver on the client host.
struct Receiver {
    app: MulticastReceiver,
    sk: Option<MediaSidekickCore>,
    uni: SocketAddr,
    sk_addr: SocketAddr,
}

struct World {
    clock: Clock,
    t: Duration,
    sched: Scheduler,
    net: Network,
    server: MulticastServer,
    receivers: Vec<Receiver>,
    setup: MulticastSetup,
}

/// Runs one multicast trial.
pub fn run_trial(s: &TrialSetup, m: &MulticastSetup) -> TrialOutcome {
    let mut w = World::new(s, m);
    let (error, events) = w.run(s.timeout);
    let (metrics, report_error) = w.metrics(s);
    TrialOutcome {
        metrics,
        error: error.or(report_error),
        events,
    }
}

fn receiver_addr(i: usize, sidekick: bool) -> SocketAddr {
    let port =
        RECEIVER_PORT_BASE + 2 * u16::try_from(i).unwrap_or(u16::MAX / 2) + u16::from(sidekick);
    SocketAddr::V4(SocketAddrV4::new(net::CLIENT_IP, port))
}

impl World {
    fn new(s: &TrialSetup, m: &MulticastSetup) -> Self {
        let clock = Clock::new(Instant::now());
        let mut rng = StdRng::seed_from_u64(s.stack_seed);
        let a = &m.args;
        let cfg = a.media_config();
        let timing: ReceiverTiming = a.timing();
        let receivers = (0..a.receivers.max(1))
            .map(|i| Receiver {
                app: MulticastReceiver::new(server_addr(), &cfg, m.duration, timing),
                sk: a.sidekick_config().map(|c| {
                    MediaSidekickCore::new(
                        SidekickClient::new(c),
                        server_addr(),
                        [IpAddr::V4(net::CLIENT_IP)],
                        Mode::Packrat,
                    )
                }),
                uni: receiver_addr(i, false),
                sk_addr: receiver_addr(i, true),
            })
            .collect::<Vec<_>>();
        let server = MulticastServer::new(
            a.group,
            &MediaConfig::default(),
            JOIN_WAIT,
            MAX_DURATION,
            SUMMARY_WAIT,
            rng.next_u64(),
        );
        let proxy_seeds = (rng.next_u64(), rng.next_u64());
        Self {
            clock,
            t: Duration::ZERO,
            sched: Scheduler::new(FIRST_RECEIVER + 2 * receivers.len()),
            net: Network::new(s, clock, proxy_seeds),
            server,
            receivers,
            setup: m.clone(),
        }
    }

    fn now(&self) -> Instant {
        self.clock.at(self.t)
    }

    fn wall_us(&self) -> u64 {
        EPOCH_UNIX_US + u64::try_from(self.t.as_micros()).unwrap_or(u64::MAX)
    }

    fn run(&mut self, timeout: Duration) -> (Option<String>, u64) {
        let mut events = 0u64;
        for i in 0..self.receivers.len() {
            self.receiver_timer(i);
        }
        self.settle();
        while !self.receivers.iter().all(|r| r.app.is_over()) {
            let (t, k) = match self.sched.next_event(timeout, &mut events, MAX_EVENTS) {
                Ok(e) => e,
                Err(e) => return (Some(e.into()), events),
            };
            self.t = self.t.max(t);
            self.net.set_time(self.t);
            self.step(k);
            self.settle();
        }
        (None, events)
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
            PROXY_TIMER => self.net.proxy_timeout(),
            SERVER_TIMER => {
                let (t, wall) = (self.t, self.wall_us());
                self.server.handle_timeout(t, wall);
                self.server_sends();
            }
            _ => {
                let i = (k - FIRST_RECEIVER) / 2;
                if (k - FIRST_RECEIVER).is_multiple_of(2) {
                    self.receiver_timer(i);
                } else if let Some(s) = self.receivers[i].sk.as_mut() {
                    s.handle_timeout(now);
                }
            }
        }
    }

    /// Sends what the receivers and their sidekicks queued; re-announces every deadline.
    fn settle(&mut self) {
        let now = self.now();
        let (t, c) = (self.t, self.clock);
        for i in 0..self.receivers.len() {
            self.receiver_sends(i);
            let r = &mut self.receivers[i];
            let mut out = Vec::new();
            if let Some(s) = r.sk.as_mut() {
                for x in s.poll_transmits(now) {
                    match x {
                        Transmit::Base(d) => out.push((r.uni, server_addr(), d)),
                        Transmit::Sidekick(to, d) => out.push((r.sk_addr, to, d)),
                    }
                }
            }
            for (src, dst, d) in out {
                self.net.client_send(src, dst, &d);
            }
            let r = &self.receivers[i];
            let rt = r.app.poll_timeout().map(|d| d.max(t));
            let kt =
                r.sk.as_ref()
                    .and_then(MediaSidekickCore::poll_timeout)
                    .map(|i| c.offset(i).max(t));
            self.sched.set(FIRST_RECEIVER + 2 * i, rt);
            self.sched.set(FIRST_RECEIVER + 2 * i + 1, kt);
        }
        let timers = NetTimers {
            proxy: PROXY_TIMER,
            delayed: None,
        };
        self.net.schedule(&mut self.sched, timers, None);
        let st = self.server.poll_timeout(t).map(|d| d.max(t));
        self.sched.set(SERVER_TIMER, st);
    }

    fn receiver_timer(&mut self, i: usize) {
        let (t, now) = (self.t, self.now());
        let r = &mut self.receivers[i];
        let mut hooks = CoreHooks {
            core: r.sk.as_mut(),
            now,
        };
        r.app.handle_timeout(t, &mut hooks);
    }

    fn receiver_sends(&mut self, i: usize) {
        let uni = self.receivers[i].uni;
        while let Some(d) = self.receivers[i].app.poll_transmit() {
            self.net.client_send(uni, server_addr(), &d);
        }
    }

    fn client_from_lan(&mut self, frame: &[u8]) {
        let (t, now, wall) = (self.t, self.now(), self.wall_us());
        let Some((src, dst, payload)) = udp_of(frame) else {
            return;
        };
        if dst == self.setup.args.group {
            for r in &mut self.receivers {
                let mut hooks = CoreHooks {
                    core: r.sk.as_mut(),
                    now,
                };
                r.app
                    .handle_group_datagram(t, wall, src, payload, &mut hooks);
            }
            return;
        }
        for r in &mut self.receivers {
            if dst == r.uni {
                let mut hooks = CoreHooks {
                    core: r.sk.as_mut(),
                    now,
                };
                r.app
                    .handle_unicast_datagram(t, wall, src, payload, &mut hooks);
                return;
            }
            if dst == r.sk_addr {
                if let Some(s) = r.sk.as_mut() {
                    s.on_sidekick_datagram(now, src, payload);
                }
                return;
            }
        }
    }

    fn server_from_wan(&mut self, frame: &[u8]) {
        let Some((src, dst, payload)) = udp_of(frame) else {
            return;
        };
        if dst != server_addr() {
            return;
        }
        let (t, wall) = (self.t, self.wall_us());
        self.server.handle_datagram(t, wall, src, payload);
        self.server_sends();
    }

    fn server_sends(&mut self) {
        while let Some((to, d)) = self.server.poll_transmit() {
            self.net.server_send(to, &d);
        }
    }

    /// The lab's metrics of the trial, and the client's error when no receiver got the stream
    /// (the binary's "no receiver got the stream").
    fn metrics(&mut self, s: &TrialSetup) -> (BTreeMap<String, f64>, Option<String>) {
        let mut m = BTreeMap::new();
        self.net.metrics(&mut m);
        let cfg = self.setup.args.media_config();
        let reports: Vec<ReceiverReport> = std::mem::take(&mut self.receivers)
            .into_iter()
            .filter_map(|r| {
                let sk = r.sk.as_ref().map(MediaSidekickCore::counters);
                ReceiverReport::of(r.app, &cfg, sk)
            })
            .collect();
        if reports.is_empty() {
            return (m, Some("no receiver got the stream".into()));
        }
        let report = MulticastReport::new(self.setup.duration, self.setup.args.receivers, reports);
        if let Ok(j) = serde_json::to_value(&report) {
            sidekick_lab::runner::add_client_json(&mut m, &j);
            sidekick_lab::runner::derive_metrics(&mut m, s.direction.name());
        }
        (m, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_flags_parse_and_bad_ones_are_named() {
        let d = Duration::from_secs(5);
        let m = parse_client_args(d, &["--receivers".into(), "16".into(), "--sidekick".into()])
            .unwrap();
        assert_eq!(m.args.receivers, 16);
        assert!(m.args.sidekick_config().is_some());
        let e = parse_client_args(d, &["--sidekick-frob".into()]).unwrap_err();
        assert!(e.to_string().contains("--sidekick-frob"), "{e}");
        let e = parse_client_args(d, &["--group".into(), "10.0.0.1:5".into()]).unwrap_err();
        assert!(e.to_string().contains("--group"), "{e}");
        let e = parse_client_args(d, &["--receivers".into(), "5000".into()]).unwrap_err();
        assert!(e.to_string().contains("--receivers"), "{e}");
    }
}
