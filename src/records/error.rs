//! The error of the records layer.

use super::Compression;
use crate::protocol::DecodeError;
use std::fmt;

/// Why a record set could not be decoded, or a batch not built.
///
/// It names the fault ([`RecordsError::kind`]), the base offset of the batch
/// (or v0/v1 wrapper message) it was found in ([`RecordsError::batch_offset`])
/// and where that batch starts in the record set
/// ([`RecordsError::position`]). The consumer adds the topic and partition.
///
/// Retrying the same fetch returns the same bytes, so none of these faults
/// goes away by itself: the batch at `batch_offset` cannot be delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordsError {
    kind: RecordsErrorKind,
    batch_offset: i64,
    position: usize,
}

/// Which check a record set failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordsErrorKind {
    /// The stored checksum does not match the bytes (CRC-32C over
    /// attributes..end for v2 batches, CRC-32 over magic..end for v0/v1
    /// messages).
    CrcMismatch {
        /// Which checksum.
        algorithm: Checksum,
        /// The checksum stored in the batch.
        expected: u32,
        /// The checksum of the bytes received.
        actual: u32,
    },
    /// A batch whose declared length was present ended inside one of its
    /// fields. (A batch cut off by the end of the fetch response is not an
    /// error: the rest of it comes with the next fetch.)
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Bytes it needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A length or count is negative, below the format's minimum, or does
    /// not match the bytes it describes.
    BadLength {
        /// Which length.
        what: &'static str,
        /// The value found.
        length: i64,
    },
    /// The magic byte (message format version) is not 0, 1 or 2.
    UnknownMagic(i8),
    /// The compression attribute names no codec Kafka defines (or zstd in a
    /// v0/v1 message, which Kafka never allowed).
    UnknownCompression(u8),
    /// The batch uses a codec whose cargo feature is not enabled.
    CompressionDisabled(Compression),
    /// The codec rejected the compressed bytes.
    Decompression {
        /// The codec.
        codec: Compression,
        /// What the codec reported.
        reason: String,
    },
    /// Compressing a batch being built failed.
    Compression {
        /// The codec.
        codec: Compression,
        /// What the codec reported.
        reason: String,
    },
    /// Decompressed records would exceed the limit on the bytes one
    /// batch may decompress to.
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The bytes are well-formed but break a rule of the format.
    Malformed {
        /// Which field or structure.
        what: &'static str,
        /// The rule broken.
        reason: &'static str,
    },
    /// A batch being built was given values the format cannot carry.
    InvalidInput {
        /// Why.
        reason: &'static str,
    },
}

/// The checksum algorithm of a message format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Checksum {
    /// CRC-32C (Castagnoli), message format v2.
    Crc32c,
    /// CRC-32 (IEEE), message formats v0 and v1.
    Crc32,
}

impl RecordsError {
    pub(crate) fn new(kind: RecordsErrorKind, batch_offset: i64, position: usize) -> Self {
        RecordsError {
            kind,
            batch_offset,
            position,
        }
    }

    /// What is wrong.
    pub fn kind(&self) -> &RecordsErrorKind {
        &self.kind
    }

    /// The base offset of the batch (or the offset of the v0/v1 message)
    /// the fault was found in; records from this offset on were not
    /// decoded. For errors of the batch builder, its base offset.
    pub fn batch_offset(&self) -> i64 {
        self.batch_offset
    }

    /// The byte position in the record set where that batch starts.
    pub fn position(&self) -> usize {
        self.position
    }
}

impl From<DecodeError> for RecordsErrorKind {
    fn from(e: DecodeError) -> Self {
        match e {
            DecodeError::UnexpectedEnd {
                what,
                needed,
                remaining,
            } => RecordsErrorKind::Truncated {
                what,
                needed,
                remaining,
            },
            DecodeError::InvalidLength { what, length } => {
                RecordsErrorKind::BadLength { what, length }
            }
            DecodeError::VarintTooLong => RecordsErrorKind::Malformed {
                what: "varint",
                reason: "longer than its maximum width",
            },
            DecodeError::InvalidValue { what, reason } => {
                RecordsErrorKind::Malformed { what, reason }
            }
            // The record format reads none of the other shapes; keep the
            // mapping total without inventing detail.
            _ => RecordsErrorKind::Malformed {
                what: "record set",
                reason: "undecodable field",
            },
        }
    }
}

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Checksum::Crc32c => "CRC-32C",
            Checksum::Crc32 => "CRC-32",
        })
    }
}

impl fmt::Display for RecordsErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordsErrorKind::CrcMismatch {
                algorithm,
                expected,
                actual,
            } => write!(
                f,
                "{algorithm} mismatch: batch says {expected:#010x}, bytes give {actual:#010x}"
            ),
            RecordsErrorKind::Truncated {
                what,
                needed,
                remaining,
            } => write!(
                f,
                "batch ends inside {what}: needed {needed} bytes, {remaining} left"
            ),
            RecordsErrorKind::BadLength { what, length } => {
                write!(f, "invalid {what} {length}")
            }
            RecordsErrorKind::UnknownMagic(m) => write!(f, "unknown message format (magic {m})"),
            RecordsErrorKind::UnknownCompression(c) => write!(f, "unknown compression codec {c}"),
            RecordsErrorKind::CompressionDisabled(c) => {
                write!(f, "{c} batches need the `{c}` cargo feature")
            }
            RecordsErrorKind::Decompression { codec, reason } => {
                write!(f, "{codec} decompression failed: {reason}")
            }
            RecordsErrorKind::Compression { codec, reason } => {
                write!(f, "{codec} compression failed: {reason}")
            }
            RecordsErrorKind::TooLarge { limit } => {
                write!(f, "decompressed records exceed the limit of {limit} bytes")
            }
            RecordsErrorKind::Malformed { what, reason } => write!(f, "malformed {what}: {reason}"),
            RecordsErrorKind::InvalidInput { reason } => write!(f, "cannot build batch: {reason}"),
        }
    }
}

impl fmt::Display for RecordsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "batch at offset {} (byte {}): {}",
            self.batch_offset, self.position, self.kind
        )
    }
}

impl std::error::Error for RecordsError {}
