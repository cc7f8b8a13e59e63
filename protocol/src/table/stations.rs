//! Sessions bound to their stations and base flows.
//!
//! A *station* is the client IP address of a base flow. Each station has its own discovery
//! token bucket and its own caps on half-open entries and sessions; when a cap is reached the
//! station loses its own oldest entry, and when the whole table is full the entry evicted
//! belongs to the station holding the most (fair eviction). One station opening thousands of
//! sessions therefore only ever evicts its own.
//!
//! A base flow is *owned* by the first session announced for it (`SessionEstablished`, which
//! attaches the engines). A later session on an owned flow waits unannounced; it takes the
//! flow over only when the owner is gone, or when it has validated its address and the owner
//! never did (a spoofed session that got there first). A validated owner is never displaced.

use std::net::IpAddr;

use super::{BaseFlow, HashMap, ProxyEvent, ProxySession, ProxySessionTable, SessionId, Time};

/// Per-station state.
#[derive(Debug)]
pub(super) struct Station {
    pub(super) sessions: usize,
    pub(super) half_open: usize,
    tokens: f64,
    tokens_at: Time,
}

/// Why a session leaves the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Removal {
    /// The client closed it (the caller returns `Closed`).
    Closed,
    /// The proxy closed it (`close()`).
    ClosedByProxy,
    /// Idle timeout.
    Expired,
    /// A cap made room.
    Evicted,
    /// A validated session took its unvalidated flow over.
    Displaced,
}

/// Flow ownership: the announced owner and the sessions waiting for the flow.
pub(super) type FlowOwners = HashMap<BaseFlow, (SessionId, Vec<SessionId>)>;

impl ProxySessionTable {
    fn station(&mut self, ip: IpAddr, now: Time) -> &mut Station {
        // Stations holding entries are bounded by the session and half-open caps; those that
        // only remember a bucket by `max_stations`.
        let holding = self.sessions.len() + self.half_open.len();
        if !self.stations.contains_key(&ip)
            && self.stations.len() >= self.policy.max_stations.saturating_add(holding)
        {
            self.prune_stations(now, holding);
        }
        let burst = f64::from(self.policy.station_discovery_burst);
        self.stations.entry(ip).or_insert(Station {
            sessions: 0,
            half_open: 0,
            tokens: burst,
            tokens_at: now,
        })
    }

    /// Forgets stations that hold nothing: first those whose bucket refilled (no information
    /// lost), then the longest quiet ones until a quarter of the cap is free again (so that a
    /// flood of new stations pays this scan once per quarter cap, not per request).
    fn prune_stations(&mut self, now: Time, holding: usize) {
        let rate = f64::from(self.policy.station_discovery_rate);
        let burst = f64::from(self.policy.station_discovery_burst);
        self.stations.retain(|_, s| {
            s.sessions > 0
                || s.half_open > 0
                || s.tokens + now.saturating_duration_since(s.tokens_at).as_secs_f64() * rate
                    < burst
        });
        let target = (self.policy.max_stations / 4 * 3).saturating_add(holding);
        if self.stations.len() > target {
            let mut quiet: Vec<(Time, IpAddr)> = self
                .stations
                .iter()
                .filter(|(_, s)| s.sessions == 0 && s.half_open == 0)
                .map(|(ip, s)| (s.tokens_at, *ip))
                .collect();
            quiet.sort_unstable();
            for (_, ip) in quiet.into_iter().take(self.stations.len() - target) {
                self.stations.remove(&ip);
                self.stats.stations_forgotten += 1;
            }
        }
    }

