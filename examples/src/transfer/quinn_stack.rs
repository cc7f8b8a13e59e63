//! quinn (0.11, rustls with ring) client and server for the bulk transfer.
//!
//! GSO: quinn sends with UDP segmentation offload by default. We disable it unless
//! [`TransportOptions::gso`] is set (`TransportConfig::enable_segmentation_offload(false)`), so every
//! datagram handed to the kernel fits the path MTU, as the lab's link element requires.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use anyhow::{Context as _, bail};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{Endpoint, TransportConfig, VarInt};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use sidekick::integrations::quinn_cc::{PacubicFactory, SharedSignals};
use sidekick::integrations::quinn_socket::SidekickSocket;
use sidekick::keylog::KeyLogStore;
use sidekick::pacubic::PacubicConfig;
use sidekick::session::SidekickClient;

use super::cert::SelfSigned;
use super::sidekick::{self as sk, EngineSample};
use super::{
    ALPN, CHUNK, Cc, Request, SenderStats, SidekickCounters, Stack, Summary, TransferDirection,
    TransferReport, TransportOptions, fill_pattern, unix_ns, upload_duration,
};

/// Transport configuration of both ends: GSO off unless asked for, large windows, idle timeout,
/// congestion controller.
pub(crate) fn transport_config(opts: &TransportOptions) -> anyhow::Result<TransportConfig> {
    let mut t = TransportConfig::default();
    t.enable_segmentation_offload(opts.gso);
    // Windows large enough for a 50 Mbit/s × 300 ms path.
    t.stream_receive_window(VarInt::from_u32(32 << 20));
    t.receive_window(VarInt::from_u32(64 << 20));
    t.send_window(64 << 20);
    t.max_idle_timeout(Some(
        opts.idle_timeout
            .try_into()
            .context("idle timeout out of range")?,
    ));
    match opts.cc {
        Cc::Cubic => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default()))
        }
        Cc::Reno => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default()))
        }
        Cc::Bbr => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default()))
        }
    };
    Ok(t)
}

fn alpn(opts: &TransportOptions) -> Vec<u8> {
    if opts.http3 {
        b"h3".to_vec()
    } else {
        ALPN.to_vec()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Build a quinn server endpoint bound to `listen` with a fresh self-signed certificate.
/// (padded to `opts.cert_bytes`).
pub fn server_endpoint(listen: SocketAddr, opts: &TransportOptions) -> anyhow::Result<Endpoint> {
    server_endpoint_cert(
        listen,
        alpn(opts),
        transport_config(opts)?,
        SelfSigned::generate_padded(opts.cert_bytes)?,
    )
}

/// A server endpoint on `listen` with a fresh self-signed certificate, ALPN `alpn` and transport
/// configuration `transport`.
pub(crate) fn server_endpoint_with(
    listen: SocketAddr,
    alpn: Vec<u8>,
    transport: TransportConfig,
) -> anyhow::Result<Endpoint> {
    server_endpoint_cert(listen, alpn, transport, SelfSigned::generate()?)
}

/// Server TLS configuration (TLS 1.3, ring) with ALPN `alpn` and the certificate `cert`; the
/// s2n-quic server ([`super::s2n_stack`]) uses it too, so both rustls servers negotiate alike.
pub(crate) fn server_tls(alpn: Vec<u8>, cert: &SelfSigned) -> anyhow::Result<rustls::ServerConfig> {
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3 with ring")?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_der.clone())),
        )
        .context("server certificate")?;
    tls.alpn_protocols = vec![alpn];
    Ok(tls)
}

fn server_endpoint_cert(
    listen: SocketAddr,
    alpn: Vec<u8>,
    transport: TransportConfig,
    cert: SelfSigned,
) -> anyhow::Result<Endpoint> {
    let tls = server_tls(alpn, &cert)?;
    let crypto = QuicServerConfig::try_from(tls).context("QUIC server TLS config")?;
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    cfg.transport_config(Arc::new(transport));
    let socket = super::udp_socket(listen).with_context(|| format!("binding {listen}"))?;
    Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(cfg),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .context("quinn endpoint")
}

/// Serve transfers on `endpoint` (HTTP/3 if `http3`): connections are handled concurrently; with
/// `once`, return after the first connection ends. A non-zero `hello_delay` holds each new
/// connection's `Incoming` that long before accepting it, so the server answers nothing —
/// neither ACK nor ServerHello — before Δt ("wait for certificate", ReACKed QUICer (IMC '24)
/// §2; quinn has no way to send an instant ACK before the handshake proceeds).
pub async fn serve(
    endpoint: Endpoint,
    once: bool,
    http3: bool,
    hello_delay: std::time::Duration,
) -> anyhow::Result<()> {
    serve_delayed(endpoint, once, hello_delay, move |conn| async move {
        if http3 {
            super::quinn_h3::serve_connection(conn).await
        } else {
            serve_connection(conn).await
        }
    })
    .await
}

/// Accept connections on `endpoint` and run `handler` on each once its handshake completed,
/// concurrently; with `once`, return the first connection's result after it ended and the
/// endpoint is idle.
pub(crate) async fn serve_with<F, Fut>(
    endpoint: Endpoint,
    once: bool,
    handler: F,
) -> anyhow::Result<()>
where
    F: Fn(quinn::Connection) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    serve_delayed(endpoint, once, std::time::Duration::ZERO, handler).await
}

