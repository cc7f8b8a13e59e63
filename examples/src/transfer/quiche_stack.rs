//! quiche (0.24, BoringSSL) client and server for the bulk transfer: a blocking event loop over a
//! `std::net::UdpSocket`, one datagram per `send` (no GSO; every datagram fits the MTU). quiche's
//! pacing is honoured: each datagram leaves at the `SendInfo::at` quiche assigns to it. The
//! server serves every stream a client opens on its connection: one per transfer, two at once
//! for `--both` (whose client is in `quiche_both.rs`).

use std::collections::{BTreeMap, VecDeque};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use ring::rand::SecureRandom as _;

use super::cert::SelfSigned;
use super::quiche_outbox::{Outbox, Segment};
use super::quiche_sidekick::SkConn;
use super::sidekick::Mode;
use super::{
    ALPN, CHUNK, Cc, Request, SenderStats, Stack, Summary, TransferDirection, TransferReport,
    TransportOptions, unix_ns, upload_duration,
};

/// The stream of a one-way transfer: the client's first bidirectional one (the `--both` client
/// opens two, see `quiche_both.rs`).
const STREAM: u64 = 0;
/// Largest UDP payload quiche emits (its default).
const MAX_DATAGRAM: usize = 1350;

pub(super) fn config(opts: &TransportOptions) -> anyhow::Result<quiche::Config> {
    let alpn: &[u8] = if opts.http3 {
        quiche::h3::APPLICATION_PROTOCOL[0]
    } else {
        ALPN
    };
    config_with_alpn(opts, alpn)
}

/// The TLS key-exchange groups our quiche endpoints offer and accept (BoringSSL names): the
/// default list of the BoringSSL that quiche 0.24 vendored.
const TLS_GROUPS: &str = "X25519:P-256:P-384";

/// The transport configuration both stacks' applications share (windows, datagram size, idle
/// timeout, congestion controller) with the application protocol `alpn`.
pub(crate) fn config_with_alpn(
    opts: &TransportOptions,
    alpn: &[u8],
) -> anyhow::Result<quiche::Config> {
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).context("quiche config")?;
    c.set_application_protos(&[alpn]).context("ALPN")?;
    c.set_max_idle_timeout(u64::try_from(opts.idle_timeout.as_millis()).unwrap_or(u64::MAX));
    c.set_max_recv_udp_payload_size(65_527);
    c.set_max_send_udp_payload_size(MAX_DATAGRAM);
    c.set_initial_max_data(64 << 20);
    c.set_initial_max_stream_data_bidi_local(32 << 20);
    c.set_initial_max_stream_data_bidi_remote(32 << 20);
    c.set_initial_max_stream_data_uni(1 << 20);
    c.set_initial_max_streams_bidi(16);
    c.set_initial_max_streams_uni(16);
    c.set_disable_active_migration(true);
    let cc = match opts.cc {
        Cc::Cubic => "cubic",
        Cc::Reno => "reno",
        Cc::Bbr => "bbr2_gcongestion",
    };
    c.set_cc_algorithm_name(cc)
        .context("congestion controller")?;
    // quiche 0.30 changed CUBIC's restart after idle (the epoch shift is measured from the later
    // of the last ACK and the last send, no longer from the last send alone) and turned it on by
    // default. Off: the CUBIC of quiche 0.24 that the figures in docs/results.md were measured
    // with. (Reno and BBR do not read this option.)
    c.set_enable_cubic_idle_restart_fix(false);
    // quiche 0.30 takes BoringSSL from the boring-sys crate, whose BoringSSL offers the hybrid
    // X25519MLKEM768 first: its 1.2 KB key share puts the ClientHello into two Initial datagrams
    // and the server then ACKs the first one on its own (an "instant ACK"), which changes the
    // handshake the proxy sees (docs/results.md, handshake section). The groups of quiche 0.24's
    // vendored BoringSSL, in its order: one Initial datagram, one X25519 key share.
    c.set_curves_list(TLS_GROUPS).context("TLS groups")?;
    Ok(c)
}

pub(super) fn random_cid() -> anyhow::Result<[u8; quiche::MAX_CONN_ID_LEN]> {
    let mut cid = [0u8; quiche::MAX_CONN_ID_LEN];
    ring::rand::SystemRandom::new()
        .fill(&mut cid)
        .map_err(|_| anyhow::anyhow!("system random generator failed"))?;
    Ok(cid)
}

