//! Link measurement by UDP probes (`sidekick-lab check-links`).
//!
//! Every namespace of the machine shares one CLOCK_MONOTONIC, so a probe carrying its send time
//! gives the *one-way* delay of one link direction directly (probes run between the two
//! endpoints of one link: server↔ap for wan, ap↔client for lan; no subtraction needed).
//!
//! - **Delay**: median one-way delay of the probes, compared with `delay + serialisation of the
//!   probe frame`; tolerance `max(10 %, 0.5 ms)`.
//! - **Loss**: the fraction of probes that never arrive. The probe count is chosen so that the
//!   10 % relative band equals three binomial standard deviations, `n = 9·(1-p)/(0.1²·p)`
//!   (times the Gilbert–Elliott variance factor below; clamped to 2 000..[`MAX_LOSS_PROBES`]); the check passes if `|p̂ - p| ≤ max(0.1·p, 3σ)` with
//!   `σ = sqrt(p(1-p)/n)`, inflated for Gilbert–Elliott by the Markov-chain variance factor
//!   `(1+λ)/(1-λ)`, `λ = 1 - p_gb - p_bg`. A lossless link passes with at most 0.1 % loss
//!   (kernel socket-buffer drops). Probes are paced at ≤ 25 % of the link rate (and ≤ 10 000 per second) so that no queue
//!   builds up.
//! - **Rate**: a blast of 1400-byte datagrams at 1.2× the link rate for one second; the rate is
//!   the Ethernet-frame bits received between the first and the last arrival divided by that
//!   time; tolerance 10 %.

use crate::spec::{LinkSpec, LossModel};
use crate::sys;
use crate::topo::{LabError, Topology};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Most loss probes sent per direction.
pub const MAX_LOSS_PROBES: usize = 100_000;
/// Ethernet + IPv4 + UDP header bytes.
pub const FRAME_OVERHEAD: usize = 14 + 20 + 8;
const PROBE_PAYLOAD: usize = 32;
const BLAST_PAYLOAD: usize = 1400;
const MAGIC: u32 = 0x534b_4c42;

/// Probe count for a loss probability (see the module docs).
pub fn loss_probes(spec: &LinkSpec) -> usize {
    let p = spec.loss.mean_loss();
    if p <= 0.0 {
        return 2000;
    }
    let n = (9.0 * (1.0 - p) / (0.01 * p) * burst_factor(&spec.loss)).ceil() as usize;
    n.clamp(2000, MAX_LOSS_PROBES)
}

/// Variance inflation of a loss count over independent draws: `(1+λ)/(1-λ)` with
/// `λ = 1 - p - r` for Gilbert–Elliott (the lag-k autocorrelation of the state decays as λ^k),
/// 1 for independent loss.
pub fn burst_factor(m: &LossModel) -> f64 {
    match *m {
        LossModel::GilbertElliott { p, r, .. } => {
            let l = (1.0 - p - r).clamp(0.0, 0.999);
            (1.0 + l) / (1.0 - l)
        }
        _ => 1.0,
    }
}

/// Loss tolerance (absolute) for `n` probes of a link with this spec.
pub fn loss_tolerance(spec: &LinkSpec, n: usize) -> f64 {
    let p = spec.loss.mean_loss();
    if p <= 0.0 {
        return 0.001;
    }
    let sigma = (p * (1.0 - p) / n as f64 * burst_factor(&spec.loss)).sqrt();
    (0.1 * p).max(3.0 * sigma)
}

/// Delay tolerance: `max(10 %, 0.5 ms)` of the expected delay.
pub fn delay_tolerance(expected: Duration) -> Duration {
    expected.mul_f64(0.1).max(Duration::from_micros(500))
}

/// One measured property of one link direction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    /// Link name (`wan`, `lan0`, ...).
    pub link: String,
    /// Direction (`down` = towards the client, `up` = towards the server).
    pub dir: String,
    /// `delay_ms`, `loss_pct` or `rate_mbps`.
    pub property: String,
    /// Configured value.
    pub expected: f64,
    /// Measured value.
    pub measured: f64,
    /// Allowed absolute deviation.
    pub tolerance: f64,
    /// Samples behind the measurement.
    pub samples: usize,
    /// Whether `|measured - expected| ≤ tolerance`.
    pub pass: bool,
    /// Measurement attempts of this direction (a failing direction is measured once more, to
    /// tell a transient CPU stall of the host from a wrong link).
    pub attempts: usize,
}

