//! What the `record_set` fuzz target runs on each input. The main crate's
//! `tests/fuzz_corpus.rs` includes this file to replay the corpus under
//! `cargo test`, and `tests/records_props.rs` runs it on generated inputs,
//! so all three apply the same checks.

use bytes::Bytes;
use lazykafka::records::{
    AbortedTransaction, DecodeOptions, DecodedRecords, IsolationLevel, RecordSetDecoder,
};

/// Decodes `data` as a record set every way there is (CRCs checked and
/// not, so inputs reach the record parser and the codecs; both isolation
/// levels) and checks what any outcome must satisfy. Panics on a
/// violation, as the decoder itself must never do.
pub fn record_set(data: &[u8]) {
    let bytes = Bytes::copy_from_slice(data);
    // Producer 4242 is the aborted one of the transaction fixture.
    let aborted = [
        AbortedTransaction {
            producer_id: 4242,
            first_offset: 10,
        },
        AbortedTransaction {
            producer_id: 0,
            first_offset: 0,
        },
    ];
    for check_crcs in [true, false] {
        let decoder = RecordSetDecoder::new(
            DecodeOptions::default()
                .with_check_crcs(check_crcs)
                .with_max_decompressed_bytes(1 << 20),
        );
        for isolation in [
            IsolationLevel::ReadUncommitted,
            IsolationLevel::ReadCommitted,
        ] {
            let mut out = DecodedRecords::new();
            let result = decoder.decode_into(bytes.clone(), isolation, &aborted, &mut out);
            if let Some(tail) = out.partial_tail {
                // A partial tail ends the set and is not an error.
                assert!(result.is_ok());
                assert_eq!(tail.position + tail.bytes, bytes.len());
            }
            if let Err(e) = &result {
                // The error names a batch within the input.
                assert!(e.position() < bytes.len());
                let _ = e.to_string();
            }
            if !out.is_empty() {
                assert!(out.next_offset.is_some());
            }
            assert!(out.batches >= out.control_batches + out.aborted_batches);
            for r in &out {
                let _ = (r.key(), r.value(), r.key_bytes(), r.value_bytes());
                assert_eq!(r.headers().iter().count(), r.headers().len());
            }
        }
    }
}
