//! The tokio adapter of a [`PeerCore`]: its UDP sockets, the clock, key changes arriving on a
//! channel and the server's stop signal.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use str0m::Rtc;
use str0m::media::Mid;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

use super::{PeerConfig, PeerCore, PeerReport, Socket, WallClock};
use crate::webrtc::rekey::Rekey;
use crate::webrtc::sidekick::WebrtcSidekick;

/// A peer on real sockets.
pub struct Peer {
    core: PeerCore,
    socket: Arc<UdpSocket>,
    /// The sidekick's own socket (with `--sidekick`).
    side_socket: Option<UdpSocket>,
    /// New instances to switch to (a key change).
    rekeys: Option<mpsc::Receiver<Result<Rekey, String>>>,
}

impl Peer {
    /// A peer on `rtc` (offer/answer done) with its UDP `socket`; `local` is the address of its
    /// host candidate, `mid` the media line when known; `side` the sidekick with its socket.
    pub fn new(
        rtc: Rtc,
        socket: Arc<UdpSocket>,
        local: SocketAddr,
        mid: Option<Mid>,
        cfg: PeerConfig,
        side: Option<(WebrtcSidekick, UdpSocket)>,
    ) -> Self {
        let (side, side_socket) = side.map_or((None, None), |(s, u)| (Some(s), Some(u)));
        Self {
            core: PeerCore::new(rtc, local, mid, cfg, side, Instant::now(), WallClock::now()),
            socket,
            side_socket,
            rekeys: None,
        }
    }

    /// Key changes: each instance that arrives on `rx` (offer/answer done) replaces the current
    /// one, make-before-break ([`crate::webrtc::rekey`]); an error is reported and the call goes
    /// on.
    #[must_use]
    pub fn with_rekeys(mut self, rx: mpsc::Receiver<Result<Rekey, String>>) -> Self {
        self.rekeys = Some(rx);
        self
    }

    async fn flush(&mut self) {
        while let Some(d) = self.core.poll_transmit() {
            let r = match d.socket {
                // Best effort, as UDP: a full socket buffer is a loss NACKs recover.
                Socket::Base => self.socket.try_send_to(&d.data, d.to).map(|_| ()),
                Socket::Sidekick => match &self.side_socket {
                    Some(s) => s.send_to(&d.data, d.to).await.map(|_| ()),
                    None => Ok(()),
                },
            };
            if let Err(e) = r {
                tracing::debug!("send: {e}");
            }
        }
    }

    /// Runs the call until done (client), `stop` fires (server), the peer disconnects, or the
    /// time limits pass; returns this peer's report (and writes the receiver's trace when
    /// configured).
    pub async fn run(
        mut self,
        mut stop: Option<oneshot::Receiver<()>>,
    ) -> anyhow::Result<PeerReport> {
        let mut buf = vec![0u8; 2048];
        let mut sk_buf = vec![0u8; 2048];
        self.core.handle_timeout(Instant::now())?;
        let end = loop {
            self.flush().await;
            let now = Instant::now();
            if let Some(end) = self.core.finished(now) {
                break end;
            }
            if self.core.connect_timed_out(now) {
                anyhow::bail!(
                    "ICE/DTLS did not complete within {:?}",
                    self.core.config().connect_timeout
                );
            }
            let wake = self
                .core
                .poll_timeout()
                .min(now + Duration::from_millis(100));
            enum Ev {
                Base(usize, SocketAddr),
                Side(usize, SocketAddr),
                Timer,
                Stop,
                Rekey(Option<Result<Rekey, String>>),
            }
            let side_socket = self.side_socket.as_ref();
            let ev = tokio::select! {
                r = self.socket.recv_from(&mut buf) => match r {
                    Ok((n, from)) => Ev::Base(n, from),
                    Err(e) => {
                        tracing::debug!("base socket: {e}");
                        Ev::Timer
                    }
                },
                r = async {
                    match side_socket {
                        Some(s) => s.recv_from(&mut sk_buf).await,
                        None => std::future::pending().await,
                    }
                } => match r {
                    Ok((n, from)) => Ev::Side(n, from),
                    Err(e) => {
                        tracing::debug!("sidekick socket: {e}");
                        Ev::Timer
                    }
                },
                () = tokio::time::sleep_until(wake.into()) => Ev::Timer,
                r = async {
                    match self.rekeys.as_mut() {
                        Some(rx) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                } => Ev::Rekey(r),
                () = async {
                    match stop.as_mut() {
                        Some(s) => { let _ = s.await; }
                        None => std::future::pending().await,
                    }
                } => Ev::Stop,
            };
            let now = Instant::now();
            match ev {
                Ev::Base(n, from) => self.core.handle_datagram(now, from, buf[..n].to_vec())?,
                Ev::Side(n, from) => self
                    .core
                    .handle_sidekick_datagram(now, from, &sk_buf[..n])?,
                Ev::Timer => self.core.handle_timeout(now)?,
                Ev::Rekey(Some(Ok(k))) => self.core.handle_rekey(now, k)?,
                Ev::Rekey(Some(Err(e))) => self.core.handle_rekey_error(e),
                Ev::Rekey(None) => self.rekeys = None,
                Ev::Stop => {
                    stop = None;
                    break "stopped";
                }
            }
        };
        let _ = stop;
        self.core.close(Instant::now());
        self.flush().await;
        if let Some(path) = &self.core.config().trace
            && let Err(e) = std::fs::write(path, self.core.trace_csv())
        {
            tracing::warn!("writing {}: {e}", path.display());
        }
        Ok(self.core.into_report(end))
    }
}