    /// One discovery token of `ip`'s bucket.
    pub(super) fn take_station_token(&mut self, ip: IpAddr, now: Time) -> bool {
        let rate = f64::from(self.policy.station_discovery_rate);
        let burst = f64::from(self.policy.station_discovery_burst);
        let s = self.station(ip, now);
        let dt = now.saturating_duration_since(s.tokens_at).as_secs_f64();
        s.tokens = (s.tokens + dt * rate).min(burst);
        s.tokens_at = s.tokens_at.max(now);
        if s.tokens >= 1.0 {
            s.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    pub(super) fn count_half_open(&mut self, ip: IpAddr, now: Time, delta: isize) {
        let s = self.station(ip, now);
        s.half_open = s.half_open.saturating_add_signed(delta);
    }

    /// Makes room for one more half-open entry of `ip`: its own oldest beyond its cap, else the
    /// oldest of the station holding the most when the table is full.
    pub(super) fn make_half_open_room(&mut self, ip: IpAddr, now: Time) {
        let own = self.stations.get(&ip).map_or(0, |s| s.half_open);
        let victim_station = if own >= self.policy.max_half_open_per_station {
            Some(ip)
        } else if self.half_open.len() >= self.policy.max_half_open {
            self.stations
                .iter()
                .max_by_key(|(_, s)| s.half_open)
                .map(|(ip, _)| *ip)
        } else {
            None
        };
        let Some(station) = victim_station else {
            return;
        };
        let oldest = self
            .half_open_order
            .iter()
            .copied()
            .find(|id| self.half_open.get(id).is_some_and(|h| h.station == station));
        if let Some(id) = oldest
            && self.half_open.remove(&id).is_some()
        {
            self.count_half_open(station, now, -1);
            self.stats.half_open_evicted += 1;
        }
    }

    /// Makes room for one more session of `ip` (see the module docs).
    pub(super) fn make_session_room(&mut self, ip: IpAddr, now: Time) {
        let own = self.stations.get(&ip).map_or(0, |s| s.sessions);
        let station = if own >= self.policy.max_sessions_per_station {
            ip
        } else if self.sessions.len() >= self.policy.max_sessions {
            match self
                .stations
                .iter()
                .max_by_key(|(_, s)| s.sessions)
                .map(|(ip, _)| *ip)
            {
                Some(s) => s,
                None => return,
            }
        } else {
            return;
        };
        let victim = self
            .sessions
            .values()
            .filter(|s| s.station == station)
            .min_by_key(|s| s.last_rx)
            .map(|s| s.id);
        if let Some(id) = victim {
            self.remove_session(now, &id, Removal::Evicted);
        }
    }

    /// Inserts an established session, binding it to its flow: announced at once when the
    /// flow has no owner, else waiting. Returns whether it was announced.
    pub(super) fn insert_session(&mut self, now: Time, mut s: ProxySession) -> bool {
        let (id, base) = (s.id, s.base);
        self.station(s.station, now).sessions += 1;
        let owner = self
            .flows
            .get(&base)
            .map(|(o, _)| *o)
            .filter(|o| self.sessions.contains_key(o));
        s.announced = owner.is_none();
        match self.flows.get_mut(&base) {
            Some((_, standby)) if owner.is_some() => {
                standby.push(id);
                self.stats.sessions_waiting += 1;
            }
            _ => {
                let standby = self.flows.remove(&base).map(|(_, w)| w).unwrap_or_default();
                self.flows.insert(base, (id, standby));
            }
        }
        let announced = s.announced;
        self.deadlines
            .file(id, s.next_deadline(self.policy.idle_timeout));
        self.sessions.insert(id, s);
        announced
    }

    /// Removes a session and everything bound to it; pushes `Expired` for an announced session
    /// removed by the proxy (the caller reports client closes itself).
    pub(super) fn remove_session(
        &mut self,
        now: Time,
        id: &SessionId,
        why: Removal,
    ) -> Option<ProxySession> {
        let s = self.sessions.remove(id)?;
        self.deadlines.forget(id);
        self.retire(&s);
        if let Some(st) = self.stations.get_mut(&s.station) {
            st.sessions = st.sessions.saturating_sub(1);
        }
        match why {
            Removal::Expired => self.stats.sessions_expired += 1,
            Removal::Evicted => self.stats.sessions_evicted += 1,
            Removal::Displaced => self.stats.sessions_displaced += 1,
            Removal::Closed | Removal::ClosedByProxy => {}
        }
        if s.announced
            && matches!(
                why,
                Removal::Expired | Removal::Evicted | Removal::Displaced
            )
        {
            self.push_event(ProxyEvent::Expired {
                id: *id,
                base: s.base,
            });
        }
        let base = s.base;
        if let Some((owner, standby)) = self.flows.get_mut(&base) {
            standby.retain(|w| w != id);
            if owner == id {
                let standby = std::mem::take(standby);
                self.flows.remove(&base);
                self.promote(now, base, standby);
            }
        }
        Some(s)
    }

    /// The flow lost its owner: the best waiting session (validated first, then the most
    /// recently active) owns it now and is announced.
    fn promote(&mut self, _now: Time, base: BaseFlow, mut standby: Vec<SessionId>) {
        standby.retain(|w| self.sessions.contains_key(w));
        let best = standby
            .iter()
            .copied()
            .filter_map(|w| self.sessions.get(&w).map(|s| (s.validated, s.last_rx, w)))
            .max()
            .map(|(_, _, w)| w);
        let Some(new_owner) = best else {
            return;
        };
        standby.retain(|w| *w != new_owner);
        self.flows.insert(base, (new_owner, standby));
        if let Some(s) = self.sessions.get_mut(&new_owner) {
            s.announced = true;
            let ev = ProxyEvent::SessionEstablished {
                id: new_owner,
                base,
                config: s.config.clone(),
                epoch: s.epoch,
            };
            self.push_event(ev);
        }
    }

    /// A waiting session validated its address: it displaces an owner that never did.
    pub(super) fn on_validated(&mut self, now: Time, id: SessionId) {
        let Some(s) = self.sessions.get(&id) else {
            return;
        };
        if s.announced {
            return;
        }
        let Some((owner, _)) = self.flows.get(&s.base) else {
            return;
        };
        let owner = *owner;
        if self.sessions.get(&owner).is_some_and(|o| !o.validated) {
            self.remove_session(now, &owner, Removal::Displaced);
        }
    }
}
