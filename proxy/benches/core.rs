//! Per-packet and per-eACK cost of the proxy core (issue 7 "Performance"; Packrat (CoNEXT '26) §7.3.4 reports
//! 1002 cycles per data packet and 27,716 per eACK on 2.3 GHz; Sidekick (NSDI '24) Table 6).
//!
//! Targets: ≤ 150 ns per data packet, ≤ 5 µs per eACK at the Packrat WiFi setting (160 symbols,
//! 48 kB cache, one eACK per 16 packets, 4 % loss). Cycles are printed as ns × the CPU clock read
//! from /proc/cpuinfo. Time is the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so time spent
//! descheduled on a shared machine is not counted.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Duration;

use sidekick_proxy::Time;

use criterion::{Criterion, criterion_group, criterion_main};
use eack::ReceiverEack;
use sidekick_proxy::core::{CoreConfig, FrameMeta, ProxyCore};
use sidekick_proxy::engine::{Action, Direction};
use sidekick_proxy::flow::FlowKey;
use sidekick_proxy::packet::build_udp_ip;
use sidekick_proxy::packrat::{PackratEngine, PackratEngineConfig};
use sidekick_proxy::pemi::PemiConfig;
use sidekick_proxy::robin::RobinEngineConfig;
use sidekick_proxy::session::{EngineConfig, StaticSessions};
use sidekick_proxy::sys::thread_cpu_time;

fn eth(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(ip);
    f
}

fn ident(i: u32) -> u32 {
    i.wrapping_mul(0x9e37_79b9) ^ 0x5bd1_e995
}

fn frames(src: SocketAddr, dst: SocketAddr, n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut p = vec![0x40u8; 1196];
            p.extend_from_slice(&ident(i).to_le_bytes());
            eth(&build_udp_ip(src, dst, &p, 64))
        })
        .collect()
}

fn core_with(
    engines: EngineConfig,
    flow: FlowKey,
    background_flows: u32,
) -> ProxyCore<StaticSessions> {
    let mut core = ProxyCore::new(CoreConfig::default(), StaticSessions::new(), (11, 22));
    let now = Time::ZERO;
    let sk: SocketAddr = "10.0.0.2:50001".parse().unwrap();
    core.sessions_mut().add(flow, engines, sk);
    core.handle_timeout(now);
    // A realistically populated table.
    for i in 0..background_flows {
        let c = SocketAddr::from(([10, 2, (i >> 8) as u8, i as u8], 40000));
        let f = eth(&build_udp_ip(c, flow.server, b"0123456789", 64));
        core.handle_frame(now, Direction::FromClient, &f, FrameMeta::default());
    }
    assert_eq!(core.flows().assisted_len(), 1);
    core
}

