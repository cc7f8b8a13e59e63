//! A real browser as the far peer: the server answers a call whose offer asks for it
//! (`far_peer: chromium`) by starting headless Chromium on a page it serves itself
//! (`browser.html`). The page fetches the caller's SDP offer, answers with the browser's own
//! WebRTC stack (ICE, DTLS-SRTP, its NACK module and jitter buffer, libvpx's VP8 decoder), plays
//! the video and POSTs the video stream's `inbound-rtp` `getStats()` every 250 ms. When the
//! caller asks for the report (`POST /report`), the server waits for one more sample, tells the
//! page to stop and answers with the browser's figures ([`StatsLog::report`]), then kills the
//! browser (its whole process group) and removes its profile directory. The browser is killed
//! on every exit path ([`Chromium`]'s `Drop`).
//!
//! Signalling on the server's TCP port, one request per connection:
//!
//! | request | from | answer |
//! |---|---|---|
//! | `GET /browser` | browser | the page |
//! | `POST /browser/offer` | page | `{"offer": SDP}` |
//! | `POST /browser/answer` `{"answer": SDP}` | page | `{}`; the caller's `/offer` is answered |
//! | `POST /browser/stats` [`StatsPost`] | page | `{"stop": bool}` |
//! | `POST /browser/error` `{"error": text}` | page | `{}`; the call fails |
//! | `POST /report` | caller | the browser's report |

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Deserialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

use super::call::OfferResponse;
use super::signal::{accept_request, respond, respond_typed};

/// The page the browser loads.
pub const PAGE: &str = include_str!("browser.html");

/// How long the browser has to start, load the page and answer.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(45);

/// After the caller's `/report`: how long to wait for the browser's last sample.
const LAST_SAMPLE_WAIT: Duration = Duration::from_secs(3);

pub use super::browser_stats::{
    BrowserError, InboundRtp, MAX_SAMPLES, StatsLog, StatsPost, parse_stats_post,
};

/// How the server starts the browser.
#[derive(Debug, Clone)]
pub struct BrowserOptions {
    /// The Chromium binary (`chromium` on Debian).
    pub binary: PathBuf,
}

impl Default for BrowserOptions {
    fn default() -> Self {
        Self {
            binary: PathBuf::from("chromium"),
        }
    }
}

/// A headless Chromium in its own process group with a fresh profile directory; the group is
/// SIGKILLed and the directory removed on drop.
pub struct Chromium {
    child: Child,
    pgid: Option<u32>,
    dir: PathBuf,
}

