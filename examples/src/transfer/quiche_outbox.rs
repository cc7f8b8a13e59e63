//! Ordered writes of one stream of the raw-stream protocol on quiche (request, payload, summary,
//! FIN), as far as quiche's flow and congestion control let them go: shared by the quiche
//! server, the one-way client ([`super::quiche_stack`]) and the `--both` client
//! ([`super::quiche_both`]).

use std::collections::VecDeque;

use anyhow::bail;

use super::{CHUNK, fill_pattern};

/// Ordered bytes to write on one stream: literal segments and pattern payload, then optionally FIN.
pub(super) struct Outbox {
    /// The stream written.
    pub(super) stream: u64,
    /// What is left to write, in order.
    pub(super) queue: VecDeque<Segment>,
    /// Finish the stream once the queue is written.
    pub(super) fin: bool,
    fin_sent: bool,
    pattern: Vec<u8>,
}

/// A piece of an [`Outbox`].
pub(super) enum Segment {
    /// Literal bytes, of which the first `.1` are written.
    Bytes(Vec<u8>, usize),
    /// This many bytes of payload pattern still to write.
    Pattern(u64),
}

impl Outbox {
    pub(super) fn new(stream: u64) -> Self {
        let mut pattern = vec![0u8; CHUNK];
        fill_pattern(&mut pattern);
        Self {
            stream,
            queue: VecDeque::new(),
            fin: false,
            fin_sent: false,
            pattern,
        }
    }

    /// Payload is still queued. A stream with only a request or a summary to write is pumped
    /// before those with payload: quiche's send capacity (`stream_send`) is shared by the
    /// connection's streams, and a bulk stream pumped first takes all of it, holding the small
    /// message back for as long as the other direction's payload keeps coming.
    pub(super) fn is_bulk(&self) -> bool {
        self.queue.iter().any(|s| matches!(s, Segment::Pattern(_)))
    }

    /// Write as much as flow and congestion control allow.
    pub(super) fn pump(&mut self, conn: &mut quiche::Connection) -> anyhow::Result<()> {
        loop {
            let last = self.queue.len() == 1;
            let Some(seg) = self.queue.front_mut() else {
                break;
            };
            let (buf, rest): (&[u8], u64) = match seg {
                Segment::Bytes(b, off) => (&b[*off..], (b.len() - *off) as u64),
                Segment::Pattern(left) => {
                    let n = usize::try_from(*left).unwrap_or(usize::MAX).min(CHUNK);
                    (&self.pattern[..n], *left)
                }
            };
            let fin = self.fin && last && buf.len() as u64 == rest;
            let written = match conn.stream_send(self.stream, buf, fin) {
                Ok(n) => n,
                Err(quiche::Error::Done) => return Ok(()),
                Err(e) => bail!("stream_send: {e}"),
            };
            let full = written == buf.len();
            match seg {
                Segment::Bytes(_, off) => *off += written,
                Segment::Pattern(left) => *left -= written as u64,
            }
            let empty = match seg {
                Segment::Bytes(b, off) => *off == b.len(),
                Segment::Pattern(left) => *left == 0,
            };
            if empty {
                self.queue.pop_front();
                if fin && full {
                    self.fin_sent = true;
                }
            }
            if !full {
                return Ok(());
            }
        }
        if self.fin && !self.fin_sent {
            match conn.stream_send(self.stream, &[], true) {
                Ok(_) => self.fin_sent = true,
                Err(quiche::Error::Done) => {}
                Err(e) => bail!("stream_send fin: {e}"),
            }
        }
        Ok(())
    }

    /// Everything queued, and the FIN if asked for, is written.
    pub(super) fn is_done(&self) -> bool {
        self.queue.is_empty() && (!self.fin || self.fin_sent)
    }
}
