//! A call: the client offers (one video m-line, send-only for an upload, receive-only for a
//! download) over the signalling endpoint ([`super::signal`]), both sides run a [`Peer`], and at
//! the end the client fetches the server's half of the report (`POST /report`) and merges it with
//! its own: the receiver's jitter-buffer metrics, the sender's counters, the client's sidekick.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::{mpsc, oneshot};

use super::peer::{Peer, PeerConfig, PeerReport, Role};
use super::rekey::{self, Rekey, RekeyRequest};
use super::sidekick::WebrtcSidekick;
use super::signal::{accept_request, post, respond};
use super::source::SourceConfig;
use super::vp8::{EncodedFrame, Vp8Config, encode_stream};
use crate::transfer::sidekick::Mode;
use sidekick::session::{SidekickClient, SidekickConfig};

/// The client's `POST /offer` body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OfferRequest {
    /// SDP offer.
    pub offer: String,
    /// What the server does.
    pub server_role: Role,
    /// Frames of the call.
    pub frames: u32,
    /// Frames per second.
    pub fps: u32,
    /// Mean bit rate, kbit/s.
    pub kbps: u32,
    /// A keyframe every this many frames.
    pub keyframe_interval: u32,
    /// Keyframe size relative to a delta frame.
    pub keyframe_factor: f64,
    /// Frame-size seed.
    pub seed: u64,
    /// Receiver's jitter-buffer target, ms.
    pub playout_delay_ms: u64,
    /// Linger after the last frame, ms.
    pub linger_ms: u64,
    /// Who answers: this server's str0m peer, or a browser it starts ([`super::browser`]).
    #[serde(default)]
    pub far_peer: FarPeer,
}

/// The far end of a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FarPeer {
    /// The server's own str0m peer (the synthetic frames, our jitter buffer's metrics).
    #[default]
    Str0m,
    /// Headless Chromium started by the server: it receives real VP8 frames and reports its
    /// `getStats()` (upload only).
    Chromium,
}

/// The `POST /offer` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OfferResponse {
    /// SDP answer.
    pub answer: String,
}

const SIGNAL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long ICE and DTLS may take. With str0m's default DTLS timers (first resend after 1 s) one
/// call of a day's test runs on a 10 %-loss last hop did not connect within 30 s; with
/// [`super::dtls`]'s prompt ones a handshake that needs this long means the path is broken.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The source of a call, the binary's flags clamped to what it accepts.
pub fn source_config(
    fps: u32,
    kbps: u32,
    keyframe_interval: u32,
    keyframe_factor: f64,
) -> SourceConfig {
    SourceConfig {
        fps: fps.clamp(1, 240),
        kbps: kbps.clamp(8, 100_000),
        keyframe_interval: keyframe_interval.clamp(1, 100_000),
        keyframe_factor: if keyframe_factor.is_finite() {
            keyframe_factor.clamp(1.0, 50.0)
        } else {
            1.0
        },
        ..SourceConfig::default()
    }
}

/// The signalling endpoint and the media socket of a server, on one address (TCP and UDP).
pub struct Server {
    tcp: TcpListener,
    udp: Arc<UdpSocket>,
    advertise: Option<SocketAddr>,
    trace: Option<std::path::PathBuf>,
    browser: super::browser::BrowserOptions,
}

impl Server {
    /// Binds TCP and UDP on `listen` (port 0: the UDP socket takes the TCP port).
    pub async fn bind(listen: SocketAddr) -> anyhow::Result<Self> {
        let tcp = TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding TCP {listen}"))?;
        let udp_addr = SocketAddr::new(listen.ip(), tcp.local_addr()?.port());
        let udp = UdpSocket::bind(udp_addr)
            .await
            .with_context(|| format!("binding UDP {udp_addr}"))?;
        Ok(Self {
            tcp,
            udp: Arc::new(udp),
            advertise: None,
            trace: None,
            browser: super::browser::BrowserOptions::default(),
        })
    }

