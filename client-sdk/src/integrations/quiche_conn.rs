//! A wrapper over `quiche::Connection` that interposes on `send`/`recv`.
//!
//! quiche has no pluggable congestion control, so here the sidekick gives: the key-log hook
//! installed (packet numbers through the lens), Robin's log of sent datagrams with early
//! retransmission of datagrams a quACK shows lost (identical copies, which quiche's receiver
//! accepts once; quiche's own loss recovery and spurious-loss handling stay in charge of its
//! window), and Packrat's eACKs and reorder window on received datagrams. See the crate README
//! for the table of what each stack gets.
//!
//! ```no_run
//! use std::time::Instant;
//! use sidekick::integrations::quiche_conn::SidekickQuiche;
//! use sidekick::session::{SidekickClient, SidekickConfig};
//!
//! # fn f(conn: quiche::Connection) {
//! let mut conn = SidekickQuiche::new(conn, SidekickClient::new(SidekickConfig::packrat()));
//! let mut out = [0u8; 1500];
//! if let Ok((n, info)) = conn.send(Instant::now(), &mut out) {
//!     // send out[..n] to info.to on the base socket, then:
//!     while let Some(t) = conn.poll_transmit() { /* base or sidekick socket */ }
//! }
//! # }
//! ```

use std::net::SocketAddr;
use std::time::Instant;

use crate::keylog::KeyLogStore;
use crate::session::{SidekickClient, Transmit};

/// A quiche connection with the sidekick in its datagram path.
pub struct SidekickQuiche {
    conn: quiche::Connection,
    client: SidekickClient,
    keylog: KeyLogStore,
}

impl std::fmt::Debug for SidekickQuiche {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SidekickQuiche")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl SidekickQuiche {
    /// Wraps `conn` and installs the key-log hook. The quiche `Config` must have called
    /// `log_keys()` for quiche to write the key log.
    pub fn new(mut conn: quiche::Connection, mut client: SidekickClient) -> Self {
        let keylog = KeyLogStore::new(64);
        conn.set_keylog(Box::new(keylog.clone()));
        // The sidekick may not point back into this host (unless the base peer is on it too).
        if let Some(path) = conn.path_stats().next() {
            client.set_base_peer(path.peer_addr);
            if !path.local_addr.ip().is_unspecified() {
                client.add_local_addrs([path.local_addr.ip()]);
            }
        }
        client.add_local_addrs(crate::local_addrs::host_addresses());
        Self {
            conn,
            client,
            keylog,
        }
    }

    /// The wrapped connection.
    pub fn conn(&self) -> &quiche::Connection {
        &self.conn
    }

    /// The wrapped connection, mutably (streams, timeouts…).
    pub fn conn_mut(&mut self) -> &mut quiche::Connection {
        &mut self.conn
    }

    /// The sidekick client.
    pub fn sidekick(&self) -> &SidekickClient {
        &self.client
    }

    /// The sidekick client, mutably.
    pub fn sidekick_mut(&mut self) -> &mut SidekickClient {
        &mut self.client
    }

    fn drain_keylog(&mut self) {
        if !self.keylog.is_empty() {
            self.keylog.drain_into(self.client.lens_mut());
        }
    }

    /// `quiche::Connection::send`, with the datagram logged for Robin. Discovery starts with
    /// the first 1-RTT datagram once the connection is established.
    pub fn send(
        &mut self,
        now: Instant,
        out: &mut [u8],
    ) -> quiche::Result<(usize, quiche::SendInfo)> {
        let (n, info) = self.conn.send(out)?;
        self.drain_keylog();
        // quiche hands the datagram to the caller, who sends it next.
        self.client.on_base_sent(now, &out[..n]);
        if self.client.is_idle() && self.conn.is_established() && out[0] & 0x80 == 0 {
            let _ = self.client.start(now);
        }
        Ok((n, info))
    }

    /// A datagram arrived on the base socket: Packrat sees it first; whatever may pass now is
    /// handed to quiche (the rest after the reorder window, from [`Self::handle_timeout`]).
    pub fn recv(
        &mut self,
        now: Instant,
        datagram: &[u8],
        info: quiche::RecvInfo,
    ) -> quiche::Result<usize> {
        self.drain_keylog();
        // The end-to-end RTT bounds holds and tells needed resends from unneeded ones.
        if let Some(rtt) = self
            .conn
            .path_stats()
            .next()
            .and_then(|p| p.min_rtt.filter(|r| !r.is_zero()))
        {
            self.client.on_e2e_rtt(rtt);
        }
        self.client.on_base_received(now, datagram.to_vec());
        self.deliver(info)
    }

    fn deliver(&mut self, info: quiche::RecvInfo) -> quiche::Result<usize> {
        let mut total = 0;
        while let Some(mut d) = self.client.poll_deliver() {
            match self.conn.recv(&mut d, info) {
                Ok(n) => total += n,
                // A datagram quiche rejects is not fatal to the others.
                Err(quiche::Error::Done) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }

    /// A datagram arrived on the sidekick socket.
    pub fn on_sidekick_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        self.client.on_sidekick_datagram(now, from, datagram);
    }

    /// The earlier of quiche's and the sidekick's timers.
    pub fn timeout_at(&self, now: Instant) -> Option<Instant> {
        let q = self.conn.timeout().map(|d| now + d);
        match (q, self.client.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs due timers of both; `info` addresses released held datagrams.
    pub fn handle_timeout(
        &mut self,
        now: Instant,
        info: quiche::RecvInfo,
    ) -> quiche::Result<usize> {
        if self.conn.timeout().is_some_and(|d| d.is_zero()) {
            self.conn.on_timeout();
        }
        self.client.handle_timeout(now);
        self.deliver(info)
    }

    /// Datagrams the sidekick wants sent: discovery and early retransmissions on the base
    /// socket, control frames and eACKs on the sidekick socket.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.client.poll_transmit()
    }
}
