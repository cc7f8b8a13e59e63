//! Fuzzes the drop-rule parser and the per-flow datagram counter with arbitrary text and frames.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sidekick_lab::droprule::fuzz_drop_rules(data);
});
