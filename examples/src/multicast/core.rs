//! The multicast stream's server and receiver as sans-IO state machines: no sockets and no clock
//! of their own. The tokio loops of [`super`] and the simulator drive the same code.
//!
//! Times are `Duration`s since the machine's creation (the caller's clock: wall or virtual);
//! `CLOCK_REALTIME` (the media's production timestamps) is passed in as `wall_us`.
//!
//! Call order of both: feed what arrives (`handle_*`), run [`MulticastServer::handle_timeout`] /
//! [`MulticastReceiver::handle_timeout`] when `poll_timeout` is due, and after each of them
//! drain `poll_transmit` until `None`; stop once `is_done` / `is_over`.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use super::{ServerCounters, note_receiver};
use crate::media::{MediaConfig, MediaSender};
use crate::media_io::{FecHooks, data_seq};
use crate::media_session::{
    HELLO_EVERY, MediaReceiverSession, ReceiverTiming, SenderSession, Sent,
};
use crate::wire::{Codec, Message, encode_hello, encode_summary};
use sidekick_protocol::is_discovery_reply;

/// How long a receiver that sent its SUMMARY waits for the server's answer.
const SUMMARY_ANSWER_WAIT: Duration = Duration::from_secs(2);

/// Where the server is (one per server: no point boxing the streaming state).
#[allow(clippy::large_enum_variant)]
enum ServerState {
    /// No HELLO yet.
    Waiting,
    /// The first HELLO came; other receivers may join until `until`.
    Joining { until: Duration, duration: Duration },
    /// Streaming since `t0`.
    Streaming {
        t0: Duration,
        sender: MediaSender,
        session: SenderSession,
    },
    /// Every known receiver sent its SUMMARY, or the session gave up waiting.
    Done,
}

/// The stream's server: waits for a HELLO, `join_wait` more for other receivers, streams the
/// media packets to the group for the requested duration (capped by `max_duration`), answers
/// NACKs by unicast, then FINs until every known receiver's SUMMARY arrived or `summary_wait`
/// passed; each SUMMARY is answered with the server's counters.
///
/// ```
/// use std::time::Duration;
/// use sidekick_examples::media::MediaConfig;
/// use sidekick_examples::multicast::MulticastServer;
/// let group = "239.1.2.3:5004".parse().unwrap();
/// let receiver = "10.0.2.2:40000".parse().unwrap();
/// let mut s = MulticastServer::new(group, &MediaConfig::default(), Duration::ZERO,
///     Duration::from_secs(60), Duration::from_secs(1), 7);
/// let hello = sidekick_examples::wire::encode_hello(1000);
/// s.handle_datagram(Duration::ZERO, 0, receiver, &hello);
/// s.handle_timeout(Duration::ZERO, 0);
/// let (to, _) = s.poll_transmit().unwrap();
/// assert_eq!(to, group); // the stream's first packet
/// ```
pub struct MulticastServer {
    group: SocketAddr,
    cfg: MediaConfig,
    join_wait: Duration,
    max_duration: Duration,
    summary_wait: Duration,
    nonce: u64,
    codec: Codec,
    state: ServerState,
    /// Receivers and whether their SUMMARY arrived.
    receivers: BTreeMap<SocketAddr, bool>,
    counters: ServerCounters,
    out: VecDeque<(SocketAddr, Vec<u8>)>,
}

impl MulticastServer {
    /// A server of `cfg`'s stream to `group`; `nonce` starts the packets' nonces.
    pub fn new(
        group: SocketAddr,
        cfg: &MediaConfig,
        join_wait: Duration,
        max_duration: Duration,
        summary_wait: Duration,
        nonce: u64,
    ) -> Self {
        Self {
            group,
            cfg: cfg.clone(),
            join_wait,
            max_duration,
            summary_wait,
            nonce,
            codec: Codec::new(0),
            state: ServerState::Waiting,
            receivers: BTreeMap::new(),
            counters: ServerCounters::default(),
            out: VecDeque::new(),
        }
    }

