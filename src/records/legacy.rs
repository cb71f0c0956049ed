//! Message sets, message formats v0 and v1 (magic 0 and 1; KIP-31, KIP-32).
//!
//! ```text
//! offset int64 | messageSize int32 | crc uint32 | magic int8 |
//! attributes int8 | [timestamp int64, v1 only] | key bytes | value bytes
//! ```
//!
//! `bytes` are an int32 length (-1 for null) and the bytes. The CRC is
//! CRC-32 (IEEE) over magic to the end of the message. Attributes: bits 0-2
//! compression (gzip, snappy, lz4; zstd only exists in v2), bit 3 the
//! timestamp type (v1).
//!
//! A compressed message is a *wrapper*: its value is a compressed message
//! set of inner messages, which are never compressed themselves. The
//! wrapper's offset is the offset of the last inner message. Inner offsets
//! are absolute in v0 (the broker rewrote them) and relative in v1
//! (KIP-31: the producer writes 0, 1, …, and the broker only sets the
//! wrapper's offset), so an inner v1 record's offset is
//! `wrapper offset - last inner offset + inner offset`. With LogAppendTime
//! the wrapper's timestamp applies to every inner record (KIP-32).

use super::batch::LOG_OVERHEAD;
use super::compression::{self, Compression};
use super::record::{Entry, Span, TimestampType};
use super::DecodedRecords;
use super::{Checksum, DecodeOptions, RecordsErrorKind};
use crate::protocol::Reader;
use bytes::Bytes;

/// The smallest v0 message after `messageSize`: crc, magic, attributes and
/// two null lengths.
pub(crate) const MIN_SIZE_V0: usize = 14;
/// The same for v1, which adds a timestamp.
pub(crate) const MIN_SIZE_V1: usize = 22;

const ATTR_COMPRESSION: i8 = 0x07;
const ATTR_LOG_APPEND_TIME: i8 = 0x08;

/// One parsed message; key and value are positions in `buf`.
struct Message {
    buf: Bytes,
    offset: i64,
    magic: i8,
    codec: Compression,
    timestamp: i64,
    timestamp_type: TimestampType,
    key: Span,
    value: Span,
}

impl Message {
    fn entry(&self, buffer: u32) -> Entry {
        Entry {
            buffer,
            offset: self.offset,
            timestamp: self.timestamp,
            leader_epoch: -1,
            timestamp_type: self.timestamp_type,
            key: self.key,
            value: self.value,
            headers: Span::EMPTY,
            header_count: 0,
        }
    }
}

/// Decodes one top-level message of magic 0 or 1 (`message` is exactly
/// `offset`, `messageSize` and the `messageSize` bytes after it), appending
/// its records to `out`. Returns the message's offset, the last offset it
/// covers.
pub(crate) fn decode_message(
    message: &Bytes,
    options: &DecodeOptions,
    out: &mut DecodedRecords,
) -> Result<i64, RecordsErrorKind> {
    let wrapper = read_message(message.clone(), 0, options)?;
    if wrapper.codec == Compression::None {
        let buffer = out.push_buffer(message.clone());
        out.entries.push(wrapper.entry(buffer));
        return Ok(wrapper.offset);
    }
    let Some(compressed) = wrapper.value.get(message) else {
        return Err(RecordsErrorKind::Malformed {
            what: "compressed message",
            reason: "null value",
        });
    };
    let inner = compression::decompress(
        wrapper.codec,
        compressed,
        // Records locate their fields with u32 positions.
        options.max_decompressed_bytes().min(u32::MAX as usize),
        wrapper.magic,
    )?;
    let inner = Bytes::from(inner);
    let first = out.entries.len();
    // One buffer for all inner messages; their positions are relative to it.
    let buffer = out.push_buffer(inner.clone());
    let mut pos = 0;
    while pos < inner.len() {
        let message = frame(&inner, pos)?;
        let m = read_message(message, pos, options)?;
        pos += m.buf.len();
        if m.codec != Compression::None {
            return Err(RecordsErrorKind::Malformed {
                what: "inner message",
                reason: "compressed inside a compressed message",
            });
        }
        if m.magic != wrapper.magic {
            return Err(RecordsErrorKind::Malformed {
                what: "inner message",
                reason: "magic differs from its wrapper's",
            });
        }
        let (timestamp, timestamp_type) = if wrapper.timestamp_type == TimestampType::LogAppendTime
        {
            (wrapper.timestamp, TimestampType::LogAppendTime)
        } else {
            (m.timestamp, m.timestamp_type)
        };
        out.entries.push(Entry {
            timestamp,
            timestamp_type,
            ..m.entry(buffer)
        });
    }
    settle_inner_offsets(&wrapper, &mut out.entries[first..])?;
    Ok(wrapper.offset)
}

