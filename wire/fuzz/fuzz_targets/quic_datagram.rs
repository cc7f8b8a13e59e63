//! Fuzz target: a datagram walked as coalesced QUIC packets, its varints and its checksum. Run with
//! `scripts/fuzz.sh quic_datagram`. The body is `sidekick_wire::fuzz_datagram`, which
//! `tests/fuzz_corpus.rs` runs over the committed seeds.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sidekick_wire::fuzz_datagram(data);
});
