//! The per-flow engine interface: every engine (Robin, Packrat, later PEMI) is a sans-IO state
//! machine that takes packets with an explicit `now` and returns [`Action`]s.

use crate::Time;
use std::net::SocketAddr;

use crate::packet::UdpPacket;

/// Direction of a base-connection packet relative to the assisted client (the endpoint on the
/// proxy's near side — Sidekick (NSDI '24) §2 sender for Robin, Packrat (CoNEXT '26) §3 receiver for Packrat).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Sent by the client towards the server.
    FromClient,
    /// Sent by the server towards the client.
    ToClient,
}

impl Direction {
    /// The opposite direction.
    pub fn reverse(self) -> Self {
        match self {
            Self::FromClient => Self::ToClient,
            Self::ToClient => Self::FromClient,
        }
    }
}

/// What the I/O backend must do on behalf of an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send a sidekick message from the proxy's sidekick socket to a client's sidekick address.
    SendSidekick {
        /// The client's sidekick address.
        to: SocketAddr,
        /// The encoded message.
        bytes: Vec<u8>,
    },
    /// Inject a complete frame (same link type as captured) travelling in `dir`: cached
    /// retransmissions (the original bytes) and discovery replies (sent "from the peer").
    Inject {
        /// Direction of travel; selects the egress interface in bridge mode.
        dir: Direction,
        /// The frame bytes.
        frame: Vec<u8>,
    },
    /// A sidekick message for the flow's session; the core frames it (session id, epoch, MAC,
    /// quota) and turns it into [`Action::SendSidekick`]. Backends never see this variant.
    Message(Outgoing),
    /// Forward the base packet now (bridge mode; a no-op when sniffing: the kernel forwards).
    Forward,
    /// Forward the base packet no earlier than `until` (PEMI's bounded reply delay; bridge only).
    Delay {
        /// Earliest release time.
        until: Time,
    },
}

/// A message an engine asks its session to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// A quACK in its wire form (the quack crate's encoding).
    Quack(Vec<u8>),
    /// A proxy-initiated Reset: the engine has started a new epoch (Packrat (CoNEXT '26) §6.1).
    Reset,
    /// The answer to an eACK that reported open gaps: `resent` packets were resent for it (sent
    /// only with 0, so that the client stops holding for gaps nobody will fill).
    EackOutcome {
        /// Packets resent for the eACK.
        resent: u32,
        /// The client's number for the eACK.
        eack_number: u32,
    },
}

/// One base-connection packet (or one segment of a GSO super-frame) as engines see it.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// The captured frame (checksum already filled in if the kernel left it partial).
    pub frame: &'a [u8],
    /// Where the UDP datagram sits in `frame`.
    pub udp: &'a UdpPacket,
    /// The UDP payload of this segment.
    pub payload: &'a [u8],
    /// True when `frame` holds exactly this datagram (not a GSO super-frame): then the frame may
    /// be cached and re-injected as is.
    pub whole_frame: bool,
}

/// A per-flow engine. Implementations never drop or alter the base packet: their verdict for it
/// is [`Action::Forward`] (implicit) unless they are PEMI's delay (fail-open, docs/architecture.md).
pub trait FlowEngine {
    /// Process one packet of the flow; push side effects to `out`.
    fn on_packet(&mut self, now: Time, dir: Direction, pkt: &Packet<'_>, out: &mut Vec<Action>);
    /// Timer expiry (called at or after [`FlowEngine::poll_timeout`]).
    fn handle_timeout(&mut self, now: Time, out: &mut Vec<Action>);
    /// The next time [`FlowEngine::handle_timeout`] should run, if any.
    fn poll_timeout(&self) -> Option<Time>;
    /// Heap bytes this engine holds (for the per-flow memory cap and metrics).
    fn memory_bytes(&self) -> usize;
}