/// What the event loop ([`Io`]) drives: a plain `quiche::Connection` (servers, clients without
/// the sidekick) or a client connection wrapped in the SDK's `SidekickQuiche`.
pub(crate) trait Driver {
    /// The connection (streams, state, statistics).
    fn conn(&mut self) -> &mut quiche::Connection;
    /// Next datagram to send.
    fn send_datagram(&mut self, out: &mut [u8]) -> quiche::Result<(usize, quiche::SendInfo)>;
    /// A datagram arrived on the base socket.
    fn recv_datagram(&mut self, buf: &mut [u8], info: quiche::RecvInfo) -> quiche::Result<usize>;
    /// Time until the next timer.
    fn next_timeout(&self) -> Option<Duration>;
    /// Run due timers.
    fn fire_timers(&mut self, peer: SocketAddr, local: SocketAddr);
    /// Longest the loop may block on the base socket (a second socket needs polling).
    fn poll_interval(&self) -> Option<Duration> {
        None
    }
    /// I/O besides the base connection's (the sidekick socket).
    fn side_io(&mut self, _base: &UdpSocket) {}
}

impl Driver for quiche::Connection {
    fn conn(&mut self) -> &mut quiche::Connection {
        self
    }

    fn send_datagram(&mut self, out: &mut [u8]) -> quiche::Result<(usize, quiche::SendInfo)> {
        self.send(out)
    }

    fn recv_datagram(&mut self, buf: &mut [u8], info: quiche::RecvInfo) -> quiche::Result<usize> {
        self.recv(buf, info)
    }

    fn next_timeout(&self) -> Option<Duration> {
        self.timeout()
    }

    fn fire_timers(&mut self, _peer: SocketAddr, _local: SocketAddr) {
        self.on_timeout();
    }
}

/// Most datagrams held for pacing before `flush` stops asking quiche for more.
const PACING_QUEUE: usize = 256;

/// Socket plus buffers; sends what quiche releases at the paced times, receives with quiche's
/// timeout.
pub(crate) struct Io {
    pub(crate) socket: UdpSocket,
    pub(crate) local: SocketAddr,
    out: Vec<u8>,
    inbuf: Vec<u8>,
    /// Datagrams waiting for their pacing time (bounded by [`PACING_QUEUE`]).
    paced: VecDeque<(Instant, Vec<u8>, SocketAddr)>,
}

impl Io {
    pub(crate) fn new(socket: UdpSocket) -> anyhow::Result<Self> {
        let local = socket.local_addr().context("local address")?;
        Ok(Self {
            socket,
            local,
            out: vec![0u8; 65_535],
            inbuf: vec![0u8; 65_535],
            paced: VecDeque::new(),
        })
    }

    pub(crate) fn flush<D: Driver + ?Sized>(&mut self, conn: &mut D) -> anyhow::Result<()> {
        while self.paced.len() < PACING_QUEUE {
            match conn.send_datagram(&mut self.out) {
                Ok((n, info)) => self
                    .paced
                    .push_back((info.at, self.out[..n].to_vec(), info.to)),
                Err(quiche::Error::Done) => break,
                Err(e) => bail!("quiche send: {e}"),
            }
        }
        let now = Instant::now();
        while let Some((at, _, _)) = self.paced.front() {
            if *at > now {
                break;
            }
            if let Some((_, d, to)) = self.paced.pop_front() {
                self.socket
                    .send_to(&d, to)
                    .with_context(|| format!("sending to {to}"))?;
            }
        }
        conn.side_io(&self.socket);
        Ok(())
    }

    /// Send every held datagram now (before leaving the loop).
    pub(crate) fn drain(&mut self) -> anyhow::Result<()> {
        while let Some((_, d, to)) = self.paced.pop_front() {
            self.socket
                .send_to(&d, to)
                .with_context(|| format!("sending to {to}"))?;
        }
        Ok(())
    }

    /// Time until the next paced datagram is due, if any.
    fn next_send(&self) -> Option<Duration> {
        self.paced
            .front()
            .map(|(at, _, _)| at.saturating_duration_since(Instant::now()))
    }

