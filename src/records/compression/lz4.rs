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
use lz4_flex::frame::{BlockMode, BlockSize, FrameDecoder, FrameEncoder, FrameInfo};
use std::io::{Read, Write};

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

pub(super) fn compress(input: &[u8]) -> Result<Vec<u8>, RecordsErrorKind> {
    // Kafka reads independent blocks only (KafkaLZ4BlockInputStream), and
    // its producers write 64 KiB blocks. Left to choose, lz4_flex picks
    // 4 MiB blocks for large inputs, and a decoder then zeroes a 4 MiB
    // buffer per batch.
    let info = FrameInfo::new()
        .block_mode(BlockMode::Independent)
        .block_size(BlockSize::Max64KB);
    let mut enc = FrameEncoder::with_frame_info(info, Vec::with_capacity(input.len() / 2 + 64));
    enc.write_all(input)
        .map_err(|e| compression_error(Compression::Lz4, e))?;
    enc.finish()
        .map_err(|e| compression_error(Compression::Lz4, e))
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
