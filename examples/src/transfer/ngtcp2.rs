//! ngtcp2 in the transfer: Debian's `ngtcp2-server` / `ngtcp2-client` packages (ngtcp2 0.12 with
//! nghttp3, the GnuTLS examples `gtlsserver` and `gtlsclient`), driven so that they speak the
//! HTTP/3 side of the transfer protocol ([`super`]): `GET /download/N` and `POST /upload/N`.
//!
//! - **Server**: `gtlsserver` serves files from a document root. [`prepare_htdocs`] makes a
//!   per-process directory `sidekick-ngtcp2-PID` in the temporary directory with a sparse file
//!   `download/N` of N bytes for every size asked for, and a fresh self-signed certificate; the
//!   wrapper then *replaces itself* with `gtlsserver` (`exec`), so whoever stops the wrapper stops
//!   the server. Directories of processes that no longer run are removed at the next start (the
//!   only cap the exec leaves room for). `gtlsserver` reads and discards request bodies and has
//!   no `/stats`: clients report its counters as unknown, and uploads to it are not measured
//!   (there is no summary of what it received).
//! - **Client**: `gtlsclient` with its debug log on stderr. The log's library lines start with
//!   `I` and the milliseconds since the connection started (`I00000066 0x…`); the goodput
//!   interval runs from the handshake's completion (the request leaves then, as with the other
//!   clients) to the request stream's close, both read at the latest library timestamp before
//!   the application's line ([`LogClock`]). The body is saved with `--download` and its length
//!   checked. Upload: `-d FILE -m POST`; the server's [`Summary`] (the response body) gives the
//!   received byte count and its last-byte time.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};

use super::{Summary, TransferDirection, TransferReport, unix_ns, upload_duration};

/// Stack name in reports and in the lab (`app.stack` / `app.client_stack`).
pub const NAME: &str = "ngtcp2";

/// The server program (`ngtcp2-server`), overridable with `$SIDEKICK_GTLSSERVER`.
pub fn server_program() -> PathBuf {
    std::env::var_os("SIDEKICK_GTLSSERVER").map_or_else(|| "gtlsserver".into(), PathBuf::from)
}

/// The client program (`ngtcp2-client`), overridable with `$SIDEKICK_GTLSCLIENT`.
pub fn client_program() -> PathBuf {
    std::env::var_os("SIDEKICK_GTLSCLIENT").map_or_else(|| "gtlsclient".into(), PathBuf::from)
}

const DIR_PREFIX: &str = "sidekick-ngtcp2-";

/// At most this many distinct sizes served by one server (each a sparse file).
pub const MAX_SIZES: usize = 64;

/// The server's files: document root, certificate and key.
#[derive(Debug)]
pub struct Htdocs {
    /// Per-process directory holding everything below.
    pub dir: PathBuf,
    /// Document root (`download/N` files).
    pub root: PathBuf,
    /// Certificate, PEM.
    pub cert: PathBuf,
    /// Private key, PEM.
    pub key: PathBuf,
}

