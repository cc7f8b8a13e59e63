//! Fuzz the RTC framing: request, frame header, end marker, frame stream reader.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sidekick_examples::rtc::fuzz_parse(data);
});
