#![no_main]
//! Fuzz target: `sidekick::lens::fuzz_datagram` (also run by the crate's proptests).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sidekick::lens::fuzz_datagram(data);
});
