//! One access point at scale: the proxy core the daemon builds (from the lab's Robin #2 proxy
//! command line, every other setting at the daemon's default), sniffing `lan0`, with thousands of
//! concurrent flows and hundreds of sidekick sessions, in virtual time.
//!
//! - **Flows** are packet sources at the frame level: real Ethernet/IPv4/UDP frames with QUIC
//!   short-header payloads (fixed bit set, an 8-byte connection ID per flow, the identifier the
//!   quACKs carry in the last 4 bytes), client → server at a steady rate with one small frame
//!   back for every four; 10 000 quinn-proto connections would be far too slow and would not
//!   change what the core sees.
//! - **Sessions** run the real protocol: one `SidekickClient` (the SDK, Robin with the lab's
//!   30 ms / t = 10 quACKs) on each assisted flow, discovering the proxy in-band on its flow's
//!   4-tuple and talking to the proxy's sidekick socket; 1 % of each assisted flow's packets are
//!   lost on the near link (before the ap sees them), so quACKs have something to reveal.
//!   Session starts are spread over `start_over` seconds (by default within the core's default
//!   discovery rate limit of 200/s, burst 50); measurement starts two seconds after the last
//!   start.
//! - **Measured** over the `seconds` after that: the core's heap (a counting allocator in the
//!   binary; this thread's allocations during the core's calls, minus the bytes it hands out), its own
//!   accounting (`engine_memory_bytes`, `memory_reserved_bytes`), the CPU time of its timer
//!   handling (thread CPU clock) and timers fired per simulated second, and per session the
//!   quACKs received, the longest gap between two of them, the near losses revealed, and whether
//!   it is still active.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use sidekick::session::{SdkEvent, SidekickClient, Transmit};
use sidekick_examples::transfer::TransferDirection;
use sidekick_examples::transfer::sidekick::SidekickParams;

use super::alloc;
use crate::net::{mac, server_addr, udp_frame};
use crate::proxy_node::{ProxyNode, ProxyOut, parse_args};
use crate::sched::Clock;

/// The proxy's command line: the lab's Robin #2 variant (robin-2-upload.toml) without its
/// I/O-only flags.
pub const PROXY_ARGS: &[&str] = &[
    "--mode",
    "sniff",
    "--interface",
    "lan0",
    "--faces",
    "client",
    "--sidekick-listen",
    "10.0.2.1:7788",
];

/// One-way delay between a client and the ap (the Robin #2 near link).
const LAN_DELAY: Duration = Duration::from_millis(1);
/// Near-link loss of the assisted flows' packets.
const NEAR_LOSS: f64 = 0.01;
/// Payload of a data packet (QUIC-like, as the lab's quinn datagrams).
const DATA_LEN: usize = 1200;
/// How long the core's deadline may go unread after a frame (the daemon's worker reads it once
/// per turn of its loop, a batch of up to 16 frames per capture socket).
pub const POLL_BATCH: Duration = Duration::from_millis(1);
/// Payload of a reverse (ACK-like) packet.
const ACK_LEN: usize = 40;

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct ScaleSpec {
    /// Concurrent flows.
    pub flows: usize,
    /// Sessions (each on one of the flows; at most `flows`).
    pub sessions: usize,
    /// Simulated seconds measured (after the sessions' start-up).
    pub seconds: f64,
    /// Session starts are spread uniformly over this many seconds (`None`: one second per
    /// 150 sessions, at least one, within the proxy's default discovery rate of 200/s).
    pub start_over: Option<f64>,
    /// Packets per second of a plain flow.
    pub flow_pps: f64,
    /// Packets per second of an assisted flow.
    pub session_pps: f64,
    /// Seed (flow phases, near-link losses, the flow table's key).
    pub seed: u64,
}

