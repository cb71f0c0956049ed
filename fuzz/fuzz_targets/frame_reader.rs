//! Fuzzes the frame reader: size prefixes, the frame limit, request and response
//! headers: run with `cargo +nightly fuzz run frame_reader` from
//! `fuzz/`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lazykafka_fuzz::frame_reader(data);
});
