//! Shared pieces of the sidekick example applications: low-latency media with NACKs and FEC,
//! bulk transfer and RTC frames over QUIC. Each application is a binary usable alone and by the
//! lab.
//!
//! - [`transfer`]: bulk transfer over QUIC (quinn and quiche) and, as the papers' baseline, over
//!   kernel TCP ([`transfer::tcp_stack`]), binary `sidekick-transfer`.
//! - [`tcp_split`]: a transparent split-TCP proxy for the lab's ap (the papers' PEPsal
//!   baseline), binary `sidekick-tcp-split`; [`tcp_sys`]: the TCP socket options both need.
//! - [`media`]: Robin #1 low-latency media with NACKs and de-jitter delay, binary `sidekick-media`;
//!   [`media_sidekick`]: its Robin sender on the SDK (`--sidekick`).
//! - [`fec`]: Packrat media with FEC by repetition, stalls, binary `sidekick-media-fec`.
//! - [`multicast`]: a reliable multicast media stream, several receivers with Packrat for the
//!   group, binary `sidekick-multicast`.
//! - [`rtc`]: RTC frames over QUIC (PEMI, PEMI §6.1.2): one stream per frame, frame delay
//!   and jitter, quinn and quiche, binary `sidekick-rtc`.
//! - [`webrtc`]: a WebRTC call on str0m (ICE, DTLS, SRTP, RTP/RTCP, NACK/RTX) with Robin on the
//!   sender and Packrat on the receiver, binary `sidekick-webrtc`.
//! - [`wire`], [`nack`], [`stats`], [`media_session`], [`media_io`]: shared wire format, NACK
//!   bookkeeping, statistics, the media sessions sans IO and their tokio adapters.

/// Items that need the QUIC, WebRTC and media stacks: compiled with the feature `stacks` (on by
/// default). Without it the library holds the wire formats alone, which is what the fuzz targets
/// (examples/fuzz) build.
macro_rules! with_stacks {
    ($($item:item)*) => { $( #[cfg(feature = "stacks")] $item )* };
}

with_stacks! {
    pub mod cli;
    pub mod fec;
    pub mod media;
    pub mod media_io;
    pub mod media_session;
    pub mod media_sidekick;
    pub mod multicast;
    pub mod nack;
    pub mod tcp_split;
    pub mod tcp_sys;
}
pub mod rtc;
pub mod stats;
pub mod transfer;
pub mod webrtc;
pub mod wire;
