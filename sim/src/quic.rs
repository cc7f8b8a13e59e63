//! quinn-proto endpoints in virtual time, with every random source quinn-proto exposes seeded.
//!
//! quinn-proto is sans-IO: datagrams go in with [`Endpoint::handle`], come out of
//! [`Connection::poll_transmit`], and time only enters through the `now` of each call. What draws
//! randomness, and what the simulator does about it:
//!
//! - the endpoint's RNG (connection RNGs, transport-parameter grease, packet-number skips, tokens):
//!   seeded through [`EndpointConfig::rng_seed`];
//! - connection IDs (quinn-proto's default generator reads the thread RNG): a seeded generator
//!   keyed like the default (`SeededCids`: an endpoint recognises its own IDs, so it sends no
//!   stateless reset for others), for the endpoints' own IDs and for the client's first destination ID
//!   ([`ClientConfig::initial_dst_cid_provider`]). The latter enters the Initial keys and the
//!   transport parameters the handshake transcript covers, so an unseeded one changes every
//!   traffic key and with them the packet identifiers Packrat's eACKs are built from;
//! - the stateless-reset key and the server's token key (random by default): fixed keys;
//! - the wall clock of address-validation tokens: a fixed [`TimeSource`];
//! - the server certificate (rcgen draws a fresh key): a fixed Ed25519 key, whose signatures are
//!   deterministic and of fixed length, so every handshake has the same sizes;
//! - rustls's client random, session ID and key shares (ring draws them from the operating
//!   system): a provider whose random source and X25519 key exchange are seeded
//!   ([`crate::seeded_tls`]), so the traffic keys, the AEAD tags and with them the packet
//!   identifiers of quACKs and eACKs are the same under one seed.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::BytesMut;
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, ConnectionId, ConnectionIdGenerator, DatagramEvent,
    Endpoint, EndpointConfig, ServerConfig, TimeSource, TransportConfig, VarInt,
};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// ALPN of the raw-stream bulk transfer (the lab's `sidekick-transfer`).
pub const ALPN: &[u8] = sidekick_examples::transfer::ALPN;

/// Errors setting up the QUIC endpoints.
#[derive(Debug, thiserror::Error)]
pub enum QuicError {
    /// TLS configuration.
    #[error("TLS: {0}")]
    Tls(String),
    /// Starting the connection.
    #[error("connect: {0}")]
    Connect(#[from] quinn_proto::ConnectError),
}

/// Connection IDs from a seeded RNG, 8 bytes, keyed as quinn-proto's default generator
/// (`HashedConnectionIdGenerator`) keys them: a 3-byte nonce and a 5-byte keyed hash of it, so
/// that the endpoint recognises its own IDs ([`ConnectionIdGenerator::validate`]) and answers a
/// short-header datagram for any other ID with silence, not a stateless reset. (With plain
/// random IDs the server reset the SDK's discovery marker, which reaches it on the base 4-tuple;
/// the proxy cached that reset as a datagram of the flow, the client's lens could not
/// authenticate it, so no eACK ever acknowledged it and the proxy kept resending it — 1.5–3×
/// as many repairs as drops in `packrat-wifi`, never seen in the lab.)
struct SeededCids {
    rng: StdRng,
    key: u64,
}

/// quinn-proto's split of an 8-byte ID: nonce, then signature.
const CID_NONCE_LEN: usize = 3;

impl SeededCids {
    fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            key: seed ^ 0x6b65_7965_645f_6369,
        }
    }

    fn signature(&self, nonce: &[u8]) -> [u8; 8] {
        use std::hash::Hasher as _;
        // SipHash with fixed keys: deterministic across runs, keyed by `key`.
        let mut h = std::hash::DefaultHasher::new();
        h.write_u64(self.key);
        h.write(nonce);
        h.finish().to_le_bytes()
    }
}

