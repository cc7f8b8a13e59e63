//! The bulk transfer over kernel TCP: the baseline the papers compare QUIC against (Sidekick
//! (NSDI '24) §5.1 and Fig. 6 with PEPsal, Packrat (CoNEXT '26) Fig. 5a, PEMI's split-TCP
//! comparison).
//!
//! The application protocol is the raw-stream one of the QUIC transfer ([`super`]) on one TCP
//! connection: the client writes a [`Request`]; for a download the server writes the payload, the
//! client half-closes once it holds all of it and the server answers with a [`Summary`]; for an
//! upload the client writes the payload and half-closes, and the server answers with the summary
//! once it has read everything. Goodput is measured as for QUIC (request → last payload byte at
//! the receiving application). The data sender's counters come from the kernel (`TCP_INFO`):
//! `sent_packets` = segments sent, `lost_packets` = `retransmissions` = segments retransmitted
//! (TCP resends what it declares lost, so the two counts are one).
//!
//! Both ends select their congestion controller per socket (`TCP_CONGESTION`, CUBIC by default)
//! instead of inheriting the host's default.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};

use super::{
    CHUNK, Cc, Request, SenderStats, Summary, TransferDirection, TransferReport, fill_pattern,
    unix_ns, upload_duration,
};
use crate::tcp_sys::{TcpCounters, set_congestion, tcp_counters};

/// Name of the stack in reports and on the command line.
pub const NAME: &str = "tcp";

/// The kernel's name of a congestion controller.
pub fn kernel_cc(cc: Cc) -> &'static str {
    match cc {
        Cc::Cubic => "cubic",
        Cc::Reno => "reno",
        Cc::Bbr => "bbr",
    }
}

/// Serves transfers on `listen`, one connection after the other (only the first with `once`).
/// A connection that fails is logged and the next one served.
pub fn serve(listen: SocketAddr, once: bool, cc: Cc) -> anyhow::Result<()> {
    let l = TcpListener::bind(listen).with_context(|| format!("listening on {listen}"))?;
    // Accepted connections inherit the listener's congestion controller.
    set_congestion(&l, kernel_cc(cc)).context("TCP_CONGESTION on the listener")?;
    loop {
        let (s, peer) = l.accept().context("accept")?;
        if let Err(e) = set_congestion(&s, kernel_cc(cc)) {
            tracing::warn!(%peer, "TCP_CONGESTION: {e}");
        }
        match serve_one(s) {
            Ok(()) => tracing::info!(%peer, "transfer served"),
            Err(e) => tracing::warn!(%peer, "transfer failed: {e:#}"),
        }
        if once {
            return Ok(());
        }
    }
}

fn serve_one(mut s: TcpStream) -> anyhow::Result<()> {
    // A client that stalls must not hold the (sequential) server forever.
    s.set_read_timeout(Some(Duration::from_secs(600)))?;
    let mut head = [0u8; Request::LEN];
    s.read_exact(&mut head).context("reading the request")?;
    let req = Request::decode(&head)?;
    let mut summary = Summary::default();
    match req.direction {
        TransferDirection::Download => {
            write_payload(&mut s, req.bytes, None)?;
            summary.bytes = req.bytes;
            // The client half-closes once it holds every byte.
            let extra = drain(&mut s)?;
            if extra > 0 {
                bail!("{extra} unexpected bytes after a download request");
            }
        }
        TransferDirection::Upload => {
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = s.read(&mut buf).context("reading the upload")?;
                if n == 0 {
                    break;
                }
                let now = unix_ns(SystemTime::now());
                if summary.bytes == 0 {
                    summary.first_byte_unix_ns = now;
                }
                summary.bytes += n as u64;
                summary.last_byte_unix_ns = now;
            }
        }
    }
    let k = tcp_counters(&s).unwrap_or_default();
    summary.sent_packets = k.segs_out;
    summary.lost_packets = k.total_retrans;
    summary.retransmissions = k.total_retrans;
    s.write_all(&summary.encode())
        .context("writing the summary")?;
    s.shutdown(Shutdown::Write)?;
    Ok(())
}

/// Reads until the peer half-closes; returns how many bytes came.
fn drain(s: &mut TcpStream) -> io::Result<u64> {
    let mut buf = [0u8; 4096];
    let mut n = 0u64;
    loop {
        match s.read(&mut buf)? {
            0 => return Ok(n),
            k => n += k as u64,
        }
    }
}

/// Writes `bytes` bytes of the payload pattern, failing once `deadline` has passed.
fn write_payload(s: &mut TcpStream, bytes: u64, deadline: Option<Instant>) -> anyhow::Result<()> {
    let mut chunk = vec![0u8; CHUNK];
    fill_pattern(&mut chunk);
    let mut left = bytes;
    while left > 0 {
        if deadline.is_some_and(|d| Instant::now() > d) {
            bail!("timed out with {left} of {bytes} bytes unsent");
        }
        let n = usize::try_from(left).unwrap_or(CHUNK).min(CHUNK);
        s.write_all(&chunk[..n]).context("writing the payload")?;
        left -= n as u64;
    }
    Ok(())
}