impl Check {
    fn new(
        link: &str,
        dir: &str,
        property: &str,
        expected: f64,
        measured: f64,
        tolerance: f64,
        samples: usize,
    ) -> Self {
        Check {
            link: link.into(),
            dir: dir.into(),
            property: property.into(),
            expected,
            measured,
            tolerance,
            samples,
            pass: (measured - expected).abs() <= tolerance,
            attempts: 1,
        }
    }
}

fn sock_in(ns: &str, addr: SocketAddr) -> Result<UdpSocket, LabError> {
    let s = sys::in_netns(ns, move || UdpSocket::bind(addr)).map_err(|e| LabError::Io {
        context: format!("UDP socket in {ns}"),
        source: e,
    })?;
    sys::set_socket_buffers(s.as_raw_fd(), 8 << 20);
    Ok(s)
}

/// Result of a probe train in one direction.
#[derive(Debug, Clone, Default)]
pub struct ProbeResult {
    /// Probes sent.
    pub sent: usize,
    /// One-way delays of the probes received.
    pub delays: Vec<Duration>,
}

/// Sends `n` probes from `src` (in namespace `src_ns`) to `dst` (in `dst_ns`), one every `gap`.
pub fn probe_train(
    src_ns: &str,
    src: SocketAddr,
    dst_ns: &str,
    dst: SocketAddr,
    n: usize,
    gap: Duration,
    drain: Duration,
) -> Result<ProbeResult, LabError> {
    let rx = sock_in(dst_ns, dst)?;
    let tx = sock_in(src_ns, src)?;
    let token: u32 = rand::random();
    let recv = std::thread::spawn(move || {
        sys::set_realtime(10);
        recv_probes(&rx, token, n, gap * n as u32 + drain)
    });
    sys::set_min_timer_slack();
    // The sender paces at up to ~10k packets/s: keep it on time on a loaded machine.
    let rt = sys::set_realtime(5);
    let start = Instant::now();
    let mut buf = [0u8; PROBE_PAYLOAD];
    let mut sent = 0;
    for i in 0..n {
        let target = gap * i as u32;
        let el = start.elapsed();
        if target > el {
            std::thread::sleep(target.saturating_sub(el));
        }
        buf[..4].copy_from_slice(&MAGIC.to_be_bytes());
        buf[4..8].copy_from_slice(&token.to_be_bytes());
        buf[8..12].copy_from_slice(&(i as u32).to_be_bytes());
        buf[12..20].copy_from_slice(&sys::monotonic_ns().to_be_bytes());
        if tx.send_to(&buf, dst).is_ok() {
            sent += 1;
        }
    }
    if rt {
        sys::set_normal();
    }
    let delays = recv
        .join()
        .map_err(|_| LabError::Config("probe receiver panicked".into()))?;
    Ok(ProbeResult { sent, delays })
}

fn recv_probes(rx: &UdpSocket, token: u32, n: usize, max_wait: Duration) -> Vec<Duration> {
    let _ = rx.set_read_timeout(Some(Duration::from_millis(20)));
    let deadline = Instant::now() + max_wait;
    let mut seen = vec![false; n];
    let mut delays = Vec::with_capacity(n);
    let mut buf = [0u8; 2048];
    while Instant::now() < deadline && delays.len() < n {
        let Ok(len) = rx.recv(&mut buf) else { continue };
        let now = sys::monotonic_ns();
        if len < 20 || buf[..4] != MAGIC.to_be_bytes() || buf[4..8] != token.to_be_bytes() {
            continue;
        }
        let seq = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&buf[12..20]);
        let sent = u64::from_be_bytes(ts);
        if let Some(s) = seen.get_mut(seq)
            && !*s
        {
            *s = true;
            delays.push(Duration::from_nanos(now.saturating_sub(sent)));
        }
    }
    delays
}

