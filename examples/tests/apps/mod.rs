//! The application binaries under test, as the integration tests drive them: a guard that kills
//! a server process, a free loopback port, the one JSON report line a client prints with
//! `--json`, and the binaries the project's scripts build outside cargo.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

/// A server process, killed when the test is done with it (also on a failed assertion).
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Server {
    /// Wait (up to 20 s) for a `--once` server to exit after its connection; true if it exited
    /// successfully.
    pub fn exited_ok(&mut self) -> bool {
        for _ in 0..200 {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }
}

/// A loopback UDP address nobody listens on right now.
pub fn free_port() -> SocketAddr {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap()
}

/// Asserts that the process succeeded and printed exactly one line, and parses it.
pub fn one_json_line(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one JSON line: {stdout}");
    serde_json::from_str(lines[0]).unwrap()
}

/// A binary built outside cargo (quic-go's, aioquic's launcher): `$override_var` if set, else
/// `name` beside `beside`. `None` when it does not exist, unless `$require_var` is set
/// (scripts/test.sh), which makes a missing one fail with `hint`.
pub fn optional_bin(
    override_var: &str,
    beside: &str,
    name: &str,
    require_var: &str,
    hint: &str,
) -> Option<PathBuf> {
    let p = std::env::var_os(override_var)
        .map_or_else(|| Path::new(beside).with_file_name(name), PathBuf::from);
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os(require_var).is_none(),
        "{} missing ({hint})",
        p.display()
    );
    eprintln!("skipped: {} not built ({hint})", p.display());
    None
}
