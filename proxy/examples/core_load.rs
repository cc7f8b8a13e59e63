//! The proxy core under an access point's load, in virtual time: what one tracked flow costs in
//! memory, and what the timers of many flows and sessions cost per second.
//!
//! ```text
//! cargo run --release -p sidekick-proxy --example core_load -- [FLOWS] [PEMI_FLOWS] [SESSIONS]
//! ```
//!
//! Defaults: 100 000 unassisted flows, 100 000 PEMI flows and 4 096 Robin sessions with a 1 ms
//! quACK interval. Prints the resident memory per unassisted and per PEMI flow (RSS growth over
//! the flows, /proc/self/statm), then drives the sessions' upload packets for one virtual second
//! (each session one packet per millisecond) and reports the CPU time spent in `handle_timeout`
//! as a share of one core (CLOCK_THREAD_CPUTIME_ID: only this thread's work counts). The memory
//! budget is lifted so that every PEMI flow gets an engine (the budget reserves each engine's
//! buffer cap, not what an idle flow holds).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use sidekick_proxy::Time;

use sidekick_proxy::core::{CoreConfig, FrameMeta, ProxyCore};
use sidekick_proxy::engine::Direction;
use sidekick_proxy::flow::{FlowKey, FlowTableConfig};
use sidekick_proxy::packet::build_udp_ip;
use sidekick_proxy::pemi::PemiConfig;
use sidekick_proxy::robin::RobinEngineConfig;
use sidekick_proxy::session::{EngineConfig, StaticSessions};
use sidekick_proxy::sys::thread_cpu_time;

fn eth(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&build_udp_ip(src, dst, payload, 64));
    f
}

fn addr(net: u8, i: u32) -> SocketAddr {
    SocketAddr::from(([10, net, (i >> 8) as u8, i as u8], 1024 + (i >> 16) as u16))
}

fn rss_bytes() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn initial() -> Vec<u8> {
    let mut p = vec![0xc3, 0, 0, 0, 1, 8];
    p.extend_from_slice(&[7; 8]);
    let rest = 1200 - (p.len() + 4);
    p.extend_from_slice(&[0, 0, 0x40 | (rest >> 8) as u8, rest as u8]);
    p.resize(1200, 0);
    p
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u32>().unwrap());
    let flows = args.next().unwrap_or(100_000);
    let pemi_flows = args.next().unwrap_or(100_000);
    let sessions = args.next().unwrap_or(4096);
    let server: SocketAddr = "198.51.100.10:443".parse().unwrap();
    let cfg = CoreConfig {
        flows: FlowTableConfig {
            max_flows: (flows + pemi_flows + sessions) as usize + 1024,
            max_assisted: sessions as usize,
            ..FlowTableConfig::default()
        },
        memory_budget: usize::MAX,
        ..CoreConfig::default()
    };
    let mut core = ProxyCore::new(cfg, StaticSessions::new(), (1, 2)).with_pemi(Some(PemiConfig {
        enforce_delay: false,
        icmp_calibration: false,
        ..PemiConfig::default()
    }));
    let t0 = Time::ZERO;
    let meta = FrameMeta::default();

    let before = rss_bytes();
    for i in 0..flows {
        let f = eth(addr(1, i), server, b"0123456789abcdef");
        core.handle_frame(t0, Direction::FromClient, &f, meta);
    }
    let per_flow = (rss_bytes() - before) as f64 / f64::from(flows.max(1));
    let before = rss_bytes();
    let init = initial();
    for i in 0..pemi_flows {
        let f = eth(addr(2, i), server, &init);
        core.handle_frame(t0, Direction::FromClient, &f, meta);
    }
    let per_pemi = (rss_bytes() - before) as f64 / f64::from(pemi_flows.max(1));
    while core.poll_transmit().is_some() {}
    let pemi_engines = core
        .flows()
        .iter()
        .filter(|(_, e)| e.value.assistance.pemi().is_some())
        .count();
    println!(
        "flows {} ({pemi_engines} with a PEMI engine): RSS per unassisted flow {per_flow:.0} B, \
         per PEMI flow {per_pemi:.0} B",
        core.flows().len()
    );

    let robin = EngineConfig {
        robin: Some(RobinEngineConfig {
            every: Duration::from_millis(1),
            ..RobinEngineConfig::default()
        }),
        packrat: None,
        multicast_group: None,
    };
    let sk: SocketAddr = "10.0.0.2:50001".parse().unwrap();
    for i in 0..sessions {
        let key = FlowKey {
            client: addr(3, i),
            server,
        };
        core.sessions_mut().add(key, robin, sk);
    }
    core.handle_timeout(t0);
    let frames: Vec<Vec<u8>> = (0..sessions)
        .map(|i| eth(addr(3, i), server, &[0x41; 1200]))
        .collect();
    // Idle: every session exists with its 1 ms cadence, no packet flows.
    let fired_before = core.snapshot().timers_fired;
    let mut idle_cpu = Duration::ZERO;
    let ticks = 1000u32;
    for ms in 1..=ticks {
        let now = t0 + Duration::from_millis(u64::from(ms));
        let c = thread_cpu_time();
        core.handle_timeout(now);
        idle_cpu += thread_cpu_time().saturating_sub(c);
        while core.poll_transmit().is_some() {}
    }
    let virtual_s = f64::from(ticks) / 1000.0;
    let idle_fired = core.snapshot().timers_fired - fired_before;
    println!(
        "idle: {sessions} sessions at 1 ms and {} flows in all: timer work {:.3} ms CPU per \
         virtual second = {:.3} % of a core ({idle_fired} deadlines fired)",
        core.flows().len(),
        idle_cpu.as_secs_f64() * 1e3 / virtual_s,
        idle_cpu.as_secs_f64() / virtual_s * 100.0,
    );
    // Busy: every session's client sends one packet per millisecond, so every session quACKs
    // every millisecond (4 096 000 quACKs per second: the work is the quACKs themselves).
    let t1 = t0 + Duration::from_millis(u64::from(ticks));
    let fired_before = core.snapshot().timers_fired;
    let quacks_before = core.snapshot().robin.quacks;
    let mut timer_cpu = Duration::ZERO;
    let mut packet_cpu = Duration::ZERO;
    for ms in 1..=ticks {
        let now = t1 + Duration::from_millis(u64::from(ms));
        let c = thread_cpu_time();
        for f in &frames {
            core.handle_frame(now, Direction::FromClient, f, meta);
        }
        packet_cpu += thread_cpu_time().saturating_sub(c);
        let c = thread_cpu_time();
        core.handle_timeout(now);
        timer_cpu += thread_cpu_time().saturating_sub(c);
        while core.poll_transmit().is_some() {}
    }
    let snap = core.snapshot();
    let fired = snap.timers_fired - fired_before;
    let quacks = snap.robin.quacks - quacks_before;
    println!(
        "busy: timer work {:.1} ms CPU per virtual second = {:.1} % of a core ({fired} deadlines, \
         {quacks} quACKs: {:.0} ns per quACK); packets {:.0} ns each",
        timer_cpu.as_secs_f64() * 1e3 / virtual_s,
        timer_cpu.as_secs_f64() / virtual_s * 100.0,
        timer_cpu.as_secs_f64() * 1e9 / quacks.max(1) as f64,
        packet_cpu.as_secs_f64() * 1e9 / (f64::from(sessions) * f64::from(ticks)),
    );
}
