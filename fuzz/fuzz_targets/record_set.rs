//! Fuzzes record-set decoding: run with `cargo +nightly fuzz run record_set`
//! from `fuzz/`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lazykafka_fuzz::record_set(data);
});