/// Blasts `duration` of 1400-byte datagrams at `offered_bps` and returns the received rate
/// (Ethernet-frame bits per second) and the number of datagrams received.
pub fn blast(
    src_ns: &str,
    src: SocketAddr,
    dst_ns: &str,
    dst: SocketAddr,
    offered_bps: u64,
    duration: Duration,
    drain: Duration,
) -> Result<(f64, usize), LabError> {
    let rx = sock_in(dst_ns, dst)?;
    let tx = sock_in(src_ns, src)?;
    let frame_bits = ((BLAST_PAYLOAD + FRAME_OVERHEAD) * 8) as f64;
    let gap = Duration::from_secs_f64(frame_bits / offered_bps.max(1) as f64);
    let n = (duration.as_secs_f64() / gap.as_secs_f64()).ceil() as usize;
    let token: u32 = rand::random();
    let recv = std::thread::spawn(move || {
        sys::set_realtime(10);
        let _ = rx.set_read_timeout(Some(Duration::from_millis(20)));
        let mut buf = [0u8; 2048];
        let (mut first, mut last, mut count) = (None, None, 0usize);
        let deadline = Instant::now() + duration + drain;
        let mut idle_since = Instant::now();
        while Instant::now() < deadline {
            match rx.recv(&mut buf) {
                Ok(len)
                    if len >= 8
                        && buf[..4] == MAGIC.to_be_bytes()
                        && buf[4..8] == token.to_be_bytes() =>
                {
                    let t = Instant::now();
                    first.get_or_insert(t);
                    last = Some(t);
                    count += 1;
                    idle_since = t;
                }
                _ => {
                    if count > 0 && idle_since.elapsed() > drain.min(Duration::from_millis(500)) {
                        break;
                    }
                }
            }
        }
        (first, last, count)
    });
    sys::set_min_timer_slack();
    // The sender paces at up to ~10k packets/s: keep it on time on a loaded machine.
    let rt = sys::set_realtime(5);
    let mut buf = vec![0u8; BLAST_PAYLOAD];
    buf[..4].copy_from_slice(&MAGIC.to_be_bytes());
    buf[4..8].copy_from_slice(&token.to_be_bytes());
    let start = Instant::now();
    for i in 0..n {
        let target = gap * i as u32;
        let el = start.elapsed();
        if target > el + Duration::from_micros(200) {
            std::thread::sleep(target.saturating_sub(el));
        }
        let _ = tx.send_to(&buf, dst);
    }
    if rt {
        sys::set_normal();
    }
    let (first, last, count) = recv
        .join()
        .map_err(|_| LabError::Config("blast receiver panicked".into()))?;
    let rate = match (first, last) {
        (Some(f), Some(l)) if count > 1 && l > f => {
            (count - 1) as f64 * frame_bits / (l - f).as_secs_f64()
        }
        _ => 0.0,
    };
    Ok((rate, count))
}

/// Measures one direction of one link and returns its delay, loss and rate checks.
#[allow(clippy::too_many_arguments)]
pub fn check_direction(
    link: &str,
    dir: &str,
    spec: &LinkSpec,
    src_ns: &str,
    src: SocketAddr,
    dst_ns: &str,
    dst: SocketAddr,
    check_rate: bool,
) -> Result<Vec<Check>, LabError> {
    let mut out = Vec::new();
    let n = loss_probes(spec);
    let probe_bits = ((PROBE_PAYLOAD + FRAME_OVERHEAD) * 8) as f64;
    let max_pps = if spec.rate_bps == 0 {
        10_000.0
    } else {
        (0.25 * spec.rate_bps as f64 / probe_bits).min(10_000.0)
    };
    let gap = Duration::from_secs_f64(1.0 / max_pps);
    let drain = spec.delay * 2 + Duration::from_millis(300);
    let r = probe_train(src_ns, src, dst_ns, dst, n, gap, drain)?;
    let mut d: Vec<f64> = r.delays.iter().map(|x| x.as_secs_f64() * 1e3).collect();
    let expected = spec.delay + spec.serialization(PROBE_PAYLOAD + FRAME_OVERHEAD);
    let med = crate::stats::summarize(&d).map_or(f64::NAN, |s| s.median);
    d.clear();
    out.push(Check::new(
        link,
        dir,
        "delay_ms",
        expected.as_secs_f64() * 1e3,
        med,
        delay_tolerance(expected).as_secs_f64() * 1e3,
        r.delays.len(),
    ));
    let loss = 1.0 - r.delays.len() as f64 / r.sent.max(1) as f64;
    out.push(Check::new(
        link,
        dir,
        "loss_pct",
        spec.loss.mean_loss() * 100.0,
        loss * 100.0,
        loss_tolerance(spec, r.sent) * 100.0,
        r.sent,
    ));
    if check_rate && spec.rate_bps > 0 {
        let offered = spec.rate_bps + spec.rate_bps / 5;
        let (rate, count) = blast(
            src_ns,
            src,
            dst_ns,
            dst,
            offered,
            Duration::from_secs(1),
            drain,
        )?;
        let exp = spec.rate_bps as f64 / 1e6;
        out.push(Check::new(
            link,
            dir,
            "rate_mbps",
            exp,
            rate / 1e6,
            0.1 * exp,
            count,
        ));
    }
    Ok(out)
}