    fn feed<D: Driver + ?Sized>(
        &mut self,
        conn: &mut D,
        peer: SocketAddr,
        n: usize,
        from: SocketAddr,
    ) {
        if from != peer {
            tracing::debug!(%from, "ignoring datagram from another peer");
            return;
        }
        let info = quiche::RecvInfo {
            from,
            to: self.local,
        };
        if let Err(e) = conn.recv_datagram(&mut self.inbuf[..n], info) {
            tracing::debug!("quiche recv: {e}");
        }
    }

    /// Wait for one datagram from `peer` (others are ignored) until quiche's timer; feed it to
    /// `conn`, or fire the timer.
    pub(crate) fn step<D: Driver + ?Sized>(
        &mut self,
        conn: &mut D,
        peer: SocketAddr,
    ) -> anyhow::Result<()> {
        let mut wait = conn.next_timeout().unwrap_or(Duration::from_millis(100));
        if let Some(s) = self.next_send() {
            wait = wait.min(s);
        }
        if let Some(p) = conn.poll_interval() {
            wait = wait.min(p);
        }
        let wait = wait.clamp(Duration::from_micros(50), Duration::from_millis(100));
        self.socket
            .set_read_timeout(Some(wait))
            .context("socket timeout")?;
        match self.socket.recv_from(&mut self.inbuf) {
            Ok((n, from)) => {
                self.feed(conn, peer, n, from);
                // Drain what else is queued before answering, so ACKs cover batches.
                self.socket.set_nonblocking(true).context("nonblocking")?;
                for _ in 0..64 {
                    match self.socket.recv_from(&mut self.inbuf) {
                        Ok((n, from)) => self.feed(conn, peer, n, from),
                        Err(_) => break,
                    }
                }
                self.socket.set_nonblocking(false).context("blocking")?;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                conn.fire_timers(peer, self.local);
            }
            Err(e) => return Err(e).context("receiving"),
        }
        if conn.next_timeout() == Some(Duration::ZERO) {
            conn.fire_timers(peer, self.local);
        }
        conn.side_io(&self.socket);
        Ok(())
    }
}

pub(super) fn stats_of(conn: &quiche::Connection) -> SenderStats {
    let s = conn.stats();
    SenderStats {
        sent_packets: s.sent as u64,
        lost_packets: s.lost as u64,
        retransmissions: s.retrans as u64,
        receiver_sent_packets: 0,
        sender_unknown: false,
    }
}

/// Serve transfers on `listen`, one connection at a time (datagrams from other peers are ignored
/// while a connection runs); with `once`, return after the first connection.
pub fn serve(listen: SocketAddr, once: bool, opts: &TransportOptions) -> anyhow::Result<()> {
    let socket = super::udp_socket(listen).with_context(|| format!("binding {listen}"))?;
    serve_socket(socket, once, opts)
}

/// [`serve`] on an already bound socket (lets tests bind port 0 first).
pub fn serve_socket(socket: UdpSocket, once: bool, opts: &TransportOptions) -> anyhow::Result<()> {
    let mut cfg = server_config_cert(opts, None, SelfSigned::generate_padded(opts.cert_bytes)?)?;
    let mut io = Io::new(socket)?;
    loop {
        let (mut conn, from) = accept_delayed(&mut io, &mut cfg, opts.hello_delay)?;
        let served = if opts.http3 {
            super::quiche_h3::serve_connection(&mut io, &mut conn, from)
        } else {
            serve_connection(&mut io, &mut conn, from)
        };
        match served {
            Ok(()) => tracing::info!(%from, "connection done"),
            Err(e) => tracing::warn!(%from, "connection failed: {e:#}"),
        }
        if once {
            return Ok(());
        }
    }
}

/// Server configuration with a fresh self-signed certificate; ALPN `alpn`, or the transfer's
/// (raw or HTTP/3 after `opts.http3`) when `None`.
pub(crate) fn server_config(
    opts: &TransportOptions,
    alpn: Option<&[u8]>,
) -> anyhow::Result<quiche::Config> {
    server_config_cert(opts, alpn, SelfSigned::generate()?)
}

