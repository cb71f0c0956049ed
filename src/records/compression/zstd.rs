//! Zstandard (KIP-110) through the `zstd` crate, which links libzstd.
//!
//! Chosen over the pure-Rust `ruzstd` by measurement: on text-like record
//! payloads libzstd decompressed 1.0-1.6 GB/s and ruzstd 0.18-0.34 GB/s on
//! this project's reference machine (see `docs/records.md`), and the
//! decompressor bounds a consumer's throughput on zstd topics.

use super::{compression_error, decompression_error, read_limited, size_hint, Compression};
use crate::records::RecordsErrorKind;

/// libzstd's own default ceiling for the window a frame may ask for
/// (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`, 128 MiB).
const MAX_WINDOW_LOG: u32 = 27;

pub(super) fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, RecordsErrorKind> {
    let mut decoder = zstd::stream::read::Decoder::with_buffer(input)
        .map_err(|e| decompression_error(Compression::Zstd, e))?;
    // A frame names its window size and the decoder allocates it up front:
    // a hostile frame of a few bytes could ask for 128 MiB. No frame whose
    // output fits the limit needs a window larger than the limit.
    decoder
        .window_log_max(window_log_for(limit))
        .map_err(|e| decompression_error(Compression::Zstd, e))?;
    read_limited(decoder, Compression::Zstd, limit, size_hint(input))
}

/// The smallest window log (at least zstd's minimum, 10) whose window holds
/// `limit` bytes, capped at libzstd's default ceiling.
fn window_log_for(limit: usize) -> u32 {
    let needed = usize::BITS - limit.saturating_sub(1).leading_zeros();
    needed.clamp(10, MAX_WINDOW_LOG)
}

pub(super) fn compress(input: &[u8]) -> Result<Vec<u8>, RecordsErrorKind> {
    // Level 3 is zstd's default and what the Java producer uses by default.
    zstd::bulk::compress(input, 3).map_err(|e| compression_error(Compression::Zstd, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_log_covers_the_limit() {
        assert_eq!(window_log_for(0), 10);
        assert_eq!(window_log_for(1024), 10);
        assert_eq!(window_log_for(1025), 11);
        assert_eq!(window_log_for(64 << 20), 26);
        assert_eq!(window_log_for(usize::MAX), 27);
    }
}
