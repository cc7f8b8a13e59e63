#![no_main]
//! Fuzz target: `sidekick::robin::fuzz_quack` (also run by the crate's proptests).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sidekick::robin::fuzz_quack(data);
});