fn per_packet(c: &mut Criterion) {
    let client: SocketAddr = "10.0.0.2:50000".parse().unwrap();
    let server: SocketAddr = "198.51.100.10:443".parse().unwrap();
    let flow = FlowKey { client, server };
    let up = frames(client, server, 1024);
    let down = frames(server, client, 1024);
    let mut g = c.benchmark_group("per_packet");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));

    let robin = EngineConfig {
        robin: Some(RobinEngineConfig::default()),
        packrat: None,
        multicast_group: None,
    };
    let mut core = core_with(robin, flow, 10_000);
    let now = Time::ZERO;
    let mut i = 0usize;
    g.bench_function("classify_lookup_robin_insert", |b| {
        b.iter_custom(|iters| {
            let t = thread_cpu_time();
            for _ in 0..iters {
                i = (i + 1) & 1023;
                let v = core.handle_frame(
                    now,
                    Direction::FromClient,
                    black_box(&up[i]),
                    FrameMeta::default(),
                );
                while core.poll_transmit().is_some() {}
                black_box(v);
            }
            thread_cpu_time().saturating_sub(t)
        });
    });
    let s = core.snapshot();
    // (Skipped when a filter excluded the benchmark.)
    assert!(s.frames <= 10_000 || s.robin.inserted > 0);

    let packrat = EngineConfig {
        robin: None,
        packrat: Some(PackratEngineConfig::default()),
        multicast_group: None,
    };
    let mut core = core_with(packrat, flow, 10_000);
    g.bench_function("classify_lookup_packrat_cache_insert", |b| {
        b.iter_custom(|iters| {
            let t = thread_cpu_time();
            for _ in 0..iters {
                i = (i + 1) & 1023;
                let v = core.handle_frame(
                    now,
                    Direction::ToClient,
                    black_box(&down[i]),
                    FrameMeta::default(),
                );
                while core.poll_transmit().is_some() {}
                black_box(v);
            }
            thread_cpu_time().saturating_sub(t)
        });
    });
    let s = core.snapshot();
    assert!(s.frames <= 10_000 || s.packrat.cached > 0);

    // Steady state of the WiFi setting: an eACK acknowledges the cache every 16 packets, so
    // packets leave the cache on acknowledgement (free) instead of by optimistic eviction
    // (which encodes them). Timed: the 16 data packets only.
    let packrat = EngineConfig {
        robin: None,
        packrat: Some(PackratEngineConfig::default()),
        multicast_group: None,
    };
    let mut core = core_with(packrat, flow, 10_000);
    let mut rx = ReceiverEack::new(160);
    let mut wire = Vec::new();
    // Each 16-packet block is timed by two reads of the thread CPU clock (a system call, a few
    // hundred ns): their own cost is measured once and subtracted from every block, so the
    // figure is the packets' cost, comparable with the cases timed over whole batches.
    let clock_pair = clock_pair_cost();
    g.bench_function("classify_lookup_packrat_cache_insert_acked", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let t = thread_cpu_time();
                for _ in 0..16 {
                    i = (i + 1) & 1023;
                    let v = core.handle_frame(
                        now,
                        Direction::ToClient,
                        black_box(&down[i]),
                        FrameMeta::default(),
                    );
                    black_box(v);
                }
                total += thread_cpu_time()
                    .saturating_sub(t)
                    .saturating_sub(clock_pair);
                done += 16;
                for j in 0..16 {
                    let k = (i + 1024 - j) & 1023;
                    rx.on_receive(ident(k as u32));
                }
                wire.clear();
                rx.encode(8, &mut wire).unwrap();
                core.sessions_mut().eack(0, wire.clone());
                core.handle_timeout(now);
                while core.poll_transmit().is_some() {}
            }
            total.mul_f64(iters as f64 / done as f64)
        });
    });
    let snap = core.snapshot();
    assert!(
        snap.frames <= 10_000 || snap.packrat.evicted_acked > 0,
        "{snap:?}"
    );

    let mut core = core_with(EngineConfig::default(), flow, 10_000);
    let other = frames("10.0.0.3:1".parse().unwrap(), server, 1);
    g.bench_function("classify_lookup_unassisted", |b| {
        b.iter_custom(|iters| {
            let t = thread_cpu_time();
            for _ in 0..iters {
                let v = core.handle_frame(
                    now,
                    Direction::FromClient,
                    black_box(&other[0]),
                    FrameMeta::default(),
                );
                while core.poll_transmit().is_some() {}
                black_box(v);
            }
            thread_cpu_time().saturating_sub(t)
        });
    });
    g.finish();
}

/// A QUIC long-header packet of type `ty` (0 Initial, 2 Handshake) with `len` payload bytes.
fn long_header(ty: u8, len: usize) -> Vec<u8> {
    let mut p = vec![0xc0 | (ty << 4), 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0];
    if ty == 0 {
        p.push(0);
    }
    p.push(0x40 | (len >> 8) as u8);
    p.push(len as u8);
    p.extend(std::iter::repeat_n(0xaa, len));
    p
}

