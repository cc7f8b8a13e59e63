//! SIGHUP reloads the proxy's configuration file without dropping sessions or flows
//! (docs/proxy.md "Reloading the configuration"), tested with the real binary in a network
//! namespace and two capture workers (the reload must reach both): an SDK client keeps its
//! Robin session and its quACKs across reloads; a changed live key (`max_threshold`) takes effect
//! for the next session; a file that does not parse, and one that changes a key needing a
//! restart (`shards`), are refused and the running configuration is kept.
//!
//! Namespace test: runs with `SIDEKICK_LAB=1` as root (the lab stage of `scripts/test.sh`).

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{lab, sh};
use sidekick::session::{SidekickClient, SidekickConfig, Transmit};

/// A client-side veth in the root namespace and the ap in its own namespace (the proxy sniffs
/// the ap's client-facing end). The server address is routed through the ap and need not
/// answer: Robin quACKs what the client sends.
struct Topo {
    ap: String,
    host: String,
    net: u8,
    proxy: Option<Child>,
}

impl Drop for Topo {
    fn drop(&mut self) {
        if let Some(mut p) = self.proxy.take() {
            let _ = p.kill();
            let _ = p.wait();
        }
        let _ = sh(&["ip", "link", "del", &self.host]);
        let _ = sh(&["ip", "netns", "del", &self.ap]);
    }
}

impl Topo {
    fn client_ip(&self) -> String {
        format!("10.224.{}.2", self.net)
    }

    fn proxy_ip(&self) -> String {
        format!("10.224.{}.1", self.net)
    }

    fn server(&self) -> SocketAddr {
        format!("10.225.{}.9:4433", self.net).parse().unwrap()
    }

    fn metrics(&self) -> String {
        let Ok(mut s) = TcpStream::connect(format!("{}:19475", self.proxy_ip())) else {
            return String::new();
        };
        let _ = s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    fn metric(&self, line: &str) -> u64 {
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
            .unwrap_or(0)
    }

    fn hup(&self) {
        let pid = self.proxy.as_ref().unwrap().id().to_string();
        assert!(sh(&["kill", "-HUP", &pid]));
        // The main thread reads signals every 50 ms; workers apply a new configuration at
        // their next turn (at least every 100 ms).
        std::thread::sleep(Duration::from_millis(400));
    }
}

fn setup(config: &std::path::Path) -> Topo {
    let id = std::process::id() % 100_000;
    let mut t = Topo {
        ap: format!("skrap{id}"),
        host: format!("skrc{id}"),
        net: (id % 200) as u8 + 20,
        proxy: None,
    };
    let apc = format!("skra{id}");
    let ap = t.ap.clone();
    let (cip, pip) = (t.client_ip(), t.proxy_ip());
    let ok = sh(&["ip", "netns", "add", &ap])
        && sh(&[
            "ip", "link", "add", &t.host, "type", "veth", "peer", "name", &apc,
        ])
        && sh(&["ip", "link", "set", &apc, "netns", &ap])
        && sh(&["ip", "addr", "add", &format!("{cip}/24"), "dev", &t.host])
        && sh(&["ip", "link", "set", &t.host, "up"])
        && sh(&[
            "ip",
            "route",
            "add",
            &format!("10.225.{}.0/24", t.net),
            "via",
            &pip,
            "dev",
            &t.host,
        ])
        && sh(&[
            "ip",
            "netns",
            "exec",
            &ap,
            "ip",
            "addr",
            "add",
            &format!("{pip}/24"),
            "dev",
            &apc,
        ])
        && sh(&["ip", "netns", "exec", &ap, "ip", "link", "set", &apc, "up"])
        && sh(&["ip", "netns", "exec", &ap, "ip", "link", "set", "lo", "up"]);
    assert!(ok, "could not build the namespaces");
    t.proxy = Some(
        Command::new("ip")
            .args(["netns", "exec", &ap, env!("CARGO_BIN_EXE_sidekick-proxy")])
            .arg("--config")
            .arg(config)
            .args(["--interface", &apc, "--faces", "client"])
            .args(["--sidekick-listen", &format!("{pip}:7788")])
            .args(["--metrics-listen", &format!("{pip}:19475")])
            .args(["--workers", "2", "--ring-blocks", "8"])
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the proxy"),
    );
    std::thread::sleep(Duration::from_millis(800));
    t
}

/// One client's sockets and SDK session.
struct Client {
    c: SidekickClient,
    base: UdpSocket,
    sk: UdpSocket,
    server: SocketAddr,
    next: u32,
}

impl Client {
    fn new(t: &Topo, port: u16, threshold: u32) -> Self {
        let base = UdpSocket::bind((t.client_ip().as_str(), port)).unwrap();
        let sk = UdpSocket::bind((t.client_ip().as_str(), port + 1)).unwrap();
        for s in [&base, &sk] {
            s.set_read_timeout(Some(Duration::from_millis(2))).unwrap();
        }
        let mut c = SidekickClient::new(SidekickConfig::robin(10, threshold));
        c.set_base_peer(t.server());
        c.start(Instant::now()).unwrap();
        let mut me = Self {
            c,
            base,
            sk,
            server: t.server(),
            next: 1000,
        };
        for _ in 0..60 {
            me.pump(Duration::from_millis(50));
            if me.c.is_active() {
                break;
            }
        }
        assert!(me.c.is_active(), "no session:\n{}", t.metrics());
        me
    }

