//! Primitive types of the Kafka wire protocol.
//!
//! Every message is built from a handful of primitives (fixed-width big-endian
//! integers, varints, strings, bytes, arrays) in two flavours: the classic
//! encoding (`int16` / `int32` length prefixes, `-1` for null) and the
//! *compact* encoding of flexible versions (KIP-482: an unsigned varint holding
//! `length + 1`, `0` for null), followed in flexible versions by a section of
//! tagged fields.
//!
//! [`Reader`] decodes from a [`Bytes`] buffer so that byte fields (record
//! batches above all) come out as zero-copy slices of the received frame.
//! It never panics and never trusts a length prefix: every length is checked
//! against the bytes actually left before anything is allocated.
//! [`Writer`] appends to a [`BytesMut`].

use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::fmt;

/// Why bytes could not be decoded into a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended before a value was complete.
    UnexpectedEnd {
        /// What was being read.
        what: &'static str,
        /// How many bytes it needed.
        needed: usize,
        /// How many bytes were left.
        remaining: usize,
    },
    /// A length or count prefix was negative (other than the null marker) or
    /// larger than the input could possibly hold.
    InvalidLength {
        /// What was being read.
        what: &'static str,
        /// The length found on the wire.
        length: i64,
    },
    /// A varint ran past its maximum width (5 bytes for 32 bits, 10 for 64).
    VarintTooLong,
    /// A string was not valid UTF-8.
    InvalidUtf8 {
        /// Which field.
        what: &'static str,
    },
    /// A field that may not be null was null.
    UnexpectedNull {
        /// Which field.
        what: &'static str,
    },
    /// A boolean byte was neither 0 nor 1.
    InvalidBool(u8),
    /// A message was decoded but bytes were left over in its frame.
    TrailingBytes {
        /// How many bytes were left.
        remaining: usize,
    },
    /// The message has no layout at this version.
    UnsupportedVersion {
        /// The API name.
        api: &'static str,
        /// The version asked for.
        version: i16,
    },
    /// A value was well-formed but not allowed here.
    InvalidValue {
        /// Which field.
        what: &'static str,
        /// Why it is refused.
        reason: &'static str,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::UnexpectedEnd {
                what,
                needed,
                remaining,
            } => write!(
                f,
                "input ended while reading {what}: needed {needed} bytes, {remaining} left"
            ),
            DecodeError::InvalidLength { what, length } => {
                write!(f, "invalid length {length} for {what}")
            }
            DecodeError::VarintTooLong => f.write_str("varint longer than its maximum width"),
            DecodeError::InvalidUtf8 { what } => write!(f, "{what} is not valid UTF-8"),
            DecodeError::UnexpectedNull { what } => write!(f, "{what} is null but may not be"),
            DecodeError::InvalidBool(b) => write!(f, "invalid boolean byte {b:#04x}"),
            DecodeError::TrailingBytes { remaining } => {
                write!(f, "{remaining} bytes left over after the message")
            }
            DecodeError::UnsupportedVersion { api, version } => {
                write!(f, "{api} has no version {version} in this client")
            }
            DecodeError::InvalidValue { what, reason } => write!(f, "invalid {what}: {reason}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The message has no layout at this version.
    UnsupportedVersion {
        /// The API name.
        api: &'static str,
        /// The version asked for.
        version: i16,
    },
    /// A field is set that this version cannot carry, and dropping it would
    /// change the meaning of the message.
    FieldNotInVersion {
        /// Which field.
        what: &'static str,
        /// The version asked for.
        version: i16,
    },
    /// A string, byte field or array is longer than its length prefix allows.
    TooLong {
        /// Which field.
        what: &'static str,
        /// Its length.
        length: usize,
    },
    /// A field that the wire format cannot carry as null was null.
    UnexpectedNull {
        /// Which field.
        what: &'static str,
    },
    /// The version names topics by id (Fetch v13+, KIP-516) but this
    /// topic's id is not known: the metadata that named it carried none.
    UnknownTopicId {
        /// The topic's name.
        topic: String,
        /// The version asked for.
        version: i16,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::UnsupportedVersion { api, version } => {
                write!(f, "{api} has no version {version} in this client")
            }
            EncodeError::FieldNotInVersion { what, version } => {
                write!(f, "{what} cannot be sent at version {version}")
            }
            EncodeError::TooLong { what, length } => {
                write!(f, "{what} is too long for its length prefix ({length})")
            }
            EncodeError::UnexpectedNull { what } => write!(f, "{what} is null but may not be"),
            EncodeError::UnknownTopicId { topic, version } => write!(
                f,
                "topic {topic} has no known topic id, which version {version} needs"
            ),
        }
    }
}