/// PEMI's per-packet cost beside Robin's and Packrat's (issue 24 point 10; PEMI §6.5 reports its
/// CPU overhead per packet): a flow PEMI took over at its handshake (transparent mode, 10 000
/// other flows in the table), fed the pattern of a download: bursts of 10 server datagrams
/// (1 200 bytes, 0.5 ms apart, every 30 ms) and a 50-byte client reply to each one client RTT
/// (10 ms, as the handshake showed) later.
/// Timed: `handle_frame` of every data packet and reply, PEMI's timers when due, and draining
/// the output; the figure is per frame (data and replies alike). The clock is synthetic, so the
/// flowlets, the reply matching and the RTT filters run as they would at that pace.
fn per_packet_pemi(c: &mut Criterion) {
    let client: SocketAddr = "10.0.0.2:50000".parse().unwrap();
    let server: SocketAddr = "198.51.100.10:443".parse().unwrap();
    let mut g = c.benchmark_group("per_packet");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let pemi = PemiConfig {
        // Timing-only inference (PEMI §4.2–4.3): these replies carry no ACK ranges.
        gap_signal: false,
        ..PemiConfig::default()
    };
    let mut core = ProxyCore::new(CoreConfig::default(), StaticSessions::new(), (11, 22))
        .with_pemi(Some(pemi));
    let t0 = Time::ZERO;
    for i in 0..10_000u32 {
        let c = SocketAddr::from(([10, 2, (i >> 8) as u8, i as u8], 40000));
        let f = eth(&build_udp_ip(c, server, b"0123456789", 64));
        core.handle_frame(t0, Direction::FromClient, &f, FrameMeta::default());
    }
    let frame = |src, dst, p: &[u8]| eth(&build_udp_ip(src, dst, p, 64));
    core.handle_frame(
        t0,
        Direction::FromClient,
        &frame(client, server, &long_header(0, 1180)),
        FrameMeta::default(),
    );
    let mut sh = long_header(0, 150);
    sh.extend(long_header(2, 1000));
    core.handle_frame(
        t0 + Duration::from_millis(40),
        Direction::ToClient,
        &frame(server, client, &sh),
        FrameMeta::default(),
    );
    core.handle_frame(
        t0 + Duration::from_millis(50),
        Direction::FromClient,
        &frame(client, server, &long_header(2, 60)),
        FrameMeta::default(),
    );
    assert!(
        core.snapshot().pemi.handshakes > 0,
        "PEMI took the flow at its handshake"
    );
    // One 30 ms cycle: 10 data packets and 10 replies, in time order.
    let data: Vec<Vec<u8>> = (0..1024u32)
        .map(|i| {
            let mut p = vec![0x41u8; 1200];
            p[1..5].copy_from_slice(&i.to_be_bytes());
            frame(server, client, &p)
        })
        .collect();
    let reply = frame(client, server, &[0x41u8; 50]);
    let mut cycle: Vec<(Duration, Direction, usize)> = Vec::new();
    for i in 0..10u64 {
        let t = Duration::from_micros(500 * i);
        cycle.push((t, Direction::ToClient, i as usize));
        cycle.push((t + Duration::from_millis(10), Direction::FromClient, 0));
    }
    cycle.sort_by_key(|e| e.0);
    let mut start = t0 + Duration::from_millis(100);
    let mut n = 0usize;
    let run_cycle = |core: &mut ProxyCore<StaticSessions>, start: Time, n: &mut usize| {
        for &(dt, dir, k) in &cycle {
            let now = start + dt;
            let f = match dir {
                Direction::ToClient => {
                    *n = (*n + 1) & 1023;
                    &data[(*n + k) & 1023]
                }
                Direction::FromClient => &reply,
            };
            let v = core.handle_frame(now, dir, black_box(f), FrameMeta::default());
            if core.poll_timeout().is_some_and(|d| d <= now) {
                core.handle_timeout(now);
            }
            while core.poll_transmit().is_some() {}
            black_box(v);
        }
    };
    g.bench_function("classify_lookup_pemi_download", |b| {
        b.iter_custom(|iters| {
            let cycles = iters.div_ceil(cycle.len() as u64);
            let t = thread_cpu_time();
            for _ in 0..cycles {
                run_cycle(&mut core, start, &mut n);
                start += Duration::from_millis(30);
            }
            thread_cpu_time()
                .saturating_sub(t)
                .mul_f64(iters as f64 / (cycles * cycle.len() as u64) as f64)
        });
    });
    let s = core.snapshot();
    if s.frames > 10_010 {
        eprintln!(
            "pemi: {} flowlets, {} replies assigned, {} excluded, {} RTT samples over {} frames",
            s.pemi.flowlets,
            s.pemi.replies_assigned,
            s.pemi.replies_excluded,
            s.pemi.rtt_samples,
            s.frames
        );
        assert!(s.pemi.flowlets > 0, "{:?}", s.pemi);
    }
    g.finish();
}

