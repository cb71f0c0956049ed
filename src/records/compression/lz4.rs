//! LZ4 frame format (KIP-57), through lz4_flex, with the fix-up for the
//! broken header checksum of magic-0 messages.
//!
//! Kafka before 0.10 computed the frame header checksum (HC) over the
//! magic number and the descriptor, where the LZ4 frame specification says
//! the descriptor only (FLG, BD and the optional content size and
//! dictionary id). Kafka kept writing and accepting the broken checksum
//! for magic 0 (KIP-57; apache/kafka `KafkaLZ4BlockOutputStream`
//! `useBrokenFlagDescriptorChecksum`). Like librdkafka
//! (`rd_kafka_lz4_decompress_fixup_bad_framing`), magic-0 frames get their
//! HC rewritten to the correct value, `(XXH32(descriptor, 0) >> 8) & 0xff`,
//! before decoding. The message's own CRC-32 already covers these bytes.

use super::{compression_error, decompression_error, read_limited, size_hint, Compression};
use crate::records::RecordsErrorKind;
use lz4_flex::frame::FrameDecoder;
use std::io::Read;

const MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
const FLG_CONTENT_SIZE: u8 = 0x08;
const FLG_DICT_ID: u8 = 0x01;
/// Magic, FLG, BD, content size, dictionary id, HC.
const MAX_HEADER: usize = 4 + 2 + 8 + 4 + 1;

pub(super) fn decompress(
    input: &[u8],
    limit: usize,
    magic: i8,
) -> Result<Vec<u8>, RecordsErrorKind> {
    let hint = size_hint(input);
    if magic == 0 {
        let (header, len) = fix_header_checksum(input)?;
        // Only the header is copied; the blocks are read in place.
        let reader = (&header[..len]).chain(&input[len..]);
        read_limited(FrameDecoder::new(reader), Compression::Lz4, limit, hint)
    } else {
        read_limited(FrameDecoder::new(input), Compression::Lz4, limit, hint)
    }
}

/// A copy of the frame header with its checksum recomputed over the
/// descriptor, and the header's length.
fn fix_header_checksum(input: &[u8]) -> Result<([u8; MAX_HEADER], usize), RecordsErrorKind> {
    if input.len() < 7 || input[..4] != MAGIC {
        return Err(decompression_error(
            Compression::Lz4,
            "no LZ4 frame header to fix up (magic-0 message)",
        ));
    }
    let flg = input[4];
    let mut hc_at = 6;
    if flg & FLG_CONTENT_SIZE != 0 {
        hc_at += 8;
    }
    if flg & FLG_DICT_ID != 0 {
        hc_at += 4;
    }
    if hc_at >= input.len() {
        return Err(decompression_error(
            Compression::Lz4,
            "frame header cut off",
        ));
    }
    let mut header = [0u8; MAX_HEADER];
    header[..=hc_at].copy_from_slice(&input[..=hc_at]);
    header[hc_at] = header_checksum(&input[4..hc_at]);
    Ok((header, hc_at + 1))
}

/// The header checksum the LZ4 frame format specifies.
fn header_checksum(descriptor: &[u8]) -> u8 {
    (twox_hash::XxHash32::oneshot(0, descriptor) >> 8) as u8
}

/// The largest block (BD `Max64KB`): Kafka reads independent blocks only
/// (`KafkaLZ4BlockInputStream`) and its producers write 64 KiB blocks.
const BLOCK: usize = 64 * 1024;
/// FLG: version 01, independent blocks, no checksums, no content size.
const FLG: u8 = 0x60;
/// BD: blocks of at most 64 KiB.
const BD: u8 = 0x40;
/// A block's size word with this bit set: the block is stored as it is.
const UNCOMPRESSED: u32 = 0x8000_0000;