impl ConnectionIdGenerator for SeededCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut b = [0u8; 8];
        self.rng.fill_bytes(&mut b[..CID_NONCE_LEN]);
        let sig = self.signature(&b[..CID_NONCE_LEN]);
        b[CID_NONCE_LEN..].copy_from_slice(&sig[..8 - CID_NONCE_LEN]);
        ConnectionId::new(&b)
    }

    fn validate(&self, cid: &ConnectionId) -> Result<(), quinn_proto::InvalidCid> {
        let (nonce, sig) = cid.split_at(CID_NONCE_LEN.min(cid.len()));
        if cid.len() == 8 && self.signature(nonce)[..8 - CID_NONCE_LEN] == *sig {
            Ok(())
        } else {
            Err(quinn_proto::InvalidCid)
        }
    }

    fn cid_len(&self) -> usize {
        8
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// A fixed wall clock for address-validation tokens (their issue time is inside the token).
#[derive(Debug)]
struct FixedTime;

impl TimeSource for FixedTime {
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_000_000)
    }
}

/// PKCS#8 v1 of an Ed25519 key: this fixed prefix, then the 32-byte seed.
const ED25519_PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

fn server_identity() -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), QuicError> {
    let mut pkcs8 = ED25519_PKCS8_PREFIX.to_vec();
    pkcs8.extend_from_slice(&[0x5a; 32]);
    let der = PrivatePkcs8KeyDer::from(pkcs8);
    let key = rcgen::KeyPair::try_from(&der).map_err(|e| QuicError::Tls(e.to_string()))?;
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .map_err(|e| QuicError::Tls(e.to_string()))?;
    params.serial_number = Some(rcgen::SerialNumber::from(1u64));
    let cert = params
        .self_signed(&key)
        .map_err(|e| QuicError::Tls(e.to_string()))?;
    Ok((cert.der().clone(), PrivateKeyDer::Pkcs8(der)))
}

/// The transport configuration of the lab's `sidekick-transfer` (examples/src/transfer/
/// quinn_stack.rs): GSO off, large windows, 30 s idle timeout; the caller picks the controller.
pub fn transport_config() -> TransportConfig {
    let mut t = TransportConfig::default();
    t.enable_segmentation_offload(false);
    t.stream_receive_window(VarInt::from_u32(32 << 20));
    t.receive_window(VarInt::from_u32(64 << 20));
    t.send_window(64 << 20);
    t.max_idle_timeout(Some(VarInt::from_u32(30_000).into()));
    t.congestion_controller_factory(Arc::new(quinn_proto::congestion::CubicConfig::default()));
    t
}

fn endpoint_config(rng: &mut StdRng) -> EndpointConfig {
    let mut reset = [0u8; 64];
    rng.fill_bytes(&mut reset);
    let mut cfg = EndpointConfig::new(Arc::new(ring::hmac::Key::new(
        ring::hmac::HMAC_SHA256,
        &reset,
    )));
    let cid_seed = rng.next_u64();
    cfg.cid_generator(move || Box::new(SeededCids::new(cid_seed)));
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    cfg.rng_seed(Some(seed));
    cfg
}

/// A server endpoint (seeded from `rng`) with the fixed certificate and ALPN [`ALPN`].
pub fn server_endpoint(
    rng: &mut StdRng,
    transport: TransportConfig,
) -> Result<(Endpoint, Arc<ServerConfig>), QuicError> {
    let (cert, key) = server_identity()?;
    let mut tls = rustls::ServerConfig::builder_with_provider(crate::seeded_tls::provider(rng))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| QuicError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .map_err(|e| QuicError::Tls(e.to_string()))?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| QuicError::Tls(e.to_string()))?;
    let mut master = [0u8; 64];
    rng.fill_bytes(&mut master);
    let token_key = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, &[]).extract(&master);
    let mut cfg = ServerConfig::new(Arc::new(crypto), Arc::new(token_key));
    cfg.transport_config(Arc::new(transport));
    cfg.time_source(Arc::new(FixedTime));
    let cfg = Arc::new(cfg);
    let ep = Endpoint::new(
        Arc::new(endpoint_config(rng)),
        Some(cfg.clone()),
        true,
        None,
    );
    Ok((ep, cfg))
}

