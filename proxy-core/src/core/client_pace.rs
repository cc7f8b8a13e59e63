//! What the handshake rescue learns per client address: how much longer than two round trips
//! its completions take (its own work on the server's flight, such as the certificate check;
//! `handshake_rescue` module docs, step 7), kept within a cap and charged to the memory budget.
//!
//! A daemon runs one core per worker, and the capture hands each worker a share of the flows by
//! their four-tuple, so a client's next connection may land on another core: each lesson is also
//! put out ([`ClientPaces::poll_lesson`]) for the daemon to hand to the other cores
//! ([`ClientPaces::teach`]).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

use crate::Time;

use super::budget::MemoryBudget;
use super::{HandshakeRescue, ProxyCore};
use crate::session::SessionLayer;

/// Bytes charged to the memory budget per remembered client (address, pace, table slot).
pub(super) const CLIENT_PACE_BYTES: usize = 64;

/// Lessons waiting for the daemon to collect; the oldest are dropped beyond this (a lesson
/// lost costs another core one spurious replay round at most).
const MAX_UNCOLLECTED_LESSONS: usize = 64;

/// A client's learned pace, as one core tells the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaceLesson {
    /// The client's address.
    pub client: IpAddr,
    /// How much longer than two round trips its completions took (as smoothed by the core that
    /// learned it).
    pub extra: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Pace {
    extra: Duration,
    /// Its last lesson: the client taught longest ago is forgotten when the table is full.
    taught: Time,
}

/// Learned client paces, at most `max_clients`, each charged to the memory budget.
#[derive(Debug)]
pub(super) struct ClientPaces {
    max_clients: usize,
    paces: HashMap<IpAddr, Pace>,
    lessons: VecDeque<PaceLesson>,
}

impl ClientPaces {
    pub(super) fn new(max_clients: usize) -> Self {
        Self {
            max_clients,
            paces: HashMap::new(),
            lessons: VecDeque::new(),
        }
    }

    /// Clients remembered.
    pub(super) fn len(&self) -> usize {
        self.paces.len()
    }

    /// The pace of `client`, if learned.
    pub(super) fn get(&self, client: IpAddr) -> Option<Duration> {
        self.paces.get(&client).map(|p| p.extra)
    }

    /// A new sample of `client`'s pace at `now`: a longer one counts at once, a shorter one
    /// lowers the pace by a quarter of the difference (one slow handshake under load is not
    /// forgotten at the next). Whether it was remembered (the budget may refuse a new client).
    pub(super) fn learn(
        &mut self,
        now: Time,
        client: IpAddr,
        sample: Duration,
        budget: &mut MemoryBudget,
    ) -> bool {
        let extra = match self.paces.get(&client) {
            Some(p) => p
                .extra
                .max(sample)
                .saturating_sub(p.extra.saturating_sub(sample) / 4),
            None => sample,
        };
        if !self.set(now, client, extra, budget) {
            return false;
        }
        if self.lessons.len() >= MAX_UNCOLLECTED_LESSONS {
            self.lessons.pop_front();
        }
        self.lessons.push_back(PaceLesson { client, extra });
        true
    }

    /// Another core's lesson: its pace replaces this core's (it is the newer).
    pub(super) fn teach(&mut self, now: Time, lesson: PaceLesson, budget: &mut MemoryBudget) {
        self.set(now, lesson.client, lesson.extra, budget);
    }

    /// The next lesson learned here and not collected yet.
    pub(super) fn poll_lesson(&mut self) -> Option<PaceLesson> {
        self.lessons.pop_front()
    }

    fn set(
        &mut self,
        now: Time,
        client: IpAddr,
        extra: Duration,
        budget: &mut MemoryBudget,
    ) -> bool {
        if let Some(p) = self.paces.get_mut(&client) {
            *p = Pace { extra, taught: now };
            return true;
        }
        if self.max_clients == 0 {
            return false;
        }
        if self.paces.len() >= self.max_clients {
            // Full: forget the client taught longest ago. A scan of at most `max_clients`, and
            // only when a client not remembered completes a handshake with the table full.
            if let Some(oldest) = self
                .paces
                .iter()
                .min_by_key(|(_, p)| p.taught)
                .map(|(a, _)| *a)
            {
                self.paces.remove(&oldest);
                budget.release(CLIENT_PACE_BYTES);
            }
        }
        if !budget.try_reserve(CLIENT_PACE_BYTES) {
            return false;
        }
        self.paces.insert(client, Pace { extra, taught: now });
        true
    }
}

impl<S: SessionLayer> ProxyCore<S> {
    /// The next client pace the handshake rescue learned here and has not put out yet, for the
    /// other cores of the same access point (step 5 of the call order); `None` without rescue.
    pub fn poll_pace_lesson(&mut self) -> Option<PaceLesson> {
        self.rescue.as_mut().and_then(HandshakeRescue::poll_lesson)
    }

    /// A client pace another core learned ([`ProxyCore::poll_pace_lesson`]): this core's
    /// handshake rescue waits as long for that client's next handshake.
    pub fn handle_pace_lesson(&mut self, now: Time, lesson: PaceLesson) {
        if let Some(r) = self.rescue.as_mut() {
            r.handle_lesson(now, lesson, &mut self.budget);
        }
    }
}
