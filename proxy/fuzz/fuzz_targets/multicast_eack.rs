//! A shared multicast cache and its clients' eACKs (real and fuzzed): retransmissions go only
//! to the client that lacks the packet, at its MAC address; caches stay within their caps.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sidekick_proxy::fuzz_support::fuzz_multicast_eack(data)
});
