//! [`ConsumerRecord`]: a fetched record with its topic and partition.

use crate::records::{self, OwnedRecord, Record, Timestamp};
use bytes::Bytes;
use std::sync::Arc;

/// A record with the topic and partition it came from.
///
/// Key, value and headers are zero-copy slices of the fetched response or
/// of the batch's decompressed records (see [`OwnedRecord`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    pub(super) topic: Arc<str>,
    pub(super) partition: i32,
    pub(super) record: OwnedRecord,
}

impl ConsumerRecord {
    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition index.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The record's offset in its partition.
    pub fn offset(&self) -> i64 {
        self.record.offset()
    }

    /// The record's timestamp and who set it.
    pub fn timestamp(&self) -> Timestamp {
        self.record.as_record().timestamp()
    }

    /// The key, `None` when null.
    pub fn key(&self) -> Option<&[u8]> {
        self.record.as_record().key()
    }

    /// The value, `None` when null.
    pub fn value(&self) -> Option<&[u8]> {
        self.record.as_record().value()
    }

    /// The key as a [`Bytes`] slice of the fetched buffer (no copy).
    pub fn key_bytes(&self) -> Option<Bytes> {
        self.record.as_record().key_bytes()
    }

    /// The value as a [`Bytes`] slice of the fetched buffer (no copy).
    pub fn value_bytes(&self) -> Option<Bytes> {
        self.record.as_record().value_bytes()
    }

    /// The headers.
    pub fn headers(&self) -> records::Headers<'_> {
        self.record.as_record().headers()
    }

    /// The leader epoch the record was written in, when known.
    pub fn leader_epoch(&self) -> Option<i32> {
        self.record.as_record().leader_epoch()
    }

    /// The record without its topic and partition.
    pub fn record(&self) -> Record<'_> {
        self.record.as_record()
    }

    /// Takes the record out.
    pub fn into_record(self) -> OwnedRecord {
        self.record
    }
}
