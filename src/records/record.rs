//! A decoded record and its headers.

use crate::protocol::{DecodeError, Reader};
use bytes::Bytes;
use std::borrow::Cow;
use std::fmt;

/// What a record's timestamp means (attributes bit 3 of a v1 message or a
/// v2 batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// Message format v0 has no timestamps; the timestamp is -1.
    NoTimestamp,
    /// Set by the producer when the record was created.
    CreateTime,
    /// Set by the broker when it appended the batch to its log
    /// (`message.timestamp.type=LogAppendTime`).
    LogAppendTime,
}

/// A record's timestamp, with who set it (as rust-rdkafka's `Timestamp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timestamp {
    /// The record has none: message format v0, or a producer that set
    /// none (-1 on the wire).
    NotAvailable,
    /// Set by the producer when it created the record: milliseconds since
    /// the Unix epoch.
    CreateTime(i64),
    /// Set by the broker when it appended the batch to its log
    /// (`message.timestamp.type=LogAppendTime`): milliseconds since the
    /// Unix epoch.
    LogAppendTime(i64),
}

impl Timestamp {
    /// Milliseconds since the Unix epoch, whoever set them; `None` when
    /// there are none.
    pub fn millis(self) -> Option<i64> {
        match self {
            Timestamp::NotAvailable => None,
            Timestamp::CreateTime(ms) | Timestamp::LogAppendTime(ms) => Some(ms),
        }
    }

    /// Who set it.
    pub fn kind(self) -> TimestampType {
        match self {
            Timestamp::NotAvailable => TimestampType::NoTimestamp,
            Timestamp::CreateTime(_) => TimestampType::CreateTime,
            Timestamp::LogAppendTime(_) => TimestampType::LogAppendTime,
        }
    }

    /// The timestamp a record's fields give: none for -1 (Kafka's
    /// `NO_TIMESTAMP`) or format v0.
    pub(crate) fn from_parts(millis: i64, kind: TimestampType) -> Timestamp {
        match kind {
            _ if millis == -1 => Timestamp::NotAvailable,
            TimestampType::NoTimestamp => Timestamp::NotAvailable,
            TimestampType::CreateTime => Timestamp::CreateTime(millis),
            TimestampType::LogAppendTime => Timestamp::LogAppendTime(millis),
        }
    }
}

/// Where a field lies in a record's buffer; `len == NULL` for null.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: u32,
    pub len: u32,
}

impl Span {
    const NULL_LEN: u32 = u32::MAX;
    pub const NULL: Span = Span {
        start: 0,
        len: Span::NULL_LEN,
    };
    pub const EMPTY: Span = Span { start: 0, len: 0 };

    /// A span of `len` bytes at `start`. Buffers are at most `u32::MAX`
    /// bytes (the decoder guarantees it), so both fit.
    pub fn new(start: usize, len: usize) -> Span {
        Span {
            start: start as u32,
            len: len as u32,
        }
    }

    pub fn get(self, buf: &[u8]) -> Option<&[u8]> {
        if self.len == Span::NULL_LEN {
            return None;
        }
        let start = self.start as usize;
        buf.get(start..start + self.len as usize)
    }

    fn slice(self, buf: &Bytes) -> Option<Bytes> {
        if self.len == Span::NULL_LEN {
            return None;
        }
        let start = (self.start as usize).min(buf.len());
        let end = (start + self.len as usize).min(buf.len());
        Some(buf.slice(start..end))
    }
}

/// Where a decoded record's fields are: which buffer of its
/// [`DecodedRecords`](super::DecodedRecords), and positions in it. Holding
/// no buffer handle itself, a record costs no reference-count operation to
/// decode or to drop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub buffer: u32,
    pub offset: i64,
    pub timestamp: i64,
    pub leader_epoch: i32,
    pub timestamp_type: TimestampType,
    pub key: Span,
    pub value: Span,
    pub headers: Span,
    pub header_count: u32,
}

/// One record as the application sees it, borrowed from the decoded
/// record set it came from.
///
/// Its key, value and headers lie in a buffer that `DecodedRecords` holds:
/// the fetched buffer, or one batch's decompressed records. Decoding copied
/// none of them. [`Record::key`] and [`Record::value`] borrow; when a
/// record must outlive the borrow, [`Record::key_bytes`] and
/// [`Record::value_bytes`] hand out [`Bytes`] slices of that buffer (still
/// no copy), which keep it alive.
#[derive(Clone, Copy)]
pub struct Record<'a> {
    pub(crate) buf: &'a Bytes,
    pub(crate) entry: &'a Entry,
}