    /// A datagram from `from` arrived at `now`.
    pub fn handle_datagram(&mut self, now: Duration, wall_us: u64, from: SocketAddr, d: &[u8]) {
        let msg = self.codec.decode(d);
        match &mut self.state {
            ServerState::Waiting => {
                if let Ok(Message::Hello { duration_ms }) = msg {
                    note_receiver(&mut self.receivers, from, false);
                    let duration =
                        Duration::from_millis(u64::from(duration_ms)).min(self.max_duration);
                    self.state = ServerState::Joining {
                        until: now + self.join_wait,
                        duration,
                    };
                }
            }
            ServerState::Joining { .. } => {
                if matches!(msg, Ok(Message::Hello { .. })) {
                    note_receiver(&mut self.receivers, from, false);
                }
            }
            ServerState::Streaming { sender, .. } => match msg {
                Ok(Message::Nack { seqs, .. }) => {
                    note_receiver(&mut self.receivers, from, false);
                    self.counters.server_nacks += 1;
                    self.counters.server_nacked_seqs += seqs.len() as u64;
                    for (_, r) in sender.on_datagram(d) {
                        self.out.push_back((from, r));
                    }
                }
                Ok(Message::Summary(_)) => {
                    note_receiver(&mut self.receivers, from, true);
                    let c = sender.counters();
                    self.counters.server_receivers = self.receivers.len() as u64;
                    self.counters.server_retransmissions = c.retransmissions;
                    self.counters.server_packets_sent = c.packets_sent;
                    let json = serde_json::to_string(&self.counters).unwrap_or_default();
                    self.out.push_back((from, encode_summary(&json)));
                }
                Ok(Message::Hello { .. }) => note_receiver(&mut self.receivers, from, false),
                _ => {}
            },
            ServerState::Done => {}
        }
        self.handle_timeout(now, wall_us);
    }

    /// Runs what is due at `now`: the start of the stream, its packets and FINs, the end.
    pub fn handle_timeout(&mut self, now: Duration, wall_us: u64) {
        if let ServerState::Joining { until, duration } = self.state
            && now >= until
        {
            tracing::info!(receivers = self.receivers.len(), ?duration, group = %self.group,
                "streaming");
            self.state = ServerState::Streaming {
                t0: now,
                sender: MediaSender::new(&self.cfg, self.nonce),
                session: SenderSession::new(
                    wall_us,
                    self.cfg.interval,
                    duration,
                    self.summary_wait,
                ),
            };
        }
        let ServerState::Streaming {
            t0,
            sender,
            session,
        } = &mut self.state
        else {
            return;
        };
        let t = now.saturating_sub(*t0);
        let mut sent = Vec::new();
        session.on_timeout(t, sender, &mut sent);
        for s in sent {
            match s {
                Sent::Media { datagram, .. } | Sent::Control(datagram) => {
                    self.out.push_back((self.group, datagram));
                }
            }
        }
        let all_done = !self.receivers.is_empty() && self.receivers.values().all(|d| *d);
        if all_done || session.next_deadline(t).is_none() {
            let c = sender.counters();
            self.counters.server_retransmissions = c.retransmissions;
            self.counters.server_packets_sent = c.packets_sent;
            self.state = ServerState::Done;
        }
    }

    /// When [`Self::handle_timeout`] must run next, given the time `now` (`None`: only a
    /// datagram can move the server).
    pub fn poll_timeout(&self, now: Duration) -> Option<Duration> {
        match &self.state {
            ServerState::Joining { until, .. } => Some(*until),
            ServerState::Streaming { t0, session, .. } => {
                Some(*t0 + session.next_deadline(now.saturating_sub(*t0))?)
            }
            ServerState::Waiting | ServerState::Done => None,
        }
    }

    /// The next datagram to send and its destination (the group, or a receiver).
    pub fn poll_transmit(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        self.out.pop_front()
    }

    /// Whether no HELLO has come yet.
    pub fn is_waiting(&self) -> bool {
        matches!(self.state, ServerState::Waiting)
    }

    /// Whether the session is over.
    pub fn is_done(&self) -> bool {
        matches!(self.state, ServerState::Done)
    }

    /// The server's counters.
    pub fn counters(&self) -> ServerCounters {
        let mut c = self.counters;
        c.server_receivers = self.receivers.len() as u64;
        c
    }
}

/// Sequence numbers seen, as a bitmap up to a cap.
#[derive(Debug, Default)]
pub(super) struct SeqSet(Vec<bool>);

impl SeqSet {
    /// Records `seq`; true if it is new (numbers at or beyond `cap` always count as new).
    pub(super) fn insert(&mut self, seq: u32, cap: u32) -> bool {
        if seq >= cap {
            return true;
        }
        let i = seq as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, false);
        }
        !std::mem::replace(&mut self.0[i], true)
    }
}