    fn pump(&mut self, dur: Duration) {
        let mut buf = vec![0u8; 4096];
        let end = Instant::now() + dur;
        while Instant::now() < end {
            let now = Instant::now();
            while let Some(t) = self.c.poll_transmit() {
                match t {
                    Transmit::Base(b) => {
                        self.base.send_to(&b, self.server).unwrap();
                    }
                    Transmit::Sidekick(a, b) => {
                        self.sk.send_to(&b, a).unwrap();
                    }
                }
            }
            if let Ok((n, from)) = self.sk.recv_from(&mut buf) {
                self.c.on_sidekick_datagram(now, from, &buf[..n]);
            }
            if let Ok((n, _)) = self.base.recv_from(&mut buf) {
                self.c.on_base_received(now, buf[..n].to_vec());
            }
            if self.c.poll_timeout().is_some_and(|t| t <= now) {
                self.c.handle_timeout(now);
            }
            while self.c.poll_event().is_some() {}
            while self.c.poll_deliver().is_some() {}
        }
    }

    /// Upload `n` datagrams 2 ms apart, then let the quACKs come; returns the quACKs received.
    fn upload(&mut self, n: u32) -> u64 {
        let before = self.c.stats().quacks;
        for _ in 0..n {
            let mut p = vec![0x40u8; 300];
            p.extend_from_slice(&self.next.to_le_bytes());
            self.next += 1;
            self.c.on_base_sent(Instant::now(), &p);
            self.base.send_to(&p, self.server).unwrap();
            self.pump(Duration::from_millis(2));
        }
        self.pump(Duration::from_millis(200));
        self.c.stats().quacks - before
    }

    fn threshold(&self) -> u32 {
        self.c
            .session_config()
            .and_then(|s| s.robin.as_ref())
            .map_or(0, |r| r.threshold)
    }
}

#[test]
fn sighup_reloads_live_keys_and_keeps_sessions() {
    if !lab() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("sk-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("proxy.toml");
    std::fs::write(&file, "max_threshold = 64\n").unwrap();
    let t = setup(&file);
    let reloads = |r: &str| t.metric(&format!("sidekick_config_reloads_total{{result=\"{r}\"}}"));

    // A session granted the threshold it asked for (16 ≤ 64), quACKing.
    let mut first = Client::new(&t, 41_600, 16);
    assert_eq!(first.threshold(), 16);
    assert!(first.upload(20) > 0, "{}", t.metrics());
    // Workers publish their counters once a second.
    std::thread::sleep(Duration::from_millis(1200));
    let sessions = t.metric("sidekick_sessions ");
    assert!(sessions >= 1);

    // A live key changes: the next session is granted at most 4; the first keeps its session,
    // its threshold and its quACKs.
    std::fs::write(&file, "max_threshold = 4\n").unwrap();
    t.hup();
    assert_eq!(reloads("applied"), 1, "{}", t.metrics());
    assert!(first.c.is_active());
    assert!(first.upload(20) > 0, "quACKs after the reload");
    assert_eq!(first.threshold(), 16);
    assert_eq!(first.c.stats().inconsistent_quacks, 0);
    // Both workers got the new limit: sessions hash to either (sidekick port + worker), so
    // open several and check every grant.
    let mut later = Vec::new();
    for k in 0..4u16 {
        let c = Client::new(&t, 41_610 + 2 * k, 16);
        assert_eq!(c.threshold(), 4, "client {k}: the reloaded limit");
        later.push(c);
    }
    assert!(later.iter().all(|c| c.c.is_active()));
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(t.metric("sidekick_sessions "), sessions + 4);

    // A file that does not parse is refused; the running configuration stays.
    std::fs::write(&file, "max_threshold = \"many\"\n").unwrap();
    t.hup();
    // A key that needs a restart is refused too.
    std::fs::write(&file, "max_threshold = 64\nshards = 8\n").unwrap();
    t.hup();
    assert_eq!((reloads("applied"), reloads("refused")), (1, 2));
    let c = Client::new(&t, 41_640, 16);
    assert_eq!(c.threshold(), 4, "the refused files changed nothing");
    assert!(first.c.is_active());
    assert!(first.upload(20) > 0);
    // No session or flow was dropped by the reloads: all six sessions are there.
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(t.metric("sidekick_sessions "), sessions + 5);
    let _ = std::fs::remove_dir_all(&dir);
}
