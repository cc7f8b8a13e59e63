#![no_main]
//! Fuzz target: `sidekick_capi::fuzz_c_api_calls`, every entry point in any order with any
//! arguments (also run by the crate's property tests).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sidekick_capi::fuzz_c_api_calls(data);
});
