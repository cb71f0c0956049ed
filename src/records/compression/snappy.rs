//! Snappy: raw blocks, and the "xerial" framing of Java's snappy-java.
//!
//! Java producers write snappy-java's stream format: a 16-byte header
//! (`\x82SNAPPY\0`, then int32 version and int32 minimum-compatible
//! version, both 1), then blocks, each an int32 big-endian length followed
//! by one raw snappy block. librdkafka and others write one raw block. The
//! `snap` crate reads neither framing (its `FrameDecoder` is Google's
//! framing format), so blocks are split here and decoded with `snap::raw`.
//! A payload is xerial exactly when it starts with the 8-byte magic, the
//! same test snappy-java and librdkafka apply.

use super::{decompression_error, Compression};
use crate::records::RecordsErrorKind;

const XERIAL_MAGIC: [u8; 8] = *b"\x82SNAPPY\0";
const XERIAL_HEADER_LEN: usize = 16;
/// snappy-java's default block size (of uncompressed input).
const XERIAL_BLOCK: usize = 32 * 1024;
/// The most a raw snappy block can expand: the best element is a 3-byte
/// copy producing 64 bytes (64/3 < 22).
const MAX_EXPANSION: usize = 22;

pub(super) fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, RecordsErrorKind> {
    let mut out = Vec::new();
    if input.len() >= XERIAL_HEADER_LEN && input.starts_with(&XERIAL_MAGIC) {
        // The two version fields are not checked: every snappy-java release
        // writes 1 and 1, and the blocks inside are plain snappy either way.
        let mut rest = &input[XERIAL_HEADER_LEN..];
        while !rest.is_empty() {
            let Some((len, tail)) = rest.split_first_chunk::<4>() else {
                return Err(error("xerial block length cut off"));
            };
            let len = i32::from_be_bytes(*len);
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l <= tail.len())
                .ok_or_else(|| error("xerial block length beyond the payload"))?;
            let (block, next) = tail.split_at(len);
            raw_block(block, &mut out, limit)?;
            rest = next;
        }
    } else {
        raw_block(input, &mut out, limit)?;
    }
    Ok(out)
}

/// Decodes one raw snappy block, appending to `out`.
fn raw_block(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), RecordsErrorKind> {
    let claimed = snap::raw::decompress_len(block)
        .map_err(|e| decompression_error(Compression::Snappy, e))?;
    // The block states its output size and the decoder needs the buffer up
    // front, so the claim is checked before allocating: against what the
    // codec can produce from this many bytes, then against the limit.
    if claimed > block.len().saturating_mul(MAX_EXPANSION) {
        return Err(error("claimed length larger than the block can hold"));
    }
    let start = out.len();
    if claimed > limit.saturating_sub(start) {
        return Err(RecordsErrorKind::TooLarge { limit });
    }
    out.resize(start + claimed, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| decompression_error(Compression::Snappy, e))?;
    out.truncate(start + written);
    Ok(())
}

fn error(reason: &str) -> RecordsErrorKind {
    decompression_error(Compression::Snappy, reason)
}

/// Compresses in snappy-java's xerial framing, as the Java producer does.
pub(super) fn compress_xerial(input: &[u8]) -> Result<Vec<u8>, RecordsErrorKind> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + input.len() / 2);
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    let mut block = vec![0u8; snap::raw::max_compress_len(XERIAL_BLOCK)];
    for chunk in input.chunks(XERIAL_BLOCK) {
        let n = encoder
            .compress(chunk, &mut block)
            .map_err(|e| super::compression_error(Compression::Snappy, e))?;
        // n <= max_compress_len(32 KiB), far below i32::MAX.
        out.extend_from_slice(&(n as i32).to_be_bytes());
        out.extend_from_slice(&block[..n]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_xerial_both_decode() {
        let data = b"snappy snappy snappy snappy snappy snappy".repeat(5000);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress(&raw, 1 << 20).unwrap(), data);
        let xerial = compress_xerial(&data).unwrap();
        assert!(xerial.starts_with(&XERIAL_MAGIC));
        assert_eq!(decompress(&xerial, 1 << 20).unwrap(), data);
        // More than one block was written.
        assert!(data.len() > XERIAL_BLOCK);
    }

    #[test]
    fn hostile_claims_are_refused_before_allocating() {
        // A raw block claiming 2^32-1 bytes of output in five bytes.
        let claim = [0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(matches!(
            decompress(&claim, usize::MAX),
            Err(RecordsErrorKind::Decompression { .. })
        ));
        // A xerial block length pointing past the end.
        let mut xerial = compress_xerial(b"abc").unwrap();
        xerial[16..20].copy_from_slice(&1000i32.to_be_bytes());
        assert!(matches!(
            decompress(&xerial, 1 << 20),
            Err(RecordsErrorKind::Decompression { .. })
        ));
        // A negative one.
        xerial[16..20].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(decompress(&xerial, 1 << 20).is_err());
        // Header only: an empty payload.
        assert_eq!(decompress(&compress_xerial(b"").unwrap(), 10).unwrap(), b"");
    }

    #[test]
    fn output_beyond_the_limit_is_too_large() {
        let data = vec![7u8; 100_000];
        let xerial = compress_xerial(&data).unwrap();
        assert_eq!(
            decompress(&xerial, 99_999),
            Err(RecordsErrorKind::TooLarge { limit: 99_999 })
        );
    }
}
