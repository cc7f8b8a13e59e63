//! What the core hands back to its I/O backend: a verdict for each captured frame, and a queue of
//! datagrams and frames to send, polled by the backend.

use crate::Time;
use std::collections::VecDeque;
use std::net::SocketAddr;

use crate::engine::Direction;

/// What to do with a captured base frame. There is no "drop" and no "rewrite": whatever the
/// engines decide, the base packet is forwarded unchanged (fail-open by construction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Forward the frame now (bridge mode; a no-op when sniffing, where the kernel forwards).
    Forward,
    /// Forward the frame no earlier than `until` (PEMI's bounded reply delay, PEMI §4.5;
    /// bridge mode only — a sniffing backend forwards at once).
    Delay {
        /// Earliest release time.
        until: Time,
    },
}

/// A datagram or frame the backend sends on the core's behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transmit {
    /// A sidekick message from the proxy's sidekick socket to a client's sidekick address.
    Sidekick {
        /// The client's sidekick address.
        to: SocketAddr,
        /// The encoded message.
        bytes: Vec<u8>,
    },
    /// A complete frame (of the captured link type) travelling in `dir`: a cached packet resent
    /// as it was, a discovery reply sent "from the server", a PEMI calibration probe.
    Inject {
        /// Direction of travel; selects the egress interface in bridge mode.
        dir: Direction,
        /// The frame bytes.
        frame: Vec<u8>,
    },
}

/// Frames waiting for the backend. Capped: a backend that stops polling loses the newest
/// injections (counted), never memory.
#[derive(Debug, Default)]
pub(super) struct InjectQueue {
    frames: VecDeque<(Direction, Vec<u8>)>,
    /// Frames dropped because the queue was full.
    pub dropped: u64,
}

/// Frames the queue holds at most (a few ring blocks' worth of retransmissions).
pub(super) const INJECT_QUEUE_CAP: usize = 4096;

impl InjectQueue {
    pub fn push(&mut self, dir: Direction, frame: Vec<u8>) -> bool {
        if self.frames.len() >= INJECT_QUEUE_CAP {
            self.dropped += 1;
            return false;
        }
        self.frames.push_back((dir, frame));
        true
    }

    pub fn pop(&mut self) -> Option<Transmit> {
        self.frames
            .pop_front()
            .map(|(dir, frame)| Transmit::Inject { dir, frame })
    }

    pub fn memory(&self) -> usize {
        self.frames.iter().map(|(_, f)| f.capacity()).sum::<usize>()
            + self.frames.capacity() * std::mem::size_of::<(Direction, Vec<u8>)>()
    }
}