fn server_config_cert(
    opts: &TransportOptions,
    alpn: Option<&[u8]>,
    cert: SelfSigned,
) -> anyhow::Result<quiche::Config> {
    let pem = cert.write_pem_files(&std::env::temp_dir())?;
    let mut cfg = match alpn {
        Some(a) => config_with_alpn(opts, a)?,
        None => config(opts)?,
    };
    cfg.load_cert_chain_from_pem_file(&pem.cert.to_string_lossy())
        .context("loading certificate")?;
    cfg.load_priv_key_from_pem_file(&pem.key.to_string_lossy())
        .context("loading key")?;
    Ok(cfg)
}

/// Wait for the Initial of a new connection on `io` (answering version negotiation, ignoring
/// anything else) and accept it: the connection and its peer.
pub(crate) fn accept(
    io: &mut Io,
    cfg: &mut quiche::Config,
) -> anyhow::Result<(quiche::Connection, SocketAddr)> {
    accept_delayed(io, cfg, Duration::ZERO)
}

/// [`accept`], holding the first Initial for `hello_delay` before quiche sees it ("wait for
/// certificate" with Δt, ReACKed QUICer (IMC '24) §2: quiche answers a ClientHello with its
/// whole flight and has no instant-ACK mode). Datagrams arriving meanwhile wait in the socket
/// and are read by the connection's loop afterwards.
fn accept_delayed(
    io: &mut Io,
    cfg: &mut quiche::Config,
    hello_delay: Duration,
) -> anyhow::Result<(quiche::Connection, SocketAddr)> {
    loop {
        io.socket.set_read_timeout(None).context("socket timeout")?;
        let (n, from) = io.socket.recv_from(&mut io.inbuf).context("receiving")?;
        let Ok(hdr) = quiche::Header::from_slice(&mut io.inbuf[..n], quiche::MAX_CONN_ID_LEN)
        else {
            continue;
        };
        if hdr.ty != quiche::Type::Initial {
            continue;
        }
        if !quiche::version_is_supported(hdr.version) {
            if let Ok(len) = quiche::negotiate_version(&hdr.scid, &hdr.dcid, &mut io.out) {
                let _ = io.socket.send_to(&io.out[..len], from);
            }
            continue;
        }
        if !hello_delay.is_zero() {
            std::thread::sleep(hello_delay);
        }
        let scid = random_cid()?;
        let scid = quiche::ConnectionId::from_ref(&scid);
        let mut conn = quiche::accept(&scid, None, io.local, from, cfg).context("accept")?;
        let info = quiche::RecvInfo { from, to: io.local };
        if let Err(e) = conn.recv(&mut io.inbuf[..n], info) {
            tracing::debug!("first packet: {e}");
        }
        return Ok((conn, from));
    }
}

/// A client socket for `peer` (4 MiB buffers) and a connection to it started with `cfg`.
pub(crate) fn connect_to(
    peer: SocketAddr,
    cfg: &mut quiche::Config,
) -> anyhow::Result<(Io, quiche::Connection)> {
    let socket =
        super::udp_socket(super::unspecified_for(peer)).context("binding client socket")?;
    let io = Io::new(socket)?;
    let scid = random_cid()?;
    let scid = quiche::ConnectionId::from_ref(&scid);
    let conn =
        quiche::connect(Some("localhost"), &scid, io.local, peer, cfg).context("quiche connect")?;
    Ok((io, conn))
}

/// One client-initiated bidirectional stream the server serves, a transfer of its own (`--both`
/// opens two on one connection: an upload and a download).
struct ServedStream {
    /// The request's bytes so far.
    hdr: Vec<u8>,
    req: Option<Request>,
    out: Outbox,
    /// Payload bytes received.
    got: u64,
    /// Wall-clock times of the first and the last payload byte received (uploads).
    first: u64,
    last: u64,
    /// The client finished its side: it sent every byte of an upload, or holds every byte of a
    /// download.
    peer_fin: bool,
    summary_queued: bool,
}

impl ServedStream {
    fn new(stream: u64) -> Self {
        Self {
            hdr: Vec::with_capacity(Request::LEN),
            req: None,
            out: Outbox::new(stream),
            got: 0,
            first: 0,
            last: 0,
            peer_fin: false,
            summary_queued: false,
        }
    }

