//! An `AsyncUdpSocket` wrapper that runs the sidekick under an unmodified quinn endpoint.
//!
//! Every datagram quinn sends passes [`SidekickClient::on_base_sent`] (Robin's log, the lens);
//! every datagram it receives passes [`SidekickClient::on_base_received`] (Packrat's eACK and
//! reorder window) before quinn sees it. A background task owns the sidekick socket, runs the
//! session timers, sends quACK-driven early retransmissions on the base socket, and forwards
//! near-segment losses and the RTT ratio to the [`PacubicController`](super::quinn_cc) through
//! [`SharedSignals`]. Discovery starts with the first short-header (1-RTT) datagram sent, so the
//! proxy already tracks the flow.
//!
//! ```no_run
//! # async fn f() -> std::io::Result<()> {
//! use std::sync::Arc;
//! use sidekick::integrations::quinn_socket::SidekickSocket;
//! use sidekick::session::{SidekickClient, SidekickConfig};
//!
//! let runtime = quinn::default_runtime().unwrap();
//! let base = runtime.wrap_udp_socket(std::net::UdpSocket::bind("0.0.0.0:0")?)?;
//! let sidekick_udp = std::net::UdpSocket::bind("0.0.0.0:0")?;
//! let server = "203.0.113.5:443".parse().unwrap();
//! let client = SidekickClient::new(SidekickConfig::robin(30, 10));
//! let (socket, _handle) = SidekickSocket::spawn(base, sidekick_udp, server, client, None, None)?;
//! let endpoint = quinn::Endpoint::new_with_abstract_socket(
//!     quinn::EndpointConfig::default(), None, socket, runtime)?;
//! # drop(endpoint); Ok(()) }
//! ```

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

use super::quinn_cc::SharedSignals;
use crate::keylog::KeyLogStore;
use crate::session::{Engine, SdkEvent, SidekickClient, Transmit as SdkTransmit};

struct Shared {
    client: Mutex<SidekickClient>,
    keylog: Option<KeyLogStore>,
    signals: Option<SharedSignals>,
    peer: SocketAddr,
    recv_waker: Mutex<Option<Waker>>,
    wake_driver: tokio::sync::Notify,
    events: Mutex<Vec<SdkEvent>>,
}

impl Shared {
    fn client(&self) -> MutexGuard<'_, SidekickClient> {
        self.client.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Cap on events kept for [`SidekickHandle::take_events`].
const MAX_KEPT_EVENTS: usize = 4096;

/// The quinn socket wrapper. Create it with [`SidekickSocket::spawn`] inside a tokio runtime.
pub struct SidekickSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    sidekick: Arc<tokio::net::UdpSocket>,
    shared: Arc<Shared>,
}

impl fmt::Debug for SidekickSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SidekickSocket")
            .field("peer", &self.shared.peer)
            .finish_non_exhaustive()
    }
}

/// A handle to inspect the sidekick running under quinn.
#[derive(Clone)]
pub struct SidekickHandle {
    shared: Arc<Shared>,
    task: Arc<tokio::task::JoinHandle<()>>,
}

impl fmt::Debug for SidekickHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SidekickHandle").finish_non_exhaustive()
    }
}

impl SidekickHandle {
    /// Runs `f` on the client state (counters, engines, lens).
    pub fn with_client<R>(&self, f: impl FnOnce(&SidekickClient) -> R) -> R {
        f(&self.shared.client())
    }

