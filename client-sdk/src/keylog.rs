//! Collecting TLS secrets from a QUIC stack's key-log hook.
//!
//! [`KeyLogStore`] is a cheap-to-clone shared store. Hand one clone to the stack — it implements
//! `rustls::KeyLog` (feature `quinn`) and [`std::io::Write`] for quiche's `set_keylog` — and feed
//! the other to a [`PacketNumberLens`] with
//! [`KeyLogStore::drain_into`].
//!
//! ```
//! use std::io::Write;
//! use sidekick::keylog::KeyLogStore;
//! use sidekick::lens::{PacketNumberLens, Role};
//!
//! let store = KeyLogStore::new(16);
//! let mut sink = store.clone();
//! writeln!(sink, "SERVER_TRAFFIC_SECRET_0 {} {}", "ab".repeat(32), "01".repeat(48)).unwrap();
//! let mut lens = PacketNumberLens::new(Role::Client);
//! assert_eq!(store.drain_into(&mut lens), 1);
//! ```

use std::sync::{Arc, Mutex, PoisonError};

use crate::lens::{KeyLogEntry, PacketNumberLens, parse_keylog_line};

#[derive(Debug, Default)]
struct Inner {
    entries: Vec<KeyLogEntry>,
    partial: Vec<u8>,
    dropped: u64,
    malformed: u64,
}

/// A bounded store of key-log entries shared between a QUIC stack and the SDK.
#[derive(Debug, Clone)]
pub struct KeyLogStore {
    inner: Arc<Mutex<Inner>>,
    cap: usize,
}

impl KeyLogStore {
    /// A store holding at most `cap` undrained entries (the oldest is dropped beyond).
    pub fn new(cap: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner::default())),
            cap: cap.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds an entry.
    pub fn push(&self, entry: KeyLogEntry) {
        let mut inner = self.lock();
        if inner.entries.len() >= self.cap {
            inner.entries.remove(0);
            inner.dropped += 1;
        }
        inner.entries.push(entry);
    }

    /// Adds one key-log line; lines with labels the lens does not use are ignored.
    pub fn push_line(&self, line: &str) {
        match parse_keylog_line(line) {
            Ok(entry) => self.push(entry),
            Err(crate::lens::KeyLogError::UnknownLabel(_)) => {}
            Err(_) => self.lock().malformed += 1,
        }
    }

    /// Moves all entries into `lens`; returns how many were 1-RTT secrets it took.
    pub fn drain_into(&self, lens: &mut PacketNumberLens) -> usize {
        let entries = std::mem::take(&mut self.lock().entries);
        entries.iter().filter(|e| lens.on_keylog_entry(e)).count()
    }

    /// Number of undrained entries.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether no entry is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries dropped because the store was full.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Lines that could not be parsed.
    pub fn malformed(&self) -> u64 {
        self.lock().malformed
    }
}

/// Longest partial line kept between writes (a key-log line is under 300 bytes).
const MAX_PARTIAL: usize = 1024;

impl std::io::Write for KeyLogStore {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut lines = Vec::new();
        {
            let mut inner = self.lock();
            inner.partial.extend_from_slice(buf);
            while let Some(pos) = inner.partial.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = inner.partial.drain(..=pos).collect();
                lines.push(line);
            }
            if inner.partial.len() > MAX_PARTIAL {
                inner.partial.clear();
                inner.malformed += 1;
            }
        }
        for line in lines {
            match std::str::from_utf8(&line) {
                Ok(text) => self.push_line(text.trim_end()),
                Err(_) => self.lock().malformed += 1,
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(feature = "quinn")]
impl rustls::KeyLog for KeyLogStore {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let (Some(label), Ok(client_random)) = (
            crate::lens::KeyLogLabel::from_name(label),
            <[u8; 32]>::try_from(client_random),
        ) else {
            return;
        };
        self.push(KeyLogEntry {
            label,
            client_random,
            secret: secret.to_vec(),
        });
    }

    fn will_log(&self, label: &str) -> bool {
        crate::lens::KeyLogLabel::from_name(label).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lens::{DatagramDirection, Role};
    use std::io::Write;

    #[test]
    fn split_writes_and_caps() {
        let store = KeyLogStore::new(2);
        let mut sink = store.clone();
        let line = format!(
            "CLIENT_TRAFFIC_SECRET_0 {} {}\n",
            "ab".repeat(32),
            "01".repeat(32)
        );
        let (a, b) = line.as_bytes().split_at(40);
        sink.write_all(a).unwrap();
        assert!(store.is_empty());
        sink.write_all(b).unwrap();
        assert_eq!(store.len(), 1);
        sink.write_all(b"garbage line\n").unwrap();
        assert_eq!(store.malformed(), 1);
        for _ in 0..3 {
            sink.write_all(line.as_bytes()).unwrap();
        }
        assert_eq!(store.len(), 2);
        assert_eq!(store.dropped(), 2);
        let mut lens = PacketNumberLens::new(Role::Client);
        assert_eq!(store.drain_into(&mut lens), 2);
        assert!(store.is_empty());
        // 32-byte secret: suite still ambiguous, no packet read yet.
        assert_eq!(lens.stats(DatagramDirection::Outgoing).read, 0);
    }
}