/// [`check_direction`], measured a second time if any property failed the first time; the
/// second result is kept (with `attempts = 2`).
#[allow(clippy::too_many_arguments)]
fn check_direction_retry(
    link: &str,
    dir: &str,
    spec: &LinkSpec,
    src_ns: &str,
    src: SocketAddr,
    dst_ns: &str,
    dst: SocketAddr,
    check_rate: bool,
) -> Result<Vec<Check>, LabError> {
    let first = check_direction(link, dir, spec, src_ns, src, dst_ns, dst, check_rate)?;
    if first.iter().all(|c| c.pass) {
        return Ok(first);
    }
    tracing::warn!(
        "{link} {dir}: out of tolerance, measuring again: {}",
        format_checks(&first)
    );
    let mut second = check_direction(link, dir, spec, src_ns, src, dst_ns, dst, check_rate)?;
    for c in &mut second {
        c.attempts = 2;
    }
    Ok(second)
}

/// Measures every link of a topology in both directions.
pub fn check_links(
    topo: &Topology,
    wan: &LinkSpec,
    lan: &LinkSpec,
    check_rate: bool,
) -> Result<Vec<Check>, LabError> {
    let mut out = Vec::new();
    let port = |p: u16| p;
    let srv = SocketAddr::from((Topology::server_addr(), port(47001)));
    let apw = SocketAddr::from((Topology::ap_wan_addr(), port(47002)));
    let (s_ns, ap_ns) = (topo.ns_server(), topo.ns_ap());
    out.extend(check_direction_retry(
        "wan", "down", wan, &s_ns, srv, &ap_ns, apw, check_rate,
    )?);
    out.extend(check_direction_retry(
        "wan", "up", wan, &ap_ns, apw, &s_ns, srv, check_rate,
    )?);
    for i in 0..topo.clients() {
        let apl = SocketAddr::from((Topology::ap_lan_addr(i), port(47003)));
        let cli = SocketAddr::from((Topology::client_addr(i), port(47004)));
        let (c_ns, name) = (topo.ns_client(i), format!("lan{i}"));
        out.extend(check_direction_retry(
            &name, "down", lan, &ap_ns, apl, &c_ns, cli, check_rate,
        )?);
        out.extend(check_direction_retry(
            &name, "up", lan, &c_ns, cli, &ap_ns, apl, check_rate,
        )?);
    }
    Ok(out)
}

/// Formats checks as a table.
pub fn format_checks(checks: &[Check]) -> String {
    let mut s = format!(
        "{:<6} {:<5} {:<10} {:>10} {:>10} {:>9} {:>8}  result\n",
        "link", "dir", "property", "expected", "measured", "tol", "samples"
    );
    for c in checks {
        let _ = writeln!(
            s,
            "{:<6} {:<5} {:<10} {:>10.3} {:>10.3} {:>9.3} {:>8}  {}",
            c.link,
            c.dir,
            c.property,
            c.expected,
            c.measured,
            c.tolerance,
            c.samples,
            if c.pass { "ok" } else { "FAIL" }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_counts_and_tolerances() {
        let mut s = LinkSpec::default();
        assert_eq!(loss_probes(&s), 2000);
        assert_eq!(loss_tolerance(&s, 2000), 0.001);
        s.loss = LossModel::Random { p: 0.04 };
        let n = loss_probes(&s);
        assert_eq!(n, 21_600);
        // With that n, the 10 % band is three standard deviations.
        let tol = loss_tolerance(&s, n);
        assert!((tol - 0.004).abs() < 1e-6, "{tol}");
        s.loss = LossModel::Random { p: 0.01 };
        assert_eq!(loss_probes(&s), 89_100);
        s.loss = LossModel::GilbertElliott {
            p: 0.00069,
            r: 0.0693,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        assert_eq!(loss_probes(&s), MAX_LOSS_PROBES);
        assert!(loss_tolerance(&s, MAX_LOSS_PROBES) > 0.1 * s.loss.mean_loss());
        assert_eq!(
            delay_tolerance(Duration::from_millis(1)),
            Duration::from_micros(500)
        );
        assert_eq!(
            delay_tolerance(Duration::from_millis(50)),
            Duration::from_millis(5)
        );
    }

    #[test]
    fn check_pass_rule() {
        assert!(Check::new("wan", "up", "delay_ms", 25.0, 25.4, 2.5, 10).pass);
        assert!(!Check::new("wan", "up", "delay_ms", 25.0, 28.0, 2.5, 10).pass);
        assert!(!Check::new("wan", "up", "delay_ms", 25.0, f64::NAN, 2.5, 0).pass);
    }
}