impl std::error::Error for EncodeError {}

/// A tagged field this client does not know (KIP-482). Unknown tags are kept,
/// not interpreted, so that a decoded message can be re-encoded unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawTaggedField {
    /// The tag number.
    pub tag: u32,
    /// The field's bytes, undecoded.
    pub data: Bytes,
}

/// A cursor over a received buffer.
///
/// All reads are bounds-checked; a failed read leaves the cursor where the
/// failed value started, so the caller can report where decoding stopped.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
}

impl Reader {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: Bytes) -> Self {
        Reader { buf }
    }

    /// Bytes left to read.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Fails with [`DecodeError::TrailingBytes`] unless everything was read.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes {
                remaining: self.buf.len(),
            })
        }
    }

    fn need(&self, what: &'static str, needed: usize) -> Result<(), DecodeError> {
        if self.buf.len() < needed {
            Err(DecodeError::UnexpectedEnd {
                what,
                needed,
                remaining: self.buf.len(),
            })
        } else {
            Ok(())
        }
    }

    /// Takes the next `n` bytes as a zero-copy slice.
    pub fn take(&mut self, what: &'static str, n: usize) -> Result<Bytes, DecodeError> {
        self.need(what, n)?;
        Ok(self.buf.split_to(n))
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, what: &'static str, n: usize) -> Result<(), DecodeError> {
        self.need(what, n)?;
        self.buf.advance(n);
        Ok(())
    }

    /// Reads an `int8`.
    pub fn i8(&mut self, what: &'static str) -> Result<i8, DecodeError> {
        self.need(what, 1)?;
        Ok(self.buf.get_i8())
    }

    /// Reads an `int16`.
    pub fn i16(&mut self, what: &'static str) -> Result<i16, DecodeError> {
        self.need(what, 2)?;
        Ok(self.buf.get_i16())
    }

    /// Reads a `uint16`.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        self.need(what, 2)?;
        Ok(self.buf.get_u16())
    }

    /// Reads an `int32`.
    pub fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        self.need(what, 4)?;
        Ok(self.buf.get_i32())
    }

    /// Reads a `uint32`.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        self.need(what, 4)?;
        Ok(self.buf.get_u32())
    }

    /// Reads an `int64`.
    pub fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        self.need(what, 8)?;
        Ok(self.buf.get_i64())
    }

    /// Reads a `float64`.
    pub fn f64(&mut self, what: &'static str) -> Result<f64, DecodeError> {
        self.need(what, 8)?;
        Ok(self.buf.get_f64())
    }

    /// Reads a `bool` (exactly 0 or 1).
    pub fn bool(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        self.need(what, 1)?;
        match self.buf[0] {
            0 => {
                self.buf.advance(1);
                Ok(false)
            }
            1 => {
                self.buf.advance(1);
                Ok(true)
            }
            b => Err(DecodeError::InvalidBool(b)),
        }
    }

    /// Reads a 16-byte `uuid` (topic ids).
    pub fn uuid(&mut self, what: &'static str) -> Result<[u8; 16], DecodeError> {
        self.need(what, 16)?;
        let mut id = [0u8; 16];
        self.buf.copy_to_slice(&mut id);
        Ok(id)
    }

    /// Reads an unsigned varint of at most 32 bits (at most 5 bytes).
    pub fn uvarint(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let mut value: u64 = 0;
        for i in 0..5 {
            let byte = *self.buf.get(i).ok_or(DecodeError::UnexpectedEnd {
                what,
                needed: i + 1,
                remaining: self.buf.len(),
            })?;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                if value > u64::from(u32::MAX) {
                    return Err(DecodeError::VarintTooLong);
                }
                self.buf.advance(i + 1);
                return Ok(value as u32);
            }
        }
        Err(DecodeError::VarintTooLong)
    }

    /// Reads an unsigned varint of at most 64 bits (at most 10 bytes).
    pub fn uvarlong(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let byte = *self.buf.get(i).ok_or(DecodeError::UnexpectedEnd {
                what,
                needed: i + 1,
                remaining: self.buf.len(),
            })?;
            if i == 9 && byte > 1 {
                return Err(DecodeError::VarintTooLong);
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.buf.advance(i + 1);
                return Ok(value);
            }
        }
        Err(DecodeError::VarintTooLong)
    }

    /// Reads a zigzag-encoded signed varint (`varint` in the record format).
    pub fn varint(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        let v = self.uvarint(what)?;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    /// Reads a zigzag-encoded signed varlong.
    pub fn varlong(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        let v = self.uvarlong(what)?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// Reads a length prefix: `int16`/`int32` in classic versions (`-1` is
    /// null), `uvarint(length + 1)` in compact ones (`0` is null). Returns
    /// `None` for null. A length beyond the bytes left is rejected here,
    /// before anything is allocated.
    fn length(
        &mut self,
        what: &'static str,
        compact: bool,
        wide: bool,
        element_min: usize,
    ) -> Result<Option<usize>, DecodeError> {
        let raw: i64 = if compact {
            i64::from(self.uvarint(what)?) - 1
        } else if wide {
            i64::from(self.i32(what)?)
        } else {
            i64::from(self.i16(what)?)
        };
        if raw == -1 {
            return Ok(None);
        }
        if raw < 0 {
            return Err(DecodeError::InvalidLength { what, length: raw });
        }
        let len = raw as usize;
        if len.saturating_mul(element_min) > self.buf.len() {
            return Err(DecodeError::InvalidLength { what, length: raw });
        }
        Ok(Some(len))
    }

    /// Reads a nullable string (`NULLABLE_STRING` or `COMPACT_NULLABLE_STRING`).
    pub fn nullable_string(
        &mut self,
        what: &'static str,
        compact: bool,
    ) -> Result<Option<String>, DecodeError> {
        match self.length(what, compact, false, 1)? {
            None => Ok(None),
            Some(len) => {
                let bytes = self.take(what, len)?;
                String::from_utf8(bytes.to_vec())
                    .map(Some)
                    .map_err(|_| DecodeError::InvalidUtf8 { what })
            }
        }
    }

    /// Reads a non-null string (`STRING` or `COMPACT_STRING`).
    pub fn string(&mut self, what: &'static str, compact: bool) -> Result<String, DecodeError> {
        self.nullable_string(what, compact)?
            .ok_or(DecodeError::UnexpectedNull { what })
    }

    /// Reads nullable bytes (`NULLABLE_BYTES` or `COMPACT_NULLABLE_BYTES`) as a
    /// zero-copy slice. Record sets use the same prefix.
    pub fn nullable_bytes(
        &mut self,
        what: &'static str,
        compact: bool,
    ) -> Result<Option<Bytes>, DecodeError> {
        match self.length(what, compact, true, 1)? {
            None => Ok(None),
            Some(len) => self.take(what, len).map(Some),
        }
    }

    /// Reads non-null bytes (`BYTES` or `COMPACT_BYTES`).
    pub fn bytes(&mut self, what: &'static str, compact: bool) -> Result<Bytes, DecodeError> {
        self.nullable_bytes(what, compact)?
            .ok_or(DecodeError::UnexpectedNull { what })
    }

    /// Reads a nullable array whose elements are decoded by `item`.
    ///
    /// `element_min` is the smallest encoded size of one element (at least
    /// 1); the count is checked against it so a hostile count cannot make
    /// the vector's capacity exceed the input.
    pub fn nullable_array<T>(
        &mut self,
        what: &'static str,
        compact: bool,
        element_min: usize,
        mut item: impl FnMut(&mut Reader) -> Result<T, DecodeError>,
    ) -> Result<Option<Vec<T>>, DecodeError> {
        match self.length(what, compact, true, element_min.max(1))? {
            None => Ok(None),
            Some(len) => {
                let mut out = Vec::with_capacity(len);
                for _ in 0..len {
                    out.push(item(self)?);
                }
                Ok(Some(out))
            }
        }
    }

    /// Reads a non-null array; see [`Reader::nullable_array`].
    pub fn array<T>(
        &mut self,
        what: &'static str,
        compact: bool,
        element_min: usize,
        item: impl FnMut(&mut Reader) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        self.nullable_array(what, compact, element_min, item)?
            .ok_or(DecodeError::UnexpectedNull { what })
    }

    /// Reads a tagged-field section (flexible versions only).
    ///
    /// `known` is offered each field's tag and a reader over exactly its
    /// bytes; it returns `Ok(true)` when it consumed the field. Fields it does
    /// not know are returned undecoded, in wire order.
    pub fn tagged_fields(
        &mut self,
        mut known: impl FnMut(u32, &mut Reader) -> Result<bool, DecodeError>,
    ) -> Result<Vec<RawTaggedField>, DecodeError> {
        let count = self.uvarint("tagged field count")? as usize;
        // Each tagged field takes at least two bytes (tag and size).
        if count.saturating_mul(2) > self.buf.len() {
            return Err(DecodeError::InvalidLength {
                what: "tagged field count",
                length: count as i64,
            });
        }
        let mut unknown = Vec::new();
        let mut last_tag: Option<u32> = None;
        for _ in 0..count {
            let tag = self.uvarint("tag")?;
            // KIP-482: tags appear in strictly increasing order.
            if last_tag.is_some_and(|last| tag <= last) {
                return Err(DecodeError::InvalidValue {
                    what: "tagged fields",
                    reason: "tags out of order or repeated",
                });
            }
            last_tag = Some(tag);
            let size = self.uvarint("tagged field size")? as usize;
            let data = self.take("tagged field", size)?;
            let mut field = Reader::new(data.clone());
            if known(tag, &mut field)? {
                field.finish()?;
            } else {
                unknown.push(RawTaggedField { tag, data });
            }
        }
        Ok(unknown)
    }

    /// Reads a tagged-field section and keeps every field undecoded.
    pub fn unknown_tagged_fields(&mut self) -> Result<Vec<RawTaggedField>, DecodeError> {
        self.tagged_fields(|_, _| Ok(false))
    }
}

/// An output buffer for encoding.
#[derive(Debug, Default)]
pub struct Writer {
    buf: BytesMut,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Writer::default()
    }

    /// A writer that appends to `buf`.
    pub fn from_buf(buf: BytesMut) -> Self {
        Writer { buf }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The written bytes.
    pub fn into_inner(self) -> BytesMut {
        self.buf
    }

    /// Mutable access to the written bytes (to patch a length afterwards).
    pub fn buf_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Appends raw bytes.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.put_slice(bytes);
    }

    /// Writes an `int8`.
    pub fn i8(&mut self, v: i8) {
        self.buf.put_i8(v);
    }

    /// Writes an `int16`.
    pub fn i16(&mut self, v: i16) {
        self.buf.put_i16(v);
    }

    /// Writes a `uint16`.
    pub fn u16(&mut self, v: u16) {
        self.buf.put_u16(v);
    }

    /// Writes an `int32`.
    pub fn i32(&mut self, v: i32) {
        self.buf.put_i32(v);
    }

    /// Writes a `uint32`.
    pub fn u32(&mut self, v: u32) {
        self.buf.put_u32(v);
    }

    /// Writes an `int64`.
    pub fn i64(&mut self, v: i64) {
        self.buf.put_i64(v);
    }

    /// Writes a `float64`.
    pub fn f64(&mut self, v: f64) {
        self.buf.put_f64(v);
    }

    /// Writes a `bool`.
    pub fn bool(&mut self, v: bool) {
        self.buf.put_u8(u8::from(v));
    }

    /// Writes a `uuid`.
    pub fn uuid(&mut self, v: &[u8; 16]) {
        self.buf.put_slice(v);
    }

    /// Writes an unsigned varint.
    pub fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.buf.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.put_u8(v as u8);
    }

    /// Writes an unsigned varlong.
    pub fn uvarlong(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.put_u8(v as u8);
    }

    /// Writes a zigzag-encoded signed varint.
    pub fn varint(&mut self, v: i32) {
        self.uvarint(((v << 1) ^ (v >> 31)) as u32);
    }

    /// Writes a zigzag-encoded signed varlong.
    pub fn varlong(&mut self, v: i64) {
        self.uvarlong(((v << 1) ^ (v >> 63)) as u64);
    }

    fn length(
        &mut self,
        what: &'static str,
        len: Option<usize>,
        compact: bool,
        wide: bool,
    ) -> Result<(), EncodeError> {
        let limit = if wide {
            i32::MAX as usize
        } else {
            i16::MAX as usize
        };
        match len {
            Some(n) if n > limit || (compact && n >= u32::MAX as usize) => {
                Err(EncodeError::TooLong { what, length: n })
            }
            Some(n) if compact => {
                self.uvarint(n as u32 + 1);
                Ok(())
            }
            None if compact => {
                self.uvarint(0);
                Ok(())
            }
            Some(n) if wide => {
                self.i32(n as i32);
                Ok(())
            }
            Some(n) => {
                self.i16(n as i16);
                Ok(())
            }
            None if wide => {
                self.i32(-1);
                Ok(())
            }
            None => {
                self.i16(-1);
                Ok(())
            }
        }
    }

    /// Writes a nullable string.
    pub fn nullable_string(
        &mut self,
        what: &'static str,
        v: Option<&str>,
        compact: bool,
    ) -> Result<(), EncodeError> {
        self.length(what, v.map(str::len), compact, false)?;
        if let Some(s) = v {
            self.buf.put_slice(s.as_bytes());
        }
        Ok(())
    }

    /// Writes a non-null string.
    pub fn string(
        &mut self,
        what: &'static str,
        v: &str,
        compact: bool,
    ) -> Result<(), EncodeError> {
        self.nullable_string(what, Some(v), compact)
    }

    /// Writes nullable bytes.
    pub fn nullable_bytes(
        &mut self,
        what: &'static str,
        v: Option<&[u8]>,
        compact: bool,
    ) -> Result<(), EncodeError> {
        self.length(what, v.map(<[u8]>::len), compact, true)?;
        if let Some(b) = v {
            self.buf.put_slice(b);
        }
        Ok(())
    }

    /// Writes non-null bytes.
    pub fn bytes(
        &mut self,
        what: &'static str,
        v: &[u8],
        compact: bool,
    ) -> Result<(), EncodeError> {
        self.nullable_bytes(what, Some(v), compact)
    }

    /// Writes a nullable array, each element with `item`.
    pub fn nullable_array<T>(
        &mut self,
        what: &'static str,
        v: Option<&[T]>,
        compact: bool,
        mut item: impl FnMut(&mut Writer, &T) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        self.length(what, v.map(<[T]>::len), compact, true)?;
        for element in v.unwrap_or_default() {
            item(self, element)?;
        }
        Ok(())
    }

    /// Writes a non-null array.
    pub fn array<T>(
        &mut self,
        what: &'static str,
        v: &[T],
        compact: bool,
        item: impl FnMut(&mut Writer, &T) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        self.nullable_array(what, Some(v), compact, item)
    }

    /// Writes a tagged-field section: the `known` fields this client sets
    /// (already encoded, as `(tag, bytes)`) merged with `unknown` ones kept
    /// from decoding, in increasing tag order as KIP-482 requires.
    pub fn tagged_fields(&mut self, known: &[(u32, Bytes)], unknown: &[RawTaggedField]) {
        let mut all: Vec<(u32, &[u8])> = known
            .iter()
            .map(|(t, d)| (*t, d.as_ref()))
            .chain(unknown.iter().map(|f| (f.tag, f.data.as_ref())))
            .collect();
        all.sort_by_key(|(t, _)| *t);
        all.dedup_by_key(|(t, _)| *t);
        self.uvarint(all.len() as u32);
        for (tag, data) in all {
            self.uvarint(tag);
            self.uvarint(data.len() as u32);
            self.buf.put_slice(data);
        }
    }

    /// Encodes one tagged field's value into its own buffer, ready for
    /// [`Writer::tagged_fields`].
    pub fn tagged(
        tag: u32,
        encode: impl FnOnce(&mut Writer) -> Result<(), EncodeError>,
    ) -> Result<(u32, Bytes), EncodeError> {
        let mut w = Writer::new();
        encode(&mut w)?;
        Ok((tag, w.into_inner().freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reader(bytes: &[u8]) -> Reader {
        Reader::new(Bytes::copy_from_slice(bytes))
    }

    // Vectors from apache/kafka ByteUtilsTest (testUnsignedVarintSerde,
    // testVarintSerde, testVarlongSerde).
    #[test]
    fn varint_vectors_match_kafka() {
        let cases: &[(u32, &[u8])] = &[
            (0, &[0x00]),
            (0x7f, &[0x7f]),
            (0x80, &[0x80, 0x01]),
            (0x3fff, &[0xff, 0x7f]),
            (0x4000, &[0x80, 0x80, 0x01]),
            (u32::MAX, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for (value, bytes) in cases {
            assert_eq!(reader(bytes).uvarint("v").unwrap(), *value);
            let mut w = Writer::new();
            w.uvarint(*value);
            assert_eq!(&w.into_inner()[..], *bytes);
        }
        let signed: &[(i32, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for (value, bytes) in signed {
            assert_eq!(reader(bytes).varint("v").unwrap(), *value);
            let mut w = Writer::new();
            w.varint(*value);
            assert_eq!(&w.into_inner()[..], *bytes);
        }
        assert_eq!(
            reader(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])
                .varlong("v")
                .unwrap(),
            i64::MIN
        );
    }

    #[test]
    fn overlong_varints_are_refused() {
        // Five bytes, the last still carrying the continuation bit.
        assert_eq!(
            reader(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]).uvarint("v"),
            Err(DecodeError::VarintTooLong)
        );
        // Five bytes whose value does not fit 32 bits.
        assert_eq!(
            reader(&[0xff, 0xff, 0xff, 0xff, 0x1f]).uvarint("v"),
            Err(DecodeError::VarintTooLong)
        );
        assert_eq!(
            reader(&[0xff; 11]).uvarlong("v"),
            Err(DecodeError::VarintTooLong)
        );
        assert!(matches!(
            reader(&[0x80]).uvarint("v"),
            Err(DecodeError::UnexpectedEnd { .. })
        ));
    }

    #[test]
    fn absurd_lengths_fail_before_allocating() {
        // An int32 array count of 2^31-1 with four bytes behind it.
        let mut r = reader(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        let res = r.array("items", false, 4, |r| r.i32("item"));
        assert_eq!(
            res,
            Err(DecodeError::InvalidLength {
                what: "items",
                length: i32::MAX as i64
            })
        );
        assert!(matches!(
            reader(&[0xff, 0xfe]).nullable_string("s", false),
            Err(DecodeError::InvalidLength { length: -2, .. })
        ));
        assert!(matches!(
            reader(&[0x05, b'a']).string("s", true),
            Err(DecodeError::InvalidLength { length: 4, .. })
        ));
    }

    #[test]
    fn nulls_in_both_encodings() {
        assert_eq!(reader(&[0xff, 0xff]).nullable_string("s", false), Ok(None));
        assert_eq!(reader(&[0x00]).nullable_string("s", true), Ok(None));
        assert_eq!(
            reader(&[0xff, 0xff, 0xff, 0xff]).nullable_bytes("b", false),
            Ok(None)
        );
        assert_eq!(
            reader(&[0x00]).string("s", true),
            Err(DecodeError::UnexpectedNull { what: "s" })
        );
    }

    #[test]
    fn unknown_tagged_fields_are_kept_and_rewritten_in_order() {
        // Two fields: tag 1 (2 bytes) and tag 7 (0 bytes).
        let bytes = [0x02, 0x01, 0x02, 0xaa, 0xbb, 0x07, 0x00];
        let mut r = reader(&bytes);
        let unknown = r.unknown_tagged_fields().unwrap();
        r.finish().unwrap();
        assert_eq!(unknown.len(), 2);
        let mut w = Writer::new();
        w.tagged_fields(&[], &unknown);
        assert_eq!(&w.into_inner()[..], &bytes);

        let out_of_order = [0x02, 0x07, 0x00, 0x01, 0x00];
        assert!(reader(&out_of_order).unknown_tagged_fields().is_err());
    }

    proptest! {
        #[test]
        fn varints_round_trip(v in any::<i32>(), u in any::<u32>(), l in any::<i64>(), ul in any::<u64>()) {
            let mut w = Writer::new();
            w.varint(v);
            w.uvarint(u);
            w.varlong(l);
            w.uvarlong(ul);
            let mut r = Reader::new(w.into_inner().freeze());
            prop_assert_eq!(r.varint("v").unwrap(), v);
            prop_assert_eq!(r.uvarint("u").unwrap(), u);
            prop_assert_eq!(r.varlong("l").unwrap(), l);
            prop_assert_eq!(r.uvarlong("ul").unwrap(), ul);
            prop_assert!(r.finish().is_ok());
        }

        #[test]
        fn strings_round_trip(s in proptest::option::of(".{0,40}"), compact in any::<bool>()) {
            let mut w = Writer::new();
            w.nullable_string("s", s.as_deref(), compact).unwrap();
            let mut r = Reader::new(w.into_inner().freeze());
            prop_assert_eq!(r.nullable_string("s", compact).unwrap(), s);
            prop_assert!(r.finish().is_ok());
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut r = Reader::new(Bytes::from(bytes));
            let _ = r.array("a", true, 1, |r| r.nullable_string("s", true));
            let _ = r.unknown_tagged_fields();
            let _ = r.varlong("v");
        }
    }
}
