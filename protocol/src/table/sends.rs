//! What the proxy sends on its own initiative in an established session: quACKs, eACK
//! outcomes, a Reset that starts a new epoch, a Close.

use super::{
    Close, EackOutcome, Error, ErrorCode, Message, ProxySessionTable, Quack, Removal, Reset, Retry,
    SessionId, Time, Transmit,
};

impl ProxySessionTable {
    /// Emits a quACK for session `id` in its current epoch. Refused (and counted) beyond the
    /// client's quota or the anti-amplification limit.
    pub fn send_quack(
        &mut self,
        _now: Time,
        id: &SessionId,
        data: &[u8],
    ) -> Result<Transmit, Error> {
        let s = self.sessions.get_mut(id).ok_or(Error::UnknownSession)?;
        let m = Message::Quack(Quack {
            epoch: s.epoch,
            data: data.to_vec(),
        });
        let t = s.emit(&m)?;
        self.stats.bytes_out += t.bytes.len() as u64;
        Ok(t)
    }

    /// Emits an eACK outcome for session `id` in its current epoch (the answer to an eACK with
    /// open gaps: `resent` packets resent for it). Refused (and counted) beyond the client's
    /// quota or the anti-amplification limit.
    pub fn send_eack_outcome(
        &mut self,
        _now: Time,
        id: &SessionId,
        resent: u32,
        eack_number: u32,
    ) -> Result<Transmit, Error> {
        let s = self.sessions.get_mut(id).ok_or(Error::UnknownSession)?;
        let m = Message::EackOutcome(EackOutcome {
            epoch: s.epoch,
            resent,
            eack_number,
        });
        let t = s.emit(&m)?;
        self.stats.bytes_out += t.bytes.len() as u64;
        Ok(t)
    }

    /// Test support (feature `testing`): emits a quACK numbered right after the client's last
    /// grant, as a proxy that ignores the quota would (Sidekick (NSDI '24) §4.1), so client tests can check
    /// that they notice. The proxy never enables this feature.
    #[cfg(feature = "testing")]
    pub fn send_quack_beyond_quota(
        &mut self,
        id: &SessionId,
        data: &[u8],
    ) -> Result<Transmit, Error> {
        let s = self.sessions.get_mut(id).ok_or(Error::UnknownSession)?;
        let limit = s.quota_limit;
        s.next_seq = limit + 1;
        s.quota_limit = u64::MAX;
        let m = Message::Quack(Quack {
            epoch: s.epoch,
            data: data.to_vec(),
        });
        let t = s.emit(&m);
        s.quota_limit = limit;
        t
    }

    /// Starts a new epoch from the proxy side (e.g. an undecodable eACK, Packrat (CoNEXT '26) §6.1);
    /// returns it. The Reset is queued and retransmitted until the client echoes it.
    pub fn send_reset(
        &mut self,
        now: Time,
        id: &SessionId,
        reason: ErrorCode,
    ) -> Result<u32, Error> {
        let retry = self.policy.reset_retry;
        let s = self.sessions.get_mut(id).ok_or(Error::UnknownSession)?;
        let e = s.epoch.wrapping_add(1);
        s.epoch = e;
        let t = s.emit(&Message::Reset(Reset {
            epoch: e,
            reason: reason as u32,
        }));
        s.pending_reset = Some((e, reason as u32, Retry::new(now, retry)));
        let next = s.next_deadline(self.policy.idle_timeout);
        self.deadlines.file(*id, next);
        let ok = t.as_ref().map(|_| ()).map_err(Clone::clone);
        self.queue(t);
        ok.map(|()| e)
    }

    /// Closes session `id`: queues a Close (if quota allows) and forgets the session.
    pub fn close(&mut self, now: Time, id: &SessionId, reason: ErrorCode) -> Result<(), Error> {
        let mut s = self
            .remove_session(now, id, Removal::ClosedByProxy)
            .ok_or(Error::UnknownSession)?;
        let t = s.emit(&Message::Close(Close {
            reason: reason as u32,
        }));
        self.queue(t);
        Ok(())
    }
}
