//! The hardened daemon, as the real binary in network namespaces (lab tests: `SIDEKICK_LAB=1`,
//! root):
//!
//! - after setup the packet-processing process has no capability left (`CapEff` 0 in
//!   `/proc/PID/status`, every thread), and it speaks the service-manager protocol to the
//!   `NOTIFY_SOCKET` it is given: `READY=1`, then `WATCHDOG=1` at a quarter of `WATCHDOG_USEC`,
//!   `STOPPING=1` on SIGTERM;
//! - bridge mode fails open: a TCP download through the bridging proxy completes although its
//!   worker is SIGKILLed and later its replacement frozen (SIGSTOP) mid-transfer, and a UDP echo
//!   stream running alongside never goes unanswered for 1 s.
//!
//! ```text
//! ns cl (10.222.252.2) ── veth ── ns ap: sidekick-proxy --mode bridge ── veth ── ns sv (10.222.252.3)
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{lab, sh};

use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Namespaces and processes removed on every way out.
struct Cleanup {
    netns: Vec<String>,
    children: Vec<Child>,
    files: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Workers left behind by a killed supervisor live in the ap namespace.
        for ns in &self.netns {
            if let Ok(o) = Command::new("ip").args(["netns", "pids", ns]).output() {
                for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                    let _ = sh(&["kill", "-KILL", pid]);
                }
            }
            let _ = sh(&["ip", "netns", "del", ns]);
        }
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// A `NOTIFY_SOCKET` (a path: abstract sockets do not cross network namespaces).
fn notify_socket(tag: &str, c: &mut Cleanup) -> (UnixDatagram, String) {
    let path = format!("/tmp/sidekick-notify-{tag}-{}.sock", std::process::id());
    let _ = std::fs::remove_file(&path);
    let s = UnixDatagram::bind(&path).unwrap();
    c.files.push(path.clone());
    (s, path)
}

/// Notifications received until `until` or until `stop` returns true for one.
fn notifications(s: &UnixDatagram, until: Instant, stop: impl Fn(&str) -> bool) -> Vec<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while Instant::now() < until {
        s.set_read_timeout(Some(
            until
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ))
        .unwrap();
        let Ok(k) = s.recv(&mut buf) else { break };
        let m = String::from_utf8_lossy(&buf[..k]).into_owned();
        let done = stop(&m);
        got.push(m);
        if done {
            break;
        }
    }
    got
}

/// A `CapXxx:` line of /proc/PID/status (or of one thread's status file) as a mask.
fn cap(status_path: &str, field: &str) -> u64 {
    let s = std::fs::read_to_string(status_path).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap()
}

/// The effective capabilities of every thread of `pid`.
fn thread_caps(pid: u32) -> Vec<u64> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| {
            let t = t.unwrap().file_name();
            cap(
                &format!("/proc/{pid}/task/{}/status", t.to_string_lossy()),
                "CapEff:",
            )
        })
        .collect()
}

/// The proxy processes whose parent is `pid` (from /proc/*/stat; the `ip` commands the
/// supervisor runs are left out).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u32>().ok());
        let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
        if ppid == Some(pid) && comm.trim() == "sidekick-proxy" {
            out.push(p);
        }
    }
    out
}

const CAP_NET_ADMIN: u64 = 1 << 12;
const CAP_NET_RAW: u64 = 1 << 13;