/// Errors of the scale study.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    /// Bad parameters.
    #[error("scale study: {0}")]
    Invalid(String),
    /// The proxy configuration.
    #[error(transparent)]
    Proxy(#[from] crate::proxy_node::ProxyArgError),
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleResult {
    /// Flows.
    pub flows: usize,
    /// Sessions.
    pub sessions: usize,
    /// Seconds over which sessions started.
    pub start_over_s: f64,
    /// Length of the measured window (s).
    pub window_s: f64,
    /// Flows in the core's table at the end.
    pub table_flows: u64,
    /// Flows with a session engine at the end.
    pub assisted_flows: u64,
    /// Heap bytes the core holds at the end (counting allocator; 0 without it).
    pub core_heap_bytes: u64,
    /// Heap bytes the core held at the start of the window.
    pub core_heap_bytes_mid: u64,
    /// The core's own accounting: engines' memory (`engine_memory_bytes`).
    pub engine_memory_bytes: u64,
    /// The core's own accounting: reservations against its budget.
    pub memory_reserved_bytes: u64,
    /// Timer entries in the core's deadline index at the end.
    pub timer_entries: u64,
    /// Deadlines the core's timers fired per simulated second in the window.
    pub timers_fired_per_s: f64,
    /// `handle_timeout` calls per simulated second in the window.
    pub timer_calls_per_s: f64,
    /// CPU time of the core's timer handling per simulated second (ms), window.
    pub timer_cpu_ms_per_s: f64,
    /// `poll_timeout` calls per simulated second in the window.
    pub poll_calls_per_s: f64,
    /// CPU time of the core's `poll_timeout` per simulated second (ms), window.
    pub poll_cpu_ms_per_s: f64,
    /// CPU time of the whole simulation per simulated second (ms), window.
    pub total_cpu_ms_per_s: f64,
    /// Frames the core handled per simulated second in the window.
    pub frames_per_s: f64,
    /// Sessions active (not fallen back) at the end.
    pub sessions_active: usize,
    /// Time until every session was established (s), if they all were.
    pub all_established_s: Option<f64>,
    /// quACKs per session in the window: min, median, max.
    pub quacks_per_session: (f64, f64, f64),
    /// Jain's index of the sessions' quACK counts in the window.
    pub quack_jain: Option<f64>,
    /// Longest gap between two quACKs of a session in the window (ms): median and max over
    /// sessions.
    pub quack_gap_ms: (f64, f64),
    /// Near-link drops in the window, and the share the SDK learnt about from quACKs.
    pub near_drops: u64,
    /// Near losses the sessions' quACKs revealed (of the window's drops, counted at detection).
    pub near_losses_revealed: u64,
}

impl ScaleResult {
    /// One line for the terminal.
    pub fn line(&self) -> String {
        format!(
            "{} flows, {} sessions: core heap {:.1} MiB ({:.0} B/flow), timers {:.0}/s, \
             timer CPU {:.2} ms/s, {}/{} sessions active, quACK gap max {:.0} ms",
            self.flows,
            self.sessions,
            self.core_heap_bytes as f64 / 1048576.0,
            self.core_heap_bytes as f64 / self.flows.max(1) as f64,
            self.timers_fired_per_s,
            self.timer_cpu_ms_per_s,
            self.sessions_active,
            self.sessions,
            self.quack_gap_ms.1
        )
    }
}

/// A Markdown table of runs.
pub fn table(rows: &[ScaleResult]) -> String {
    let mut s = String::from(
        "| flows | sessions | core heap (MiB) | B per flow | engine memory (kB) | reserved (kB) \
         | timer entries | timers fired /s | timer runs /s | timer CPU (ms/s) | deadline reads /s | their CPU (ms/s) | total CPU (ms/s) | frames /s \
         | active sessions | all established (s) | quACKs/session (min/med/max) | Jain | max quACK gap med/max (ms) | near losses revealed |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {:.2} | {:.0} | {:.1} | {:.1} | {} | {:.0} | {:.0} | {:.2} | {:.0} | {:.2} | {:.0} | {:.0} | {}/{} | {} | {:.0}/{:.0}/{:.0} | {} | {:.0}/{:.0} | {}/{} |",
            r.flows,
            r.sessions,
            r.core_heap_bytes as f64 / 1048576.0,
            r.core_heap_bytes as f64 / r.flows.max(1) as f64,
            r.engine_memory_bytes as f64 / 1000.0,
            r.memory_reserved_bytes as f64 / 1000.0,
            r.timer_entries,
            r.timers_fired_per_s,
            r.timer_calls_per_s,
            r.timer_cpu_ms_per_s,
            r.poll_calls_per_s,
            r.poll_cpu_ms_per_s,
            r.total_cpu_ms_per_s,
            r.frames_per_s,
            r.sessions_active,
            r.sessions,
            r.all_established_s
                .map_or_else(|| "-".into(), |t| format!("{t:.2}")),
            r.quacks_per_session.0,
            r.quacks_per_session.1,
            r.quacks_per_session.2,
            r.quack_jain
                .map_or_else(|| "-".into(), |j| format!("{j:.3}")),
            r.quack_gap_ms.0,
            r.quack_gap_ms.1,
            r.near_losses_revealed,
            r.near_drops,
        );
    }
    s
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// Flow `i` sends its next packet.
    Send(u32),
    /// Session `j` starts discovery.
    Start(u32),
    /// Session `j`'s SDK timer.
    SdkTimer(u32),
    /// Deliver the proxy's pending datagram number `k` to its session.
    ToClient(u64),
    /// The proxy core's timer.
    ProxyTimer,
    /// Re-read the core's next deadline.
    Repoll,
}

