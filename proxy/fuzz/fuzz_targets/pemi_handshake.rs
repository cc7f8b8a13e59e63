//! The PEMI handshake walker (coalesced QUIC long headers, no decryption) never panics.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sidekick_proxy::pemi::handshake::fuzz_handshake(data));