async fn serve_delayed<F, Fut>(
    endpoint: Endpoint,
    once: bool,
    hello_delay: std::time::Duration,
    handler: F,
) -> anyhow::Result<()>
where
    F: Fn(quinn::Connection) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    while let Some(incoming) = endpoint.accept().await {
        let handler = handler.clone();
        let task = async move {
            if !hello_delay.is_zero() {
                tokio::time::sleep(hello_delay).await;
            }
            let conn = incoming.await.context("handshake")?;
            handler(conn).await
        };
        if once {
            let r = task.await;
            endpoint.wait_idle().await;
            return r;
        }
        tokio::spawn(async move {
            if let Err(e) = task.await {
                tracing::warn!("connection failed: {e:#}");
            }
        });
    }
    Ok(())
}

/// Serve every stream the client opens on `conn` (one per transfer; `--both` opens two at once:
/// an upload and a download), then wait for the client to close.
async fn serve_connection(conn: quinn::Connection) -> anyhow::Result<()> {
    let peer = conn.remote_address();
    let mut streams = tokio::task::JoinSet::new();
    let mut served = 0u32;
    loop {
        tokio::select! {
            s = conn.accept_bi() => match s {
                Ok((send, recv)) => {
                    served += 1;
                    streams.spawn(serve_stream(conn.clone(), send, recv));
                }
                // The client closes once it has every summary.
                Err(e) if served > 0 => {
                    tracing::info!(%peer, reason = %e, "connection closed");
                    break;
                }
                Err(e) => return Err(e).context("accepting stream"),
            },
            Some(r) = streams.join_next() => r.context("stream task")??,
        }
    }
    while let Some(r) = streams.join_next().await {
        r.context("stream task")??;
    }
    Ok(())
}

async fn serve_stream(
    conn: quinn::Connection,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) -> anyhow::Result<()> {
    let peer = conn.remote_address();
    let mut hdr = [0u8; Request::LEN];
    recv.read_exact(&mut hdr).await.context("reading request")?;
    let req = Request::decode(&hdr)?;
    tracing::info!(%peer, ?req, "request");
    let summary = match req.direction {
        TransferDirection::Download => {
            let mut buf = vec![0u8; CHUNK];
            fill_pattern(&mut buf);
            let mut left = req.bytes;
            while left > 0 {
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(CHUNK);
                send.write_all(&buf[..n]).await.context("sending payload")?;
                left -= n as u64;
            }
            // The client finishes its side once it holds every byte.
            while recv
                .read_chunk(CHUNK, true)
                .await
                .context("awaiting client FIN")?
                .is_some()
            {}
            let stats = conn.stats();
            Summary {
                bytes: req.bytes,
                sent_packets: stats.path.sent_packets,
                lost_packets: stats.path.lost_packets,
                retransmissions: stats.path.lost_packets,
                ..Summary::default()
            }
        }
        TransferDirection::Upload => {
            let mut got = 0u64;
            let mut first = 0u64;
            let mut last = 0u64;
            while let Some(chunk) = recv
                .read_chunk(CHUNK, true)
                .await
                .context("receiving payload")?
            {
                if got == 0 {
                    first = unix_ns(SystemTime::now());
                }
                got += chunk.bytes.len() as u64;
                if got >= req.bytes && last == 0 {
                    last = unix_ns(SystemTime::now());
                }
            }
            if got != req.bytes {
                bail!("upload from {peer}: got {got} of {} bytes", req.bytes);
            }
            let stats = conn.stats();
            Summary {
                bytes: got,
                first_byte_unix_ns: first,
                last_byte_unix_ns: last,
                sent_packets: stats.path.sent_packets,
                lost_packets: stats.path.lost_packets,
                retransmissions: stats.path.lost_packets,
            }
        }
    };
    send.write_all(&summary.encode())
        .await
        .context("sending summary")?;
    send.finish().context("finishing stream")?;
    Ok(())
}

