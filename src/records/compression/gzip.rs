//! gzip (RFC 1952) through flate2's pure-Rust miniz_oxide backend.

use super::{compression_error, read_limited, size_hint, Compression};
use crate::records::RecordsErrorKind;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use std::io::Write;

pub(super) fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, RecordsErrorKind> {
    // Java's GZIPInputStream reads concatenated members; so do we.
    read_limited(
        MultiGzDecoder::new(input),
        Compression::Gzip,
        limit,
        size_hint(input),
    )
}

pub(super) fn compress(input: &[u8]) -> Result<Vec<u8>, RecordsErrorKind> {
    let mut enc = GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(input)
        .and_then(|_| enc.finish())
        .map_err(|e| compression_error(Compression::Gzip, e))
}