    /// Write the receiver's per-packet trace (CSV) to `path` after each call it receives.
    #[must_use]
    pub fn trace(mut self, path: Option<std::path::PathBuf>) -> Self {
        self.trace = path;
        self
    }

    /// Offer `addr` as the media candidate instead of the address the client reached the
    /// signalling endpoint at (a 1:1 NAT, or a relay in front of the server).
    #[must_use]
    pub fn advertise(mut self, addr: Option<SocketAddr>) -> Self {
        self.advertise = addr;
        self
    }

    /// How to start the browser for calls that ask for one.
    #[must_use]
    pub fn browser(mut self, opts: super::browser::BrowserOptions) -> Self {
        self.browser = opts;
        self
    }

    /// An offer as this server acts on it: behind an advertised address (a relay or NAT in front)
    /// the client's own candidates are not used — the server answers the checks that reach it
    /// (peer-reflexive candidates, RFC 8445 §7.3.1.3), so media never takes a path beside the
    /// advertised one (seen on loopback: after a key change ICE found the client's host address
    /// directly and the media left the relay).
    fn offer_seen(&self, offer: &str) -> String {
        if self.advertise.is_none() {
            return offer.to_string();
        }
        offer
            .split_inclusive('\n')
            .filter(|l| !l.starts_with("a=candidate:"))
            .collect()
    }

    /// The bound address.
    pub fn local_addr(&self) -> anyhow::Result<SocketAddr> {
        Ok(self.tcp.local_addr()?)
    }

    /// Serves calls one at a time (`once`: only the first). A call ends with the client's
    /// `POST /report`, or `max_call` after its offer.
    pub async fn run(&self, once: bool, max_call: Duration) -> anyhow::Result<()> {
        loop {
            match Box::pin(self.one_call(max_call)).await {
                Ok(()) if once => return Ok(()),
                Ok(()) => {}
                Err(e) if once => return Err(e),
                Err(e) => tracing::warn!("call failed: {e:#}"),
            }
        }
    }

