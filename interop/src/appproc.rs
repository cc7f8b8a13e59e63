//! Application processes of a trial: finding their binaries, starting them in a namespace,
//! draining their output and reading a failed client's error.

use crate::topo::LabError;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

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

/// The last lines of a child's output, read on a thread ([`read_tail`]).
pub(crate) struct LogTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    reader: std::thread::JoinHandle<()>,
}

impl LogTail {
    /// The lines read so far, once the writers have closed the pipe or `wait` has passed (a
    /// grandchild that inherited the pipe may keep it open after the child is gone; the tail is
    /// taken all the same).
    pub(crate) fn lines(&self, wait: std::time::Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + wait;
        while !self.reader.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        self.last(usize::MAX)
    }

    /// The last `n` lines read so far, oldest first.
    pub(crate) fn last(&self, n: usize) -> Vec<String> {
        let l = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        l.iter().skip(l.len().saturating_sub(n)).cloned().collect()
    }
}

/// Reads `r` to its end on a thread and keeps its last `max_lines` lines: a process whose log
/// nobody reads in full (a trial's server) neither blocks on a full pipe nor grows the lab's
/// memory, and a failed trial can still say what it logged last. Bytes that are not UTF-8 are
/// replaced, not a reason to stop reading. `on_line` sees every line as it is read (a caller
/// waiting for a readiness message).
pub(crate) fn read_tail<R: std::io::Read + Send + 'static>(
    r: R,
    max_lines: usize,
    mut on_line: impl FnMut(&str) + Send + 'static,
) -> LogTail {
    let lines = Arc::new(Mutex::new(VecDeque::with_capacity(max_lines.min(64))));
    let shared = Arc::clone(&lines);
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut reader = std::io::BufReader::new(r);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                    on_line(&line);
                    if max_lines == 0 {
                        continue;
                    }
                    let mut l = shared.lock().unwrap_or_else(PoisonError::into_inner);
                    if l.len() == max_lines {
                        l.pop_front();
                    }
                    l.push_back(line);
                }
            }
        }
    });
    LogTail { lines, reader }
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
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = std::sync::Arc::clone(&seen);
        let tail = read_tail(child.stderr.take().expect("piped"), 3, move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
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
        let tail = tail.lines(std::time::Duration::from_secs(10));
        // Every line went past the callback, not only the kept ones.
        assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 6_002);
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
    fn a_pipe_left_open_still_gives_its_tail() {
        // A writer that says one line and then holds the pipe open (a grandchild that inherited
        // it): the tail comes after the wait, not when the pipe closes.
        struct OneLineThenSilence(bool);
        impl std::io::Read for OneLineThenSilence {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if std::mem::replace(&mut self.0, true) {
                    std::thread::sleep(std::time::Duration::from_secs(5));
                    return Ok(0);
                }
                buf[..8].copy_from_slice(b"goodbye\n");
                Ok(8)
            }
        }
        let tail = read_tail(OneLineThenSilence(false), 4, |_| {});
        let t0 = std::time::Instant::now();
        let mut lines = Vec::new();
        while lines.is_empty() && t0.elapsed() < std::time::Duration::from_secs(2) {
            lines = tail.lines(std::time::Duration::from_millis(50));
        }
        assert_eq!(lines, vec!["goodbye".to_string()]);
        assert!(t0.elapsed() < std::time::Duration::from_secs(3));
    }

    #[test]
    fn a_missing_binary_is_not_found() {
        assert!(
            find_bin(Path::new("/nonexistent"), "sidekick-transfer").is_none()
                || std::env::var_os("SIDEKICK_SIDEKICK_TRANSFER").is_some()
        );
    }
}