/// Removes `sidekick-ngtcp2-PID` directories in `tmp` whose process no longer runs.
pub fn remove_stale(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(DIR_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Makes the document root of this process in `tmp`: a sparse `download/N` file of N bytes per
/// size (the content is zeros; QUIC encrypts it, so the wire does not tell), and a fresh
/// self-signed certificate for `localhost`.
pub fn prepare_htdocs(tmp: &Path, sizes: &[u64]) -> anyhow::Result<Htdocs> {
    if sizes.len() > MAX_SIZES {
        bail!("{} sizes asked for (at most {MAX_SIZES})", sizes.len());
    }
    remove_stale(tmp);
    let dir = tmp.join(format!("{DIR_PREFIX}{}", std::process::id()));
    let root = dir.join("htdocs");
    let downloads = root.join("download");
    std::fs::create_dir_all(&downloads)
        .with_context(|| format!("creating {}", downloads.display()))?;
    for &n in sizes {
        let p = downloads.join(n.to_string());
        let f = std::fs::File::create(&p).with_context(|| format!("creating {}", p.display()))?;
        f.set_len(n)
            .with_context(|| format!("sizing {} to {n} bytes", p.display()))?;
    }
    let cert = super::cert::SelfSigned::generate()?;
    let files = Htdocs {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
        dir,
        root,
    };
    std::fs::write(&files.cert, &cert.cert_pem).context("writing the certificate")?;
    std::fs::write(&files.key, &cert.key_pem).context("writing the key")?;
    Ok(files)
}

/// `gtlsserver`'s arguments for `listen` (its address and port are separate arguments).
pub fn server_args(files: &Htdocs, listen: std::net::SocketAddr) -> Vec<String> {
    vec![
        "--quiet".into(),
        format!("--htdocs={}", files.root.display()),
        listen.ip().to_string(),
        listen.port().to_string(),
        files.key.display().to_string(),
        files.cert.display().to_string(),
    ]
}

/// `gtlsclient`'s arguments for one transfer: the response body goes to `save_dir`; an upload
/// sends `body` as a POST.
pub fn client_args(
    connect: std::net::SocketAddr,
    direction: TransferDirection,
    bytes: u64,
    save_dir: &Path,
    body: Option<&Path>,
) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "--exit-on-all-streams-close".into(),
        "--no-quic-dump".into(),
        "--no-http-dump".into(),
        format!("--download={}", save_dir.display()),
    ];
    if let Some(b) = body {
        a.push(format!("--data={}", b.display()));
        a.push("--http-method=POST".into());
    }
    a.push(connect.ip().to_string());
    a.push(connect.port().to_string());
    a.push(format!(
        "https://localhost:{}/{}/{bytes}",
        connect.port(),
        direction.name()
    ));
    a
}

/// Reads `gtlsclient`'s debug log line by line: the library's millisecond clock and the
/// events of the transfer.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LogClock {
    /// Latest library timestamp seen, ms since the connection started.
    pub now_ms: Option<u64>,
    /// When the handshake completed (ms).
    pub handshake_ms: Option<u64>,
    /// When the request's headers were submitted (ms; may precede the handshake).
    pub request_ms: Option<u64>,
    /// When the request stream closed (ms) and its HTTP/3 error code (256 = H3_NO_ERROR).
    pub closed: Option<(u64, u64)>,
    /// `:status` of the response.
    pub status: Option<u16>,
    /// Packets the client sent (`pkt tx` lines).
    pub sent_packets: u64,
    /// When the first bytes of the response arrived (ms): the first received STREAM frame of
    /// the request stream (id 0) that carries data — the time to first byte, on the library's
    /// clock, which starts with the connection as the other clients' `ttfb_ms` does.
    pub first_response_ms: Option<u64>,
}

impl LogClock {
    /// Consumes one line of the log.
    pub fn line(&mut self, l: &str) {
        if let Some(ts) = l
            .strip_prefix('I')
            .and_then(|r| r.get(..8))
            .and_then(|d| d.parse::<u64>().ok())
        {
            self.now_ms = Some(ts);
            let mut words = l.split_whitespace().skip(2);
            match (words.next(), words.next()) {
                (Some("pkt"), Some("tx")) => self.sent_packets += 1,
                // `frm rx PKN TYPE STREAM(0x..) id=0x0 fin=F offset=O len=N uni=0`
                (Some("frm"), Some("rx")) if self.first_response_ms.is_none() => {
                    let mut fields = words.skip(2);
                    let stream = fields.next().is_some_and(|f| f.starts_with("STREAM("));
                    let request = fields.next() == Some("id=0x0");
                    let data = fields
                        .find_map(|f| f.strip_prefix("len="))
                        .and_then(|n| n.parse::<u64>().ok())
                        .is_some_and(|n| n > 0);
                    if stream && request && data {
                        self.first_response_ms = Some(ts);
                    }
                }
                _ => {}
            }
            return;
        }
        let now = self.now_ms.unwrap_or(0);
        if l.starts_with("QUIC handshake has completed") {
            self.handshake_ms.get_or_insert(now);
        } else if l.starts_with("http: stream 0x0 submit request headers") {
            self.request_ms.get_or_insert(now);
        } else if let Some(code) = l
            .strip_prefix("HTTP stream 0 closed with error code ")
            .and_then(|c| c.trim().parse::<u64>().ok())
        {
            self.closed.get_or_insert((now, code));
        } else if let Some(s) = l
            .strip_prefix("http: stream 0x0 [:status: ")
            .and_then(|r| r.strip_suffix(']'))
            .and_then(|s| s.parse::<u16>().ok())
        {
            self.status.get_or_insert(s);
        }
    }