    async fn one_call(&self, max_call: Duration) -> anyhow::Result<()> {
        let (stream, req) = loop {
            let (s, req) = match accept_request(&self.tcp, SIGNAL_TIMEOUT).await {
                Ok(x) => x,
                Err(e) => {
                    tracing::debug!("signalling: {e:#}");
                    continue;
                }
            };
            if req.method == "POST" && req.path == "/offer" {
                break (s, req);
            }
            let _ = respond(s, 404, b"{\"error\":\"no call\"}").await;
        };
        let offer: OfferRequest = match serde_json::from_slice(&req.body) {
            Ok(o) => o,
            Err(e) => {
                let _ = respond(stream, 400, b"{\"error\":\"bad offer\"}").await;
                anyhow::bail!("bad offer request: {e}");
            }
        };
        if offer.far_peer == FarPeer::Chromium {
            if offer.server_role != Role::Receiver {
                let _ = respond(stream, 400, b"{\"error\":\"the browser only receives\"}").await;
                anyhow::bail!("a browser far peer only receives (upload calls)");
            }
            return Box::pin(super::browser::browser_call(
                &self.tcp,
                stream,
                &offer.offer,
                &self.browser,
                max_call,
            ))
            .await;
        }
        let local = match self.advertise {
            Some(a) => a,
            None => SocketAddr::new(stream.local_addr()?.ip(), self.udp.local_addr()?.port()),
        };
        let (rtc, answer) =
            match rekey::answer(local, &self.offer_seen(&offer.offer), Instant::now()) {
                Ok(a) => a,
                Err(e) => {
                    let _ = respond(stream, 400, b"{\"error\":\"offer refused\"}").await;
                    return Err(e.context("accepting the offer"));
                }
            };
        respond(stream, 200, &serde_json::to_vec(&OfferResponse { answer })?).await?;

        let source = source_config(
            offer.fps,
            offer.kbps,
            offer.keyframe_interval,
            offer.keyframe_factor,
        );
        let cfg = PeerConfig {
            role: offer.server_role,
            source,
            frames: offer.frames,
            playout_delay: Duration::from_millis(offer.playout_delay_ms.min(10_000)),
            linger: Duration::from_millis(offer.linger_ms.min(30_000)),
            seed: offer.seed,
            stop_when_done: false,
            connect_timeout: CONNECT_TIMEOUT,
            max_duration: max_call,
            trace: self.trace.clone(),
            vp8: None,
        };
        let (stop_tx, stop_rx) = oneshot::channel();
        let (rekey_tx, rekey_rx) = mpsc::channel(2);
        let peer = Peer::new(rtc, self.udp.clone(), local, None, cfg, None).with_rekeys(rekey_rx);
        let mut task = tokio::spawn(peer.run(Some(stop_rx)));
        let deadline = tokio::time::Instant::now() + max_call;
        let mut stop_tx = Some(stop_tx);
        loop {
            let next = tokio::select! {
                r = accept_request(&self.tcp, SIGNAL_TIMEOUT) => Some(r),
                () = tokio::time::sleep_until(deadline) => None,
            };
            match next {
                Some(Ok((s, req))) if req.path == "/report" => {
                    if let Some(tx) = stop_tx.take() {
                        let _ = tx.send(());
                    }
                    let report = match (&mut task).await {
                        Ok(Ok(r)) => serde_json::to_vec(&r)?,
                        Ok(Err(e)) => {
                            serde_json::to_vec(&serde_json::json!({"error": format!("{e:#}")}))?
                        }
                        Err(e) => serde_json::to_vec(&serde_json::json!({"error": e.to_string()}))?,
                    };
                    respond(s, 200, &report).await?;
                    return Ok(());
                }
                Some(Ok((s, req))) if req.method == "POST" && req.path == "/rekey" => {
                    let answered = serde_json::from_slice::<RekeyRequest>(&req.body)
                        .context("bad key change request")
                        .and_then(|r| {
                            rekey::answer(local, &self.offer_seen(&r.offer), Instant::now())
                        });
                    match answered {
                        Ok((rtc, answer)) => {
                            respond(s, 200, &serde_json::to_vec(&OfferResponse { answer })?)
                                .await?;
                            let k = Rekey {
                                rtc: Box::new(rtc),
                                mid: None,
                            };
                            let _ = rekey_tx.send(Ok(k)).await;
                        }
                        Err(e) => {
                            tracing::warn!("key change refused: {e:#}");
                            let _ = respond(s, 400, b"{\"error\":\"key change refused\"}").await;
                        }
                    }
                }
                Some(Ok((s, _))) => {
                    let _ = respond(s, 409, b"{\"error\":\"busy\"}").await;
                }
                Some(Err(e)) => tracing::debug!("signalling: {e:#}"),
                None => {
                    task.abort();
                    anyhow::bail!("no report request within {max_call:?}");
                }
            }
        }
    }
}

/// A client's parameters.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The server's signalling (and media) address.
    pub connect: SocketAddr,
    /// The client's role: `Sender` for an upload, `Receiver` for a download.
    pub role: Role,
    /// Stream length.
    pub duration: Duration,
    /// Frames per second.
    pub fps: u32,
    /// Mean bit rate, kbit/s.
    pub kbps: u32,
    /// A keyframe every this many frames.
    pub keyframe_interval: u32,
    /// Keyframe size relative to a delta frame.
    pub keyframe_factor: f64,
    /// Receiver's jitter-buffer target.
    pub playout_delay: Duration,
    /// Linger after the last frame.
    pub linger: Duration,
    /// Frame-size seed.
    pub seed: u64,
    /// Hard limit on the call.
    pub timeout: Duration,
    /// Run the sidekick SDK with this configuration (Robin when sending, Packrat when receiving).
    pub sidekick: Option<SidekickConfig>,
    /// Write the per-packet trace (CSV) here when receiving.
    pub trace: Option<std::path::PathBuf>,
    /// Change keys (a new DTLS handshake on the same sockets, [`super::rekey`]) this long after
    /// the call started.
    pub rekey_after: Option<Duration>,
    /// Who answers. A browser receives real VP8 frames (libvpx, encoded before the call at the
    /// source's rate, frame rate and keyframe interval) instead of the synthetic payloads.
    pub far_peer: FarPeer,
}

