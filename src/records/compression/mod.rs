//! Record-batch compression codecs.
//!
//! A compressed v2 batch compresses its whole records section; a compressed
//! v0/v1 message (a "wrapper") carries a compressed message set as its
//! value. Each codec is a cargo feature (`gzip`, `snappy`, `lz4`, `zstd`,
//! all on by default); without it, a batch using the codec is refused with
//! [`RecordsErrorKind::CompressionDisabled`].
//!
//! Decompression never trusts a size the input claims: output goes through
//! a reader capped at the caller's limit (one byte past it is enough to
//! know the batch is too large), and codecs that declare a size up front
//! (raw snappy) have the claim checked against the most the codec can
//! expand its input before anything is allocated.

use super::RecordsErrorKind;
use std::fmt;

#[cfg(feature = "gzip")]
mod gzip;
#[cfg(feature = "lz4")]
mod lz4;
#[cfg(feature = "snappy")]
mod snappy;
#[cfg(feature = "zstd")]
mod zstd;

/// A compression codec, as numbered in bits 0-2 of a batch's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Compression {
    /// No compression (0).
    #[default]
    None,
    /// gzip (1), RFC 1952.
    Gzip,
    /// Snappy (2): raw blocks or Java's "xerial" framing.
    Snappy,
    /// LZ4 (3), LZ4 frame format (KIP-57).
    Lz4,
    /// Zstandard (4), KIP-110; message format v2 only.
    Zstd,
}

impl Compression {
    unstable! {
        /// Every codec, in wire order.
        pub const ALL: [Compression; 5] = [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ];
    }

    /// The codec with wire id `id` (attributes bits 0-2), if Kafka defines
    /// one.
    pub fn from_id(id: u8) -> Option<Compression> {
        Some(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            _ => return None,
        })
    }

    /// The wire id.
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// The name Kafka uses (`compression.type`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// Whether this build can decode and encode the codec (its cargo
    /// feature is on).
    pub fn is_enabled(self) -> bool {
        match self {
            Compression::None => true,
            Compression::Gzip => cfg!(feature = "gzip"),
            Compression::Snappy => cfg!(feature = "snappy"),
            Compression::Lz4 => cfg!(feature = "lz4"),
            Compression::Zstd => cfg!(feature = "zstd"),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Decompresses `input` to at most `limit` bytes. `magic` is the message
/// format of the batch (LZ4 frames of magic 0 need the KIP-57 fix-up).
pub(crate) fn decompress(
    codec: Compression,
    input: &[u8],
    limit: usize,
    magic: i8,
) -> Result<Vec<u8>, RecordsErrorKind> {
    let _ = (input, limit, magic);
    match codec {
        Compression::None => Ok(input.to_vec()),
        #[cfg(feature = "gzip")]
        Compression::Gzip => gzip::decompress(input, limit),
        #[cfg(feature = "snappy")]
        Compression::Snappy => snappy::decompress(input, limit),
        #[cfg(feature = "lz4")]
        Compression::Lz4 => lz4::decompress(input, limit, magic),
        #[cfg(feature = "zstd")]
        Compression::Zstd => zstd::decompress(input, limit),
        #[allow(unreachable_patterns)]
        disabled => Err(RecordsErrorKind::CompressionDisabled(disabled)),
    }
}

/// Compresses `input` the way Kafka's Java producer does for v2 batches.
pub(crate) fn compress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, RecordsErrorKind> {
    match codec {
        Compression::None => Ok(input.to_vec()),
        #[cfg(feature = "gzip")]
        Compression::Gzip => gzip::compress(input),
        #[cfg(feature = "snappy")]
        Compression::Snappy => snappy::compress_xerial(input),
        #[cfg(feature = "lz4")]
        Compression::Lz4 => lz4::compress(input),
        #[cfg(feature = "zstd")]
        Compression::Zstd => zstd::compress(input),
        #[allow(unreachable_patterns)]
        disabled => Err(RecordsErrorKind::CompressionDisabled(disabled)),
    }
}

/// Reads a decompressing reader to its end, refusing to produce more than
/// `limit` bytes. The output grows as data arrives; `hint` (bounded by the
/// limit) only sizes the first allocation.
#[cfg(any(feature = "gzip", feature = "lz4", feature = "zstd"))]
fn read_limited<R: std::io::Read>(
    reader: R,
    codec: Compression,
    limit: usize,
    hint: usize,
) -> Result<Vec<u8>, RecordsErrorKind> {
    use std::io::Read;
    let mut out = Vec::with_capacity(hint.min(limit));
    // One byte past the limit tells "too large" from "exactly at the limit".
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|e| decompression_error(codec, e))?;
    if out.len() > limit {
        return Err(RecordsErrorKind::TooLarge { limit });
    }
    Ok(out)
}

#[cfg(any(
    feature = "gzip",
    feature = "snappy",
    feature = "lz4",
    feature = "zstd"
))]
fn decompression_error(codec: Compression, e: impl fmt::Display) -> RecordsErrorKind {
    RecordsErrorKind::Decompression {
        codec,
        reason: e.to_string(),
    }
}

#[cfg(any(
    feature = "gzip",
    feature = "snappy",
    feature = "lz4",
    feature = "zstd"
))]
fn compression_error(codec: Compression, e: impl fmt::Display) -> RecordsErrorKind {
    RecordsErrorKind::Compression {
        codec,
        reason: e.to_string(),
    }
}

/// A first guess at the decompressed size: records compress a few times
/// over, and the output vector grows beyond this if needed.
#[cfg(any(feature = "gzip", feature = "lz4", feature = "zstd"))]
fn size_hint(input: &[u8]) -> usize {
    input.len().saturating_mul(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for c in Compression::ALL {
            assert_eq!(Compression::from_id(c.id()), Some(c));
        }
        assert_eq!(Compression::from_id(5), None);
        assert_eq!(Compression::from_id(7), None);
    }

    #[test]
    fn every_enabled_codec_round_trips_and_respects_the_limit() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        for codec in Compression::ALL {
            if !codec.is_enabled() {
                continue;
            }
            let packed = compress(codec, &data).unwrap();
            for magic in [1, 2] {
                assert_eq!(decompress(codec, &packed, data.len(), magic).unwrap(), data);
            }
            if codec != Compression::None {
                assert_eq!(
                    decompress(codec, &packed, data.len() - 1, 2),
                    Err(RecordsErrorKind::TooLarge {
                        limit: data.len() - 1
                    }),
                    "{codec}"
                );
            }
        }
    }

    #[test]
    fn garbage_is_a_decompression_error() {
        for codec in Compression::ALL {
            if codec == Compression::None || !codec.is_enabled() {
                continue;
            }
            let err = decompress(codec, b"\x82not a compressed stream at all", 1 << 20, 2);
            assert!(
                matches!(err, Err(RecordsErrorKind::Decompression { codec: c, .. }) if c == codec),
                "{codec}: {err:?}"
            );
        }
    }
}