struct Session {
    flow: u32,
    sdk: SidekickClient,
    timer: Option<Duration>,
    last_quack: Option<Duration>,
    max_gap: Duration,
    quacks: u64,
    revealed: u64,
    established: Option<Duration>,
}

struct Sim {
    spec: ScaleSpec,
    clock: Clock,
    t: Duration,
    heap: BinaryHeap<Reverse<(Duration, u64, Ev)>>,
    seq: u64,
    node: ProxyNode,
    listen: SocketAddr,
    out: Vec<ProxyOut>,
    sessions: Vec<Session>,
    /// Flow index → session index.
    session_of: HashMap<u32, u32>,
    /// Client sidekick address → session index.
    by_sidekick: HashMap<SocketAddr, u32>,
    /// Client base address → session index.
    by_base: HashMap<SocketAddr, u32>,
    /// Datagrams on their way to a session's client: (session, on the base socket, bytes).
    pending: HashMap<u64, (u32, bool, Vec<u8>)>,
    next_pending: u64,
    proxy_timer: Option<Duration>,
    polled_at: Option<Duration>,
    repoll_pending: bool,
    poll_cpu: Duration,
    poll_calls: u64,
    sent: Vec<u32>,
    rng: StdRng,
    measuring: bool,
    core_heap: i64,
    timer_cpu: Duration,
    timer_calls: u64,
    near_drops: u64,
}

fn client_ip(i: u32) -> Ipv4Addr {
    // 10.64.0.0/10 and up: one address per flow, never the lab's 10.0.x.x.
    let n = 0x0a40_0000u32 + i + 2;
    Ipv4Addr::from(n)
}

fn base_addr(i: u32) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(client_ip(i), 40_000))
}

fn sidekick_addr(i: u32) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(client_ip(i), 40_001))
}

