//! The userspace link element: a thread inside a link namespace that forwards frames between
//! two veth ends through AF_PACKET sockets, each direction through its own [`LinkDirection`].
//!
//! Timers: the thread runs at SCHED_FIFO priority and sleeps in `ppoll` (nanosecond timeout,
//! timer slack set to 1 ns) until
//! [`SPIN`] before the next frame is due, then busy-polls. The lateness of every delivered
//! frame (send time minus due time) is recorded and reported in [`ElementStats`].

use crate::csum::fill_l4_checksum;
use crate::droplog::{DropCause, DropLog};
use crate::link::{DirCounters, LinkDirection, Verdict};
use crate::spec::LinkSpec;
use crate::sys::{self, PacketSocket};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Busy-poll window before a frame is due.
pub const SPIN: Duration = Duration::from_micros(50);
/// Idle poll timeout (bounds how long a stop request waits).
const IDLE: Duration = Duration::from_millis(20);
/// Largest frame accepted (GSO/GRO super-frames included).
const MAX_FRAME: usize = 65_536;

/// Histogram of timer lateness with 1 µs buckets up to 20 ms, plus an overflow count.
#[derive(Debug, Clone)]
pub struct Lateness {
    buckets: Vec<u64>,
    overflow: u64,
    max_ns: u64,
    n: u64,
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            buckets: vec![0; 20_000],
            overflow: 0,
            max_ns: 0,
            n: 0,
        }
    }
}

impl Lateness {
    /// Records one lateness sample.
    pub fn record(&mut self, late: Duration) {
        let ns = late.as_nanos() as u64;
        self.n += 1;
        self.max_ns = self.max_ns.max(ns);
        match self.buckets.get_mut((ns / 1000) as usize) {
            Some(b) => *b += 1,
            None => self.overflow += 1,
        }
    }

    /// The `q`-quantile in microseconds (bucket upper bound); 0 when empty.
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let target = ((self.n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b;
            if seen >= target {
                return (i + 1) as f64;
            }
        }
        self.max_ns as f64 / 1000.0
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.n
    }
}

/// What an element did over its lifetime.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ElementStats {
    /// Counters of the a→b direction.
    pub a_to_b: DirCounters,
    /// Counters of the b→a direction.
    pub b_to_a: DirCounters,
    /// Frames whose partial checksum the element filled in.
    pub csum_filled: u64,
    /// Receive errors (including truncated super-frames).
    pub recv_errors: u64,
    /// Send errors (frame lost at the element's egress).
    pub send_errors: u64,
    /// Median timer lateness of delivered frames, µs.
    pub late_p50_us: f64,
    /// 99th percentile timer lateness, µs.
    pub late_p99_us: f64,
    /// Largest timer lateness, µs.
    pub late_max_us: f64,
    /// Frames the lateness figures cover.
    pub late_samples: u64,
}

/// A running link element; stop it with [`ElementHandle::stop`] (or drop it).
#[derive(Debug)]
pub struct ElementHandle {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<ElementStats>>,
}

impl ElementHandle {
    /// Stops the element and returns its statistics.
    pub fn stop(mut self) -> ElementStats {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> ElementStats {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for ElementHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop_inner();
        }
    }
}

/// Starts an element in namespace `ns` forwarding between interfaces `a` and `b`, both
/// directions with `spec`; `seed` seeds the loss draws (direction b→a uses `seed + 1`).
pub fn spawn(
    ns: &str,
    a: &str,
    b: &str,
    spec: LinkSpec,
    seed: u64,
) -> std::io::Result<ElementHandle> {
    spawn_asymmetric(ns, a, b, spec, spec, seed)
}

