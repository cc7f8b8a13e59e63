//! Drop logs: every datagram a link element drops, named by a hash of its UDP payload, so that
//! an inference made elsewhere (PEMI's loss inference in the proxy, PEMI §4.3) can be scored
//! against what really happened on the link.
//!
//! Enabled by the environment variable `SIDEKICK_LAB_DROP_LOG=<directory>`: each element then
//! writes `<directory>/<namespace>.drops`, one line per dropped IPv4/UDP frame:
//!
//! ```text
//! <ns since the element started> <ab|ba> <loss|queue> <fnv1a64 of the UDP payload, hex>
//! ```
//!
//! The hash is 64-bit FNV-1a, the same as the proxy's PEMI trace (`sidekick_proxy::pemi::trace`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable naming the drop-log directory.
pub const ENV: &str = "SIDEKICK_LAB_DROP_LOG";

/// 64-bit FNV-1a (the proxy's trace uses the same function).
///
/// ```
/// assert_eq!(sidekick_lab::droplog::fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
/// ```
pub fn fnv1a64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The UDP payload of an Ethernet/IPv4 frame (`None` for anything else or a truncated frame).
///
/// ```
/// let mut f = vec![0u8; 14 + 20 + 8];
/// f[12] = 0x08; f[14] = 0x45; f[17] = 30; f[23] = 17; // IPv4, total length 30, UDP
/// f.extend_from_slice(b"hi");
/// assert_eq!(sidekick_lab::droplog::udp_payload(&f), Some(&b"hi"[..]));
/// ```
pub fn udp_payload(frame: &[u8]) -> Option<&[u8]> {
    if frame.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let ip = frame.get(14..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    if ip.first()? >> 4 != 4 || ihl < 20 || *ip.get(9)? != 17 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    let udp = ip.get(ihl..total.max(ihl))?;
    udp.get(8..)
}

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropCause {
    /// The loss model.
    Loss,
    /// A full queue.
    Queue,
}

/// A drop log of one element (a no-op when the environment does not ask for one).
#[derive(Debug)]
pub struct DropLog {
    out: Option<std::io::BufWriter<std::fs::File>>,
}

impl DropLog {
    /// The log for the element in namespace `ns`, if `SIDEKICK_LAB_DROP_LOG` is set.
    pub fn from_env(ns: &str) -> Self {
        let dir = std::env::var_os(ENV).map(PathBuf::from);
        Self::open(dir.as_deref(), ns)
    }

    /// The log for `ns` in `dir` (none when `dir` is `None` or the file cannot be created).
    pub fn open(dir: Option<&Path>, ns: &str) -> Self {
        let out = dir.and_then(|d| {
            let path = d.join(format!("{ns}.drops"));
            match std::fs::File::create(&path) {
                Ok(f) => Some(std::io::BufWriter::new(f)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "drop log: {e}");
                    None
                }
            }
        });
        Self { out }
    }

    /// The hash of `frame`'s UDP payload, when logging and the frame is IPv4/UDP (computed
    /// before the frame is handed to the link, which consumes it).
    pub fn hash(&self, frame: &[u8]) -> Option<u64> {
        self.out.as_ref()?;
        udp_payload(frame).map(fnv1a64)
    }

    /// Record a dropped frame by its payload hash.
    pub fn record(&mut self, at: Duration, a_to_b: bool, cause: DropCause, hash: u64) {
        let Some(out) = self.out.as_mut() else {
            return;
        };
        let dir = if a_to_b { "ab" } else { "ba" };
        let cause = match cause {
            DropCause::Loss => "loss",
            DropCause::Queue => "queue",
        };
        if writeln!(out, "{} {dir} {cause} {hash:016x}", at.as_nanos()).is_err() {
            self.out = None;
        }
    }

    /// Flush the log.
    pub fn flush(&mut self) {
        if let Some(o) = self.out.as_mut() {
            let _ = o.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_one_line_per_udp_drop() {
        let dir = std::env::temp_dir().join(format!("droplog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut log = DropLog::open(Some(&dir), "t");
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12] = 0x08;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&(20u16 + 8 + 3).to_be_bytes());
        f[23] = 17;
        f.extend_from_slice(b"abc");
        let h = log.hash(&f).unwrap();
        log.record(Duration::from_nanos(5), true, DropCause::Loss, h);
        assert_eq!(log.hash(&[0; 10]), None);
        log.flush();
        let text = std::fs::read_to_string(dir.join("t.drops")).unwrap();
        assert_eq!(text, format!("5 ab loss {:016x}\n", fnv1a64(b"abc")));
        std::fs::remove_dir_all(&dir).unwrap();
        // Without a directory nothing is written and nothing fails.
        let mut off = DropLog::open(None, "t");
        assert_eq!(off.hash(&f), None);
        off.record(Duration::ZERO, true, DropCause::Loss, 1);
    }

    #[test]
    fn non_udp_frames_are_skipped() {
        assert_eq!(udp_payload(&[]), None);
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12] = 0x08;
        f[14] = 0x45;
        f[23] = 6;
        assert_eq!(udp_payload(&f), None);
    }
}
