//! Fuzzes every response decoder at every version this client speaks: run with `cargo +nightly fuzz run response` from
//! `fuzz/`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lazykafka_fuzz::response(data);
});
