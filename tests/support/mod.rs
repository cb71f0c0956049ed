//! Helpers shared by the records tests.

#![allow(dead_code)]

use bytes::Bytes;
use lazykafka::records::{
    DecodeOptions, DecodedRecords, IsolationLevel, Record, RecordSetDecoder, RecordsError,
};

pub fn decode(bytes: &Bytes) -> Result<DecodedRecords, RecordsError> {
    RecordSetDecoder::new(DecodeOptions::default()).decode(
        bytes.clone(),
        IsolationLevel::ReadUncommitted,
        &[],
    )
}

/// The byte ranges of `set` that no checksum covers, batch by batch: the
/// base offset (every format) and the partition leader epoch (v2). A broker
/// rewrites them without touching the CRC, so no decoder can tell a
/// corrupted one from a rewritten one.
pub fn unprotected_ranges(set: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 17 <= set.len() {
        let len = i32::from_be_bytes(set[pos + 8..pos + 12].try_into().unwrap()) as usize;
        out.push(pos..pos + 8);
        if set[pos + 16] == 2 {
            out.push(pos + 12..pos + 16);
        }
        pos += 12 + len;
    }
    out
}

/// Records equal in everything a checksum protects.
fn same_payload(a: &Record<'_>, b: &Record<'_>) -> bool {
    a.timestamp() == b.timestamp()
        && a.key() == b.key()
        && a.value() == b.value()
        && a.headers() == b.headers()
}

/// Flips bits of `set[pos]` and checks what a single corrupted byte may
/// do: fail with a typed error; cut the set short (a length that now runs
/// past the end: a partial tail, the records before it intact); or, in
/// the bytes no checksum covers, change offsets and leader epochs only.
/// It may never yield other records.
pub fn check_corruption(set: &Bytes, pos: usize, mask: u8) -> Result<(), String> {
    assert_ne!(mask, 0);
    let original = decode(set).map_err(|e| format!("original does not decode: {e}"))?;
    let mut bad = set.to_vec();
    bad[pos] ^= mask;
    let decoded = match decode(&Bytes::from(bad)) {
        Err(_) => return Ok(()),
        Ok(d) => d,
    };
    let n = decoded.len();
    let payload_kept = n <= original.len()
        && decoded
            .iter()
            .zip(&original)
            .all(|(a, b)| same_payload(&a, &b));
    if !payload_kept {
        return Err(format!(
            "byte {pos} ^ {mask:#x}: records changed undetected"
        ));
    }
    if decoded.partial_tail.is_some() && original.partial_tail.is_none() {
        // A length now points past the end: only whole batches before it.
        return Ok(());
    }
    if n != original.len() {
        return Err(format!("byte {pos} ^ {mask:#x}: records lost undetected"));
    }
    let in_unprotected = unprotected_ranges(set).iter().any(|r| r.contains(&pos));
    let only_positions_differ =
        !decoded.iter().eq(original.iter()) || decoded.next_offset != original.next_offset;
    if only_positions_differ && !in_unprotected {
        return Err(format!(
            "byte {pos} ^ {mask:#x}: offsets changed undetected"
        ));
    }
    if !only_positions_differ && !in_unprotected {
        return Err(format!("byte {pos} ^ {mask:#x}: corruption not detected"));
    }
    Ok(())
}