/// Checks the offsets of a compressed message's inner messages against
/// their wrapper's and, for magic 1 (relative inner offsets), makes them
/// absolute.
fn settle_inner_offsets(wrapper: &Message, entries: &mut [Entry]) -> Result<(), RecordsErrorKind> {
    let Some(last_inner) = entries.last().map(|r| r.offset) else {
        return Err(RecordsErrorKind::Malformed {
            what: "compressed message",
            reason: "no inner messages",
        });
    };
    // Brokers assign inner offsets in order and give the wrapper the last
    // one; anything else would move a consumer's position backwards or
    // past records it has not seen.
    if entries.windows(2).any(|w| w[0].offset >= w[1].offset) {
        return Err(RecordsErrorKind::Malformed {
            what: "inner message offset",
            reason: "not increasing",
        });
    }
    if wrapper.magic == 0 && last_inner != wrapper.offset {
        return Err(RecordsErrorKind::Malformed {
            what: "compressed message offset",
            reason: "differs from its last inner message's",
        });
    }
    if wrapper.magic == 1 {
        let base = wrapper
            .offset
            .checked_sub(last_inner)
            .ok_or(OFFSET_OVERFLOW)?;
        for r in entries.iter_mut() {
            r.offset = base.checked_add(r.offset).ok_or(OFFSET_OVERFLOW)?;
        }
    }
    Ok(())
}

const OFFSET_OVERFLOW: RecordsErrorKind = RecordsErrorKind::Malformed {
    what: "inner message offset",
    reason: "offset overflows int64",
};

/// The inner message starting at `pos`: inside a decompressed, checksummed
/// payload a message cut short is an error, not a partial tail.
fn frame(inner: &Bytes, pos: usize) -> Result<Bytes, RecordsErrorKind> {
    let rest = inner.len() - pos;
    let mut r = Reader::new(inner.slice(pos..));
    r.skip("inner offset", 8)?;
    let size = r.i32("inner messageSize")?;
    if size < MIN_SIZE_V0 as i32 {
        return Err(RecordsErrorKind::BadLength {
            what: "inner messageSize",
            length: i64::from(size),
        });
    }
    let total = LOG_OVERHEAD + size as usize;
    if total > rest {
        return Err(RecordsErrorKind::Truncated {
            what: "inner message",
            needed: total,
            remaining: rest,
        });
    }
    Ok(inner.slice(pos..pos + total))
}

/// Parses and checks one message (top-level or inner) that starts at
/// `base` in the buffer its key and value positions refer to.
fn read_message(
    message: Bytes,
    base: usize,
    options: &DecodeOptions,
) -> Result<Message, RecordsErrorKind> {
    if u32::try_from(message.len()).is_err() {
        return Err(RecordsErrorKind::TooLarge {
            limit: u32::MAX as usize,
        });
    }
    let mut r = Reader::new(message.clone());
    let offset = r.i64("offset")?;
    let size = r.i32("messageSize")?;
    let crc = r.u32("crc")?;
    let magic = r.i8("magic")?;
    let min = match magic {
        0 => MIN_SIZE_V0,
        1 => MIN_SIZE_V1,
        m => return Err(RecordsErrorKind::UnknownMagic(m)),
    };
    if size < min as i32 {
        return Err(RecordsErrorKind::BadLength {
            what: "messageSize",
            length: i64::from(size),
        });
    }
    if options.check_crcs() {
        let actual = crc32fast::hash(message.get(16..).unwrap_or_default());
        if actual != crc {
            return Err(RecordsErrorKind::CrcMismatch {
                algorithm: Checksum::Crc32,
                expected: crc,
                actual,
            });
        }
    }
    let attributes = r.i8("attributes")?;
    let codec_id = (attributes & ATTR_COMPRESSION) as u8;
    let codec = match Compression::from_id(codec_id) {
        Some(Compression::Zstd) | None => {
            return Err(RecordsErrorKind::UnknownCompression(codec_id))
        }
        Some(c) => c,
    };
    let (timestamp, timestamp_type) = if magic == 0 {
        (-1, TimestampType::NoTimestamp)
    } else {
        let ts = r.i64("timestamp")?;
        if attributes & ATTR_LOG_APPEND_TIME != 0 {
            (ts, TimestampType::LogAppendTime)
        } else {
            (ts, TimestampType::CreateTime)
        }
    };
    let len = message.len();
    let key = bytes_span(&mut r, "key", len, base)?;
    let value = bytes_span(&mut r, "value", len, base)?;
    if r.remaining() != 0 {
        return Err(RecordsErrorKind::BadLength {
            what: "messageSize (bytes after the value)",
            length: i64::from(size),
        });
    }
    Ok(Message {
        buf: message,
        offset,
        magic,
        codec,
        timestamp,
        timestamp_type,
        key,
        value,
    })
}

/// Reads `bytes` (int32 length, -1 for null) from `r`, a reader over a
/// message of `len` bytes at `base` in its buffer, as a position in that
/// buffer.
fn bytes_span(
    r: &mut Reader,
    what: &'static str,
    len: usize,
    base: usize,
) -> Result<Span, RecordsErrorKind> {
    match r.i32(what)? {
        -1 => Ok(Span::NULL),
        n if n < 0 => Err(RecordsErrorKind::BadLength {
            what,
            length: i64::from(n),
        }),
        n => {
            let start = base + len - r.remaining();
            r.skip(what, n as usize)?;
            Ok(Span::new(start, n as usize))
        }
    }
}