/// Certificate verifier that accepts any server certificate (self-signed test servers) but still
/// checks the handshake signatures.
#[derive(Debug)]
struct AcceptAnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Client TLS configuration (TLS 1.3, ring) with ALPN `alpn` that accepts any server
/// certificate (the example servers' are self-signed). The s2n-quic client
/// ([`super::s2n_stack`]) uses it too.
pub(crate) fn client_tls(alpn: Vec<u8>) -> anyhow::Result<rustls::ClientConfig> {
    let provider = provider();
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3 with ring")?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![alpn];
    Ok(tls)
}

/// Run one transfer as a quinn client and return the report.
pub async fn run_client(
    connect: SocketAddr,
    req: Request,
    opts: &TransportOptions,
) -> anyhow::Result<TransferReport> {
    run(connect, Plan::One(req), opts).await
}

/// Upload and download `bytes` each at once on one connection (two streams, raw-stream
/// protocol only): the client sends and receives near the same link, so with the sidekick one
/// session runs Robin for what it sends and Packrat for what it receives. The report's
/// `goodput_mbps` counts both directions' bytes over the time until the later one ended;
/// `upload_goodput_mbps` and `download_goodput_mbps` are each direction's own; the sender
/// counters add both data senders' (the client's for the upload, the server's for the
/// download).
pub async fn run_client_both(
    connect: SocketAddr,
    bytes: u64,
    opts: &TransportOptions,
) -> anyhow::Result<TransferReport> {
    if opts.http3 {
        bail!("--both runs on the raw-stream protocol: drop --http3");
    }
    run(connect, Plan::Both(bytes), opts).await
}

/// What one client run transfers.
#[derive(Debug, Clone, Copy)]
enum Plan {
    One(Request),
    Both(u64),
}