/// Like [`spawn`] with a different spec per direction.
pub fn spawn_asymmetric(
    ns: &str,
    a: &str,
    b: &str,
    a_to_b: LinkSpec,
    b_to_a: LinkSpec,
    seed: u64,
) -> std::io::Result<ElementHandle> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let (ns, a, b) = (ns.to_string(), a.to_string(), b.to_string());
    let stop2 = stop.clone();
    let thread = std::thread::Builder::new()
        .name(format!("link-{ns}"))
        .spawn(move || {
            let opened = sys::enter_netns(&ns)
                .and_then(|()| Ok((PacketSocket::open(&a)?, PacketSocket::open(&b)?)));
            let (sa, sb) = match opened {
                Ok(s) => {
                    let _ = tx.send(Ok(()));
                    s
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return ElementStats::default();
                }
            };
            sys::set_min_timer_slack();
            if !sys::set_realtime(20) {
                tracing::warn!("link element: no real-time priority; timing may suffer under load");
            }
            let log = crate::droplog::DropLog::from_env(&ns);
            run(
                &sa,
                &sb,
                log,
                LinkDirection::new(a_to_b, seed).with_drops(a_to_b.drop.down),
                LinkDirection::new(b_to_a, seed.wrapping_add(1)).with_drops(b_to_a.drop.up),
                &stop2,
            )
        })?;
    match rx.recv() {
        Ok(Ok(())) => Ok(ElementHandle {
            stop,
            thread: Some(thread),
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => Err(std::io::Error::other("link element thread died")),
    }
}

fn run(
    sa: &PacketSocket,
    sb: &PacketSocket,
    mut log: DropLog,
    mut ab: LinkDirection,
    mut ba: LinkDirection,
    stop: &AtomicBool,
) -> ElementStats {
    let start = Instant::now();
    let mut buf = vec![0u8; MAX_FRAME];
    let mut stats = ElementStats::default();
    let mut late = Lateness::default();
    let fds = [sa.raw_fd(), sb.raw_fd()];
    while !stop.load(Ordering::Relaxed) {
        for (sock, dir, a_to_b) in [(sa, &mut ab, true), (sb, &mut ba, false)] {
            for _ in 0..64 {
                match sock.recv(&mut buf) {
                    Ok(Some(info)) => {
                        // Stamped when read, never before: a frame that arrived while earlier
                        // ones were handled must not be given an earlier arrival (its delay
                        // would come out short by that time; seen as 138 µs under load).
                        let now = start.elapsed();
                        let mut frame = buf[..info.len].to_vec();
                        if info.csum_not_ready && fill_l4_checksum(&mut frame).is_ok() {
                            stats.csum_filled += 1;
                        }
                        let hash = log.hash(&frame);
                        let cause = match dir.offer(now, frame) {
                            Verdict::Queued => None,
                            Verdict::Lost | Verdict::Rule => Some(DropCause::Loss),
                            Verdict::QueueFull => Some(DropCause::Queue),
                        };
                        if let (Some(c), Some(h)) = (cause, hash) {
                            log.record(now, a_to_b, c, h);
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        stats.recv_errors += 1;
                        tracing::debug!("link element receive: {e}");
                        break;
                    }
                }
            }
        }
        let now = start.elapsed();
        for (dir, out) in [(&mut ab, sb), (&mut ba, sa)] {
            while let Some((due, frame)) = dir.pop_due_with_time(now) {
                late.record(now.saturating_sub(due));
                if out.send(&frame).is_err() {
                    stats.send_errors += 1;
                }
            }
        }
        let next = match (ab.next_due(), ba.next_due()) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        let now = start.elapsed();
        let wait = match next {
            None => Some(IDLE),
            Some(d) if d > now + SPIN => Some(d.saturating_sub(now + SPIN).min(IDLE)),
            Some(_) => None, // busy-poll the last stretch
        };
        if let Some(w) = wait {
            let _ = sys::poll_readable(&fds, w);
        }
    }
    log.flush();
    stats.a_to_b = ab.counters();
    stats.b_to_a = ba.counters();
    stats.late_p50_us = late.quantile_us(0.5);
    stats.late_p99_us = late.quantile_us(0.99);
    stats.late_max_us = late.max_ns as f64 / 1000.0;
    stats.late_samples = late.count();
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_quantiles() {
        let mut l = Lateness::default();
        for us in 0..100u64 {
            l.record(Duration::from_micros(us));
        }
        assert_eq!(l.count(), 100);
        assert_eq!(l.quantile_us(0.5), 50.0);
        assert_eq!(l.quantile_us(0.99), 99.0);
        l.record(Duration::from_secs(1));
        assert_eq!(l.quantile_us(1.0), 1_000_000.0);
        assert_eq!(Lateness::default().quantile_us(0.5), 0.0);
    }
}