#[test]
fn sniffing_daemon_drops_every_capability_and_notifies() {
    if !lab() {
        return;
    }
    let id = std::process::id() % 100_000;
    let ns = format!("skhn{id}");
    let mut c = Cleanup {
        netns: vec![ns.clone()],
        children: Vec::new(),
        files: Vec::new(),
    };
    assert!(sh(&["ip", "netns", "add", &ns]));
    assert!(sh(&[
        "ip", "-n", &ns, "link", "add", "a0", "type", "veth", "peer", "name", "b0"
    ]));
    assert!(sh(&["ip", "-n", &ns, "link", "set", "a0", "up"]));
    assert!(sh(&["ip", "-n", &ns, "link", "set", "b0", "up"]));
    let (notify, path) = notify_socket("sniff", &mut c);
    let child = Command::new("ip")
        .args(["netns", "exec", &ns, env!("CARGO_BIN_EXE_sidekick-proxy")])
        .args(["--interface", "a0", "--sidekick-listen", "127.0.0.1:7788"])
        .args(["--metrics-listen", "127.0.0.1:9464"])
        .env("NOTIFY_SOCKET", &path)
        .env("WATCHDOG_USEC", "400000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    c.children.push(child);
    let t0 = Instant::now();
    let got = notifications(&notify, t0 + Duration::from_secs(10), |m| m == "READY=1");
    assert_eq!(got.last().map(String::as_str), Some("READY=1"), "{got:?}");
    // READY comes after the drop: every thread (main and metrics) has nothing left.
    let threads = thread_caps(pid);
    assert!(threads.len() >= 2, "the metrics thread runs: {threads:?}");
    assert!(
        threads.iter().all(|&c| c == 0),
        "CapEff per thread: {threads:x?}"
    );
    let status = format!("/proc/{pid}/status");
    for field in ["CapEff:", "CapPrm:", "CapInh:", "CapAmb:", "CapBnd:"] {
        assert_eq!(cap(&status, field), 0, "{field}");
    }
    // WATCHDOG=1 every 100 ms (a quarter of WATCHDOG_USEC).
    let t1 = Instant::now();
    let beats = notifications(&notify, t1 + Duration::from_secs(1), |_| false);
    let n = beats.iter().filter(|m| *m == "WATCHDOG=1").count();
    assert!(
        (6..=12).contains(&n),
        "{n} watchdog messages in 1 s: {beats:?}"
    );
    assert!(sh(&["kill", "-TERM", &pid.to_string()]));
    let got = notifications(&notify, Instant::now() + Duration::from_secs(3), |m| {
        m == "STOPPING=1"
    });
    assert_eq!(
        got.last().map(String::as_str),
        Some("STOPPING=1"),
        "{got:?}"
    );
    let mut child = c.children.pop().unwrap();
    let end = Instant::now() + Duration::from_secs(3);
    while child.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(child.try_wait().unwrap().is_some_and(|s| s.success()));
    eprintln!(
        "ready after {:?}; CapEff 0 on {} threads; {n} watchdog messages in 1 s",
        t1 - t0,
        threads.len()
    );
}

/// The client and server sides of the fail-open transfer (Python: the test needs no stack).
const SERVER_PY: &str = r"
import socket, threading, time, sys
N = int(sys.argv[1])
def echo():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(('10.222.252.3', 9001))
    while True:
        d, a = u.recvfrom(100)
        u.sendto(d, a)
threading.Thread(target=echo, daemon=True).start()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('10.222.252.3', 9000)); s.listen(1)
c, _ = s.accept()
chunk = bytes(range(256)) * 64
sent = 0; t0 = time.time()
while sent < N:
    c.sendall(chunk); sent += len(chunk)
    # 2 MB/s: the transfer spans both faults.
    d = sent / 2e6 - (time.time() - t0)
    if d > 0: time.sleep(d)
c.close()
";

const CLIENT_PY: &str = r"
import socket, threading, time, sys, json
N = int(sys.argv[1])
replies = []; stop = False
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(0.05)
def ping():
    i = 0
    while not stop:
        u.sendto(i.to_bytes(4, 'big'), ('10.222.252.3', 9001)); i += 1
        try:
            while True:
                u.recvfrom(100); replies.append(time.time())
        except Exception: pass
threading.Thread(target=ping, daemon=True).start()
s = socket.create_connection(('10.222.252.3', 9000), timeout=30)
t0 = time.time(); got = 0; ok = True; chunk = bytes(range(256))
while True:
    d = s.recv(65536)
    if not d: break
    off = got % 256
    ok = ok and all(d[i] == chunk[(off + i) % 256] for i in range(0, len(d), 97))
    got += len(d)
