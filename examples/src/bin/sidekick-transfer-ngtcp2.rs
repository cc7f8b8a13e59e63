//! `sidekick-transfer-ngtcp2`: the transfer (HTTP/3) on ngtcp2, Debian's `gtlsserver` /
//! `gtlsclient` (packages `ngtcp2-server`, `ngtcp2-client`), with the command line and the JSON
//! report of `sidekick-transfer` (see `sidekick_examples::transfer::ngtcp2`).
//!
//! ```text
//! sidekick-transfer-ngtcp2 server [--stack ngtcp2] --listen IP:PORT --http3 --bytes N [--bytes M ...]
//! sidekick-transfer-ngtcp2 client [--stack ngtcp2] --connect IP:PORT (--download N | --upload N)
//!                                 --http3 [--json] [--timeout SECS]
//! ```

use std::io::BufRead as _;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};
use sidekick_examples::transfer::TransferDirection;
use sidekick_examples::transfer::ngtcp2::{self, LogClock};

/// Bulk transfer over HTTP/3 with ngtcp2's example server and client.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve `GET /download/N` for the given sizes (replaces itself with gtlsserver).
    Server(ServerArgs),
    /// Run one download or upload with gtlsclient and print the result.
    Client(ClientArgs),
}

#[derive(Args)]
struct Common {
    /// QUIC implementation: only `ngtcp2` (accepted for the lab's common command line).
    #[arg(long, default_value = ngtcp2::NAME)]
    stack: String,
    /// HTTP/3: required (ngtcp2's examples speak HTTP/3 only).
    #[arg(long)]
    http3: bool,
}

impl Common {
    fn check(&self) -> anyhow::Result<()> {
        if self.stack != ngtcp2::NAME {
            bail!("--stack {}: this binary drives ngtcp2", self.stack);
        }
        if !self.http3 {
            bail!(
                "ngtcp2's example programs speak HTTP/3 only: pass --http3 (app.http3 = true in the lab)"
            );
        }
        Ok(())
    }
}

#[derive(Args)]
struct ServerArgs {
    #[command(flatten)]
    common: Common,
    /// Address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// A download size to serve (`/download/N`); repeat for several.
    #[arg(long = "bytes", value_name = "N", required = true)]
    sizes: Vec<u64>,
}

#[derive(Args)]
#[group(id = "dir", required = true, multiple = false, args = ["download", "upload"])]
struct ClientArgs {
    #[command(flatten)]
    common: Common,
    /// Server address.
    #[arg(long)]
    connect: SocketAddr,
    /// Download this many bytes (server → client).
    #[arg(long, value_name = "BYTES")]
    download: Option<u64>,
    /// Upload this many bytes (client → server, POST).
    #[arg(long, value_name = "BYTES")]
    upload: Option<u64>,
    /// Print exactly one JSON line.
    #[arg(long)]
    json: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,
}

fn main() -> anyhow::Result<()> {
    sidekick_examples::cli::init_tracing("info");
    match Cli::parse().cmd {
        Cmd::Server(a) => {
            a.common.check()?;
            let files = ngtcp2::prepare_htdocs(&std::env::temp_dir(), &a.sizes)?;
            let prog = ngtcp2::server_program();
            tracing::info!(root = %files.root.display(), "exec {}", prog.display());
            // exec only returns on failure.
            let e = Command::new(&prog)
                .args(ngtcp2::server_args(&files, a.listen))
                .exec();
            Err(e).with_context(|| {
                format!(
                    "starting {} (install Debian's ngtcp2-server: scripts/setup.sh)",
                    prog.display()
                )
            })
        }
        Cmd::Client(a) => {
            a.common.check()?;
            let (direction, bytes) = match (a.download, a.upload) {
                (Some(n), None) => (TransferDirection::Download, n),
                (None, Some(n)) => (TransferDirection::Upload, n),
                _ => bail!("exactly one of --download / --upload"),
            };
            if !(a.timeout > 0.0 && a.timeout < 86_400.0) {
                bail!("--timeout {} out of range", a.timeout);
            }
            let report = run_client(
                a.connect,
                direction,
                bytes,
                Duration::from_secs_f64(a.timeout),
            )?;
            if a.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                println!(
                    "ngtcp2 {} {} bytes in {:.3} s: {:.2} Mbit/s",
                    report.direction, report.bytes, report.duration_s, report.goodput_mbps
                );
            }
            Ok(())
        }
    }
}

/// A directory removed on drop.
struct TempDir(std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_client(
    connect: SocketAddr,
    direction: TransferDirection,
    bytes: u64,
    timeout: Duration,
) -> anyhow::Result<sidekick_examples::transfer::TransferReport> {
    let tmp = TempDir(std::env::temp_dir().join(format!(
        "sidekick-ngtcp2-client-{}-{}",
        std::process::id(),
        ngtcp2::now_unix_ns()
    )));
    let save = tmp.0.join("out");
    std::fs::create_dir_all(&save).with_context(|| format!("creating {}", save.display()))?;
    let body = if direction == TransferDirection::Upload {
        let p = tmp.0.join("body");
        std::fs::File::create(&p)
            .and_then(|f| f.set_len(bytes))
            .with_context(|| format!("creating the {bytes}-byte body"))?;
        Some(p)
    } else {
        None
    };
    let prog = ngtcp2::client_program();
    let mut child = Command::new(&prog)
        .args(ngtcp2::client_args(
            connect,
            direction,
            bytes,
            &save,
            body.as_deref(),
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| {
            format!(
                "starting {} (install Debian's ngtcp2-client: scripts/setup.sh)",
                prog.display()
            )
        })?;
    let stderr = child.stderr.take().context("client stderr")?;
    // The log is read on a thread; the main thread enforces the timeout.
    let reader = std::thread::spawn(move || {
        let mut clock = LogClock::default();
        let mut start_wall = None;
        let mut tail: Vec<String> = Vec::new();
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            clock.line(&line);
            if start_wall.is_none() && clock.handshake_ms.is_some() {
                start_wall = Some(ngtcp2::now_unix_ns());
            }
            if !line.starts_with('I') {
                tail.push(line);
                if tail.len() > 20 {
                    tail.remove(0);
                }
            }
        }
        (clock, start_wall, tail)
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().context("waiting for the client")? {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("timed out after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (clock, start_wall, tail) = reader
        .join()
        .map_err(|_| anyhow::anyhow!("log reader panicked"))?;
    if !status.success() {
        bail!(
            "{} exited with {status}: {}",
            prog.display(),
            tail.join(" | ")
        );
    }
    let saved = save.join(bytes.to_string());
    let result = match direction {
        TransferDirection::Download => {
            let len = std::fs::metadata(&saved).map_or(0, |m| m.len());
            ngtcp2::download_report(bytes, len, &clock)
        }
        TransferDirection::Upload => {
            let body = std::fs::read(&saved).unwrap_or_default();
            ngtcp2::upload_report(bytes, &body, &clock, start_wall.unwrap_or(0))
        }
    };
    result.with_context(|| format!("ngtcp2 client log: {}", tail.join(" | ")))
}
