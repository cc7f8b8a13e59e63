//! Per-operation cost of the SDK's engines: a Robin quACK decode (Sidekick (NSDI '24) Table 3 setting:
//! n = 25 outstanding, t = 10, 2 missing), reading a packet number through the lens, a Packrat
//! receive, and a PACUBIC ACK.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use quack::PowerSumQuack;
use sidekick::lens::{DatagramDirection, HeaderProtection, PacketNumberLens, Role, Suite};
use sidekick::packrat::{PackratReceiver, PackratReceiverConfig};
use sidekick::pacubic::{Pacubic, PacubicConfig};
use sidekick::robin::{RobinSender, RobinSenderConfig};

fn dg(i: u32) -> Vec<u8> {
    let mut d = vec![0x17u8; 1200];
    d[1196..].copy_from_slice(&i.wrapping_mul(2_654_435_761).to_le_bytes());
    d
}

fn robin(c: &mut Criterion) {
    let t0 = Instant::now();
    let datagrams: Vec<Vec<u8>> = (0..25).map(dg).collect();
    let mut proxy = PowerSumQuack::<u32>::new(10);
    for (i, d) in datagrams.iter().enumerate() {
        if i != 7 && i != 13 {
            proxy.insert(u32::from_le_bytes(d[1196..].try_into().unwrap()));
        }
    }
    let wire = proxy.to_bytes();
    let empty = PowerSumQuack::<u32>::new(10).to_bytes();
    c.bench_function("robin_on_quack_n25_t10_m2", |b| {
        b.iter_batched(
            || {
                let mut r = RobinSender::new(RobinSenderConfig {
                    threshold: 10,
                    ..RobinSenderConfig::default()
                });
                r.on_quack(t0, &empty).unwrap();
                for (i, d) in datagrams.iter().enumerate() {
                    r.on_sent(t0, d, Some(i as u64));
                }
                r
            },
            |mut r| {
                r.on_quack(t0 + Duration::from_millis(5), black_box(&wire))
                    .unwrap();
                r
            },
            BatchSize::SmallInput,
        );
    });
}

fn lens(c: &mut Criterion) {
    let secret = [9u8; 48];
    let hp = HeaderProtection::from_secret(Suite::Aes256Gcm, &secret).unwrap();
    let mut pkt = vec![0x40u8; 1200];
    pkt[1..9].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let mask = hp.mask(&pkt[9 + 4..9 + 20]).unwrap();
    pkt[0] ^= mask[0] & 0x1f;
    let mut lens = PacketNumberLens::new(Role::Client);
    lens.set_secret(DatagramDirection::Incoming, &secret);
    lens.set_dcid_len(DatagramDirection::Incoming, 8);
    c.bench_function("lens_observe_short_header_aes256", |b| {
        b.iter(|| lens.observe(DatagramDirection::Incoming, black_box(&pkt)));
    });
}

fn packrat(c: &mut Criterion) {
    let t0 = Instant::now();
    let datagrams: Vec<Vec<u8>> = (0..1000).map(dg).collect();
    c.bench_function("packrat_on_datagram_1000_in_order", |b| {
        b.iter_batched(
            || PackratReceiver::new(PackratReceiverConfig::default()),
            |mut rx| {
                for (i, d) in datagrams.iter().enumerate() {
                    rx.on_datagram(t0, d.clone(), Some(i as u64));
                    let _ = rx.poll_ready().count();
                }
                rx
            },
            BatchSize::SmallInput,
        );
    });
}

fn pacubic(c: &mut Criterion) {
    let t0 = Instant::now();
    let mut cc = Pacubic::new(PacubicConfig {
        initial_window: 120_000,
        ..PacubicConfig::default()
    });
    cc.on_congestion_event(t0, t0, sidekick::pacubic::CongestionSource::Quack);
    let mut now = t0;
    c.bench_function("pacubic_on_ack", |b| {
        b.iter(|| {
            now += Duration::from_micros(10);
            cc.on_ack(now, now, 1200, Duration::from_millis(20));
        });
    });
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! { name = benches; config = config(); targets = robin, lens, packrat, pacubic }
criterion_main!(benches);
