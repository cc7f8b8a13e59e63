#![no_main]
//! Fuzz target: `sidekick_capi::fuzz_c_api` (also run by the crate's property tests).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sidekick_capi::fuzz_c_api(data);
});