/// A client endpoint (seeded from `rng`) and its configuration; `key_log` receives the TLS
/// secrets (the SDK's packet-number lens reads them).
pub fn client_endpoint(
    rng: &mut StdRng,
    transport: TransportConfig,
    key_log: Option<Arc<dyn rustls::KeyLog>>,
) -> Result<(Endpoint, ClientConfig), QuicError> {
    let (cert, _) = server_identity()?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).map_err(|e| QuicError::Tls(e.to_string()))?;
    let mut tls = rustls::ClientConfig::builder_with_provider(crate::seeded_tls::provider(rng))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| QuicError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    if let Some(k) = key_log {
        tls.key_log = k;
    }
    let crypto = QuicClientConfig::try_from(tls).map_err(|e| QuicError::Tls(e.to_string()))?;
    let mut cfg = ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(Arc::new(transport));
    // quinn-proto's default draws the first destination ID from the thread RNG.
    let first_dcids = Mutex::new(SeededCids::new(rng.next_u64()));
    cfg.initial_dst_cid_provider(Arc::new(move || {
        first_dcids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .generate_cid()
    }));
    let ep = Endpoint::new(Arc::new(endpoint_config(rng)), None, true, None);
    Ok((ep, cfg))
}

/// One endpoint with (at most) one connection: datagrams in, datagrams out, timers.
pub struct Peer {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// The connection, once started or accepted.
    pub conn: Option<(ConnectionHandle, Connection)>,
    server_config: Option<Arc<ServerConfig>>,
    local: SocketAddr,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl Peer {
    /// A server peer at `local`.
    pub fn server(endpoint: Endpoint, cfg: Arc<ServerConfig>, local: SocketAddr) -> Self {
        Self {
            endpoint,
            conn: None,
            server_config: Some(cfg),
            local,
            buf: Vec::new(),
        }
    }

    /// A client peer at `local` connecting to `remote` at `now`.
    pub fn client(
        mut endpoint: Endpoint,
        cfg: ClientConfig,
        local: SocketAddr,
        remote: SocketAddr,
        now: Instant,
    ) -> Result<Self, QuicError> {
        let conn = endpoint.connect(now, cfg, remote, "localhost")?;
        Ok(Self {
            endpoint,
            conn: Some(conn),
            server_config: None,
            local,
            buf: Vec::new(),
        })
    }

    /// The connection, if any.
    pub fn connection(&mut self) -> Option<&mut Connection> {
        self.conn.as_mut().map(|c| &mut c.1)
    }

    /// A datagram from `remote` arrived at `now`; endpoint-level responses (version negotiation,
    /// stateless resets) are appended to `out`.
    pub fn receive(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        data: &[u8],
        out: &mut Vec<(SocketAddr, Vec<u8>)>,
    ) {
        self.buf.clear();
        let ev = self.endpoint.handle(
            now,
            remote,
            Some(self.local.ip()),
            None,
            BytesMut::from(data),
            &mut self.buf,
        );
        match ev {
            Some(DatagramEvent::ConnectionEvent(h, e)) => {
                if let Some((ch, c)) = self.conn.as_mut()
                    && *ch == h
                {
                    c.handle_event(e);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                if self.conn.is_some() {
                    self.endpoint.ignore(incoming);
                } else {
                    self.buf.clear();
                    match self.endpoint.accept(
                        incoming,
                        now,
                        &mut self.buf,
                        self.server_config.clone(),
                    ) {
                        Ok(c) => self.conn = Some(c),
                        Err(e) => {
                            if let Some(t) = e.response {
                                out.push((t.destination, self.buf[..t.size].to_vec()));
                            }
                        }
                    }
                }
            }
            Some(DatagramEvent::Response(t)) => {
                out.push((t.destination, self.buf[..t.size].to_vec()));
            }
            None => {}
        }
    }

    /// Exchanges endpoint events and collects every datagram the connection wants to send now.
    pub fn poll(&mut self, now: Instant, out: &mut Vec<(SocketAddr, Vec<u8>)>) {
        let Some((h, c)) = self.conn.as_mut() else {
            return;
        };
        loop {
            let mut progressed = false;
            while let Some(ev) = c.poll_endpoint_events() {
                progressed = true;
                if let Some(back) = self.endpoint.handle_event(*h, ev) {
                    c.handle_event(back);
                }
            }
            self.buf.clear();
            if let Some(t) = c.poll_transmit(now, 1, &mut self.buf) {
                progressed = true;
                out.push((t.destination, self.buf[..t.size].to_vec()));
            }
            if !progressed {
                break;
            }
        }
    }

    /// The connection's next timer.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.connection().and_then(Connection::poll_timeout)
    }

    /// Runs the connection's timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(c) = self.connection() {
            c.handle_timeout(now);
        }
    }
}
