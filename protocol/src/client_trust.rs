//! What the client trusts of a proxy it cannot authenticate: the sidekick address of a
//! discovery reply ([`crate::sidekick_addr`]) and the configuration echoed back to it
//! ([`crate::echo`]). See `docs/protocol.md` §11.3.

use crate::Time;
use std::net::{IpAddr, SocketAddr};

use super::{ClientEvent, ClientSession, ClientState, FallbackReason};
use crate::echo::check_echo;
use crate::messages::{Close, Message, SessionConfig};
use crate::sidekick_addr::{AddrRefusal, check_sidekick_addr};

impl ClientSession {
    /// Adds addresses of the client's host ([`crate::ClientConfig::local_addrs`]): a discovery reply
    /// naming one of them as the sidekick address is refused.
    pub fn add_local_addrs(&mut self, addrs: impl IntoIterator<Item = IpAddr>) {
        for a in addrs {
            if !self.cfg.local_addrs.contains(&a) {
                self.cfg.local_addrs.push(a);
            }
        }
    }
    /// Accepts loopback and local sidekick addresses ([`crate::ClientConfig::allow_local_sidekick`]).
    pub fn set_allow_local_sidekick(&mut self, on: bool) {
        self.cfg.allow_local_sidekick = on;
    }

    pub(super) fn check_proxy_addr(&self, addr: SocketAddr) -> Result<(), AddrRefusal> {
        match check_sidekick_addr(addr, &self.cfg.local_addrs) {
            Err(AddrRefusal::Loopback | AddrRefusal::Local) if self.cfg.allow_local_sidekick => {
                Ok(())
            }
            r => r,
        }
    }

    /// Checks an echoed configuration against `requested`: the clamped configuration, or the
    /// fallback (counted) when no genuine proxy could have sent it.
    pub(super) fn accept_echo(
        &mut self,
        now: Time,
        requested: &SessionConfig,
        echoed: &SessionConfig,
    ) -> Result<SessionConfig, ClientEvent> {
        match check_echo(requested, echoed) {
            Ok(a) => {
                self.stats.echo_fields_clamped += a.clamped.len() as u64;
                if !a.clamped.is_empty() {
                    tracing::debug!(clamped = ?a.clamped, "proxy echo clamped to the request");
                }
                Ok(a.config)
            }
            Err(e) => {
                tracing::debug!(%e, "proxy echo refused");
                self.stats.echoes_refused += 1;
                if matches!(
                    self.state,
                    ClientState::Initiating | ClientState::Established
                ) {
                    // Best effort: tell the proxy why before leaving.
                    let _ = self.send(
                        now,
                        &Message::Close(Close {
                            reason: crate::messages::ErrorCode::BadConfig as u32,
                        }),
                    );
                }
                Err(self.fail(FallbackReason::BadEcho(e.field)))
            }
        }
    }
}