/// One LZ4 frame of independent 64 KiB blocks, written straight into one
/// buffer (a frame encoder would allocate and zero its block buffers and
/// hash table for every batch).
pub(super) fn compress(input: &[u8]) -> Result<Vec<u8>, RecordsErrorKind> {
    let blocks = input.len().div_ceil(BLOCK).max(1);
    let bound =
        7 + blocks * (4 + lz4_flex::block::get_maximum_output_size(BLOCK.min(input.len()))) + 4;
    let mut out = vec![0u8; bound];
    out[..4].copy_from_slice(&MAGIC);
    out[4] = FLG;
    out[5] = BD;
    out[6] = header_checksum(&[FLG, BD]);
    let mut at = 7;
    for block in input.chunks(BLOCK) {
        let body = at + 4;
        let n = lz4_flex::block::compress_into(block, &mut out[body..])
            .map_err(|e| compression_error(Compression::Lz4, e))?;
        let word = if n < block.len() {
            n as u32
        } else {
            // Not smaller compressed: stored as it is.
            out[body..body + block.len()].copy_from_slice(block);
            block.len() as u32 | UNCOMPRESSED
        };
        out[at..body].copy_from_slice(&word.to_le_bytes());
        at = body + (word & !UNCOMPRESSED) as usize;
    }
    // The end mark.
    out[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
    out.truncate(at + 4);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Breaks the checksum the way Kafka 0.8/0.9 computed it: over the
    /// magic number too.
    fn break_checksum(frame: &mut [u8]) {
        let hc_at = 6 + if frame[4] & FLG_CONTENT_SIZE != 0 {
            8
        } else {
            0
        };
        frame[hc_at] = (twox_hash::XxHash32::oneshot(0, &frame[..hc_at]) >> 8) as u8;
    }

    #[test]
    fn magic_zero_frames_with_the_broken_checksum_decode() {
        let data = b"kip-57 ".repeat(1000);
        let mut frame = compress(&data).unwrap();
        assert_eq!(decompress(&frame, 1 << 20, 1).unwrap(), data);
        break_checksum(&mut frame);
        // lz4_flex checks the header checksum: v1 rules refuse the frame…
        assert!(matches!(
            decompress(&frame, 1 << 20, 1),
            Err(RecordsErrorKind::Decompression { .. })
        ));
        // …and the magic-0 fix-up accepts it.
        assert_eq!(decompress(&frame, 1 << 20, 0).unwrap(), data);
    }

    /// Frames of one, several and no blocks, compressible or not, read
    /// back by lz4_flex's frame decoder; the header is Kafka's (independent
    /// 64 KiB blocks, no checksums) and a block that does not shrink is
    /// stored as it is.
    #[test]
    fn frames_of_any_size_read_back() {
        let mut noise = Vec::with_capacity(200_000);
        let mut x = 0x9e37_79b9_u32;
        while noise.len() < 200_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            noise.extend_from_slice(&x.to_le_bytes());
        }
        let text = b"0000123 the same value again ".repeat(7000);
        for input in [
            &b""[..],
            &b"a"[..],
            &text[..BLOCK],
            &text[..BLOCK + 1],
            &text[..],
            &noise[..100],
            &noise[..],
        ] {
            let frame = compress(input).unwrap();
            assert_eq!(frame[..7], [0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82]);
            assert_eq!(frame[frame.len() - 4..], [0, 0, 0, 0]);
            let mut back = Vec::new();
            FrameDecoder::new(&frame[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, input, "{} bytes", input.len());
            assert_eq!(decompress(&frame, input.len().max(1), 1).unwrap(), input);
            if input.len() > 1000 && std::ptr::eq(input.as_ptr(), noise.as_ptr()) {
                // Noise does not shrink: every block stored as it is, with
                // only the frame's and the blocks' few bytes added.
                let blocks = input.len().div_ceil(BLOCK);
                assert_eq!(frame.len(), 7 + 4 * blocks + input.len() + 4);
            }
        }
        assert!(compress(&text).unwrap().len() < text.len() / 10);
    }

    #[test]
    fn short_headers_are_errors() {
        for input in [
            &b""[..],
            &MAGIC[..],
            &[0x04, 0x22, 0x4d, 0x18, 0x68, 0x40][..],
        ] {
            assert!(decompress(input, 100, 0).is_err());
        }
        // FLG announces a content size the input does not have.
        assert!(decompress(&[0x04, 0x22, 0x4d, 0x18, 0x68, 0x40, 0, 0], 100, 0).is_err());
    }
}