t1 = time.time(); stop = True
r = [t for t in replies if t0 <= t <= t1]
gaps = [b - a for a, b in zip(r, r[1:])]
print(json.dumps({'bytes': got, 'pattern_ok': ok, 'seconds': t1 - t0, 'echo_replies': len(r),
                  'max_echo_gap_s': max(gaps) if gaps else None}))
";

fn bridge_exists(ns: &str, name: &str) -> bool {
    sh(&["ip", "-n", ns, "link", "show", "dev", name])
}

/// Wait until `f` holds (polling every 10 ms); returns how long it took.
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if f() {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

#[test]
fn bridge_fails_open_when_the_worker_dies_or_hangs() {
    if !lab() {
        return;
    }
    let id = std::process::id() % 100_000;
    let (cl, ap, sv) = (
        format!("skfc{id}"),
        format!("skfa{id}"),
        format!("skfs{id}"),
    );
    let mut c = Cleanup {
        netns: vec![cl.clone(), ap.clone(), sv.clone()],
        children: Vec::new(),
        files: Vec::new(),
    };
    let ok = sh(&["ip", "netns", "add", &cl])
        && sh(&["ip", "netns", "add", &ap])
        && sh(&["ip", "netns", "add", &sv])
        && sh(&[
            "ip", "link", "add", "c0", "netns", &cl, "type", "veth", "peer", "name", "lan0",
            "netns", &ap,
        ])
        && sh(&[
            "ip", "link", "add", "s0", "netns", &sv, "type", "veth", "peer", "name", "wan0",
            "netns", &ap,
        ])
        && sh(&[
            "ip",
            "-n",
            &cl,
            "addr",
            "add",
            "10.222.252.2/24",
            "dev",
            "c0",
        ])
        && sh(&[
            "ip",
            "-n",
            &sv,
            "addr",
            "add",
            "10.222.252.3/24",
            "dev",
            "s0",
        ])
        && ["c0", "lo"]
            .iter()
            .all(|d| sh(&["ip", "-n", &cl, "link", "set", d, "up"]))
        && ["s0", "lo"]
            .iter()
            .all(|d| sh(&["ip", "-n", &sv, "link", "set", d, "up"]))
        && ["lan0", "wan0", "lo"]
            .iter()
            .all(|d| sh(&["ip", "-n", &ap, "link", "set", d, "up"]));
    assert!(ok, "could not build the namespaces");
    let (notify, path) = notify_socket("bridge", &mut c);
    let sup = Command::new("ip")
        .args(["netns", "exec", &ap, env!("CARGO_BIN_EXE_sidekick-proxy")])
        .args(["--mode", "bridge", "--client-interface", "lan0"])
        .args([
            "--server-interface",
            "wan0",
            "--sidekick-listen",
            "127.0.0.1:7788",
        ])
        .args(["--no-metrics", "--fail-open-bridge", "skfo0"])
        .env("NOTIFY_SOCKET", &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sup_pid = sup.id();
    c.children.push(sup);
    let got = notifications(&notify, Instant::now() + Duration::from_secs(10), |m| {
        m == "READY=1"
    });
    assert_eq!(got.last().map(String::as_str), Some("READY=1"), "{got:?}");
    // The supervisor relays READY once its worker forwards; the fail-open bridge is gone then.
    assert!(
        wait_for(Duration::from_secs(2), || !bridge_exists(&ap, "skfo0")).is_some(),
        "the fail-open bridge stayed"
    );
    let worker = children(sup_pid);
    assert_eq!(worker.len(), 1, "one worker: {worker:?}");
    let worker = worker[0];
    let sup_caps = cap(&format!("/proc/{sup_pid}/status"), "CapEff:");
    assert_eq!(
        sup_caps,
        CAP_NET_ADMIN | CAP_NET_RAW,
        "supervisor CapEff {sup_caps:x}"
    );
    let w_caps = thread_caps(worker);
    assert!(w_caps.iter().all(|&c| c == 0), "worker CapEff {w_caps:x?}");

    // A 12 MB download at 2 MB/s (6 s), a UDP echo every 50 ms alongside.
    let n = 16_384 * 732u64; // whole chunks of the server's 16 KiB writes
    let server = Command::new("ip")
        .args([
            "netns",
            "exec",
            &sv,
            "python3",
            "-c",
            SERVER_PY,
            &n.to_string(),
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    c.children.push(server);
    std::thread::sleep(Duration::from_millis(300));
    let client = Command::new("ip")
        .args([
            "netns",
            "exec",
            &cl,
            "python3",
            "-c",
            CLIENT_PY,
            &n.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));

    // Fault 1: the worker is SIGKILLed. The supervisor sees the exit and opens the bridge.
    assert!(sh(&["kill", "-KILL", &worker.to_string()]));
    let opened = wait_for(Duration::from_secs(1), || bridge_exists(&ap, "skfo0"));
    assert!(
        opened.is_some(),
        "no fail-open bridge within 1 s of the kill"
    );
    // A new worker starts after 1 s and takes over again.
    let next = wait_for(Duration::from_secs(5), || {
        children(sup_pid).iter().any(|&p| p != worker) && !bridge_exists(&ap, "skfo0")
    });
    assert!(next.is_some(), "no new worker took over");
    let worker2 = children(sup_pid)[0];

    // Fault 2: the new worker hangs (SIGSTOP): silent for fail_open_hang_ms (500 ms), it is
    // killed and the bridge forwards.
    std::thread::sleep(Duration::from_millis(500));
    assert!(sh(&["kill", "-STOP", &worker2.to_string()]));
    let opened2 = wait_for(Duration::from_secs(1), || bridge_exists(&ap, "skfo0"));
    assert!(
        opened2.is_some(),
        "no fail-open bridge within 1 s of the hang"
    );

    let out = client.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!(
        "kill → bridge open in {opened:?}, new worker forwarding {next:?} later; \
         hang → bridge open in {opened2:?}; transfer: {report}"
    );
    assert!(out.status.success(), "client failed: {report}");
    assert!(report.contains(&format!("\"bytes\": {n}")), "{report}");
    assert!(report.contains("\"pattern_ok\": true"), "{report}");
    let gap: f64 = report
        .split("\"max_echo_gap_s\": ")
        .nth(1)
        .and_then(|r| r.trim_end_matches(['}', '\n']).parse().ok())
        .unwrap();
    assert!(gap < 1.0, "UDP echo interrupted for {gap:.3} s");

    // SIGTERM: the supervisor leaves the kernel bridge forwarding and exits cleanly.
    let mut sup = c.children.remove(0);
    assert!(sh(&["kill", "-TERM", &sup_pid.to_string()]));
    let end = Instant::now() + Duration::from_secs(5);
    while sup.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(sup.try_wait().unwrap().is_some_and(|s| s.success()));
    assert!(bridge_exists(&ap, "skfo0"), "bridge removed on stop");

    // `--restore-bridge` (the unit's ExecStopPost) builds the bridge from the configuration.
    assert!(sh(&["ip", "-n", &ap, "link", "del", "skfo0"]));
    let restore = |mode: &str| {
        Command::new("ip")
            .args(["netns", "exec", &ap, env!("CARGO_BIN_EXE_sidekick-proxy")])
            .args([
                "--mode",
                mode,
                "--client-interface",
                "lan0",
                "--interface",
                "lan0",
            ])
            .args([
                "--server-interface",
                "wan0",
                "--sidekick-listen",
                "127.0.0.1:7788",
            ])
            .args(["--fail-open-bridge", "skfo0", "--restore-bridge"])
            .stderr(Stdio::null())
            .status()
            .unwrap()
    };
    assert!(
        !restore("sniff").success(),
        "--restore-bridge acted in sniff mode"
    );
    assert!(restore("bridge").success());
    let ports = Command::new("ip")
        .args(["-n", &ap, "-o", "link", "show", "master", "skfo0"])
        .output()
        .unwrap();
    let ports = String::from_utf8_lossy(&ports.stdout);
    assert!(ports.contains("lan0") && ports.contains("wan0"), "{ports}");
}