    /// Take `data` read from the stream; `fin`: the client's side ended with it.
    fn on_data(&mut self, mut data: &[u8], fin: bool, peer: SocketAddr) -> anyhow::Result<()> {
        if self.req.is_none() {
            let take = (Request::LEN - self.hdr.len()).min(data.len());
            self.hdr.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.hdr.len() == Request::LEN {
                let r = Request::decode(&self.hdr)?;
                tracing::info!(%peer, stream = self.out.stream, ?r, "request");
                if r.direction == TransferDirection::Download {
                    self.out.queue.push_back(Segment::Pattern(r.bytes));
                }
                self.req = Some(r);
            }
        }
        if !data.is_empty() {
            if self.got == 0 {
                self.first = unix_ns(SystemTime::now());
            }
            self.got += data.len() as u64;
            if let Some(r) = self.req
                && r.direction == TransferDirection::Upload
                && self.got >= r.bytes
                && self.last == 0
            {
                self.last = unix_ns(SystemTime::now());
            }
        }
        self.peer_fin |= fin;
        Ok(())
    }

    /// Queue the summary and the FIN once the transfer is over: the client finished its side and
    /// the payload of a download is handed to quiche. The counters are the connection's, as the
    /// quinn server's are (with `--both` they include the other stream's packets).
    fn queue_summary(&mut self, conn: &quiche::Connection) {
        let Some(r) = self.req else { return };
        if !self.peer_fin || self.summary_queued || !self.out.queue.is_empty() {
            return;
        }
        let st = stats_of(conn);
        let mut s = Summary {
            bytes: r.bytes,
            sent_packets: st.sent_packets,
            lost_packets: st.lost_packets,
            retransmissions: st.retransmissions,
            ..Summary::default()
        };
        if r.direction == TransferDirection::Upload {
            s.bytes = self.got;
            s.first_byte_unix_ns = self.first;
            s.last_byte_unix_ns = self.last;
        }
        self.out
            .queue
            .push_back(Segment::Bytes(s.encode().to_vec(), 0));
        self.out.fin = true;
        self.summary_queued = true;
    }

    /// The summary and the FIN are written: nothing more happens on the stream.
    fn finished(&self) -> bool {
        self.summary_queued && self.out.is_done()
    }
}

/// Serve every stream the client opens on `conn` (one per transfer; `--both` opens two at once)
/// until the client closes the connection.
fn serve_connection(
    io: &mut Io,
    conn: &mut quiche::Connection,
    peer: SocketAddr,
) -> anyhow::Result<()> {
    // Bounded: quiche holds the client to `initial_max_streams_bidi` open streams, and an entry
    // leaves once its summary and FIN are written (the client's side ended before: no more data
    // comes for it).
    let mut streams: BTreeMap<u64, ServedStream> = BTreeMap::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        io.flush(conn)?;
        if conn.is_closed() {
            io.drain()?;
            break;
        }
        io.step(conn, peer)?;
        let readable: Vec<u64> = conn.readable().collect();
        for sid in readable {
            loop {
                let (n, fin) = match conn.stream_recv(sid, &mut buf) {
                    Ok(v) => v,
                    Err(quiche::Error::Done | quiche::Error::InvalidStreamState(_)) => break,
                    Err(e) => bail!("stream_recv: {e}"),
                };
                // Transfers run on client-initiated bidirectional streams (ids 0 mod 4).
                if sid % 4 != 0 {
                    continue;
                }
                streams
                    .entry(sid)
                    .or_insert_with(|| ServedStream::new(sid))
                    .on_data(&buf[..n], fin, peer)?;
                if fin {
                    break;
                }
            }
        }
        for s in streams.values_mut() {
            s.queue_summary(conn);
        }
        for bulk in [false, true] {
            for s in streams.values_mut().filter(|s| s.out.is_bulk() == bulk) {
                s.out.pump(conn)?;
            }
        }
        streams.retain(|_, s| !s.finished());
    }
    if let Some(e) = conn.peer_error()
        && e.error_code != 0
    {
        bail!("peer closed with error {e:?}");
    }
    if let Some(sid) = streams.keys().next() {
        bail!("connection closed before the transfer on stream {sid} completed");
    }
    Ok(())
}