impl<'a> Record<'a> {
    /// The record's offset in its partition.
    pub fn offset(&self) -> i64 {
        self.entry.offset
    }

    /// The record's timestamp and who set it.
    pub fn timestamp(&self) -> Timestamp {
        Timestamp::from_parts(self.entry.timestamp, self.entry.timestamp_type)
    }

    /// The partition leader epoch the batch was written in (v2 batches; the
    /// broker stamps it), `None` for v0/v1 messages or when it is unknown
    /// (-1).
    pub fn leader_epoch(&self) -> Option<i32> {
        (self.entry.leader_epoch >= 0).then_some(self.entry.leader_epoch)
    }

    /// The key, `None` when null.
    pub fn key(&self) -> Option<&'a [u8]> {
        self.entry.key.get(self.buf)
    }

    /// The value, `None` when null (a tombstone in a compacted topic).
    pub fn value(&self) -> Option<&'a [u8]> {
        self.entry.value.get(self.buf)
    }

    /// The key as a [`Bytes`] slice of the record's buffer (no copy).
    pub fn key_bytes(&self) -> Option<Bytes> {
        self.entry.key.slice(self.buf)
    }

    /// The value as a [`Bytes`] slice of the record's buffer (no copy).
    pub fn value_bytes(&self) -> Option<Bytes> {
        self.entry.value.slice(self.buf)
    }

    /// The headers (v2 only; empty for v0/v1).
    pub fn headers(&self) -> Headers<'a> {
        Headers {
            buf: self.buf,
            span: self.entry.headers,
            count: self.entry.header_count,
        }
    }
}

/// A record that owns a handle on its buffer, so it can outlive the
/// decoded record set it came from: what a consumer
/// hands to the application. Making one costs one reference-count
/// increment; its key, value and headers are still not copied.
#[derive(Clone)]
pub struct OwnedRecord {
    buf: Bytes,
    entry: Entry,
}

impl OwnedRecord {
    /// The record, borrowed.
    pub fn as_record(&self) -> Record<'_> {
        Record {
            buf: &self.buf,
            entry: &self.entry,
        }
    }

    /// The record's offset in its partition.
    pub fn offset(&self) -> i64 {
        self.entry.offset
    }
}

impl fmt::Debug for OwnedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_record().fmt(f)
    }
}

impl PartialEq for OwnedRecord {
    fn eq(&self, other: &Self) -> bool {
        self.as_record() == other.as_record()
    }
}

impl Eq for OwnedRecord {}

impl Record<'_> {
    /// An owned handle on this record (see [`OwnedRecord`]).
    pub fn to_owned_record(&self) -> OwnedRecord {
        OwnedRecord {
            buf: self.buf.clone(),
            entry: *self.entry,
        }
    }
}

impl fmt::Debug for Record<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record")
            .field("offset", &self.offset())
            .field("timestamp", &self.timestamp())
            .field("leader_epoch", &self.leader_epoch())
            .field("key", &self.key().map(Bytes::copy_from_slice))
            .field("value", &self.value().map(Bytes::copy_from_slice))
            .field("headers", &self.headers())
            .finish()
    }
}

/// Records are equal when everything the application sees is: offsets,
/// timestamps, leader epochs and contents (not the buffer they sit in).
impl PartialEq for Record<'_> {
    fn eq(&self, other: &Record<'_>) -> bool {
        self.offset() == other.offset()
            && self.timestamp() == other.timestamp()
            && self.leader_epoch() == other.leader_epoch()
            && self.key() == other.key()
            && self.value() == other.value()
            && self.headers() == other.headers()
    }
}

impl Eq for Record<'_> {}

/// The headers of a record, read from their wire form as they are iterated.
///
/// The decoder checks every header while it decodes the record but builds
/// nothing, so a record costs no allocation for its headers.
#[derive(Clone, Copy)]
pub struct Headers<'a> {
    buf: &'a Bytes,
    span: Span,
    count: u32,
}

impl<'a> Headers<'a> {
    /// How many headers there are.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The headers in wire order.
    pub fn iter(&self) -> HeaderIter<'a> {
        let start = self.span.start as usize;
        HeaderIter {
            buf: self.buf,
            base: start,
            reader: self
                .span
                .slice(self.buf)
                .map(Reader::new)
                .unwrap_or_else(|| Reader::new(Bytes::new())),
            len: self.span.len as usize,
            left: self.count,
        }
    }

    /// The value of the last header named `key` (the Java client's
    /// `lastHeader`): `Some(None)` when that header's value is null.
    pub fn last(&self, key: &str) -> Option<Option<&'a [u8]>> {
        self.iter()
            .filter(|h| h.key_bytes() == key.as_bytes())
            .last()
            .map(|h| h.value())
    }
}