impl Chromium {
    /// Starts `binary` on `url`: headless, no sandbox (root in a network namespace), fake media
    /// devices, host candidates with their addresses (no mDNS names: the caller cannot resolve
    /// them), a profile under the temporary directory. Its output goes to `chromium.log` there.
    /// `loopback`: the caller is on this host's loopback, so the browser offers loopback
    /// candidates too (never otherwise: a caller elsewhere would try them, in its own host).
    pub fn launch(binary: &Path, url: &str, loopback: bool) -> anyhow::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("sidekick-chromium-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let log = std::fs::File::create(dir.join("chromium.log"))?;
        let child = Command::new(binary)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--use-fake-device-for-media-stream",
                "--use-fake-ui-for-media-stream",
                "--disable-features=WebRtcHideLocalIpsWithMdns",
                "--autoplay-policy=no-user-gesture-required",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-gpu",
                "--disable-background-timer-throttling",
                "--disable-renderer-backgrounding",
                "--enable-logging=stderr",
            ])
            .args(loopback.then_some("--allow-loopback-in-peer-connection"))
            .arg(format!("--user-data-dir={}", dir.display()))
            .arg(url)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let pgid = child.id();
        tracing::info!(pid = ?pgid, dir = %dir.display(), "browser started");
        Ok(Self { child, pgid, dir })
    }

    /// Resolves when the browser's main process exits.
    pub async fn exited(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }

    /// The last lines of the browser's log (for errors).
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("chromium.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }

    fn kill_group(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // The browser's helpers (zygote, renderer, GPU, network) share its process group.
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pgid}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.start_kill();
    }

    /// Kills the browser, waits for it, removes its profile.
    pub async fn close(mut self) {
        self.kill_group();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        self.kill_group();
        let _ = self.child.try_wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The page's address: the listening address, loopback when it is the wildcard (a secure
/// context for the page).
pub fn page_url(listen: SocketAddr) -> String {
    let ip = if listen.ip().is_unspecified() {
        std::net::IpAddr::from([127, 0, 0, 1])
    } else {
        listen.ip()
    };
    format!("http://{}/browser", SocketAddr::new(ip, listen.port()))
}

async fn respond_json(s: TcpStream, status: u16, v: &serde_json::Value) {
    if let Err(e) = respond(s, status, v.to_string().as_bytes()).await {
        tracing::debug!("browser signalling: {e:#}");
    }
}

/// Answers the caller's offer (`caller`: its `/offer` connection, still open) with a browser,
/// serves the page's requests, and answers the caller's `/report` with the browser's figures.
/// The browser is gone when this returns.
pub async fn browser_call(
    tcp: &TcpListener,
    caller: TcpStream,
    offer_sdp: &str,
    opts: &BrowserOptions,
    max_call: Duration,
) -> anyhow::Result<()> {
    let listen = tcp.local_addr()?;
    let mut browser = Chromium::launch(&opts.binary, &page_url(listen), listen.ip().is_loopback())?;
    let end = serve(tcp, caller, offer_sdp, &mut browser, max_call).await;
    if end.error.is_some() {
        tracing::warn!("browser log:\n{}", browser.log_tail());
    }
    // The browser goes before the caller has its answer: a caller (the lab) that ends this
    // server as soon as it has the report must not leave the browser's profile behind.
    browser.close().await;
    if let Some((c, status, body)) = end.answer {
        respond_json(c, status, &body).await;
    }
    end.error.map_or(Ok(()), Err)
}

/// How a browser call ended: the caller's pending request and its answer, and the error if it
/// failed.
struct Ending {
    answer: Option<(TcpStream, u16, serde_json::Value)>,
    error: Option<anyhow::Error>,
}

impl Ending {
    fn report(c: TcpStream, log: &StatsLog) -> Self {
        Self {
            answer: Some((c, 200, log.report().into())),
            error: None,
        }
    }

    fn failed(c: Option<TcpStream>, status: u16, error: anyhow::Error) -> Self {
        Self {
            answer: c.map(|c| {
                (
                    c,
                    status,
                    serde_json::json!({ "error": format!("{error:#}") }),
                )
            }),
            error: Some(error),
        }
    }
}

async fn serve(
    tcp: &TcpListener,
    caller: TcpStream,
    offer_sdp: &str,
    browser: &mut Chromium,
    max_call: Duration,
) -> Ending {
    let started = Instant::now();
    let mut caller = Some(caller);
    let mut report_to: Option<(TcpStream, Instant)> = None;
    let mut log = StatsLog::default();
    loop {
        let deadline = match (&caller, &report_to) {
            (Some(_), _) => started + ANSWER_TIMEOUT,
            (None, Some((_, asked))) => *asked + LAST_SAMPLE_WAIT,
            (None, None) => started + max_call,
        };
        let next = tokio::select! {
            r = accept_request(tcp, Duration::from_secs(10)) => Some(r),
            () = tokio::time::sleep_until(deadline.into()) => None,
            st = browser.exited() => {
                let pending = caller.take().or(report_to.take().map(|r| r.0));
                return Ending::failed(pending, 502, anyhow::anyhow!("the browser exited ({st:?})"));
            }
        };
        let (s, req) = match next {
            Some(Ok(x)) => x,
            Some(Err(e)) => {
                tracing::debug!("browser signalling: {e:#}");
                continue;
            }
            None => {
                if let Some(c) = caller.take() {
                    let e = anyhow::anyhow!("the browser did not answer within {ANSWER_TIMEOUT:?}");
                    return Ending::failed(Some(c), 504, e);
                }
                if let Some((c, _)) = report_to.take() {
                    // No sample since the request: report what there is.
                    return Ending::report(c, &log);
                }
                let e = anyhow::anyhow!("no report request within {max_call:?}");
                return Ending::failed(None, 504, e);
            }
        };
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/browser") => {
                let page = respond_typed(s, 200, "text/html; charset=utf-8", PAGE.as_bytes());
                if let Err(e) = page.await {
                    tracing::debug!("serving the page: {e:#}");
                }
            }
            ("POST", "/browser/offer") => {
                respond_json(s, 200, &serde_json::json!({ "offer": offer_sdp })).await;
            }
            ("POST", "/browser/answer") => {
                #[derive(Deserialize)]
                struct Answer {
                    answer: String,
                }
                let Ok(a) = serde_json::from_slice::<Answer>(&req.body) else {
                    respond_json(s, 400, &serde_json::json!({"error": "bad answer"})).await;
                    continue;
                };
                respond_json(s, 200, &serde_json::json!({})).await;
                if let Some(c) = caller.take() {
                    tracing::info!(after = ?started.elapsed(), "browser answered");
                    match serde_json::to_value(OfferResponse { answer: a.answer }) {
                        Ok(v) => respond_json(c, 200, &v).await,
                        Err(e) => return Ending::failed(None, 500, e.into()),
                    }
                }
            }
            ("POST", "/browser/stats") => {
                let sample = parse_stats_post(&req.body);
                let stop = report_to.is_some();
                respond_json(s, 200, &serde_json::json!({ "stop": stop })).await;
                match sample {
                    Ok(x) => log.push(x),
                    Err(e) => tracing::debug!("browser stats: {e}"),
                }
                if let Some((c, _)) = report_to.take() {
                    return Ending::report(c, &log);
                }
            }
            ("POST", "/browser/error") => {
                respond_json(s, 200, &serde_json::json!({})).await;
                let text = String::from_utf8_lossy(&req.body)
                    .chars()
                    .take(500)
                    .collect::<String>();
                let e = anyhow::anyhow!("the browser's page failed: {text}");
                return Ending::failed(caller.take(), 502, e);
            }
            ("POST", "/report") if caller.is_none() => {
                report_to = Some((s, Instant::now()));
            }
            _ => respond_json(s, 404, &serde_json::json!({"error": "no such request"})).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_url_prefers_loopback_for_the_wildcard() {
        assert_eq!(
            page_url("0.0.0.0:4000".parse().unwrap()),
            "http://127.0.0.1:4000/browser"
        );
        assert_eq!(
            page_url("10.0.1.1:4000".parse().unwrap()),
            "http://10.0.1.1:4000/browser"
        );
    }
}
