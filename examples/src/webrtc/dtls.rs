//! str0m's DTLS (the `dimpl` crate, RustCrypto backend) with the handshake's flights
//! retransmitted promptly: from [`FLIGHT_START_RTO`], doubling, [`FLIGHT_RETRIES`] times.
//!
//! Why: str0m's own provider keeps dimpl's defaults — a flight is first resent after 1 s, four
//! times in all. On Packrat's media links (10 % loss each way on the last hop) a round of the
//! handshake (a flight of two or three datagrams and the reply) is lost about one time in four
//! (1 − 0.9³), so calls connected seconds after the far peer had started sending (7.2 s against
//! 0.5 s in one trial, 26 Nov 2026), and one call of the day's test runs never connected within
//! 30 s. libwebrtc starts the timer at twice the ICE round trip, clamped to 50–3000 ms
//! (`DtlsTransport`, `kMinHandshakeTimeout`/`kMaxHandshakeTimeout`); a fixed start of about
//! twice the lab's longest WebRTC round trip (160 ms) does the same here (on a longer path a
//! flight is resent once too early: a duplicate the peer ignores), and more retries keep the
//! total patience above a minute.
//!
//! ```
//! let p = sidekick_examples::webrtc::dtls::crypto_provider();
//! let rtc = str0m::RtcConfig::new()
//!     .set_crypto_provider(std::sync::Arc::new(p))
//!     .build(std::time::Instant::now());
//! assert!(!rtc.is_connected());
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use str0m::crypto::dtls::{
    DtlsCert, DtlsImplError, DtlsInstance, DtlsOutput, DtlsProvider, DtlsVersion, ProtocolVersion,
};
use str0m::crypto::{CryptoError, CryptoProvider};

/// The first retransmission of a handshake flight (dimpl adds ±250 ms of jitter, at least 50 ms).
pub const FLIGHT_START_RTO: Duration = Duration::from_millis(300);
/// Retransmissions of one flight: 0.3 s doubling ten times is well over a minute of patience.
pub const FLIGHT_RETRIES: usize = 10;

/// str0m's crypto provider from its feature flags, with [`PromptDtls`] for DTLS.
pub fn crypto_provider() -> CryptoProvider {
    static DTLS: PromptDtls = PromptDtls;
    let mut p = str0m::crypto::from_feature_flags();
    p.dtls_provider = &DTLS;
    p
}

/// Creates dimpl DTLS instances with [`FLIGHT_START_RTO`] and [`FLIGHT_RETRIES`]; certificates
/// come from str0m's own provider.
#[derive(Debug)]
pub struct PromptDtls;

impl DtlsProvider for PromptDtls {
    fn generate_certificate(&self) -> Option<DtlsCert> {
        str0m::crypto::from_feature_flags()
            .dtls_provider
            .generate_certificate()
    }

    fn new_dtls(
        &self,
        cert: &DtlsCert,
        now: Instant,
        dtls_version: DtlsVersion,
        mtu: Option<usize>,
    ) -> Result<Box<dyn DtlsInstance>, CryptoError> {
        // ICE has checked the peer's return path already: no server cookie (as str0m does).
        let mut builder = dimpl::Config::builder()
            .use_server_cookie(false)
            .flight_start_rto(FLIGHT_START_RTO)
            .flight_retries(FLIGHT_RETRIES);
        if let Some(mtu) = mtu {
            builder = builder.mtu(mtu);
        }
        let config = Arc::new(
            builder
                .build()
                .map_err(|e| CryptoError::Other(format!("DTLS configuration: {e}")))?,
        );
        let dtls = match dtls_version {
            DtlsVersion::Dtls12 => dimpl::Dtls::new_12(config, cert.clone(), now),
            DtlsVersion::Dtls13 => dimpl::Dtls::new_13(config, cert.clone(), now),
            DtlsVersion::Auto => dimpl::Dtls::new_auto(config, cert.clone(), now),
            other => {
                return Err(CryptoError::Other(format!(
                    "unsupported DTLS version {other}"
                )));
            }
        };
        Ok(Box::new(PromptDtlsInstance(dtls)))
    }
}

/// One DTLS association: dimpl's, as is.
struct PromptDtlsInstance(dimpl::Dtls);

impl std::fmt::Debug for PromptDtlsInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptDtlsInstance").finish_non_exhaustive()
    }
}

impl DtlsInstance for PromptDtlsInstance {
    fn set_active(&mut self, active: bool) {
        self.0.set_active(active);
    }

    fn handle_packet(&mut self, packet: &[u8]) -> Result<(), DtlsImplError> {
        self.0.handle_packet(packet)
    }

    fn poll_output<'a>(&mut self, buf: &'a mut [u8]) -> DtlsOutput<'a> {
        self.0.poll_output(buf)
    }

    fn handle_timeout(&mut self, now: Instant) -> Result<(), DtlsImplError> {
        self.0.handle_timeout(now)
    }

    fn send_application_data(&mut self, data: &[u8]) -> Result<(), DtlsImplError> {
        self.0.send_application_data(data)
    }

    fn is_active(&self) -> bool {
        self.0.is_active()
    }

    fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.0.protocol_version()
    }

    fn is_closing(&self) -> bool {
        self.0.is_closing()
    }

    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    fn close(&mut self) -> Result<(), DtlsImplError> {
        self.0.close()
    }
}
