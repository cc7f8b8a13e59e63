//! Fuzz what sidekick-webrtc parses from the network: datagram classification and the RTP lens,
//! the payload header, the signalling HTTP request and response, the browser far peer's stats body.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sidekick_examples::webrtc::rtp_lens::fuzz_parse(data);
});
