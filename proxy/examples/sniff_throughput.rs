//! Sniff-mode throughput of the real `sidekick-proxy` binary (issue 7, "a lab measurement of
//! sniff-mode throughput"; Sidekick (NSDI '24) §6.4 reports 464 k packets/s on one core with recvfrom).
//!
//! Two network namespaces joined by a veth pair. A blaster in the first sends UDP datagrams to
//! many destinations (one flow each) routed through the veth; the second namespace drops them
//! in its IP layer (not addressed to it, forwarding off), so the only work on that side is the
//! proxy's AF_PACKET capture on the veth end. The proxy runs pinned to one core, the blaster to
//! the other. For each offered rate the example reports the packets the proxy captured, the
//! kernel ring drops (`sidekick_capture_drops_total`) and the proxy's CPU time per packet
//! (`/proc/<pid>/task/*/schedstat`, all threads). The veth delivers in the sender's softirq, so
//! the kernel's copy into the capture ring is charged to the blaster's core: the proxy's figure is
//! its own user-space work plus its system calls.
//!
//! Needs root. Run from the workspace root:
//!
//! ```text
//! cargo build --release -p sidekick-proxy --example sniff_throughput
//! target/release/examples/sniff_throughput --proxy target/release/sidekick-proxy
//! ```
#![allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "Sniff-mode throughput of sidekick-proxy (needs root)")]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// The proxy binary to measure.
    #[arg(long, default_value = "target/release/sidekick-proxy")]
    proxy: PathBuf,
    /// Offered rates in packets per second, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "50000,100000,200000,300000,400000"
    )]
    rates: Vec<u64>,
    /// Seconds per rate.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Distinct flows (destination addresses).
    #[arg(long, default_value_t = 1000)]
    flows: u32,
    /// UDP payload bytes.
    #[arg(long, default_value_t = 1200)]
    payload: usize,
    /// Core the proxy is pinned to (the blaster takes another).
    #[arg(long, default_value_t = 1)]
    proxy_cpu: usize,
    /// The proxy's capture workers (`--workers`); with more than one, the proxy may run on
    /// every core (the blaster shares one with it: on a 2-core machine no core is left for a
    /// generator that could saturate even one worker).
    #[arg(long, default_value_t = 1)]
    workers: usize,
}

#[derive(Subcommand)]
enum Cmd {
    /// Internal: send at `rate` packets/s for `seconds` (run inside the sender namespace).
    Blast {
        #[arg(long)]
        rate: u64,
        #[arg(long)]
        seconds: f64,
        #[arg(long)]
        flows: u32,
        #[arg(long)]
        payload: usize,
    },
}

const SUBNET: &str = "10.223.7";
const METRICS: &str = "127.0.0.1:9464";

fn sh(args: &[&str]) -> Result<()> {
    let st = Command::new(args[0])
        .args(&args[1..])
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running {}", args.join(" ")))?;
    if !st.success() {
        bail!("`{}` failed: {st}", args.join(" "));
    }
    Ok(())
}

/// The two namespaces; removed on drop.
struct Pair {
    tx: String,
    rx: String,
}

impl Pair {
    fn new() -> Result<Self> {
        let id = std::process::id();
        let p = Pair {
            tx: format!("skt-tx-{id}"),
            rx: format!("skt-rx-{id}"),
        };
        sh(&["ip", "netns", "add", &p.tx])?;
        sh(&["ip", "netns", "add", &p.rx])?;
        sh(&[
            "ip", "-n", &p.tx, "link", "add", "t0", "type", "veth", "peer", "name", "r0", "netns",
            &p.rx,
        ])?;
        let (a, b) = (format!("{SUBNET}.1/24"), format!("{SUBNET}.2/24"));
        sh(&["ip", "-n", &p.tx, "addr", "add", &a, "dev", "t0"])?;
        sh(&["ip", "-n", &p.rx, "addr", "add", &b, "dev", "r0"])?;
        for (ns, dev) in [(&p.tx, "t0"), (&p.rx, "r0"), (&p.rx, "lo"), (&p.tx, "lo")] {
            sh(&["ip", "-n", ns, "link", "set", dev, "up"])?;
        }
        // Destinations 10.99.0.0/16 go through the veth; the receiver neither owns nor forwards
        // them, so its IP layer drops them silently after the proxy's capture saw them.
        let gw = format!("{SUBNET}.2");
        sh(&[
            "ip",
            "-n",
            &p.tx,
            "route",
            "add",
            "10.99.0.0/16",
            "via",
            &gw,
        ])?;
        sh(&[
            "ip",
            "netns",
            "exec",
            &p.rx,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=0",
        ])?;
        Ok(p)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = sh(&["ip", "netns", "del", &self.tx]);
        let _ = sh(&["ip", "netns", "del", &self.rx]);
    }
}

/// The proxy process; SIGTERM then kill on drop.
struct Proxy(Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Proxy metrics of interest.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    frames: u64,
    drops: u64,
    cpu_ns: u64,
}

fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map(|v| v as u64)
}

/// CPU time of all the proxy's threads in nanoseconds (first field of each thread's schedstat).
fn cpu_ns(pid: u32) -> Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = task?.path().join("schedstat");
        // A thread may exit between the listing and the read.
        if let Ok(s) = std::fs::read_to_string(path) {
            total += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Ok(total)
}

