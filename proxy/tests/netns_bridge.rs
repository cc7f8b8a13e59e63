//! The proxy binary in bridge mode, in network namespaces: it alone joins two segments of one
//! subnet. Needs root; skipped with a message otherwise. Always cleans up.
//!
//! ```text
//! ns c (10.222.250.2) ── veth ── ns ap: sidekick-proxy --mode bridge (lan side 10.222.250.1) ── veth ── ns srv (10.222.250.3)
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::{lab, sh};

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The test's namespaces and processes, removed and stopped on every way out.
struct Namespaces {
    ap: String,
    srv: String,
    c: String,
    proxy: Option<Child>,
    server: Option<Child>,
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ch in [self.proxy.as_mut(), self.server.as_mut()]
            .into_iter()
            .flatten()
        {
            let _ = ch.kill();
            let _ = ch.wait();
        }
        for ns in [&self.c, &self.ap, &self.srv] {
            let _ = sh(&["ip", "netns", "del", ns]);
        }
    }
}

/// Bridge mode: the proxy alone joins two segments of one subnet; UDP datagrams (including IP
/// fragments) cross it both ways unchanged. Datagrams to the bridging box's own address (on its
/// client-side interface, where a sidekick socket would listen) reach the box and are not
/// forwarded to the server side.
#[test]
fn bridge_mode_forwards_both_ways() {
    if !lab() {
        eprintln!("skipping bridge test: needs root");
        return;
    }
    let id = std::process::id() % 100_000;
    let mut t = Namespaces {
        ap: format!("skbap{id}"),
        srv: format!("skbsv{id}"),
        c: format!("skbc{id}"),
        proxy: None,
        server: None,
    };
    let cl = t.c.clone();
    let (ap, sv) = (t.ap.clone(), t.srv.clone());
    let (l, w, s0) = (
        format!("skbl{id}"),
        format!("skbw{id}"),
        format!("skbs{id}"),
    );
    let ok = sh(&["ip", "netns", "add", &cl])
        && sh(&["ip", "netns", "add", &ap])
        && sh(&["ip", "netns", "add", &sv])
        && sh(&[
            "ip", "link", "add", "c0", "netns", &cl, "type", "veth", "peer", "name", &l, "netns",
            &ap,
        ])
        && sh(&[
            "ip", "link", "add", &s0, "netns", &sv, "type", "veth", "peer", "name", &w, "netns",
            &ap,
        ])
        && sh(&[
            "ip",
            "-n",
            &cl,
            "addr",
            "add",
            "10.222.250.2/24",
            "dev",
            "c0",
        ])
        && sh(&["ip", "-n", &cl, "link", "set", "c0", "up"])
        && sh(&[
            "ip",
            "-n",
            &sv,
            "addr",
            "add",
            "10.222.250.3/24",
            "dev",
            &s0,
        ])
        && sh(&["ip", "-n", &sv, "link", "set", &s0, "up"])
        && sh(&["ip", "-n", &ap, "link", "set", &l, "up"])
        && sh(&["ip", "-n", &ap, "link", "set", &w, "up"])
        && sh(&["ip", "-n", &ap, "addr", "add", "10.222.250.1/24", "dev", &l]);
    if !ok {
        eprintln!("skipping: could not build the namespaces");
        return;
    }
    // The fail-open kernel bridge carries the frames until a worker is ready; the proxy removes
    // it and then says READY=1 (a path socket: abstract ones do not cross namespaces).
    let notify_path = format!("/tmp/sidekick-notify-bridge-{}.sock", std::process::id());
    let _ = std::fs::remove_file(&notify_path);
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    t.proxy = Some(
        Command::new("ip")
            .args(["netns", "exec", &ap, env!("CARGO_BIN_EXE_sidekick-proxy")])
            .env("NOTIFY_SOCKET", &notify_path)
            .args([
                "--mode",
                "bridge",
                "--client-interface",
                &l,
                "--server-interface",
                &w,
            ])
            .args(["--sidekick-listen", "10.222.250.1:7788", "--no-metrics"])
            .stderr(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut buf = [0u8; 64];
    let ready = notify
        .recv(&mut buf)
        .is_ok_and(|k| buf[..k].starts_with(b"READY=1"));
    let _ = std::fs::remove_file(&notify_path);
    let proxy_bridges = ready && !sh(&["ip", "-n", &ap, "link", "show", "sidekick0"]);
    t.server = Some(
        Command::new("ip")
            .args(["netns", "exec", &sv, "python3", "-c"])
            .arg(
                "import socket\n\
                 s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
                 s.bind(('10.222.250.3',9000))\n\
                 while True:\n\
                 \x20 d,a=s.recvfrom(5000); s.sendto(d,a)\n",
            )
            .spawn()
            .unwrap(),
    );
    let out = Command::new("ip")
        .args(["netns", "exec", &cl, "python3", "-c"])
        .arg(
            "import socket,time\n\
             s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(1)\n\
             ok=set(); end=time.time()+20\n\
             while len(ok)<5 and time.time()<end:\n\
             \x20 for i in range(5):\n\
             \x20\x20 if i in ok: continue\n\
             \x20\x20 s.sendto(bytes([i])*(100+i*700),('10.222.250.3',9000))\n\
             \x20\x20 try:\n\
             \x20\x20\x20 d,_=s.recvfrom(5000); ok.add(d[0]) if len(d)==100+d[0]*700 else None\n\
             \x20\x20 except Exception: pass\n\
             print(len(ok))\n",
        )
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "5",
        "echoes through the bridge"
    );
    // 200 datagrams to the box itself: its own listener gets them, the server side does not.
    let rx_packets = || {
        let out = Command::new("ip")
            .args(["netns", "exec", &sv, "cat"])
            .arg(format!("/sys/class/net/{s0}/statistics/rx_packets"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let own = Command::new("ip")
        .args(["netns", "exec", &ap, "python3", "-c"])
        .arg(
            "import socket\n\
             s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(3)\n\
             s.bind(('10.222.250.1',9001)); n=0\n\
             try:\n\
             \x20 while n<200: s.recvfrom(2000); n+=1\n\
             except Exception: pass\n\
             print(n)\n",
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let before = rx_packets();
    let sent = Command::new("ip")
        .args(["netns", "exec", &cl, "python3", "-c"])
        .arg(
            "import socket,time\n\
             s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
             for i in range(200):\n\
             \x20 s.sendto(b'x'*500,('10.222.250.1',9001)); time.sleep(0.002)\n",
        )
        .status()
        .unwrap();
    assert!(sent.success());
    let own = own.wait_with_output().unwrap();
    let reached = String::from_utf8_lossy(&own.stdout).trim().to_string();
    std::thread::sleep(Duration::from_millis(200));
    let forwarded = rx_packets() - before;
    let _ = sh(&["ip", "netns", "del", &cl]);
    assert!(
        proxy_bridges,
        "the worker never took over from the fail-open bridge"
    );
    assert_eq!(reached, "200", "datagrams to the box reach its socket");
    // The client's ARP request for the box's address is a broadcast and crosses the bridge.
    assert!(
        forwarded <= 20,
        "{forwarded} frames reached the server side while the client sent 200 datagrams to the box"
    );
    let mut proxy = t.proxy.take().unwrap();
    assert!(sh(&["kill", "-TERM", &proxy.id().to_string()]));
    let end = Instant::now() + Duration::from_secs(3);
    while proxy.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(proxy.try_wait().unwrap().is_some_and(|s| s.success()));
}
