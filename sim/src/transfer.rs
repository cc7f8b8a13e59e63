//! The lab's bulk transfer (`sidekick-transfer`, raw-stream protocol: examples/src/transfer/mod.rs)
//! as sans-IO state machines over quinn-proto connections: the client opens a bidirectional
//! stream, writes the 13-byte [`Request`] and the payload, finishes; the server reads to the FIN,
//! answers with a [`Summary`] (its sent and lost packets) and finishes; the client closes.
//!
//! Downloads run the other way round: the server writes the payload after the request, the client
//! finishes its side once it holds every byte, the server appends the summary.
//!
//! Goodput is measured as the lab's client measures it: from the moment the client writes the
//! request (after the handshake) to the moment the receiver has the last byte.

use std::time::Duration;

use quinn_proto::{Connection, Dir, StreamId, VarInt};
use sidekick_examples::transfer::{CHUNK, Request, Summary, TransferDirection, fill_pattern};

/// The uploading client.
#[derive(Debug)]
pub struct UploadClient {
    bytes: u64,
    stream: Option<StreamId>,
    header: Vec<u8>,
    payload_written: u64,
    finished: bool,
    pattern: Vec<u8>,
    reply: Vec<u8>,
    /// When the request was written (virtual time).
    pub started: Option<Duration>,
    /// The server's summary, once read.
    pub summary: Option<Summary>,
    /// The client's path statistics when the summary arrived (sent, lost packets).
    pub stats: Option<(u64, u64)>,
    /// Why the transfer failed, if it did.
    pub error: Option<String>,
}

impl UploadClient {
    /// A client that will upload `bytes`.
    pub fn new(bytes: u64) -> Self {
        let mut pattern = vec![0u8; CHUNK];
        fill_pattern(&mut pattern);
        Self {
            bytes,
            stream: None,
            header: Request {
                direction: TransferDirection::Upload,
                bytes,
            }
            .encode()
            .to_vec(),
            payload_written: 0,
            finished: false,
            pattern,
            reply: Vec::new(),
            started: None,
            summary: None,
            stats: None,
            error: None,
        }
    }

    /// Whether the client is done (summary read, connection closed) or failed.
    pub fn done(&self) -> bool {
        self.summary.is_some() || self.error.is_some()
    }

    /// Makes what progress the connection allows at virtual time `t`.
    pub fn drive(&mut self, t: Duration, now: std::time::Instant, conn: &mut Connection) {
        while let Some(ev) = conn.poll() {
            if let quinn_proto::Event::ConnectionLost { reason } = ev
                && self.summary.is_none()
            {
                self.error = Some(format!("connection lost: {reason}"));
            }
        }
        if self.done() || conn.is_handshaking() {
            return;
        }
        let id = if let Some(id) = self.stream {
            id
        } else {
            let Some(id) = conn.streams().open(Dir::Bi) else {
                return;
            };
            self.stream = Some(id);
            self.started = Some(t);
            id
        };
        // Request header, then payload, as far as flow control allows.
        while !self.header.is_empty() {
            match conn.send_stream(id).write(&self.header) {
                Ok(n) if n > 0 => {
                    self.header.drain(..n);
                }
                _ => return,
            }
        }
        while self.payload_written < self.bytes {
            let off = (self.payload_written % CHUNK as u64) as usize;
            let left = usize::try_from(self.bytes - self.payload_written).unwrap_or(usize::MAX);
            let end = (off + left).min(CHUNK);
            match conn.send_stream(id).write(&self.pattern[off..end]) {
                Ok(n) if n > 0 => self.payload_written += n as u64,
                _ => return,
            }
        }
        if !self.finished {
            if conn.send_stream(id).finish().is_err() {
                self.error = Some("finishing the stream failed".into());
                return;
            }
            self.finished = true;
        }
        // The summary.
        if let Ok(mut chunks) = conn.recv_stream(id).read(true) {
            while let Ok(Some(c)) = chunks.next(usize::MAX) {
                self.reply.extend_from_slice(&c.bytes);
            }
            let _ = chunks.finalize();
        }
        if self.reply.len() >= Summary::LEN {
            match Summary::decode(&self.reply) {
                Ok(s) => {
                    let st = conn.stats();
                    self.stats = Some((st.path.sent_packets, st.path.lost_packets));
                    if s.bytes != self.bytes {
                        self.error = Some(format!(
                            "server received {} of {} bytes",
                            s.bytes, self.bytes
                        ));
                    }
                    self.summary = Some(s);
                    conn.close(now, VarInt::from_u32(0), bytes::Bytes::from_static(b"done"));
                }
                Err(e) => self.error = Some(format!("summary: {e}")),
            }
        }
    }
}