    /// The goodput interval: from the later of the handshake's completion and the request's
    /// submission to the stream's close, if the stream closed without error after a 200.
    pub fn interval(&self) -> anyhow::Result<Duration> {
        let (end, code) = self.closed.context("the request stream never closed")?;
        if code != 0x100 {
            bail!("the request stream closed with HTTP/3 error {code:#x}");
        }
        match self.status {
            Some(200) => {}
            Some(s) => bail!("server answered {s}"),
            None => bail!("no response status"),
        }
        let start = self
            .handshake_ms
            .context("no handshake")?
            .max(self.request_ms.unwrap_or(0));
        Ok(Duration::from_millis(end.saturating_sub(start)))
    }
}

/// The report of a download: `body_len` bytes were saved; the sender (server) counters are
/// unknown, the client's sent packets come from the log.
pub fn download_report(
    bytes: u64,
    body_len: u64,
    log: &LogClock,
) -> anyhow::Result<TransferReport> {
    let d = log.interval()?;
    if body_len != bytes {
        bail!("download ended after {body_len} of {bytes} bytes");
    }
    let mut r = report(
        TransferDirection::Download,
        bytes,
        d,
        None,
        log.sent_packets,
    );
    r.ttfb_ms = log.first_response_ms.map(|ms| ms as f64);
    Ok(r)
}

/// The report of an upload: the response body is the server's [`Summary`]; `start_unix_ns` is
/// the wall clock when the handshake completed (the server's last-byte time is used when the
/// clocks agree, as for the other clients).
pub fn upload_report(
    bytes: u64,
    body: &[u8],
    log: &LogClock,
    start_unix_ns: u64,
) -> anyhow::Result<TransferReport> {
    let elapsed = log.interval()?;
    let s = Summary::decode(body).context("the server's summary")?;
    if s.bytes != bytes {
        bail!("server received {} of {bytes} bytes", s.bytes);
    }
    let d = upload_duration(start_unix_ns, &s, elapsed);
    Ok(report(
        TransferDirection::Upload,
        bytes,
        d,
        Some(log.sent_packets),
        s.sent_packets,
    ))
}

fn report(
    direction: TransferDirection,
    bytes: u64,
    d: Duration,
    sender_sent: Option<u64>,
    receiver_sent: u64,
) -> TransferReport {
    let secs = d.as_secs_f64();
    TransferReport {
        stack: NAME,
        direction: direction.name(),
        bytes,
        duration_s: secs,
        goodput_mbps: if secs > 0.0 {
            bytes as f64 * 8.0 / secs / 1e6
        } else {
            0.0
        },
        retransmissions: None,
        lost_packets: None,
        spurious_lost_packets: None,
        sent_packets: sender_sent,
        receiver_sent_packets: receiver_sent,
        sidekick: None,
        ttfb_ms: None,
        connect_ms: None,
        upload_goodput_mbps: None,
        download_goodput_mbps: None,
    }
}