async fn run(
    connect: SocketAddr,
    plan: Plan,
    opts: &TransportOptions,
) -> anyhow::Result<TransferReport> {
    let mut tls = client_tls(alpn(opts))?;
    // Sidekick: the SDK needs the TLS secrets (key log) to read packet numbers in both
    // directions; when the client sends, PACUBIC replaces the configured congestion controller
    // (Robin #2).
    let mode = match plan {
        Plan::One(req) => opts
            .sidekick_params
            .engines
            .unwrap_or(sk::Mode::for_direction(req.direction)),
        Plan::Both(_) => opts.sidekick_params.engines.unwrap_or(sk::Mode::Both),
    };
    let sk = opts.sidekick.then(|| {
        let keylog = KeyLogStore::new(64);
        tls.key_log = Arc::new(keylog.clone());
        (keylog, SharedSignals::new())
    });
    let mut cfg = quinn::ClientConfig::new(Arc::new(
        QuicClientConfig::try_from(tls).context("QUIC client TLS config")?,
    ));
    let mut transport = transport_config(opts)?;
    if let Some((_, signals)) = &sk {
        if mode.robin() {
            transport.congestion_controller_factory(Arc::new(PacubicFactory::new(
                PacubicConfig::default(),
                signals.clone(),
            )));
            if let Some(n) = opts.sidekick_params.ack_reduction {
                // Robin #3 (Sidekick (NSDI '24) §2, Table 5): the server ACKs rarely (ACK-frequency
                // extension, which quinn servers support); quACKs advance the window meanwhile.
                transport.ack_frequency_config(Some(sk::ack_frequency_config(n)));
                signals.set_ack_reduction(true);
            }
        }
    } else if let Some(n) = opts.ack_frequency {
        // The end-to-end baseline of Robin #3: the same request, no quACKs.
        transport.ack_frequency_config(Some(sk::ack_frequency_config(n)));
    }
    cfg.transport_config(Arc::new(transport));
    let bind = super::unspecified_for(connect);
    let socket = super::udp_socket(bind).context("binding client socket")?;
    let runtime: Arc<dyn quinn::Runtime> = Arc::new(quinn::TokioRuntime);
    let mut sk_run = None;
    let mut endpoint = if let Some((keylog, signals)) = sk {
        let base = runtime
            .wrap_udp_socket(socket)
            .context("wrapping client socket")?;
        let sk_socket = std::net::UdpSocket::bind(bind).context("binding sidekick socket")?;
        let (wrapped, handle) = SidekickSocket::spawn(
            base,
            sk_socket,
            connect,
            SidekickClient::new(opts.sidekick_params.config_for(mode)),
            Some(keylog),
            mode.robin().then(|| signals.clone()),
        )
        .context("starting the sidekick session")?;
        // The SDK drops its engines on fallback: keep their last counters for the report.
        let sample = Arc::new(Mutex::new(EngineSample::default()));
        let sampler = tokio::spawn({
            let (handle, sample) = (handle.clone(), sample.clone());
            async move {
                loop {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    handle.with_client(|c| lock(&sample).update(c));
                }
            }
        });
        sk_run = Some((handle, signals, sample, sampler));
        Endpoint::new_with_abstract_socket(quinn::EndpointConfig::default(), None, wrapped, runtime)
            .context("quinn endpoint")?
    } else {
        Endpoint::new(quinn::EndpointConfig::default(), None, socket, runtime)
            .context("quinn endpoint")?
    };
    endpoint.set_default_client_config(cfg);
    let t0 = Instant::now();
    let mut first_byte = None;
    let conn = endpoint
        .connect(connect, "localhost")
        .context("starting connection")?
        .await
        .with_context(|| format!("handshake with {connect}"))?;
    let mut report = match plan {
        Plan::One(req) => {
            let (duration, stats) = if opts.http3 {
                let r = super::quinn_h3::client(&conn, req).await?;
                conn.close(VarInt::from_u32(0x100), b"done");
                r
            } else {
                let r = raw_transfer(&conn, req, &mut first_byte).await?;
                conn.close(VarInt::from_u32(0), b"done");
                r
            };
            TransferReport::new(Stack::Quinn, req.direction, req.bytes, duration, stats)
        }
        Plan::Both(bytes) => {
            let up = Request {
                direction: TransferDirection::Upload,
                bytes,
            };
            let down = Request {
                direction: TransferDirection::Download,
                bytes,
            };
            let mut unused = None;
            let (u, d) = tokio::try_join!(
                raw_transfer(&conn, up, &mut unused),
                raw_transfer(&conn, down, &mut first_byte)
            )?;
            conn.close(VarInt::from_u32(0), b"done");
            TransferReport::both(Stack::Quinn, bytes, u, d)
        }
    };
    endpoint.wait_idle().await;
    report.ttfb_ms = first_byte.map(|t: Instant| t.duration_since(t0).as_secs_f64() * 1e3);
    if let Some((handle, signals, sample, sampler)) = sk_run {
        sampler.abort();
        let sample = *lock(&sample);
        report.sidekick = Some(handle.with_client(|c| {
            SidekickCounters::collect(mode, c, &sample, signals.quack_events_applied())
        }));
        handle.stop();
    }
    Ok(report)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The raw-stream transfer on an established connection: (duration, data sender's stats).
/// `first_byte` receives the time the first payload byte of a download arrived.
async fn raw_transfer(
    conn: &quinn::Connection,
    req: Request,
    first_byte: &mut Option<Instant>,
) -> anyhow::Result<(std::time::Duration, SenderStats)> {
    let (mut send, mut recv) = conn.open_bi().await.context("opening stream")?;

    let start = Instant::now();
    let start_wall = unix_ns(SystemTime::now());
    send.write_all(&req.encode())
        .await
        .context("sending request")?;
    let (duration, stats) = match req.direction {
        TransferDirection::Download => {
            let mut got = 0u64;
            while got < req.bytes {
                let want = usize::try_from(req.bytes - got)
                    .unwrap_or(usize::MAX)
                    .min(CHUNK);
                match recv
                    .read_chunk(want, true)
                    .await
                    .context("receiving payload")?
                {
                    Some(c) => {
                        if got == 0 && !c.bytes.is_empty() {
                            *first_byte = Some(Instant::now());
                        }
                        got += c.bytes.len() as u64;
                    }
                    None => bail!("server finished after {got} of {} bytes", req.bytes),
                }
            }
            let duration = start.elapsed();
            send.finish().context("finishing stream")?;
            let summary = read_summary(&mut recv).await?;
            (
                duration,
                SenderStats {
                    sent_packets: summary.sent_packets,
                    lost_packets: summary.lost_packets,
                    retransmissions: summary.retransmissions,
                    receiver_sent_packets: conn.stats().path.sent_packets,
                    sender_unknown: false,
                },
            )
        }
        TransferDirection::Upload => {
            let mut buf = vec![0u8; CHUNK];
            fill_pattern(&mut buf);
            let mut left = req.bytes;
            while left > 0 {
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(CHUNK);
                send.write_all(&buf[..n]).await.context("sending payload")?;
                left -= n as u64;
            }
            send.finish().context("finishing stream")?;
            let summary = read_summary(&mut recv).await?;
            let elapsed = start.elapsed();
            if summary.bytes != req.bytes {
                bail!("server received {} of {} bytes", summary.bytes, req.bytes);
            }
            let s = conn.stats();
            (
                upload_duration(start_wall, &summary, elapsed),
                SenderStats {
                    sent_packets: s.path.sent_packets,
                    lost_packets: s.path.lost_packets,
                    retransmissions: s.path.lost_packets,
                    receiver_sent_packets: summary.sent_packets,
                    sender_unknown: false,
                },
            )
        }
    };
    Ok((duration, stats))
}

async fn read_summary(recv: &mut quinn::RecvStream) -> anyhow::Result<Summary> {
    let mut buf = [0u8; Summary::LEN];
    recv.read_exact(&mut buf).await.context("reading summary")?;
    Ok(Summary::decode(&buf)?)
}