/// Run one transfer as a quiche client; fails after `timeout`.
pub fn run_client(
    connect: SocketAddr,
    req: Request,
    opts: &TransportOptions,
    timeout: Duration,
) -> anyhow::Result<TransferReport> {
    let deadline = Instant::now() + timeout;
    let mode = opts
        .sidekick_params
        .engines
        .unwrap_or(Mode::for_direction(req.direction));
    run_connection(connect, opts, mode, |io, d, t0| {
        if opts.http3 {
            super::quiche_h3::client_loop(io, d, connect, req, deadline, timeout)
        } else {
            client_loop(io, d, connect, req, (t0, deadline), timeout)
        }
    })
}

/// Upload and download `bytes` each at once on one connection, each on its own stream
/// (raw-stream protocol only: `opts.http3` is refused); fails after `timeout`. The quiche
/// counterpart of [`super::quinn_stack::run_client_both`], against either stack's server, with
/// the same report ([`TransferReport::both`]) and with `opts.sidekick` the same session
/// ([`Mode::Both`] unless `--sidekick-engines` picks one engine).
///
/// Every number of quinn's report is there; they differ as the stacks do: `retransmissions`
/// is quiche's `Stats::retrans` (quinn reports its lost packets), and with the sidekick
/// `cc_events` stays 0 (quiche's congestion controller cannot be replaced by PACUBIC). As on
/// quinn, the sender and receiver counters are connection-wide, read when each direction's
/// summary arrived, so each includes the packets of the other direction too.
///
/// ```
/// use std::time::Duration;
/// use sidekick_examples::transfer::{TransportOptions, quiche_stack};
///
/// let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
/// let addr = socket.local_addr()?;
/// let server = std::thread::spawn(move || {
///     quiche_stack::serve_socket(socket, true, &TransportOptions::default())
/// });
/// let opts = TransportOptions::default();
/// let r = quiche_stack::run_client_both(addr, 10_000, &opts, Duration::from_secs(20))?;
/// assert_eq!((r.direction, r.bytes), ("both", 20_000));
/// assert!(r.upload_goodput_mbps.is_some() && r.download_goodput_mbps.is_some());
/// server.join().map_err(|_| anyhow::anyhow!("server thread panicked"))??;
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn run_client_both(
    connect: SocketAddr,
    bytes: u64,
    opts: &TransportOptions,
    timeout: Duration,
) -> anyhow::Result<TransferReport> {
    if opts.http3 {
        bail!("--both runs on the raw-stream protocol: drop --http3");
    }
    let deadline = Instant::now() + timeout;
    let mode = opts.sidekick_params.engines.unwrap_or(Mode::Both);
    run_connection(connect, opts, mode, |io, d, t0| {
        super::quiche_both::client_loop(io, d, connect, bytes, (t0, deadline), timeout)
    })
}

/// Connect to `connect` and run `transfer` on the connection (with the event loop, the
/// connection's driver and the time the connection started): a plain connection, or with
/// `opts.sidekick` one inside a sidekick session running `mode`'s engines, whose counters join
/// the report.
fn run_connection(
    connect: SocketAddr,
    opts: &TransportOptions,
    mode: Mode,
    transfer: impl FnOnce(&mut Io, &mut dyn Driver, Instant) -> anyhow::Result<TransferReport>,
) -> anyhow::Result<TransferReport> {
    let mut cfg = config(opts)?;
    cfg.verify_peer(false);
    if opts.sidekick {
        // The packet-number lens reads the key log (SidekickQuiche installs the hook).
        cfg.log_keys();
    }
    let t0 = Instant::now();
    let (mut io, mut conn) = connect_to(connect, &mut cfg)?;
    if opts.sidekick {
        let mut d = SkConn::new(conn, connect, mode, &opts.sidekick_params)?;
        let mut report = transfer(&mut io, &mut d, t0)?;
        report.sidekick = Some(d.counters());
        Ok(report)
    } else {
        transfer(&mut io, &mut conn, t0)
    }
}