fn sample(rx_ns: &str, pid: u32) -> Result<Sample> {
    let out = Command::new("ip")
        .args(["netns", "exec", rx_ns, "curl", "-sf"])
        .arg(format!("http://{METRICS}/metrics"))
        .output()
        .context("curl")?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(Sample {
        frames: metric(&text, "sidekick_frames_total").context("no frames metric")?,
        drops: metric(&text, "sidekick_capture_drops_total").unwrap_or(0),
        cpu_ns: cpu_ns(pid)?,
    })
}

fn blast(rate: u64, seconds: f64, flows: u32, payload: usize) -> Result<()> {
    let sock = UdpSocket::bind("0.0.0.0:0")?;
    let dsts: Vec<SocketAddrV4> = (0..flows.max(1))
        .map(|i| {
            let [_, _, hi, lo] = i.to_be_bytes();
            SocketAddrV4::new(Ipv4Addr::new(10, 99, hi, lo.max(1)), 4433)
        })
        .collect();
    let mut buf = vec![0u8; payload.max(8)];
    buf[0] = 0x40; // a QUIC short header's first byte
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let mut sent: u64 = 0;
    let mut errors: u64 = 0;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let due = (now.duration_since(start).as_secs_f64() * rate as f64) as u64;
        if sent >= due {
            std::thread::sleep(Duration::from_micros(50));
            continue;
        }
        for _ in 0..(due - sent).min(256) {
            let d = dsts[(sent % dsts.len() as u64) as usize];
            buf[1..9].copy_from_slice(&sent.to_be_bytes());
            if sock.send_to(&buf, d).is_err() {
                errors += 1;
            }
            sent += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{sent} {errors} {secs}");
    Ok(())
}

fn run(cli: &Cli) -> Result<()> {
    let uid = Command::new("id").arg("-u").output()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        bail!("needs root (network namespaces)");
    }
    let proxy_bin = std::fs::canonicalize(&cli.proxy)
        .with_context(|| format!("proxy binary {}", cli.proxy.display()))?;
    let me = std::env::current_exe()?;
    let pair = Pair::new()?;
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let proxy_cpu = cli.proxy_cpu % cpus;
    let blast_cpu = (proxy_cpu + 1) % cpus;
    let proxy_cpus = if cli.workers > 1 {
        format!("0-{}", cpus - 1)
    } else {
        proxy_cpu.to_string()
    };
    let child = Command::new("ip")
        .args(["netns", "exec", &pair.rx, "taskset", "-c"])
        .arg(&proxy_cpus)
        .arg(&proxy_bin)
        .args(["--workers", &cli.workers.to_string()])
        .args([
            "--mode",
            "sniff",
            "--interface",
            "r0",
            "--faces",
            "client",
            "--sidekick-listen",
            &format!("{SUBNET}.2:7788"),
            "--metrics-listen",
            METRICS,
            "--log",
            "warn",
        ])
        .spawn()
        .context("starting the proxy")?;
    let proxy = Proxy(child);
    // `ip netns exec` and `taskset` exec the proxy: the child's pid is the proxy's.
    let pid = proxy.0.id();
    let ready = Instant::now() + Duration::from_secs(10);
    while sample(&pair.rx, pid).is_err() {
        if Instant::now() > ready {
            bail!("the proxy's metrics endpoint did not come up");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The proxy refreshes its metrics once a second: wait for a fresh baseline.
    std::thread::sleep(Duration::from_millis(1200));
    let mut before = sample(&pair.rx, pid)?;
    println!(
        "sidekick-proxy sniff mode, {} worker(s) on cpu {proxy_cpus}; blaster on cpu {blast_cpu}; \
         {} flows, {} B payloads, {} s per rate",
        cli.workers, cli.flows, cli.payload, cli.seconds
    );
    println!("offered pps | sent pps | captured pps | capture drops | proxy CPU % | CPU ns/packet");
    println!("---|---|---|---|---|---");
    for &rate in &cli.rates {
        let out = Command::new("ip")
            .args(["netns", "exec", &pair.tx, "taskset", "-c"])
            .arg(blast_cpu.to_string())
            .arg(&me)
            .args(["blast", "--rate"])
            .arg(rate.to_string())
            .arg("--seconds")
            .arg(cli.seconds.to_string())
            .arg("--flows")
            .arg(cli.flows.to_string())
            .arg("--payload")
            .arg(cli.payload.to_string())
            .output()
            .context("running the blaster")?;
        let line = String::from_utf8_lossy(&out.stdout);
        let f: Vec<f64> = line
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        let [sent, _errors, secs] = f[..] else {
            bail!(
                "blaster failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        };
        // Let the proxy drain its ring and refresh its metrics (once a second).
        std::thread::sleep(Duration::from_millis(1200));
        let after = sample(&pair.rx, pid)?;
        let frames = after.frames - before.frames;
        let drops = after.drops - before.drops;
        let cpu_s = (after.cpu_ns - before.cpu_ns) as f64 / 1e9;
        before = after;
        println!(
            "{rate} | {:.0} | {:.0} | {drops} | {:.0} | {:.0}",
            sent / secs,
            frames as f64 / secs,
            100.0 * cpu_s / secs,
            if frames > 0 {
                cpu_s * 1e9 / frames as f64
            } else {
                0.0
            },
        );
    }
    drop(proxy);
    drop(pair);
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Some(Cmd::Blast {
            rate,
            seconds,
            flows,
            payload,
        }) => blast(rate, seconds, flows, payload),
        None => run(&cli),
    }
}