/// The QUIC-like short-header datagram number `n` of flow `i`: fixed bit, the flow's 8-byte
/// connection ID, filler, and a per-packet identifier in the last 4 bytes.
fn datagram(i: u32, n: u32, len: usize) -> Vec<u8> {
    let mut d = vec![0u8; len];
    d[0] = 0x40 | (n & 0x1f) as u8;
    d[1..5].copy_from_slice(&i.to_be_bytes());
    d[5..9].copy_from_slice(&(!i).to_be_bytes());
    let mut z = (u64::from(i) << 32 | u64::from(n)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    d[len - 4..].copy_from_slice(&(z as u32).to_be_bytes());
    d
}

impl Sim {
    fn push(&mut self, at: Duration, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    fn now(&self) -> Instant {
        self.clock.at(self.t)
    }

    /// Runs a core call, accounting the heap it keeps (allocations during the call minus the
    /// bytes it hands out in `out`).
    fn core<R>(&mut self, f: impl FnOnce(&mut ProxyNode, &mut Vec<ProxyOut>) -> R) -> R {
        let before = alloc::thread_net_bytes();
        let r = f(&mut self.node, &mut self.out);
        let after = alloc::thread_net_bytes();
        let handed: usize = self
            .out
            .iter()
            .map(|o| match o {
                ProxyOut::Sidekick { bytes, .. } => bytes.capacity(),
                ProxyOut::Inject { frame, .. } => frame.capacity(),
            })
            .sum();
        self.core_heap += after - before - handed as i64;
        self.route_out();
        r
    }

    /// Re-reads the core's next deadline (O(sessions) in the session table, so at most once per
    /// [`POLL_BATCH`] of virtual time between timer runs, as the daemon reads it once per batch
    /// of frames).
    fn repoll(&mut self) {
        self.polled_at = Some(self.t);
        let c0 = alloc::thread_cpu_time();
        let next = self.node.poll_timeout();
        if self.measuring {
            self.poll_cpu += alloc::thread_cpu_time().saturating_sub(c0);
            self.poll_calls += 1;
        }
        let next = next.map(|i| self.clock.offset(i).max(self.t));
        if next.is_some() && next != self.proxy_timer {
            self.proxy_timer = next;
            if let Some(at) = next {
                self.push(at, Ev::ProxyTimer);
            }
        }
    }

    fn route_out(&mut self) {
        for o in std::mem::take(&mut self.out) {
            let to_session = match o {
                ProxyOut::Sidekick { to, bytes } => {
                    self.by_sidekick.get(&to).map(|&j| (j, false, bytes))
                }
                // Injected frames leave on lan0: discovery replies on a flow's 4-tuple reach
                // its client's base socket; others are not for a session's client.
                ProxyOut::Inject { frame, .. } => {
                    crate::net::udp_of(&frame).and_then(|(_, dst, p)| {
                        let j = self.by_base.get(&dst)?;
                        Some((*j, true, p.to_vec()))
                    })
                }
            };
            if let Some(x) = to_session {
                let k = self.next_pending;
                self.next_pending += 1;
                self.pending.insert(k, x);
                self.push(self.t + LAN_DELAY, Ev::ToClient(k));
            }
        }
        if self.out.capacity() < 256 {
            self.out = Vec::with_capacity(4096);
        }
        if !self.repoll_pending {
            self.repoll_pending = true;
            let at = self
                .polled_at
                .map_or(self.t, |p| (p + POLL_BATCH).max(self.t));
            self.push(at, Ev::Repoll);
        }
    }

    /// A frame from a client reaches the ap on lan0 (captured; a sidekick datagram is also read
    /// by the proxy's socket).
    fn frame_from_client(&mut self, i: u32, src: SocketAddr, dst: SocketAddr, payload: &[u8]) {
        let f = udp_frame(mac::CLIENT, mac::AP_LAN, src, dst, payload);
        let now = self.now();
        self.core(|n, out| n.on_frame(now, true, &f, out));
        if dst == self.listen {
            self.core(|n, out| n.on_sidekick(now, src, payload, out));
        }
        let _ = i;
    }

    fn frame_to_client(&mut self, i: u32, payload: &[u8]) {
        let f = udp_frame(
            mac::AP_LAN,
            mac::CLIENT,
            server_addr(),
            base_addr(i),
            payload,
        );
        let now = self.now();
        self.core(|n, out| n.on_frame(now, false, &f, out));
    }

    fn sdk_flush(&mut self, j: u32) {
        let now = self.now();
        let s = &mut self.sessions[j as usize];
        let i = s.flow;
        let mut tx = Vec::new();
        while let Some(t) = s.sdk.poll_transmit() {
            tx.push(t);
        }
        while let Some(e) = s.sdk.poll_event() {
            match e {
                SdkEvent::NearLoss(_) if self.measuring => s.revealed += 1,
                SdkEvent::Established if s.established.is_none() => s.established = Some(self.t),
                _ => {}
            }
        }
        let timer = s
            .sdk
            .poll_timeout()
            .map(|x| self.clock.offset(x).max(self.t));
        let changed = timer != s.timer;
        s.timer = timer;
        for t in tx {
            match t {
                Transmit::Base(b) => self.frame_from_client(i, base_addr(i), server_addr(), &b),
                Transmit::Sidekick(to, b) => self.frame_from_client(i, sidekick_addr(i), to, &b),
            }
        }
        if changed && let Some(at) = timer {
            self.push(at, Ev::SdkTimer(j));
        }
        let _ = now;
    }

    fn send(&mut self, i: u32) {
        let n = self.sent[i as usize];
        self.sent[i as usize] += 1;
        let session = self.session_of.get(&i).copied();
        let pps = if session.is_some() {
            self.spec.session_pps
        } else {
            self.spec.flow_pps
        };
        let d = datagram(i, n, DATA_LEN);
        let mut lost = false;
        if let Some(j) = session {
            let now = self.now();
            self.sessions[j as usize].sdk.on_base_sent(now, &d);
            lost = self.rng.random_bool(NEAR_LOSS);
            if lost && self.measuring {
                self.near_drops += 1;
            }
        }
        if !lost {
            self.frame_from_client(i, base_addr(i), server_addr(), &d);
        }
        if n % 4 == 3 {
            let a = datagram(i, n | 0x8000_0000, ACK_LEN);
            self.frame_to_client(i, &a);
        }
        if let Some(j) = session {
            self.sdk_flush(j);
        }
        let gap = Duration::from_secs_f64(1.0 / pps);
        self.push(self.t + gap, Ev::Send(i));
    }

    fn step(&mut self, ev: Ev) {
        match ev {
            Ev::Send(i) => self.send(i),
            Ev::Start(j) => {
                let now = self.now();
                let _ = self.sessions[j as usize].sdk.start(now);
                self.sdk_flush(j);
            }
            Ev::SdkTimer(j) => {
                let s = &mut self.sessions[j as usize];
                if s.timer != Some(self.t) {
                    return;
                }
                s.timer = None;
                let now = self.clock.at(self.t);
                s.sdk.handle_timeout(now);
                self.sdk_flush(j);
            }
            Ev::ToClient(k) => {
                let Some((j, base, bytes)) = self.pending.remove(&k) else {
                    return;
                };
                let now = self.now();
                let t = self.t;
                let measuring = self.measuring;
                let s = &mut self.sessions[j as usize];
                let q0 = s.sdk.stats().quacks;
                if base {
                    s.sdk.on_base_received(now, bytes);
                    // The stack's copy of anything that is not a discovery reply is dropped.
                    while s.sdk.poll_deliver().is_some() {}
                } else {
                    s.sdk.on_sidekick_datagram(now, self.listen, &bytes);
                }
                if s.sdk.stats().quacks > q0 && measuring {
                    s.quacks += 1;
                    if let Some(l) = s.last_quack {
                        s.max_gap = s.max_gap.max(t.saturating_sub(l));
                    }
                    s.last_quack = Some(t);
                }
                self.sdk_flush(j);
            }
            Ev::ProxyTimer => {
                if self.proxy_timer != Some(self.t) {
                    return;
                }
                self.proxy_timer = None;
                let now = self.now();
                let c0 = alloc::thread_cpu_time();
                self.core(|n, out| n.handle_timeout(now, out));
                if self.measuring {
                    self.timer_cpu += alloc::thread_cpu_time().saturating_sub(c0);
                    self.timer_calls += 1;
                }
                self.repoll();
            }
            Ev::Repoll => {
                self.repoll_pending = false;
                self.repoll();
            }
        }
    }
}

/// Runs the scale study once.
pub fn run_scale(spec: &ScaleSpec) -> Result<ScaleResult, ScaleError> {
    if spec.flows == 0 || spec.sessions > spec.flows || spec.flows > 1 << 20 {
        return Err(ScaleError::Invalid(format!(
            "need 0 < sessions ≤ flows ≤ 2^20 (flows {}, sessions {})",
            spec.flows, spec.sessions
        )));
    }
    if !(spec.seconds > 0.0
        && spec.flow_pps > 0.0
        && spec.session_pps > 0.0
        && spec.start_over.is_none_or(|s| s >= 0.0))
    {
        return Err(ScaleError::Invalid(
            "seconds and rates must be positive".into(),
        ));
    }
    let args: Vec<String> = PROXY_ARGS.iter().map(|s| (*s).to_string()).collect();
    let cfg = parse_args(&args)?;
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let heap0 = alloc::thread_net_bytes();
    let clock = Clock::new(Instant::now());
    let node = ProxyNode::new(&cfg, (rng.random(), rng.random()), clock);
    let core_heap = alloc::thread_net_bytes() - heap0;
    let mut sim = Sim {
        spec: *spec,
        clock,
        t: Duration::ZERO,
        heap: BinaryHeap::new(),
        seq: 0,
        listen: node.listen(),
        node,
        out: Vec::with_capacity(4096),
        sessions: Vec::new(),
        session_of: HashMap::new(),
        by_sidekick: HashMap::new(),
        by_base: HashMap::new(),
        pending: HashMap::new(),
        next_pending: 0,
        proxy_timer: None,
        polled_at: None,
        repoll_pending: false,
        poll_cpu: Duration::ZERO,
        poll_calls: 0,
        sent: vec![0; spec.flows],
        rng,
        measuring: false,
        core_heap,
        timer_cpu: Duration::ZERO,
        timer_calls: 0,
        near_drops: 0,
    };
    // Sessions on every (flows / sessions)-th flow, starting over the first second.
    let stride = spec.flows / spec.sessions.max(1);
    let start_over = spec
        .start_over
        .unwrap_or_else(|| (spec.sessions as f64 / 150.0).max(1.0));
    let params = SidekickParams::default();
    for j in 0..spec.sessions {
        let i = (j * stride) as u32;
        let mut sdk = SidekickClient::new(params.config(TransferDirection::Upload));
        sdk.set_base_peer(server_addr());
        sdk.add_local_addrs([IpAddr::V4(client_ip(i))]);
        sim.sessions.push(Session {
            flow: i,
            sdk,
            timer: None,
            last_quack: None,
            max_gap: Duration::ZERO,
            quacks: 0,
            revealed: 0,
            established: None,
        });
        sim.session_of.insert(i, j as u32);
        sim.by_sidekick.insert(sidekick_addr(i), j as u32);
        sim.by_base.insert(base_addr(i), j as u32);
        let at = Duration::from_secs_f64(sim.rng.random::<f64>() * start_over);
        sim.push(at, Ev::Start(j as u32));
    }
    for i in 0..spec.flows as u32 {
        let pps = if sim.session_of.contains_key(&i) {
            spec.session_pps
        } else {
            spec.flow_pps
        };
        let phase = Duration::from_secs_f64(sim.rng.random::<f64>() / pps);
        sim.push(phase, Ev::Send(i));
    }
    let mid = Duration::from_secs_f64(start_over + 2.0);
    let end = mid + Duration::from_secs_f64(spec.seconds);
    let mut mid_snapshot = None;
    let mut cpu_mid = Duration::ZERO;
    while let Some(Reverse((t, _, ev))) = sim.heap.pop() {
        if t > end {
            break;
        }
        if !sim.measuring && t >= mid {
            sim.measuring = true;
            mid_snapshot = Some((sim.node.counters(), sim.core_heap));
            cpu_mid = alloc::thread_cpu_time();
        }
        sim.t = t;
        sim.step(ev);
    }
    let cpu = alloc::thread_cpu_time().saturating_sub(cpu_mid);
    let c = sim.node.counters();
    let (c_mid, heap_mid) = mid_snapshot.unwrap_or((c, sim.core_heap));
    let window = end.saturating_sub(mid).as_secs_f64();
    let mut quacks: Vec<f64> = sim.sessions.iter().map(|s| s.quacks as f64).collect();
    quacks.sort_by(f64::total_cmp);
    let gaps: Vec<f64> = sim
        .sessions
        .iter()
        .map(|s| s.max_gap.as_secs_f64() * 1000.0)
        .collect();
    let all_established = sim
        .sessions
        .iter()
        .map(|s| s.established)
        .try_fold(Duration::ZERO, |m, e| e.map(|e| m.max(e)));
    let counted = alloc::installed();
    Ok(ScaleResult {
        flows: spec.flows,
        sessions: spec.sessions,
        start_over_s: start_over,
        window_s: window,
        table_flows: c.flows,
        assisted_flows: c.assisted_flows,
        core_heap_bytes: if counted {
            sim.core_heap.max(0) as u64
        } else {
            0
        },
        core_heap_bytes_mid: if counted { heap_mid.max(0) as u64 } else { 0 },
        engine_memory_bytes: c.engine_memory_bytes,
        memory_reserved_bytes: c.memory_reserved_bytes,
        timer_entries: c.timer_entries,
        timers_fired_per_s: (c.timers_fired - c_mid.timers_fired) as f64 / window,
        timer_calls_per_s: sim.timer_calls as f64 / window,
        timer_cpu_ms_per_s: sim.timer_cpu.as_secs_f64() * 1000.0 / window,
        poll_calls_per_s: sim.poll_calls as f64 / window,
        poll_cpu_ms_per_s: sim.poll_cpu.as_secs_f64() * 1000.0 / window,
        total_cpu_ms_per_s: cpu.as_secs_f64() * 1000.0 / window,
        frames_per_s: (c.frames - c_mid.frames) as f64 / window,
        sessions_active: sim.sessions.iter().filter(|s| s.sdk.is_active()).count(),
        all_established_s: all_established.map(|d| d.as_secs_f64()),
        quacks_per_session: (
            quacks.first().copied().unwrap_or(0.0),
            super::median(&quacks).unwrap_or(0.0),
            quacks.last().copied().unwrap_or(0.0),
        ),
        quack_jain: super::jain(&quacks),
        quack_gap_ms: (
            super::median(&gaps).unwrap_or(0.0),
            gaps.iter().copied().fold(0.0, f64::max),
        ),
        near_drops: sim.near_drops,
        near_losses_revealed: sim.sessions.iter().map(|s| s.revealed).sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_are_short_header_with_distinct_ids() {
        let a = datagram(7, 1, DATA_LEN);
        let b = datagram(7, 2, DATA_LEN);
        assert_eq!(a.len(), DATA_LEN);
        assert_eq!(a[0] & 0xc0, 0x40, "short header, fixed bit");
        assert_ne!(a[DATA_LEN - 4..], b[DATA_LEN - 4..]);
        let f = udp_frame(mac::CLIENT, mac::AP_LAN, base_addr(7), server_addr(), &a);
        assert_eq!(crate::net::udp_of(&f).map(|u| u.0), Some(base_addr(7)));
        assert_ne!(client_ip(0), crate::net::CLIENT_IP);
    }
}
