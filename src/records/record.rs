//! A decoded record and its headers.

use crate::protocol::Reader;
use bytes::Bytes;
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

/// One record as the application sees it.
///
/// Key, value and header values are [`Bytes`] slices of the fetched buffer
/// (or of a batch's decompressed records): decoding copies no payload, and
/// a record keeps that buffer alive until it is dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub(crate) offset: i64,
    pub(crate) timestamp: i64,
    pub(crate) timestamp_type: TimestampType,
    pub(crate) leader_epoch: Option<i32>,
    pub(crate) key: Option<Bytes>,
    pub(crate) value: Option<Bytes>,
    pub(crate) headers: Headers,
}

impl Record {
    /// The record's offset in its partition.
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// Milliseconds since the Unix epoch; -1 when there is none (v0).
    pub fn timestamp(&self) -> i64 {
        self.timestamp
    }

    /// Who set the timestamp.
    pub fn timestamp_type(&self) -> TimestampType {
        self.timestamp_type
    }

    /// The partition leader epoch the batch was written in (v2 batches; the
    /// broker stamps it), `None` for v0/v1 messages or when it is unknown
    /// (-1).
    pub fn leader_epoch(&self) -> Option<i32> {
        self.leader_epoch
    }

    /// The key, `None` when null.
    pub fn key(&self) -> Option<&Bytes> {
        self.key.as_ref()
    }

    /// The value, `None` when null (a tombstone in a compacted topic).
    pub fn value(&self) -> Option<&Bytes> {
        self.value.as_ref()
    }

    /// The headers (v2 only; empty for v0/v1).
    pub fn headers(&self) -> &Headers {
        &self.headers
    }
}

/// One record header: a key (UTF-8 by Kafka's convention, not checked
/// here) and a nullable value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The header's key.
    pub key: Bytes,
    /// The header's value, `None` when null.
    pub value: Option<Bytes>,
}

/// The headers of a record, kept in their wire form.
///
/// The decoder checks every header while it decodes the record but builds
/// nothing: iterating slices the wire bytes, so a record costs no
/// allocation for its headers.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Headers {
    /// `headerCount` headers, each `keyLength varint, key, valueLength
    /// varint, value`, already validated.
    raw: Bytes,
    count: u32,
}

impl Headers {
    pub(crate) fn new(raw: Bytes, count: u32) -> Self {
        Headers { raw, count }
    }

    /// How many headers there are.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The headers in wire order.
    pub fn iter(&self) -> HeaderIter {
        HeaderIter {
            reader: Reader::new(self.raw.clone()),
            left: self.count,
        }
    }

    /// The value of the last header named `key` (the Java client's
    /// `lastHeader`): `Some(None)` when that header's value is null.
    pub fn last(&self, key: &[u8]) -> Option<Option<Bytes>> {
        self.iter().filter(|h| h.key == key).last().map(|h| h.value)
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl IntoIterator for &Headers {
    type Item = Header;
    type IntoIter = HeaderIter;
    fn into_iter(self) -> HeaderIter {
        self.iter()
    }
}

/// An iterator over [`Headers`].
#[derive(Debug, Clone)]
pub struct HeaderIter {
    reader: Reader,
    left: u32,
}

impl Iterator for HeaderIter {
    type Item = Header;

    fn next(&mut self) -> Option<Header> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The bytes were validated by `read_header` when the record was
        // decoded, so this cannot fail; if it did, iteration would stop
        // rather than panic.
        read_header(&mut self.reader).ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

/// Reads one header: a non-null key and a nullable value, each with a
/// zigzag varint length.
pub(crate) fn read_header(r: &mut Reader) -> Result<Header, crate::protocol::DecodeError> {
    let key = match varint_len(r, "header key length")? {
        Some(n) => r.take("header key", n)?,
        None => {
            return Err(crate::protocol::DecodeError::InvalidValue {
                what: "header key",
                reason: "null",
            })
        }
    };
    let value = match varint_len(r, "header value length")? {
        Some(n) => Some(r.take("header value", n)?),
        None => None,
    };
    Ok(Header { key, value })
}

/// A varint length where -1 means null and other negatives are invalid.
#[inline]
pub(crate) fn varint_len(
    r: &mut Reader,
    what: &'static str,
) -> Result<Option<usize>, crate::protocol::DecodeError> {
    match r.varint(what)? {
        -1 => Ok(None),
        n if n < 0 => Err(crate::protocol::DecodeError::InvalidLength {
            what,
            length: i64::from(n),
        }),
        n => Ok(Some(n as usize)),
    }
}