/// Wall clock now, ns since the Unix epoch.
pub fn now_unix_ns() -> u64 {
    unix_ns(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as gtlsclient 0.12.1 prints them (abridged from a real run).
    const LOG: &str = "I00000005 0xcd98 pkt tx pkn=0 dcid=0xdb01 type=Initial len=0
I00000005 0xcd98 frm tx 0 Initial CRYPTO(0x06) offset=0 len=371
http: control stream=2
I00000007 0xcd98 con recv packet len=1280
QUIC handshake has completed
Negotiated ALPN is h3
http: stream 0x0 submit request headers
I00000009 0xcd98 pkt tx pkn=1 dcid=0xf94a type=1RTT k=0
I00000010 0xcd98 frm rx 0 1RTT STREAM(0x0a) id=0x3 fin=0 offset=0 len=18 uni=1
I00000012 0xcd98 frm rx 2 1RTT STREAM(0x0a) id=0x0 fin=0 offset=0 len=596 uni=0
http: stream 0x0 response headers started
http: stream 0x0 [:status: 200]
http: stream 0x0 [content-length: 1000000]
I00000059 0xcd98 pkt tx pkn=2 dcid=0xf94a type=1RTT k=0
HTTP stream 0 closed with error code 256
";

    #[test]
    fn log_clock_reads_the_interval() {
        let mut c = LogClock::default();
        for l in LOG.lines() {
            c.line(l);
        }
        assert_eq!(c.handshake_ms, Some(7));
        assert_eq!(c.request_ms, Some(7));
        assert_eq!(c.closed, Some((59, 256)));
        assert_eq!(c.status, Some(200));
        assert_eq!(c.sent_packets, 3);
        // The first data on the request stream, not the server's control stream before it.
        assert_eq!(c.first_response_ms, Some(12));
        assert_eq!(c.interval().unwrap(), Duration::from_millis(52));
        let r = download_report(1_000_000, 1_000_000, &c).unwrap();
        assert_eq!(r.ttfb_ms, Some(12.0));
        assert!((r.goodput_mbps - 8e6 / 0.052 / 1e6).abs() < 1e-9);
        let line = serde_json::to_string(&r).unwrap();
        assert!(
            line.starts_with(
                r#"{"stack":"ngtcp2","direction":"download","bytes":1000000,"duration_s":0.052,"#
            ),
            "{line}"
        );
        assert!(!line.contains("lost_packets"), "{line}");
        assert!(download_report(1_000_000, 999_999, &c).is_err());
    }

    #[test]
    fn log_clock_refuses_failed_streams() {
        let mut c = LogClock::default();
        for l in LOG.lines() {
            c.line(
                &l.replace("error code 256", "error code 270")
                    .replace(":status: 200", ":status: 404"),
            );
        }
        assert!(c.interval().is_err());
        let mut c = LogClock::default();
        for l in LOG.lines().filter(|l| !l.starts_with("HTTP stream")) {
            c.line(l);
        }
        assert!(c.interval().is_err());
        // Garbage never panics.
        for l in [
            "I",
            "I0000",
            "Ixxxxxxxx a b",
            "HTTP stream 0 closed with error code ",
            "http: stream 0x0 [:status: 99999999]",
            "I00000001 0x frm rx",
            "I00000001 0x frm rx 1 1RTT STREAM(0x0a) id=0x0 fin=0 offset=0 len=x",
        ] {
            LogClock::default().line(l);
        }
    }

    #[test]
    fn htdocs_has_sparse_files_and_a_certificate() {
        let tmp = std::env::temp_dir().join(format!("sk-ngtcp2-test-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        // A stale directory of a pid that cannot run (above pid_max) is removed.
        let stale = tmp.join(format!("{DIR_PREFIX}4294967295"));
        std::fs::create_dir_all(&stale).unwrap();
        let h = prepare_htdocs(&tmp, &[5_000_000, 10]).unwrap();
        assert!(!stale.exists());
        assert_eq!(
            std::fs::metadata(h.root.join("download/5000000"))
                .unwrap()
                .len(),
            5_000_000
        );
        assert_eq!(
            std::fs::metadata(h.root.join("download/10")).unwrap().len(),
            10
        );
        assert!(
            std::fs::read_to_string(&h.cert)
                .unwrap()
                .contains("BEGIN CERTIFICATE")
        );
        let args = server_args(&h, "0.0.0.0:4433".parse().unwrap());
        assert_eq!(&args[2..4], ["0.0.0.0", "4433"]);
        assert!(prepare_htdocs(&tmp, &[1; MAX_SIZES + 1]).is_err());
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn client_command_line() {
        let a = client_args(
            "10.0.1.1:4433".parse().unwrap(),
            TransferDirection::Upload,
            7,
            Path::new("/t/out"),
            Some(Path::new("/t/body")),
        );
        assert_eq!(
            a,
            [
                "--exit-on-all-streams-close",
                "--no-quic-dump",
                "--no-http-dump",
                "--download=/t/out",
                "--data=/t/body",
                "--http-method=POST",
                "10.0.1.1",
                "4433",
                "https://localhost:4433/upload/7"
            ]
        );
    }
}
