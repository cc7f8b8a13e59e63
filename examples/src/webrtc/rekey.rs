//! A key change mid-call: both peers replace their str0m instance with a new one (a new
//! offer/answer, ICE credentials, DTLS handshake and so new SRTP keys) on the same UDP sockets,
//! as a WebRTC endpoint does after a DTLS restart. str0m has no DTLS restart within one
//! instance, so the change is make-before-break across two: the old instance keeps carrying
//! the media until the new one is connected ([`Retiring`]), then stays for
//! [`RETIRE_GRACE`] to decrypt stragglers and answer NACKs for its own packets.
//!
//! To the proxy the flow stays one 5-tuple that carries, mid-stream, STUN and DTLS again, a new
//! SSRC and SRTP under keys it never saw; the tests (`tests/webrtc.rs`) check that the call and
//! its assistance carry on.
//!
//! Signalling: the client posts [`RekeyRequest`] to `POST /rekey` on the server's endpoint; the
//! server answers with an [`super::call::OfferResponse`] and hands its new instance to its peer.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use str0m::Candidate;
use str0m::Rtc;
use str0m::change::{SdpAnswer, SdpOffer, SdpPendingOffer};
use str0m::media::{Direction as MediaDirection, MediaKind, Mid, Pt};

use super::call::OfferResponse;
use super::peer::{Role, new_rtc};
use super::signal::post;

/// How long the old instance stays after the new one connected: its packets still in flight
/// are decrypted, and a NACK for one of them (or a sidekick's resend of one) is answered.
pub const RETIRE_GRACE: Duration = Duration::from_secs(1);

/// SRTP/SRTCP datagrams kept for an instance (the call's first, or a key change's new one) while
/// it is not yet connected (the far peer's keys may be up first); replayed when it connects. At
/// 1.5 Mbit/s a lost DTLS flight (300 ms and more) brings about a hundred.
pub const EARLY_CAP: usize = 512;

/// The client's `POST /rekey` body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RekeyRequest {
    /// SDP offer of the client's new instance (the same media line as the call's).
    pub offer: String,
}

/// A new str0m instance, offer/answer done, for a peer to switch to.
pub struct Rekey {
    /// The instance (boxed: a str0m instance is some 20 KB, and this travels through channels).
    pub rtc: Box<Rtc>,
    /// Its media line when known (the offerer's; the answerer learns it from `MediaAdded`).
    pub mid: Option<Mid>,
}

/// The instance being replaced.
pub struct Retiring {
    /// The old instance.
    pub rtc: Rtc,
    /// Its media and RTX payload types.
    pub media_pt: Option<(Pt, Option<Pt>)>,
    /// When it is dropped: set once the new instance has connected.
    pub until: Option<Instant>,
    /// The sender's media has moved to the new instance.
    pub sender_switched: bool,
}

/// A new instance created at `now` with the host candidate `local`.
fn rtc_at(local: SocketAddr, now: Instant) -> anyhow::Result<Rtc> {
    let mut rtc = new_rtc(now);
    rtc.add_local_candidate(Candidate::host(local, "udp")?)
        .context("adding the host candidate")?;
    Ok(rtc)
}

/// The answerer's side: a new instance at `local` (created at `now`) that accepts `offer`;
/// returns it with the SDP answer.
pub fn answer(local: SocketAddr, offer: &str, now: Instant) -> anyhow::Result<(Rtc, String)> {
    let mut rtc = rtc_at(local, now)?;
    let sdp = SdpOffer::from_sdp_string(offer)?;
    let answer = rtc.sdp_api().accept_offer(sdp)?.to_sdp_string();
    Ok((rtc, answer))
}

/// An offer in the making: the offerer's instance, its media line, the SDP and what accepting
/// the answer needs.
pub struct Offer {
    /// The offerer's instance.
    pub rtc: Rtc,
    /// Its media line.
    pub mid: Mid,
    /// The SDP offer.
    pub sdp: String,
    pending: SdpPendingOffer,
}

impl Offer {
    /// The offerer's side: a new instance at `local` (created at `now`) offering one video line,
    /// send-only for a `Sender`, receive-only for a `Receiver`.
    pub fn new(local: SocketAddr, role: Role, now: Instant) -> anyhow::Result<Self> {
        let mut rtc = rtc_at(local, now)?;
        let mut change = rtc.sdp_api();
        let dir = match role {
            Role::Sender => MediaDirection::SendOnly,
            Role::Receiver => MediaDirection::RecvOnly,
        };
        let mid = change.add_media(MediaKind::Video, dir, None, None, None);
        let (offer, pending) = change.apply().context("no offer")?;
        Ok(Self {
            rtc,
            mid,
            sdp: offer.to_sdp_string(),
            pending,
        })
    }

    /// The answer arrived: the instance is ready to connect.
    pub fn accept(mut self, answer: &str) -> anyhow::Result<Rekey> {
        self.rtc
            .sdp_api()
            .accept_answer(self.pending, SdpAnswer::from_sdp_string(answer)?)
            .context("accepting the answer")?;
        Ok(Rekey {
            rtc: Box::new(self.rtc),
            mid: Some(self.mid),
        })
    }
}

/// The client's side of a key change: a new instance at `local` offers the call's media line
/// (`role` is the client's) to the server at `connect` and takes its answer.
pub async fn offer(connect: SocketAddr, local: SocketAddr, role: Role) -> anyhow::Result<Rekey> {
    let offer = Offer::new(local, role, Instant::now())?;
    let body = serde_json::to_vec(&RekeyRequest {
        offer: offer.sdp.clone(),
    })?;
    let r = post(connect, "/rekey", &body, Duration::from_secs(10))
        .await
        .context("sending the key change's offer")?;
    anyhow::ensure!(
        r.status == 200,
        "key change refused ({}): {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    let answer: OfferResponse = serde_json::from_slice(&r.body).context("parsing the answer")?;
    offer.accept(&answer.answer)
}