/// The receiving server.
#[derive(Debug, Default)]
pub struct UploadServer {
    stream: Option<StreamId>,
    header: Vec<u8>,
    expected: Option<u64>,
    got: u64,
    replied: bool,
    /// When the last payload byte was received (virtual time).
    pub last_byte: Option<Duration>,
    /// Why the transfer failed on the server, if it did.
    pub error: Option<String>,
}

impl UploadServer {
    /// A server waiting for its client.
    pub fn new() -> Self {
        Self::default()
    }

    /// Payload bytes received so far.
    pub fn received(&self) -> u64 {
        self.got
    }

    /// Makes what progress the connection allows at virtual time `t`.
    pub fn drive(&mut self, t: Duration, conn: &mut Connection) {
        while conn.poll().is_some() {}
        if self.replied || self.error.is_some() {
            return;
        }
        let id = if let Some(id) = self.stream {
            id
        } else {
            let Some(id) = conn.streams().accept(Dir::Bi) else {
                return;
            };
            self.stream = Some(id);
            id
        };
        let mut fin = false;
        if let Ok(mut chunks) = conn.recv_stream(id).read(true) {
            loop {
                match chunks.next(usize::MAX) {
                    Ok(Some(c)) => {
                        let mut data: &[u8] = &c.bytes;
                        if self.expected.is_none() {
                            let need = Request::LEN - self.header.len();
                            let take = need.min(data.len());
                            self.header.extend_from_slice(&data[..take]);
                            data = &data[take..];
                            if self.header.len() == Request::LEN {
                                match Request::decode(&self.header) {
                                    Ok(r) => self.expected = Some(r.bytes),
                                    Err(e) => {
                                        self.error = Some(format!("request: {e}"));
                                        break;
                                    }
                                }
                            }
                        }
                        self.got += data.len() as u64;
                        if self.expected.is_some_and(|n| self.got >= n) && self.last_byte.is_none()
                        {
                            self.last_byte = Some(t);
                        }
                    }
                    Ok(None) => {
                        fin = true;
                        break;
                    }
                    Err(_) => break,
                }
            }
            let _ = chunks.finalize();
        }
        if fin {
            let st = conn.stats();
            let summary = Summary {
                bytes: self.got,
                sent_packets: st.path.sent_packets,
                lost_packets: st.path.lost_packets,
                retransmissions: st.path.lost_packets,
                ..Summary::default()
            };
            let mut s = conn.send_stream(id);
            if s.write(&summary.encode()) != Ok(Summary::LEN) || s.finish().is_err() {
                self.error = Some("writing the summary failed".into());
            }
            self.replied = true;
        }
    }
}

/// The downloading client: requests `bytes`, reads them, finishes its side, reads the summary.
#[derive(Debug)]
pub struct DownloadClient {
    bytes: u64,
    stream: Option<StreamId>,
    got: u64,
    finished: bool,
    reply: Vec<u8>,
    /// When the request was written (virtual time).
    pub started: Option<Duration>,
    /// When the last byte arrived (virtual time).
    pub last_byte: Option<Duration>,
    /// The server's summary (its sent and lost packets), once read.
    pub summary: Option<Summary>,
    /// The client's sent-packet count when the summary arrived.
    pub sent_packets: Option<u64>,
    /// Why the transfer failed, if it did.
    pub error: Option<String>,
}

impl DownloadClient {
    /// A client that will download `bytes`.
    pub fn new(bytes: u64) -> Self {
        Self {
            bytes,
            stream: None,
            got: 0,
            finished: false,
            reply: Vec::new(),
            started: None,
            last_byte: None,
            summary: None,
            sent_packets: None,
            error: None,
        }
    }

    /// Payload bytes received so far.
    pub fn received(&self) -> u64 {
        self.got
    }

    /// Whether the client is done (summary read, connection closed) or failed.
    pub fn done(&self) -> bool {
        self.summary.is_some() || self.error.is_some()
    }

