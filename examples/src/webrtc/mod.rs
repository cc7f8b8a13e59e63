//! A WebRTC call on a real stack — `str0m` (sans-IO: ICE, DTLS, SRTP, RTP/RTCP, NACK/RTX) — with
//! the sidekick on the datagrams it sends and receives: binary `sidekick-webrtc`.
//!
//! - [`source`]: video-like frames (30 fps, keyframes, several packets per frame), paced.
//! - [`playout`]: the receiver's jitter buffer and metrics (de-jitter delay, frame delay,
//!   frozen time).
//! - [`dtls`]: str0m's DTLS with handshake flights retransmitted as promptly as libwebrtc's.
//! - [`peer`]: the str0m loop (socket, timers, NACK/RTX counters).
//! - [`rekey`]: a key change mid-call (new DTLS, new SRTP keys, same sockets).
//! - [`sidekick`]: Robin on the sender, Packrat on the receiver, through the SDK's sans-IO API.
//! - [`rtp_lens`]: what the sidekick reads from SRTP without keys (RTP sequence numbers).
//! - [`signal`], [`call`]: offer/answer and the report over a small local HTTP endpoint.
//! - [`browser`], [`vp8`]: a real browser (headless Chromium) as the far peer, receiving real
//!   VP8 frames (libvpx) and reporting its `getStats()` ([`browser_stats`]).

with_stacks! {
    pub mod browser;
    pub mod call;
    pub mod dtls;
    pub mod peer;
    pub mod playout;
    pub mod rekey;
    pub mod sidekick;
    pub mod vp8;
}
pub mod browser_stats;
pub mod rtp_lens;
pub mod signal;
pub mod source;
