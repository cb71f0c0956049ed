//! Replays the corpora of the fuzz targets (`fuzz/corpus/<target>/`:
//! `record_set`, `frame_reader`, `response`) through the same checks the
//! targets run (`fuzz/src/lib.rs`), so every input a fuzzer kept stays
//! fixed.

#[path = "../fuzz/src/lib.rs"]
mod fuzz_body;

#[test]
fn record_set_corpus_replays() {
    let dir = format!("{}/fuzz/corpus/record_set", env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let run = std::panic::catch_unwind(|| fuzz_body::record_set(&data));
        assert!(run.is_ok(), "{} fails the fuzz checks", path.display());
        n += 1;
    }
    // The seeds: every fixture of tests/fixtures/records and three more.
    assert!(n >= 19, "only {n} corpus files in {dir}");
}

/// Replays `fuzz/corpus/<target>/` through `check`; returns how many inputs.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = format!("{}/fuzz/corpus/{target}", env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let run = std::panic::catch_unwind(|| check(&data));
        assert!(run.is_ok(), "{} fails the {target} checks", path.display());
        n += 1;
    }
    n
}

#[test]
fn frame_reader_corpus_replays() {
    // Seeds: every frame of tests/fixtures/protocol, plus what the fuzzer
    // kept.
    assert!(replay("frame_reader", fuzz_body::frame_reader) >= 12);
}

#[test]
fn response_corpus_replays() {
    // Seeds: every response frame of tests/fixtures/protocol, as API,
    // version and body, plus what the fuzzer kept.
    assert!(replay("response", fuzz_body::response) >= 11);
}
