//! Datagrams of established sessions: Init/InitAck, Config, Reset, quota refresh and Close as the
//! proxy's table handles them once a session exists (or a half-open entry becomes one).

use super::{
    Challenge, Config, Error, ErrorCode, FrameDirection, Header, InitAck, Message, ProxyEvent,
    ProxySession, ProxySessionTable, Refresh, SecureRandom, SessionConfig, SocketAddr, Time,
    Transmit, frame,
};

impl ProxySessionTable {
    pub(super) fn handle_established(
        &mut self,
        now: Time,
        from: SocketAddr,
        datagram: &[u8],
    ) -> Result<ProxyEvent, Error> {
        let caps = self.policy.capabilities;
        let lie = self.echo_lie();
        let (bind, rate, burst) = (
            self.policy.bind_station,
            self.policy.control_rate,
            self.policy.control_burst,
        );
        let Some(s) = self.sessions.get_mut(&Header::peek(datagram)?.session_id) else {
            return Err(Error::UnknownSession);
        };
        let f = match frame::open(datagram, &s.key, FrameDirection::ClientToProxy) {
            Ok(f) => f,
            Err(e) => {
                match e {
                    Error::BadMac => self.stats.auth_failures += 1,
                    _ => self.stats.refused += 1,
                }
                return Err(e);
            }
        };
        if bind && from.ip().to_canonical() != s.station {
            self.stats.station_mismatch += 1;
            return Err(Error::StationMismatch);
        }
        if let Err(e) = s.replay.accept(f.header.seq) {
            self.stats.replays += 1;
            return Err(e);
        }
        let control = !matches!(f.message, Message::Eack(_) | Message::Close(_));
        if control && !s.take_control_token(now, rate, burst) {
            // RFC 9000 §21.9: a peer may not make us work without bound; the client
            // retransmits what matters.
            self.stats.refused += 1;
            return Err(Error::RateLimited);
        }
        s.last_rx = now;
        s.stats.received += 1;
        s.quota_limit = s.quota_limit.max(u64::from(f.header.quota));
        let mut out: Vec<Result<Transmit, Error>> = Vec::new();
        if from != s.client_addr && !s.validated {
            // Never validated: nothing to keep; the new address is unverified until it echoes
            // a fresh challenge.
            s.client_addr = from;
            s.bytes_in_unverified = 0;
            s.bytes_out_unverified = 0;
            let mut c = [0u8; 8];
            self.rng.fill(&mut c)?;
            s.challenge = u64::from_be_bytes(c).max(1);
            s.challenge_pending = true;
        } else if from != s.client_addr {
            // RFC 9000 §9.3.3: NAT rebinding or an on-path copy. Frames keep going to the last
            // validated address; the new one is probed with its own zero-amplification budget
            // and replaces it only once it echoes the probe's challenge.
            let len = datagram.len() as u64;
            match s.probe.as_mut() {
                Some(p) if p.addr == from => p.bytes_in += len,
                _ => {
                    let mut c = [0u8; 8];
                    self.rng.fill(&mut c)?;
                    s.probe = Some(crate::proxy::Probe {
                        addr: from,
                        challenge: u64::from_be_bytes(c).max(1),
                        bytes_in: len,
                        bytes_out: 0,
                        pending: true,
                    });
                }
            }
            if let Some(t) = s.emit_probe_challenge() {
                if t.is_err()
                    && let Some(p) = s.probe.as_mut()
                {
                    p.pending = true;
                }
                out.push(t);
            }
        }
        if !s.validated {
            s.bytes_in_unverified += datagram.len() as u64;
            if s.challenge_pending {
                let t = s.emit(&Message::Challenge(Challenge { token: s.challenge }));
                s.challenge_pending = t.is_err();
                out.push(t);
            }
        }
        let id = s.id;
        let ev = match f.message {
            Message::Init(_) => {
                // Retransmitted Init (our InitAck was lost): answer again, same challenge.
                let ack = init_ack(s, super::echo_of(s, lie), None, caps);
                out.push(s.emit(&ack));
                Ok(ProxyEvent::Nothing)
            }
            Message::Config(c) => {
                if c.config_id != 0 && c.config_id == s.last_config_id {
                    // Retransmission: echo what is in force.
                    out.push(s.emit(&Message::Config(Config {
                        config_id: c.config_id,
                        config: Some(s.config.clone()),
                        accepted: true,
                        epoch: s.epoch,
                    })));
                    Ok(ProxyEvent::Nothing)
                } else {
                    let negotiated = c
                        .config
                        .as_ref()
                        .ok_or(crate::messages::ConfigError::NoMode)
                        .and_then(|r| self.policy.negotiate(r));
                    if let Ok(config) = negotiated {
                        s.config = config.clone();
                        s.epoch = s.epoch.wrapping_add(1);
                        s.last_config_id = c.config_id;
                        out.push(s.emit(&Message::Config(Config {
                            config_id: c.config_id,
                            config: Some(config.clone()),
                            accepted: true,
                            epoch: s.epoch,
                        })));
                        Ok(ProxyEvent::Reconfigured {
                            id,
                            config,
                            epoch: s.epoch,
                        })
                    } else {
                        out.push(s.emit(&Message::Config(Config {
                            config_id: c.config_id,
                            config: Some(s.config.clone()),
                            accepted: false,
                            epoch: s.epoch,
                        })));
                        Ok(ProxyEvent::Nothing)
                    }
                }
            }
            Message::Reset(r) => {
                match r.epoch.cmp(&s.epoch) {
                    std::cmp::Ordering::Less => Err(Error::StaleEpoch {
                        got: r.epoch,
                        current: s.epoch,
                    }),
                    std::cmp::Ordering::Equal => {
                        if matches!(s.pending_reset, Some((e, _, _)) if e == r.epoch) {
                            s.pending_reset = None;
                            Ok(ProxyEvent::ResetAcked { id, epoch: r.epoch })
                        } else {
                            // The client retransmitted (our echo was lost): echo again.
                            out.push(s.emit(&Message::Reset(r)));
                            Ok(ProxyEvent::Nothing)
                        }
                    }
                    std::cmp::Ordering::Greater => {
                        s.epoch = r.epoch;
                        if matches!(s.pending_reset, Some((e, _, _)) if e <= r.epoch) {
                            s.pending_reset = None;
                        }
                        out.push(s.emit(&Message::Reset(r)));
                        Ok(ProxyEvent::Reset { id, epoch: s.epoch })
                    }
                }
            }
            Message::Eack(e) => match e.epoch.cmp(&s.epoch) {
                std::cmp::Ordering::Less => Err(Error::StaleEpoch {
                    got: e.epoch,
                    current: s.epoch,
                }),
                std::cmp::Ordering::Greater => Err(Error::EpochAhead {
                    got: e.epoch,
                    current: s.epoch,
                }),
                std::cmp::Ordering::Equal => Ok(ProxyEvent::Eack {
                    id,
                    epoch: e.epoch,
                    data: e.data,
                    open_gaps: e.open_gaps,
                    number: e.number,
                }),
            },
            Message::Refresh(r) => {
                let mut ev = ProxyEvent::Nothing;
                if !s.validated && r.path_response == s.challenge {
                    s.validated = true;
                    ev = ProxyEvent::PathValidated { id };
                } else if let Some(p) = s.probe
                    && p.addr == from
                    && r.path_response == p.challenge
                {
                    s.client_addr = p.addr;
                    s.probe = None;
                    s.stats.address_changes += 1;
                    ev = ProxyEvent::PathValidated { id };
                }
                if r.want_reply {
                    out.push(s.emit(&Message::Refresh(Refresh {
                        path_response: 0,
                        want_reply: false,
                    })));
                }
                Ok(ev)
            }
            Message::Error(e) => Ok(ProxyEvent::ClientError { id, code: e.code }),
            Message::Close(_) => Ok(ProxyEvent::Closed { id }),
            other => Err(Error::WrongDirection(other.msg_type())),
        };
        for t in out {
            self.queue(t);
        }
        match &ev {
            Ok(ProxyEvent::Closed { id }) => {
                self.remove_session(now, id, super::Removal::Closed);
                self.stats.sessions_closed += 1;
            }
            Ok(ProxyEvent::PathValidated { id }) => self.on_validated(now, *id),
            Err(_) => self.stats.refused += 1,
            Ok(_) => {}
        }
        ev
    }
}

pub(super) fn init_ack(
    s: &ProxySession,
    echo: SessionConfig,
    err: Option<&crate::messages::ConfigError>,
    caps: u32,
) -> Message {
    Message::InitAck(InitAck {
        accepted: err.is_none(),
        capabilities: caps,
        config: err.is_none().then_some(echo),
        path_challenge: s.challenge,
        epoch: s.epoch,
        reject_code: if err.is_some() {
            ErrorCode::BadConfig as u32
        } else {
            0
        },
    })
}