    /// Events seen so far (establishment, near losses, fallback), drained.
    pub fn take_events(&self) -> Vec<SdkEvent> {
        std::mem::take(
            &mut *self
                .shared
                .events
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Stops the background task (the base socket keeps working end to end).
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl SidekickSocket {
    /// Wraps `inner` (quinn's socket to `peer`) and spawns the driver task that owns the
    /// `sidekick` socket. `keylog` is the store given to rustls (`ClientConfig::key_log`);
    /// `signals` those of the [`PacubicFactory`](super::quinn_cc::PacubicFactory).
    pub fn spawn(
        inner: Arc<dyn AsyncUdpSocket>,
        sidekick: std::net::UdpSocket,
        peer: SocketAddr,
        client: SidekickClient,
        keylog: Option<KeyLogStore>,
        signals: Option<SharedSignals>,
    ) -> io::Result<(Arc<Self>, SidekickHandle)> {
        sidekick.set_nonblocking(true)?;
        let mut client = client;
        // The sidekick may not point back into this host (unless the base peer is on it too).
        client.set_base_peer(peer);
        client.add_local_addrs(crate::local_addrs::host_addresses());
        let bound = [inner.local_addr().ok(), sidekick.local_addr().ok()];
        client.add_local_addrs(
            bound
                .into_iter()
                .flatten()
                .map(|a| a.ip())
                .filter(|ip| !ip.is_unspecified()),
        );
        let sidekick = Arc::new(tokio::net::UdpSocket::from_std(sidekick)?);
        let shared = Arc::new(Shared {
            client: Mutex::new(client),
            keylog,
            signals,
            peer,
            recv_waker: Mutex::new(None),
            wake_driver: tokio::sync::Notify::new(),
            events: Mutex::new(Vec::new()),
        });
        let socket = Arc::new(Self {
            inner,
            sidekick,
            shared: shared.clone(),
        });
        let task = tokio::spawn(drive(socket.clone()));
        Ok((
            socket,
            SidekickHandle {
                shared,
                task: Arc::new(task),
            },
        ))
    }

    fn drain_keylog(&self, client: &mut SidekickClient) {
        if let Some(k) = &self.shared.keylog
            && !k.is_empty()
        {
            k.drain_into(client.lens_mut());
        }
    }

    /// Sends what the client queued and forwards its events; returns whether datagrams wait
    /// for quinn.
    fn flush(&self, client: &mut SidekickClient) -> bool {
        while let Some(t) = client.poll_transmit() {
            match t {
                SdkTransmit::Base(bytes) => {
                    let t = Transmit {
                        destination: self.shared.peer,
                        ecn: None,
                        contents: &bytes,
                        segment_size: None,
                        src_ip: None,
                    };
                    // Best effort: the end-to-end connection recovers what is not sent.
                    let _ = self.inner.try_send(&t);
                }
                SdkTransmit::Sidekick(addr, bytes) => {
                    let _ = self.sidekick.try_send_to(&bytes, addr);
                }
            }
        }
        if let Some(s) = &self.shared.signals {
            if let Some(rtt) = s.e2e_min_rtt() {
                client.on_e2e_rtt(rtt);
            }
            if let Some(r) = client.rtt_ratio() {
                s.set_rtt_ratio(r);
            }
        }
        let mut kept = self
            .shared
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while let Some(e) = client.poll_event() {
            if let Some(s) = &self.shared.signals {
                match &e {
                    SdkEvent::NearLoss(l) => s.near_loss(l.sent),
                    SdkEvent::Delivered { bytes, .. } => s.delivered(*bytes),
                    // Robin stopped (alone or with the session): PACUBIC acts as CUBIC again.
                    SdkEvent::Fallback(_) | SdkEvent::EngineDropped(Engine::Robin, _) => s.clear(),
                    SdkEvent::Established | SdkEvent::EngineDropped(Engine::Packrat, _) => {}
                }
            }
            if kept.len() < MAX_KEPT_EVENTS && !matches!(e, SdkEvent::Delivered { .. }) {
                kept.push(e);
            }
        }
        client.has_deliverable()
    }

    fn wake_receiver(&self) {
        if let Some(w) = self
            .shared
            .recv_waker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            w.wake();
        }
    }
}

async fn drive(socket: Arc<SidekickSocket>) {
    let mut buf = vec![0u8; 65536];
    loop {
        let deadline = socket.shared.client().poll_timeout();
        let sleep_for = deadline.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        });
        tokio::select! {
            r = socket.sidekick.recv_from(&mut buf) => {
                if let Ok((n, from)) = r {
                    let mut c = socket.shared.client();
                    c.on_sidekick_datagram(Instant::now(), from, &buf[..n]);
                    if socket.flush(&mut c) {
                        drop(c);
                        socket.wake_receiver();
                    }
                }
            }
            () = tokio::time::sleep(sleep_for) => {
                let mut c = socket.shared.client();
                c.handle_timeout(Instant::now());
                if socket.flush(&mut c) {
                    drop(c);
                    socket.wake_receiver();
                }
            }
            () = socket.shared.wake_driver.notified() => {}
        }
    }
}

impl AsyncUdpSocket for SidekickSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        if transmit.destination != self.shared.peer {
            return self.inner.try_send(transmit);
        }
        let now = Instant::now();
        let mut c = self.shared.client();
        self.drain_keylog(&mut c);
        // Log before sending: a quACK naming this datagram may come back before `try_send`
        // returns. On failure quinn retries the same transmit, so the entries are withdrawn.
        let seg = transmit
            .segment_size
            .unwrap_or(transmit.contents.len())
            .max(1);
        let mut start_discovery = false;
        let mut logged = 0;
        for d in transmit.contents.chunks(seg) {
            logged += usize::from(c.on_base_sent(now, d));
            start_discovery |= d.first().is_some_and(|b| b & 0x80 == 0);
        }
        if let Err(e) = self.inner.try_send(transmit) {
            c.withdraw_sent(logged);
            return Err(e);
        }
        if start_discovery && c.is_idle() {
            let _ = c.start(now);
        }
        self.flush(&mut c);
        drop(c);
        // The driver recomputes its deadline (new log entries, discovery timers).
        self.shared.wake_driver.notify_one();
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        loop {
            {
                let mut c = self.shared.client();
                let n = fill(&mut c, self.shared.peer, bufs, meta);
                if n > 0 {
                    return Poll::Ready(Ok(n));
                }
            }
            let n = match self.inner.poll_recv(cx, bufs, meta) {
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    // Held datagrams are released by the driver, which wakes us.
                    *self
                        .shared
                        .recv_waker
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(cx.waker().clone());
                    return Poll::Pending;
                }
            };
            let now = Instant::now();
            let mut c = self.shared.client();
            self.drain_keylog(&mut c);
            for (m, b) in meta.iter().zip(bufs.iter()).take(n) {
                let stride = m.stride.max(1);
                for d in b[..m.len].chunks(stride) {
                    if m.addr == self.shared.peer {
                        c.on_base_received(now, d.to_vec());
                    } else {
                        c.push_passthrough(m.addr, d.to_vec());
                    }
                }
            }
            self.flush(&mut c);
            drop(c);
            self.shared.wake_driver.notify_one();
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        1
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// Copies deliverable datagrams into quinn's buffers, one per buffer.
fn fill(
    c: &mut SidekickClient,
    peer: SocketAddr,
    bufs: &mut [IoSliceMut<'_>],
    meta: &mut [RecvMeta],
) -> usize {
    let mut n = 0;
    while n < bufs.len().min(meta.len()) {
        let Some((from, d)) = c.poll_deliver_from(peer) else {
            break;
        };
        if d.len() > bufs[n].len() {
            continue; // cannot happen: it came out of a buffer of this size
        }
        bufs[n][..d.len()].copy_from_slice(&d);
        meta[n] = RecvMeta {
            addr: from,
            len: d.len(),
            stride: d.len(),
            ecn: None,
            dst_ip: None,
        };
        n += 1;
    }
    n
}
