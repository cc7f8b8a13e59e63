//! The quiche client with the sidekick: the connection wrapped in the SDK's `SidekickQuiche`
//! (Robin's log and early retransmission on uploads, Packrat's eACKs and reorder window on
//! downloads, both on one session with `--both`; quiche has no pluggable congestion control, see
//! client-sdk/README.md) plus the
//! sidekick socket, driven by the same blocking event loop as the plain client.
//!
//! The loop blocks on the base socket; the sidekick socket is non-blocking and drained after every
//! step, and while the session is probing or active the loop wakes at least every
//! [`SIDEKICK_POLL`] so a quACK or InitAck waits at most that long (small next to the quACK and
//! eACK intervals of 10–30 ms).

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sidekick::integrations::quiche_conn::SidekickQuiche;
use sidekick::session::{SidekickClient, Transmit};

use super::quiche_stack::Driver;
use super::sidekick::{EngineSample, Mode, SidekickCounters, SidekickParams};

/// Longest the loop blocks while the sidekick session may receive something.
pub const SIDEKICK_POLL: Duration = Duration::from_millis(1);

/// How often the engines' counters are sampled for the report.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// A quiche client connection with the sidekick in its datagram path.
pub(super) struct SkConn {
    inner: SidekickQuiche,
    socket: UdpSocket,
    peer: SocketAddr,
    mode: Mode,
    sample: EngineSample,
    last_sample: Instant,
    buf: Vec<u8>,
}

impl SkConn {
    /// Wraps `conn` (whose config called `log_keys()`) in a session running `mode`'s engines
    /// (Robin for what the client sends, Packrat for what it receives, both for `--both`).
    pub(super) fn new(
        conn: quiche::Connection,
        peer: SocketAddr,
        mode: Mode,
        params: &SidekickParams,
    ) -> anyhow::Result<Self> {
        let socket =
            UdpSocket::bind(super::unspecified_for(peer)).context("binding sidekick socket")?;
        socket.set_nonblocking(true).context("nonblocking")?;
        Ok(Self {
            inner: SidekickQuiche::new(conn, SidekickClient::new(params.config_for(mode))),
            socket,
            peer,
            mode,
            sample: EngineSample::default(),
            last_sample: Instant::now(),
            buf: vec![0u8; 65_535],
        })
    }

    /// The counters for the report.
    pub(super) fn counters(&self) -> SidekickCounters {
        SidekickCounters::collect(self.mode, self.inner.sidekick(), &self.sample, 0)
    }

    fn send_transmits(&mut self, base: &UdpSocket) {
        while let Some(t) = self.inner.poll_transmit() {
            // Best effort: the end-to-end connection recovers what is not sent.
            let r = match t {
                Transmit::Base(d) => base.send_to(&d, self.peer),
                Transmit::Sidekick(to, d) => self.socket.send_to(&d, to),
            };
            if let Err(e) = r {
                tracing::debug!("sidekick send: {e}");
            }
        }
    }
}

impl Driver for SkConn {
    fn conn(&mut self) -> &mut quiche::Connection {
        self.inner.conn_mut()
    }

    fn send_datagram(&mut self, out: &mut [u8]) -> quiche::Result<(usize, quiche::SendInfo)> {
        self.inner.send(Instant::now(), out)
    }

    fn recv_datagram(&mut self, buf: &mut [u8], info: quiche::RecvInfo) -> quiche::Result<usize> {
        self.inner.recv(Instant::now(), buf, info)
    }

    fn next_timeout(&self) -> Option<Duration> {
        let now = Instant::now();
        self.inner
            .timeout_at(now)
            .map(|t| t.saturating_duration_since(now))
    }

    fn fire_timers(&mut self, peer: SocketAddr, local: SocketAddr) {
        let info = quiche::RecvInfo {
            from: peer,
            to: local,
        };
        if let Err(e) = self.inner.handle_timeout(Instant::now(), info) {
            tracing::debug!("quiche recv (released datagram): {e}");
        }
    }

    fn poll_interval(&self) -> Option<Duration> {
        let c = self.inner.sidekick();
        (c.fallback_cause().is_none() && !c.is_idle()).then_some(SIDEKICK_POLL)
    }

    fn side_io(&mut self, base: &UdpSocket) {
        loop {
            match self.socket.recv_from(&mut self.buf) {
                Ok((n, from)) => {
                    self.inner
                        .on_sidekick_datagram(Instant::now(), from, &self.buf[..n]);
                }
                Err(e) => {
                    if e.kind() != std::io::ErrorKind::WouldBlock {
                        tracing::debug!("sidekick recv: {e}");
                    }
                    break;
                }
            }
        }
        self.send_transmits(base);
        let min_rtt = self
            .inner
            .conn()
            .path_stats()
            .next()
            .and_then(|p| p.min_rtt);
        if let Some(rtt) = min_rtt {
            self.inner.sidekick_mut().on_e2e_rtt(rtt);
        }
        // Events only matter to a congestion controller, which quiche does not let us plug in;
        // drain them so the SDK's queue does not fill.
        while self.inner.sidekick_mut().poll_event().is_some() {}
        let now = Instant::now();
        if now.duration_since(self.last_sample) >= SAMPLE_EVERY {
            self.last_sample = now;
            self.sample.update(self.inner.sidekick());
        }
    }
}