/// The local address the kernel would use towards `peer` (no packet is sent).
fn local_ip_towards(peer: SocketAddr) -> anyhow::Result<IpAddr> {
    let bind: SocketAddr = if peer.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let s = std::net::UdpSocket::bind(bind)?;
    s.connect(peer)?;
    Ok(s.local_addr()?.ip())
}

/// Runs one call and returns the merged report (one JSON object).
pub async fn run_client(o: &ClientOptions) -> anyhow::Result<serde_json::Value> {
    let ip = local_ip_towards(o.connect).context("finding the local address")?;
    let udp = Arc::new(UdpSocket::bind(SocketAddr::new(ip, 0)).await?);
    let local = udp.local_addr()?;
    let offer = rekey::Offer::new(local, o.role, Instant::now())?;
    let frames = (o.duration.as_secs_f64() * f64::from(o.fps)).round() as u32;
    let source = source_config(o.fps, o.kbps, o.keyframe_interval, o.keyframe_factor);
    let vp8 = match o.far_peer {
        FarPeer::Str0m => None,
        FarPeer::Chromium => {
            anyhow::ensure!(
                o.role == Role::Sender,
                "a browser far peer only receives: use --direction upload"
            );
            // Encoded before the call: the encoder's CPU time does not disturb the pacing.
            let c = Vp8Config {
                fps: source.fps,
                kbps: source.kbps,
                keyframe_interval: source.keyframe_interval,
                keyframe_factor: source.keyframe_factor,
                frames,
                seed: o.seed,
                ..Vp8Config::default()
            };
            let encoded = tokio::task::spawn_blocking(move || encode_stream(&c))
                .await
                .context("encoder task")?
                .context("encoding VP8")?;
            Some(Arc::<[EncodedFrame]>::from(encoded))
        }
    };
    let req = OfferRequest {
        offer: offer.sdp.clone(),
        server_role: match o.role {
            Role::Sender => Role::Receiver,
            Role::Receiver => Role::Sender,
        },
        frames,
        fps: o.fps,
        kbps: o.kbps,
        keyframe_interval: o.keyframe_interval,
        keyframe_factor: o.keyframe_factor,
        seed: o.seed,
        playout_delay_ms: o.playout_delay.as_millis() as u64,
        linger_ms: o.linger.as_millis() as u64,
        far_peer: o.far_peer,
    };
    // A browser far peer starts when the offer arrives.
    let offer_timeout = match o.far_peer {
        FarPeer::Str0m => SIGNAL_TIMEOUT,
        FarPeer::Chromium => super::browser::ANSWER_TIMEOUT + SIGNAL_TIMEOUT,
    };
    let r = post(
        o.connect,
        "/offer",
        &serde_json::to_vec(&req)?,
        offer_timeout,
    )
    .await
    .context("sending the offer")?;
    anyhow::ensure!(
        r.status == 200,
        "offer refused ({}): {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    let answer: OfferResponse = serde_json::from_slice(&r.body).context("parsing the answer")?;
    let Rekey { rtc, mid } = offer.accept(&answer.answer)?;

    let side = match &o.sidekick {
        Some(c) => {
            let bind = SocketAddr::new(
                if ip.is_ipv4() {
                    IpAddr::from([0, 0, 0, 0])
                } else {
                    IpAddr::from([0u16; 8])
                },
                0,
            );
            let s = UdpSocket::bind(bind)
                .await
                .context("binding the sidekick socket")?;
            let mode = match o.role {
                Role::Sender => Mode::Robin,
                Role::Receiver => Mode::Packrat,
            };
            let mut client = SidekickClient::new(c.clone());
            // The sidekick may not point back into this host (unless the far peer is on it too).
            client.set_base_peer(o.connect);
            client.add_local_addrs(sidekick::local_addrs::host_addresses());
            Some((WebrtcSidekick::new(client, mode), s))
        }
        None => None,
    };
    let cfg = PeerConfig {
        role: o.role,
        source,
        frames,
        playout_delay: o.playout_delay,
        linger: o.linger,
        seed: o.seed,
        stop_when_done: true,
        connect_timeout: CONNECT_TIMEOUT,
        max_duration: o.timeout,
        trace: o.trace.clone(),
        vp8,
    };
    let started = Instant::now();
    let mut peer = Peer::new(*rtc, udp, local, mid, cfg, side);
    if let Some(after) = o.rekey_after {
        let (tx, rx) = mpsc::channel(1);
        peer = peer.with_rekeys(rx);
        let (connect, role) = (o.connect, o.role);
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let k = rekey::offer(connect, local, role)
                .await
                .map_err(|e| format!("{e:#}"));
            let _ = tx.send(k).await;
        });
    }
    let mine = Box::pin(peer.run(None)).await?;
    let theirs = post(
        o.connect,
        "/report",
        &serde_json::to_vec(&mine)?,
        SIGNAL_TIMEOUT,
    )
    .await
    .context("fetching the server's report")?;
    let theirs: serde_json::Value =
        serde_json::from_slice(&theirs.body).context("parsing the server's report")?;
    let call = CallShape {
        role: o.role,
        frames,
        fps: o.fps,
        kbps: o.kbps,
    };
    Ok(merge_reports(&call, started.elapsed(), &mine, theirs))
}

