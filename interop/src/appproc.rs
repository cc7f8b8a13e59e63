//! Application processes of a trial: finding their binaries, starting them in a namespace,
//! draining their output and reading a failed client's error.

use crate::topo::LabError;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// An application or proxy binary: `$SIDEKICK_<NAME>` (upper case, `-` → `_`) when that file
/// exists, else `dir/name` when it exists.
pub(crate) fn find_bin(dir: &Path, name: &str) -> Option<PathBuf> {
    let env = format!("SIDEKICK_{}", name.to_ascii_uppercase().replace('-', "_"));
    if let Some(p) = std::env::var_os(env)
        .map(PathBuf::from)
        .filter(|p| p.exists())
    {
        return Some(p);
    }
    Some(dir.join(name)).filter(|p| p.exists())
}

/// A child process, killed and reaped when dropped.
pub(crate) struct KillOnDrop(pub(crate) Child);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bin args` in network namespace `ns` (stderr piped, stdin closed, logs without colour).
pub(crate) fn spawn_in(
    ns: &str,
    bin: &Path,
    args: &[String],
    stdout: Stdio,
) -> Result<KillOnDrop, LabError> {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(bin)
        .args(args)
        // Plain log lines: a failed trial's error quotes them.
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .map(KillOnDrop)
        .map_err(|e| LabError::Io {
            context: format!("starting {}", bin.display()),
            source: e,
        })
}

/// What a failed client said: its last `Error:` report (anyhow's form) up to a backtrace, on one
/// line, else its last stderr line; at most 600 characters.
pub(crate) fn client_error(stderr: &str) -> String {
    let report = match stderr.rfind("Error: ") {
        Some(i) => {
            let tail = &stderr[i..];
            let end = tail.find("Stack backtrace:").unwrap_or(tail.len());
            tail[..end].split_whitespace().collect::<Vec<_>>().join(" ")
        }
        None => stderr.trim().lines().last().unwrap_or("").to_string(),
    };
    report.chars().take(600).collect()
}

/// The application's server and client binaries of a trial.
#[derive(Clone, Copy)]
pub(crate) struct AppBins<'a> {
    pub(crate) server: &'a Path,
    pub(crate) client: &'a Path,
}

/// Reads `r` to its end on a thread (a full pipe would block the child).
pub(crate) fn read_all<R: std::io::Read + Send + 'static>(
    mut r: R,
) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

/// Reads `r` to its end on a thread and keeps its last `max_lines` lines: a process whose log
/// nobody reads in full (a trial's server) neither blocks on a full pipe nor grows the lab's
/// memory, and a failed trial can still say what it logged last. Bytes that are not UTF-8 are
/// replaced, not a reason to stop reading.
pub(crate) fn read_tail<R: std::io::Read + Send + 'static>(
    r: R,
    max_lines: usize,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = std::collections::VecDeque::with_capacity(max_lines.min(64));
        let mut reader = std::io::BufReader::new(r);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if max_lines == 0 {
                        continue;
                    }
                    if lines.len() == max_lines {
                        lines.pop_front();
                    }
                    let line = String::from_utf8_lossy(&buf);
                    lines.push_back(line.trim_end().to_string());
                }
            }
        }
        lines.into()
    })
}

/// What [`read_all`] read (empty if its thread panicked).
pub(crate) fn join_reader(h: std::thread::JoinHandle<String>) -> String {
    h.join().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_error_keeps_the_report_not_the_backtrace() {
        let stderr = "2026 WARN x\nError: receiving frames\n\nCaused by:\n    timed out\n\nStack backtrace:\n   0: foo\n   7: _start\n";
        assert_eq!(
            client_error(stderr),
            "Error: receiving frames Caused by: timed out"
        );
        assert_eq!(client_error("one\ntwo\n"), "two");
        assert_eq!(client_error(""), "");
    }

    #[test]
    fn a_chatty_process_is_drained_and_its_last_lines_kept() {
        // 300 kB of log (far beyond a pipe's 64 kB), a line that is not UTF-8, then the last
        // line: the child must exit, and the tail must hold the last lines in order.
        let mut child = Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 6000 ]; do echo \"line $i of a chatty log, padded to fifty\" >&2; i=$((i+1)); done; printf 'bad \\377 byte\\n' >&2; echo 'last words' >&2",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh runs");
        let tail = read_tail(child.stderr.take().expect("piped"), 3);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the child blocked on its stderr"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert!(status.success());
        let tail = tail.join().expect("reader");
        assert_eq!(
            tail,
            vec![
                "line 5999 of a chatty log, padded to fifty".to_string(),
                "bad \u{fffd} byte".to_string(),
                "last words".to_string(),
            ]
        );
    }

    #[test]
    fn a_missing_binary_is_not_found() {
        assert!(
            find_bin(Path::new("/nonexistent"), "sidekick-transfer").is_none()
                || std::env::var_os("SIDEKICK_SIDEKICK_TRANSFER").is_some()
        );
    }
}