/// One receiver of the stream: HELLO (every [`HELLO_EVERY`]) until media flows, NACKs by
/// unicast, the SUMMARY exchange at the end. Its sidekick (if any) is reached through
/// [`FecHooks`], passed to every call: what was sent, what arrived (first copies of the group's
/// packets only, with their sequence numbers, and discovery replies), how long to hold a NACK.
///
/// ```
/// use std::time::Duration;
/// use sidekick_examples::media::MediaConfig;
/// use sidekick_examples::media_io::NoHooks;
/// use sidekick_examples::media_session::ReceiverTiming;
/// use sidekick_examples::multicast::MulticastReceiver;
/// let server = "10.0.1.1:4433".parse().unwrap();
/// let mut r = MulticastReceiver::new(server, &MediaConfig::default(), Duration::from_secs(1),
///     ReceiverTiming::default());
/// r.handle_timeout(Duration::ZERO, &mut NoHooks);
/// assert!(r.poll_transmit().is_some()); // the HELLO
/// assert_eq!(r.poll_timeout(), Some(Duration::from_millis(200)));
/// ```
pub struct MulticastReceiver {
    server: SocketAddr,
    cfg: MediaConfig,
    timing: ReceiverTiming,
    codec: Codec,
    hello: Vec<u8>,
    session: Option<MediaReceiverSession>,
    last_hello: Option<Duration>,
    server_counters: Option<ServerCounters>,
    /// First and latest SUMMARY sent.
    summary_sent: Option<(Duration, Duration)>,
    fed: SeqSet,
    out: VecDeque<Vec<u8>>,
    wake: Option<Duration>,
}

impl MulticastReceiver {
    /// A receiver of `server`'s stream of `cfg`, asking for `duration`.
    pub fn new(
        server: SocketAddr,
        cfg: &MediaConfig,
        duration: Duration,
        timing: ReceiverTiming,
    ) -> Self {
        Self {
            server,
            cfg: cfg.clone(),
            timing,
            codec: Codec::new(0),
            hello: encode_hello(u32::try_from(duration.as_millis()).unwrap_or(u32::MAX)),
            session: None,
            last_hello: None,
            server_counters: None,
            summary_sent: None,
            fed: SeqSet::default(),
            out: VecDeque::new(),
            wake: Some(Duration::ZERO),
        }
    }

    /// A datagram of the group's stream from `from` arrived at `now`.
    pub fn handle_group_datagram(
        &mut self,
        now: Duration,
        wall_us: u64,
        from: SocketAddr,
        d: &[u8],
        hooks: &mut dyn FecHooks,
    ) {
        if from != self.server || self.wake.is_none() {
            return;
        }
        // Only the first copy of a packet goes into the eACK: the proxy's view holds each
        // packet of the group's stream once, and its repairs for other receivers on this host
        // arrive here too.
        let seq = data_seq(&self.codec, d);
        if seq.is_none_or(|q| self.fed.insert(q, self.cfg.max_packets)) {
            hooks.on_received(d, seq);
        }
        let (cfg, timing) = (&self.cfg, self.timing);
        let s = self
            .session
            .get_or_insert_with(|| MediaReceiverSession::new(cfg, timing, now));
        s.set_nack_hold(hooks.nack_hold());
        let nacks = s.on_datagram(d, now, wall_us);
        self.send_all(nacks, hooks);
        self.advance(now, hooks);
    }

    /// A datagram on the receiver's unicast socket from `from` arrived at `now`: a resend, a
    /// discovery reply, or the server's SUMMARY.
    pub fn handle_unicast_datagram(
        &mut self,
        now: Duration,
        wall_us: u64,
        from: SocketAddr,
        d: &[u8],
        hooks: &mut dyn FecHooks,
    ) {
        if from != self.server || self.wake.is_none() {
            return;
        }
        if is_discovery_reply(d) {
            hooks.on_received(d, None);
        } else if let Ok(Message::Summary(json)) = self.codec.decode(d) {
            self.server_counters = serde_json::from_str(&json).ok();
        } else if let Some(s) = self.session.as_mut() {
            // A resend of the server: the proxy never saw it on the group's stream, so it
            // stays out of the eACK.
            let nacks = s.on_datagram(d, now, wall_us);
            self.send_all(nacks, hooks);
        }
        self.advance(now, hooks);
    }

    /// Runs what is due at `now`: the session's re-NACKs, HELLO, SUMMARY, the end.
    pub fn handle_timeout(&mut self, now: Duration, hooks: &mut dyn FecHooks) {
        if self.wake.is_none() {
            return;
        }
        if let Some(s) = self.session.as_mut().filter(|s| !s.is_finished(now)) {
            let nacks = s.on_timeout(now);
            self.send_all(nacks, hooks);
        }
        self.advance(now, hooks);
    }

    fn send_all(&mut self, datagrams: Vec<Vec<u8>>, hooks: &mut dyn FecHooks) {
        for d in datagrams {
            hooks.on_sent(&d);
            self.out.push_back(d);
        }
    }