/// One eACK cycle at the Packrat WiFi setting: 16 packets forwarded (1 in 25 lost), the client's
/// eACK sized for its missing count; timed: the proxy's eACK processing (delta encode, decode,
/// cache update, retransmissions).
fn per_eack(c: &mut Criterion) {
    let mut g = c.benchmark_group("per_eack");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    g.bench_function("packrat_wifi_160sym_48kB_16pkt", |b| {
        b.iter_custom(|iters| {
            let mut e = PackratEngine::new(PackratEngineConfig::default());
            let mut rx = ReceiverEack::new(160);
            let mut out = Vec::new();
            let mut frame = vec![0u8; 1250];
            let mut seq = 0u32;
            let mut missing = 0usize;
            let mut wire = Vec::new();
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                for _ in 0..16 {
                    let id = ident(seq);
                    frame[1246..].copy_from_slice(&id.to_le_bytes());
                    e.cache_packet(&id.to_le_bytes(), &frame);
                    if seq % 25 == 7 {
                        missing += 1;
                    } else {
                        rx.on_receive(id);
                    }
                    seq += 1;
                }
                wire.clear();
                rx.encode_for(missing.max(1), 0.99, &mut wire);
                out.clear();
                let failed = e.counters.eacks_failed;
                let t = thread_cpu_time();
                e.on_eack(black_box(&wire), &mut out);
                total += thread_cpu_time().saturating_sub(t);
                // Retransmissions arrive at the client.
                for a in &out {
                    if let Action::Inject { frame, .. } = a {
                        let id = u32::from_le_bytes(frame[frame.len() - 4..].try_into().unwrap());
                        rx.on_receive(id);
                        missing = missing.saturating_sub(1);
                    }
                }
                if e.counters.eacks_failed > failed {
                    rx.reset(e.epoch());
                    missing = 0;
                }
            }
            assert!(e.counters.eacks_decoded > 0);
            total
        });
    });
    g.finish();
    if let Some(mhz) = cpu_mhz() {
        println!("cpu clock {mhz:.0} MHz: cycles = ns × {:.3}", mhz / 1000.0);
    }
}

fn cpu_mhz() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    s.lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
}

/// Median CPU time of two back-to-back reads of the thread CPU clock (what timing one block adds).
fn clock_pair_cost() -> Duration {
    let mut v: Vec<Duration> = (0..10_001)
        .map(|_| {
            let t = thread_cpu_time();
            thread_cpu_time().saturating_sub(t)
        })
        .collect();
    v.sort_unstable();
    let m = v[v.len() / 2];
    eprintln!("thread CPU clock: two reads cost {m:?} (median), subtracted per 16-packet block");
    m
}

criterion_group!(benches, per_packet, per_packet_pemi, per_eack);
criterion_main!(benches);
