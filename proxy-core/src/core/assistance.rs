//! What the proxy does for one flow: nothing, PEMI's transparent help, or a client's sidekick
//! session (Robin, Packrat or both). One typed state per flow replaces a set of optional engines
//! whose valid combinations depended on each other.
//!
//! Transitions (all made by [`super::ProxyCore`]):
//!
//! ```text
//!   Unassisted ──client Initial, PEMI on──▶ Pemi
//!   Unassisted ──session established on the flow──▶ Session
//!   Pemi ──session established on the flow──▶ Session (PEMI's engine suspended as its fallback)
//!   Session with a fallback ──session ended or failed──▶ Pemi (the engine resumes)
//!   Session without one ──session ended or failed──▶ Unassisted
//!   any ──flow idle for the idle timeout──▶ (removed)
//! ```
//!
//! PEMI is the fallback of a session (docs/proxy.md, "PEMI as the fallback"): a flow PEMI
//! assisted before its client opened a session goes back to PEMI when the session ends (client
//! Close) or fails (idle expiry, eviction), so a client whose sidekick goes away keeps
//! transparent help instead of none. Only a flow PEMI already had can be handed back: PEMI's
//! RTTs come from the connection's handshake (PEMI App. A), which a flow first seen mid-way
//! never shows.

use crate::Time;

use crate::engine::FlowEngine;
use crate::flow::FlowState;
use crate::packrat::PackratEngine;
use crate::pemi::PemiEngine;
use crate::robin::RobinEngine;

/// The engines of a flow whose client opened a sidekick session on it.
#[derive(Debug)]
pub struct SessionAssist<Id> {
    /// The session.
    pub id: Id,
    /// Robin: quACKs to the sending client (Sidekick (NSDI '24) §4).
    pub robin: Option<RobinEngine>,
    /// Packrat: cache and retransmissions to the receiving client (Packrat (CoNEXT '26) §5).
    /// `None` for a multicast member, whose cache is its group's.
    pub packrat: Option<PackratEngine>,
    /// PEMI's engine of the flow, suspended ([`PemiEngine::suspend`]) while the session assists
    /// it; it takes the flow back when the session ends or fails.
    pub fallback: Option<Box<PemiEngine>>,
}

impl<Id> SessionAssist<Id> {
    fn poll_timeout(&self) -> Option<Time> {
        // Packrat has no timers of its own; Robin's are its time-driven quACKs.
        self.robin.as_ref().and_then(FlowEngine::poll_timeout)
    }

    fn memory(&self) -> usize {
        self.robin.as_ref().map_or(0, FlowEngine::memory_bytes)
            + self.packrat.as_ref().map_or(0, FlowEngine::memory_bytes)
            + self
                .fallback
                .as_ref()
                .map_or(0, |p| std::mem::size_of::<PemiEngine>() + p.memory_bytes())
    }
}

/// The assistance a flow gets. Engines are boxed so that an unassisted entry stays small
/// (asserted in the tests below).
#[derive(Debug, Default)]
pub enum Assistance<Id> {
    /// Tracked (counted, idle-timed) but not helped.
    #[default]
    Unassisted,
    /// PEMI's transparent mode: the flow began with a QUIC client Initial and its client has no
    /// session (PEMI App. A).
    Pemi(Box<PemiEngine>),
    /// A sidekick session's engines.
    Session(Box<SessionAssist<Id>>),
}

impl<Id: Copy> Assistance<Id> {
    /// The session assisting the flow, if any.
    pub fn session(&self) -> Option<Id> {
        match self {
            Self::Session(s) => Some(s.id),
            _ => None,
        }
    }

    /// The session's engines, if the flow has a session.
    pub fn session_engines(&self) -> Option<&SessionAssist<Id>> {
        match self {
            Self::Session(s) => Some(s),
            _ => None,
        }
    }

    /// PEMI's engine, if the flow is in transparent mode.
    pub fn pemi(&self) -> Option<&PemiEngine> {
        match self {
            Self::Pemi(p) => Some(p),
            _ => None,
        }
    }

    /// When the flow's engines next need [`super::ProxyCore::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Time> {
        match self {
            Self::Unassisted => None,
            Self::Pemi(p) => p.poll_timeout(),
            Self::Session(s) => s.poll_timeout(),
        }
    }

    /// Heap bytes held by the flow's engines.
    pub fn memory(&self) -> usize {
        match self {
            Self::Unassisted => 0,
            Self::Pemi(p) => std::mem::size_of::<PemiEngine>() + p.memory_bytes(),
            Self::Session(s) => std::mem::size_of::<SessionAssist<Id>>() + s.memory(),
        }
    }
}

/// The state of one flow in the table.
#[derive(Debug)]
pub struct FlowValue<Id> {
    /// What the proxy does for the flow.
    pub assistance: Assistance<Id>,
    /// The client's Ethernet address, from its discovery request (multicast retransmissions are
    /// addressed to it).
    pub client_mac: Option<[u8; 6]>,
    /// Generation of this entry: deadline-index entries of an earlier flow with the same key
    /// carry another generation and are ignored.
    pub(super) generation: u32,
    /// The engine deadline registered in the core's deadline index, if any (one registration
    /// per flow: a packet re-registers only a deadline earlier than this one).
    pub(super) timer: Option<Time>,
    /// Bytes of the core's memory budget reserved for this flow's engines.
    pub(super) reserved: u32,
}

impl<Id> FlowState for FlowValue<Id> {
    fn assisted(&self) -> bool {
        matches!(self.assistance, Assistance::Session(_))
    }
}

impl<Id> FlowValue<Id> {
    pub(super) fn new(generation: u32) -> Self {
        Self {
            assistance: Assistance::Unassisted,
            client_mac: None,
            generation,
            timer: None,
            reserved: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{FlowEntry, FlowKey};

    #[test]
    fn an_unassisted_flow_entry_fits_in_256_bytes() {
        // What one tracked flow costs: the table's key and entry, plus its idle deadline in the
        // core's index (see `deadlines`).
        let entry = std::mem::size_of::<FlowKey>()
            + std::mem::size_of::<u64>()
            + std::mem::size_of::<FlowEntry<FlowValue<u64>>>()
            + super::super::deadlines::ENTRY_BYTES;
        assert!(entry <= 256, "{entry} bytes");
        assert!(std::mem::size_of::<Assistance<u64>>() <= 16);
    }
}