/// Runs one download or upload against `server` and reports it like the QUIC clients do, plus
/// `connect_ms`: how long the TCP handshake took (one round trip to whoever answers the SYN: the
/// server end to end, the ap's splitter when the connection is split).
pub fn run_client(
    server: SocketAddr,
    req: Request,
    cc: Cc,
    timeout: Duration,
) -> anyhow::Result<TransferReport> {
    let t0 = Instant::now();
    let deadline = t0 + timeout;
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(server),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    set_congestion(&sock, kernel_cc(cc)).context("TCP_CONGESTION")?;
    sock.connect_timeout(&server.into(), timeout)
        .with_context(|| format!("connecting to {server}"))?;
    let connect = t0.elapsed();
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let start = Instant::now();
    let start_unix = unix_ns(SystemTime::now());
    s.write_all(&req.encode()).context("writing the request")?;
    let (duration, summary, own) = match req.direction {
        TransferDirection::Download => {
            let mut buf = vec![0u8; CHUNK];
            let mut got = 0u64;
            while got < req.bytes {
                if Instant::now() > deadline {
                    bail!(
                        "timed out after {timeout:?} with {got} of {} bytes",
                        req.bytes
                    );
                }
                let want = usize::try_from(req.bytes - got).unwrap_or(CHUNK).min(CHUNK);
                let n = s.read(&mut buf[..want]).context("reading the payload")?;
                if n == 0 {
                    bail!("server closed after {got} of {} bytes", req.bytes);
                }
                got += n as u64;
            }
            let duration = start.elapsed();
            s.shutdown(Shutdown::Write)?;
            let summary = read_summary(&mut s)?;
            (duration, summary, tcp_counters(&s).unwrap_or_default())
        }
        TransferDirection::Upload => {
            write_payload(&mut s, req.bytes, Some(deadline))?;
            s.shutdown(Shutdown::Write)?;
            let summary = read_summary(&mut s)?;
            if summary.bytes != req.bytes {
                bail!("server received {} of {} bytes", summary.bytes, req.bytes);
            }
            let own = tcp_counters(&s).unwrap_or_default();
            (
                upload_duration(start_unix, &summary, start.elapsed()),
                summary,
                own,
            )
        }
    };
    let stats = sender_stats(req.direction, &summary, &own);
    let mut report = TransferReport::named(NAME, req.direction, req.bytes, duration, stats);
    report.connect_ms = Some(connect.as_secs_f64() * 1e3);
    Ok(report)
}

/// The data sender's counters: the server's summary for a download, the client's own kernel
/// counters for an upload (whose receiver, the server, reports its segments in the summary).
fn sender_stats(direction: TransferDirection, summary: &Summary, own: &TcpCounters) -> SenderStats {
    match direction {
        TransferDirection::Download => SenderStats {
            sent_packets: summary.sent_packets,
            lost_packets: summary.lost_packets,
            retransmissions: summary.retransmissions,
            receiver_sent_packets: own.segs_out,
            sender_unknown: false,
        },
        TransferDirection::Upload => SenderStats {
            sent_packets: own.segs_out,
            lost_packets: own.total_retrans,
            retransmissions: own.total_retrans,
            receiver_sent_packets: summary.sent_packets,
            sender_unknown: false,
        },
    }
}

fn read_summary(s: &mut TcpStream) -> anyhow::Result<Summary> {
    let mut b = [0u8; Summary::LEN];
    s.read_exact(&mut b)
        .context("reading the server's summary")?;
    Ok(Summary::decode(&b)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        std::thread::spawn(move || serve(addr, false, Cc::Cubic));
        // The server thread binds the port again; retry the connection until it does.
        for _ in 0..100 {
            if TcpStream::connect(addr).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        addr
    }

    #[test]
    fn download_and_upload_over_loopback() {
        let addr = server();
        for direction in [TransferDirection::Download, TransferDirection::Upload] {
            let req = Request {
                direction,
                bytes: 3_000_000,
            };
            let r = run_client(addr, req, Cc::Cubic, Duration::from_secs(20)).unwrap();
            assert_eq!(r.stack, "tcp");
            assert_eq!(r.bytes, 3_000_000);
            assert!(r.goodput_mbps > 0.0 && r.duration_s > 0.0, "{r:?}");
            assert!(r.sent_packets.unwrap_or(0) > 0, "{r:?}");
            assert!(r.receiver_sent_packets > 0, "{r:?}");
            assert!(r.connect_ms.is_some_and(|c| c >= 0.0));
        }
    }

    #[test]
    fn a_server_that_closes_early_is_an_error() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut head = [0u8; Request::LEN];
            s.read_exact(&mut head).unwrap();
            s.write_all(&[0u8; 1000]).unwrap();
        });
        let req = Request {
            direction: TransferDirection::Download,
            bytes: 10_000,
        };
        let e = run_client(addr, req, Cc::Cubic, Duration::from_secs(5)).unwrap_err();
        assert!(e.to_string().contains("closed after 1000"), "{e:#}");
    }
}