    /// Makes what progress the connection allows at virtual time `t`.
    pub fn drive(&mut self, t: Duration, now: std::time::Instant, conn: &mut Connection) {
        while let Some(ev) = conn.poll() {
            if let quinn_proto::Event::ConnectionLost { reason } = ev
                && self.summary.is_none()
            {
                self.error = Some(format!("connection lost: {reason}"));
            }
        }
        if self.done() || conn.is_handshaking() {
            return;
        }
        let id = if let Some(id) = self.stream {
            id
        } else {
            let Some(id) = conn.streams().open(Dir::Bi) else {
                return;
            };
            let req = Request {
                direction: TransferDirection::Download,
                bytes: self.bytes,
            }
            .encode();
            if conn.send_stream(id).write(&req) != Ok(Request::LEN) {
                self.error = Some("writing the request failed".into());
                return;
            }
            self.stream = Some(id);
            self.started = Some(t);
            id
        };
        if let Ok(mut chunks) = conn.recv_stream(id).read(true) {
            while let Ok(Some(c)) = chunks.next(usize::MAX) {
                let data: &[u8] = &c.bytes;
                let payload = usize::try_from(self.bytes - self.got)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                self.got += payload as u64;
                self.reply.extend_from_slice(&data[payload..]);
            }
            let _ = chunks.finalize();
        }
        if self.got >= self.bytes && self.last_byte.is_none() {
            self.last_byte = Some(t);
        }
        if self.last_byte.is_some() && !self.finished {
            if conn.send_stream(id).finish().is_err() {
                self.error = Some("finishing the stream failed".into());
                return;
            }
            self.finished = true;
        }
        if self.reply.len() >= Summary::LEN {
            match Summary::decode(&self.reply) {
                Ok(s) => {
                    self.sent_packets = Some(conn.stats().path.sent_packets);
                    self.summary = Some(s);
                    conn.close(now, VarInt::from_u32(0), bytes::Bytes::from_static(b"done"));
                }
                Err(e) => self.error = Some(format!("summary: {e}")),
            }
        }
    }
}

/// The sending server of a download.
#[derive(Debug)]
pub struct DownloadServer {
    stream: Option<StreamId>,
    header: Vec<u8>,
    expected: Option<u64>,
    written: u64,
    data_finished: bool,
    replied: bool,
    pattern: Vec<u8>,
    /// Why the transfer failed on the server, if it did.
    pub error: Option<String>,
}

impl Default for DownloadServer {
    fn default() -> Self {
        Self::new()
    }
}

impl DownloadServer {
    /// A server waiting for its client.
    pub fn new() -> Self {
        let mut pattern = vec![0u8; CHUNK];
        fill_pattern(&mut pattern);
        Self {
            stream: None,
            header: Vec::new(),
            expected: None,
            written: 0,
            data_finished: false,
            replied: false,
            pattern,
            error: None,
        }
    }

    /// Makes what progress the connection allows.
    pub fn drive(&mut self, conn: &mut Connection) {
        while conn.poll().is_some() {}
        if self.replied || self.error.is_some() {
            return;
        }
        let id = if let Some(id) = self.stream {
            id
        } else {
            let Some(id) = conn.streams().accept(Dir::Bi) else {
                return;
            };
            self.stream = Some(id);
            id
        };
        let mut fin = false;
        if let Ok(mut chunks) = conn.recv_stream(id).read(true) {
            loop {
                match chunks.next(usize::MAX) {
                    Ok(Some(c)) => {
                        if self.expected.is_none() {
                            let need = Request::LEN - self.header.len();
                            let take = need.min(c.bytes.len());
                            self.header.extend_from_slice(&c.bytes[..take]);
                            if self.header.len() == Request::LEN {
                                match Request::decode(&self.header) {
                                    Ok(r) => self.expected = Some(r.bytes),
                                    Err(e) => {
                                        self.error = Some(format!("request: {e}"));
                                        break;
                                    }
                                }
                            }
                        }
                    }
                    Ok(None) => {
                        fin = true;
                        break;
                    }
                    Err(_) => break,
                }
            }
            let _ = chunks.finalize();
        }
        let Some(total) = self.expected else {
            return;
        };
        while self.written < total {
            let off = (self.written % CHUNK as u64) as usize;
            let left = usize::try_from(total - self.written).unwrap_or(usize::MAX);
            let end = (off + left).min(CHUNK);
            match conn.send_stream(id).write(&self.pattern[off..end]) {
                Ok(n) if n > 0 => self.written += n as u64,
                _ => return,
            }
        }
        self.data_finished = true;
        // The client finishes its side once it holds every byte; then the summary.
        if fin && self.data_finished {
            let st = conn.stats();
            let summary = Summary {
                bytes: total,
                sent_packets: st.path.sent_packets,
                lost_packets: st.path.lost_packets,
                retransmissions: st.path.lost_packets,
                ..Summary::default()
            };
            let mut s = conn.send_stream(id);
            if s.write(&summary.encode()) != Ok(Summary::LEN) || s.finish().is_err() {
                self.error = Some("writing the summary failed".into());
            }
            self.replied = true;
        }
    }
}