    /// The loop's head: the end of the session, HELLO and SUMMARY when due, the next wake-up.
    fn advance(&mut self, now: Duration, hooks: &mut dyn FecHooks) {
        let finished = self.session.as_ref().is_some_and(|s| s.is_finished(now));
        if finished {
            if self.server_counters.is_some()
                || self
                    .summary_sent
                    .is_some_and(|(first, _)| now >= first + SUMMARY_ANSWER_WAIT)
            {
                self.wake = None;
                return;
            }
            if self
                .summary_sent
                .is_none_or(|(_, last)| now >= last + HELLO_EVERY)
                && let Some(s) = &self.session
            {
                self.out.push_back(s.summary());
                let first = self.summary_sent.map_or(now, |(f, _)| f);
                self.summary_sent = Some((first, now));
            }
        } else if self.session.is_none() {
            if now >= self.timing.idle {
                self.wake = None;
                return;
            }
            if self.last_hello.is_none_or(|h| now >= h + HELLO_EVERY) {
                hooks.on_sent(&self.hello);
                self.out.push_back(self.hello.clone());
                self.last_hello = Some(now);
            }
        }
        let mut wake = now + HELLO_EVERY;
        if let Some(s) = self.session.as_ref().filter(|_| !finished) {
            wake = wake.min(s.next_deadline());
        }
        self.wake = Some(wake);
    }

    /// The next datagram to send to the server (unicast).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }

    /// When [`Self::handle_timeout`] must run next (`None` once over).
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.wake
    }

    /// Whether the receiver is done (its SUMMARY answered or given up, or no media came).
    pub fn is_over(&self) -> bool {
        self.wake.is_none()
    }

    /// The session (once media arrived) and the server's answer to the SUMMARY, if it came.
    pub fn into_parts(self) -> (Option<MediaReceiverSession>, Option<ServerCounters>) {
        (self.session, self.server_counters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media_io::NoHooks;

    #[test]
    fn seq_set_reports_first_copies_only() {
        let mut s = SeqSet::default();
        assert!(s.insert(5, 100));
        assert!(!s.insert(5, 100));
        assert!(s.insert(2, 100));
        assert!(
            s.insert(100, 100) && s.insert(100, 100),
            "beyond the cap: not tracked"
        );
    }

    /// Server and two receivers in one loop, datagrams delivered at once; every second
    /// packet of the group lost to receiver `b` and NACKed back.
    #[test]
    fn a_server_and_two_receivers_complete_the_session() {
        let group: SocketAddr = "239.1.2.3:5004".parse().unwrap();
        let server: SocketAddr = "10.0.1.1:4433".parse().unwrap();
        let addrs: [SocketAddr; 2] = ["10.0.2.2:1".parse().unwrap(), "10.0.2.2:2".parse().unwrap()];
        let cfg = MediaConfig::default();
        let mut s = MulticastServer::new(
            group,
            &cfg,
            Duration::from_millis(300),
            Duration::from_secs(60),
            Duration::from_secs(5),
            1,
        );
        let mut r: Vec<_> = (0..2)
            .map(|_| {
                MulticastReceiver::new(
                    server,
                    &cfg,
                    Duration::from_secs(1),
                    ReceiverTiming::default(),
                )
            })
            .collect();
        let mut lost = 0;
        let mut now = Duration::ZERO;
        while !r.iter().all(MulticastReceiver::is_over) {
            assert!(now < Duration::from_secs(30), "not over");
            for (i, x) in r.iter_mut().enumerate() {
                if x.poll_timeout().is_some_and(|w| w <= now) {
                    x.handle_timeout(now, &mut NoHooks);
                }
                while let Some(d) = x.poll_transmit() {
                    s.handle_datagram(now, 0, addrs[i], &d);
                }
            }
            if s.poll_timeout(now).is_some_and(|w| w <= now) {
                s.handle_timeout(now, 0);
            }
            while let Some((to, d)) = s.poll_transmit() {
                for (i, x) in r.iter_mut().enumerate() {
                    if to == group {
                        let seq = data_seq(&Codec::new(0), &d);
                        if i == 1 && seq.is_some_and(|q| q % 2 == 1) {
                            lost += 1;
                            continue;
                        }
                        x.handle_group_datagram(now, 0, server, &d, &mut NoHooks);
                    } else if to == addrs[i] {
                        x.handle_unicast_datagram(now, 0, server, &d, &mut NoHooks);
                    }
                }
            }
            now += Duration::from_millis(1);
        }
        assert!(lost > 10);
        assert!(s.is_done(), "every receiver's SUMMARY arrived");
        let c = s.counters();
        assert_eq!(c.server_receivers, 2);
        assert!(
            c.server_nacks > 0 && c.server_retransmissions >= lost,
            "{c:?}"
        );
        for x in r {
            let (session, answer) = x.into_parts();
            assert_eq!(session.unwrap().receiver().metrics().packets_missing, 0);
            assert!(answer.is_some());
        }
    }
}