/// A direction's duration and data sender's counters once its stream's `summary` arrived
/// (`start`: when the request was written, monotonic and wall clock; `t_end`: request → last
/// payload byte of a download). A download's sender counters are the server's (from its
/// summary), an upload's this client's; the counters are the connections' when the summary
/// arrived.
pub(super) fn direction_result(
    req: Request,
    summary: &Summary,
    (start, start_wall): (Instant, u64),
    t_end: Option<Duration>,
    conn: &quiche::Connection,
) -> anyhow::Result<(Duration, SenderStats)> {
    Ok(match req.direction {
        TransferDirection::Download => (
            t_end.context("summary before payload")?,
            SenderStats {
                sent_packets: summary.sent_packets,
                lost_packets: summary.lost_packets,
                retransmissions: summary.retransmissions,
                receiver_sent_packets: conn.stats().sent as u64,
                sender_unknown: false,
            },
        ),
        TransferDirection::Upload => {
            if summary.bytes != req.bytes {
                bail!("server received {} of {} bytes", summary.bytes, req.bytes);
            }
            (
                upload_duration(start_wall, summary, start.elapsed()),
                SenderStats {
                    receiver_sent_packets: summary.sent_packets,
                    ..stats_of(conn)
                },
            )
        }
    })
}

fn client_loop(
    io: &mut Io,
    d: &mut dyn Driver,
    connect: SocketAddr,
    req: Request,
    (t0, deadline): (Instant, Instant),
    timeout: Duration,
) -> anyhow::Result<TransferReport> {
    let mut ttfb: Option<Duration> = None;
    let mut out = Outbox::new(STREAM);
    let mut start: Option<(Instant, u64)> = None;
    let mut got = 0u64;
    let mut t_end: Option<Duration> = None;
    let mut summary_buf = Vec::with_capacity(Summary::LEN);
    let mut result: Option<(Duration, SenderStats)> = None;
    let mut buf = vec![0u8; CHUNK];
    loop {
        io.flush(d)?;
        if result.is_some() || d.conn().is_closed() {
            io.drain()?;
            break;
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} ({got} of {} bytes)", req.bytes);
        }
        io.step(d, connect)?;
        let conn = d.conn();
        if conn.is_established() && start.is_none() {
            start = Some((Instant::now(), unix_ns(SystemTime::now())));
            out.queue
                .push_back(Segment::Bytes(req.encode().to_vec(), 0));
            if req.direction == TransferDirection::Upload {
                out.queue.push_back(Segment::Pattern(req.bytes));
                out.fin = true;
            }
        }
        let readable: Vec<u64> = conn.readable().collect();
        for sid in readable {
            loop {
                let (n, fin) = match conn.stream_recv(sid, &mut buf) {
                    Ok(v) => v,
                    // A stream complete in both directions is collected by quiche.
                    Err(quiche::Error::Done | quiche::Error::InvalidStreamState(_)) => break,
                    Err(e) => bail!("stream_recv: {e}"),
                };
                if sid != STREAM {
                    continue;
                }
                let mut data = &buf[..n];
                if req.direction == TransferDirection::Download && got < req.bytes {
                    let take = usize::try_from(req.bytes - got)
                        .unwrap_or(usize::MAX)
                        .min(data.len());
                    if got == 0 && take > 0 {
                        ttfb = Some(t0.elapsed());
                    }
                    got += take as u64;
                    data = &data[take..];
                    if got == req.bytes {
                        if let Some((s, _)) = start {
                            t_end = Some(s.elapsed());
                        }
                        out.fin = true;
                    }
                }
                let room = Summary::LEN
                    .saturating_sub(summary_buf.len())
                    .min(data.len());
                summary_buf.extend_from_slice(&data[..room]);
                if fin {
                    break;
                }
            }
        }
        out.pump(conn)?;
        if summary_buf.len() == Summary::LEN {
            let summary = Summary::decode(&summary_buf)?;
            let start = start.context("summary before request")?;
            result = Some(direction_result(req, &summary, start, t_end, conn)?);
            conn.close(true, 0, b"done").ok();
        }
    }
    let conn = d.conn();
    tracing::info!(stats = ?conn.stats(), path = ?conn.path_stats().next(), "client connection");
    let Some((duration, stats)) = result else {
        bail!(
            "connection closed before the transfer completed ({got} of {} bytes; peer error {:?}, local error {:?})",
            req.bytes,
            conn.peer_error(),
            conn.local_error()
        );
    };
    let mut report = TransferReport::new(Stack::Quiche, req.direction, req.bytes, duration, stats);
    report.ttfb_ms = ttfb.map(|d| d.as_secs_f64() * 1e3);
    if req.direction == TransferDirection::Upload {
        report.spurious_lost_packets = Some(conn.stats().spurious_lost as u64);
    }
    Ok(report)
}