impl fmt::Debug for Headers<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Headers<'_> {
    fn eq(&self, other: &Headers<'_>) -> bool {
        self.count == other.count && self.iter().eq(other.iter())
    }
}

impl<'a> IntoIterator for Headers<'a> {
    type Item = Header<'a>;
    type IntoIter = HeaderIter<'a>;
    fn into_iter(self) -> HeaderIter<'a> {
        self.iter()
    }
}

/// One record header: a string key and a nullable value, borrowed from
/// the record's buffer.
#[derive(Clone, Copy)]
pub struct Header<'a> {
    buf: &'a Bytes,
    key: Span,
    value: Span,
}

impl<'a> Header<'a> {
    /// The header's key. Kafka's header keys are UTF-8 strings, and this
    /// borrows it from the record's buffer; a key that is not UTF-8 (a
    /// producer that writes raw bytes can make one) is read with each
    /// invalid sequence replaced by U+FFFD, as the Java client reads it
    /// ([`key_bytes`](Self::key_bytes) has the bytes as written).
    pub fn key(&self) -> Cow<'a, str> {
        String::from_utf8_lossy(self.raw_key())
    }

    /// The header's key as written, as a [`Bytes`] slice of the record's
    /// buffer (no copy), as a record's
    /// [`key_bytes`](crate::consumer::Record::key_bytes).
    pub fn key_bytes(&self) -> Bytes {
        self.key.slice(self.buf).unwrap_or_default()
    }

    /// The key's bytes, borrowed (to copy them into a new batch).
    pub(crate) fn raw_key(&self) -> &'a [u8] {
        self.key.get(self.buf).unwrap_or_default()
    }

    /// The header's value, `None` when null.
    pub fn value(&self) -> Option<&'a [u8]> {
        self.value.get(self.buf)
    }

    /// The value as a [`Bytes`] slice of the record's buffer (no copy).
    pub fn value_bytes(&self) -> Option<Bytes> {
        self.value.slice(self.buf)
    }
}

impl fmt::Debug for Header<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Header")
            .field(&self.key())
            .field(&self.value().map(Bytes::copy_from_slice))
            .finish()
    }
}

impl PartialEq for Header<'_> {
    fn eq(&self, other: &Header<'_>) -> bool {
        self.raw_key() == other.raw_key() && self.value() == other.value()
    }
}

/// An iterator over [`Headers`].
pub struct HeaderIter<'a> {
    buf: &'a Bytes,
    /// Where the headers start in `buf`.
    base: usize,
    reader: Reader,
    len: usize,
    left: u32,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = Header<'a>;

    fn next(&mut self) -> Option<Header<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let at = self.base + self.len - self.reader.remaining();
        // The bytes were checked by `read_headers` when the record was
        // decoded, so this cannot fail; if it did, iteration would stop
        // rather than panic.
        let (key, value) = read_header(&mut self.reader, at).ok()?;
        Some(Header {
            buf: self.buf,
            key,
            value,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

/// Reads one header at buffer position `at`: a non-null key and a nullable
/// value, each with a zigzag varint length.
fn read_header(r: &mut Reader, at: usize) -> Result<(Span, Span), DecodeError> {
    let start = r.remaining();
    let pos = |r: &Reader| at + (start - r.remaining());
    let Some(key) = varint_span(r, "header key", pos)? else {
        return Err(DecodeError::InvalidValue {
            what: "header key",
            reason: "null",
        });
    };
    let value = varint_span(r, "header value", pos)?.unwrap_or(Span::NULL);
    Ok((key, value))
}

/// Checks `count` headers at buffer position `at` without building them.
pub(crate) fn read_headers(r: &mut Reader, at: usize, count: u32) -> Result<(), DecodeError> {
    let start = r.remaining();
    for _ in 0..count {
        read_header(r, at + (start - r.remaining()))?;
    }
    Ok(())
}

/// Reads a varint length (-1 null, other negatives invalid) and skips that
/// many bytes; returns where they are, `pos` telling the reader's position
/// in the buffer.
#[inline]
pub(crate) fn varint_span(
    r: &mut Reader,
    what: &'static str,
    pos: impl Fn(&Reader) -> usize,
) -> Result<Option<Span>, DecodeError> {
    match r.varint(what)? {
        -1 => Ok(None),
        n if n < 0 => Err(DecodeError::InvalidLength {
            what,
            length: i64::from(n),
        }),
        n => {
            let start = pos(r);
            r.skip(what, n as usize)?;
            Ok(Some(Span::new(start, n as usize)))
        }
    }
}
