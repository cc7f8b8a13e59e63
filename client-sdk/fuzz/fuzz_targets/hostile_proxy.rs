#![no_main]
//! Fuzz target: `sidekick::fuzz::fuzz_hostile_proxy`, the client after its Init facing a proxy
//! that holds the session key and sends anything (also run by the crate's proptests).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sidekick::fuzz::fuzz_hostile_proxy(data);
});