/// What the merged report says of the call itself.
#[derive(Debug, Clone, Copy)]
pub struct CallShape {
    /// The client's role.
    pub role: Role,
    /// Frames expected.
    pub frames: u32,
    /// Frames per second.
    pub fps: u32,
    /// Mean bit rate, kbit/s.
    pub kbps: u32,
}

/// The client's report: its own half and the server's (`theirs`, as the server answered
/// `POST /report`) in one JSON object — the receiver's jitter-buffer metrics, the sender's
/// counters, the client's sidekick; the fields both halves have are the client's, the server's
/// with a `server_` prefix.
pub fn merge_reports(
    o: &CallShape,
    elapsed: Duration,
    mine: &PeerReport,
    theirs: serde_json::Value,
) -> serde_json::Value {
    let frames = o.frames;
    let mut out = serde_json::Map::new();
    out.insert(
        "direction".into(),
        match o.role {
            Role::Sender => "upload",
            Role::Receiver => "download",
        }
        .into(),
    );
    out.insert("frames_expected".into(), frames.into());
    out.insert("fps".into(), o.fps.into());
    out.insert("kbps".into(), o.kbps.into());
    out.insert("call_s".into(), elapsed.as_secs_f64().into());
    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(mine) {
        for (k, v) in m {
            out.insert(k, v);
        }
    }
    if let serde_json::Value::Object(m) = theirs {
        for (k, v) in m {
            let k = match k.as_str() {
                // Both halves have these: keep the client's, prefix the server's.
                "connect_ms" | "datagrams_refused" | "input_errors" | "end" | "error"
                | "rekeys" | "media_after_rekey" | "rekey_connect_ms" | "rekey_error"
                | "sidekick_setup_ms" => {
                    format!("server_{k}")
                }
                _ => k,
            };
            out.entry(k).or_insert(v);
        }
    }
    serde_json::Value::Object(out)
}
