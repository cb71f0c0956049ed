//! Kafka records: record batches (message format v2) and message sets
//! (v0/v1), their codecs and checksums.
//!
//! This layer is pure: bytes in, records out; no sockets, no async, no
//! clock. [`RecordSetDecoder`] decodes the `records` field of a Fetch
//! response partition; [`RecordBatchBuilder`] writes v2 batches.
//!
//! What it follows:
//!
//! - message format v2 and transactions: KIP-98 (CRC-32C over attributes
//!   to the end of the batch; control batches; aborted transactions);
//! - v0/v1 message sets: KIP-31 (relative offsets in compressed v1
//!   messages) and KIP-32 (timestamps); CRC-32 over magic to the end;
//! - LZ4: KIP-57 (the frame format, and the broken header checksum of
//!   magic-0 messages, which is fixed up);
//! - Zstandard: KIP-110 (v2 only).
//!
//! What it promises:
//!
//! - **zero copy**: keys, values and headers are read in place in the
//!   fetched buffer, or in one buffer per compressed batch, which
//!   [`DecodedRecords`] holds; [`Record`]s borrow from it and hand out
//!   [`bytes::Bytes`] slices of it on request;
//! - **bounded**: a compressed batch decompresses through a reader capped
//!   at [`DecodeOptions::max_decompressed_bytes`]; no length or count from
//!   the wire sizes an allocation before it is checked against the bytes
//!   that are there;
//! - **no silent loss**: a batch either decodes whole or fails with a
//!   [`RecordsError`] naming the fault and the batch's base offset; the
//!   only records dropped on purpose are control records and, under
//!   [`IsolationLevel::ReadCommitted`], those of aborted transactions, and
//!   [`DecodedRecords`] counts both;
//! - **never panics**, whatever the bytes (property-tested and fuzzed).
//!
//! See `docs/records.md` for the formats, limits and measured throughput.

mod batch;
mod builder;
mod compression;
mod decoder;
mod error;
mod legacy;
mod record;

pub use builder::{ControlRecordType, NewHeader, RecordBatchBuilder};
pub use compression::Compression;
pub use decoder::{
    AbortedTransaction, DecodeOptions, DecodedRecords, IsolationLevel, PartialTail,
    RecordSetDecoder, Records, DEFAULT_MAX_DECOMPRESSED_BYTES,
};
pub use error::{Checksum, RecordsError, RecordsErrorKind};
pub use record::{Header, HeaderIter, Headers, OwnedRecord, Record, Timestamp, TimestampType};

#[cfg(test)]
pub(crate) use batch::producer_state;
pub(crate) use batch::{set_producer_state, v2_crc_holds, HEADER_LEN as BATCH_HEADER_LEN};
pub(crate) use builder::encoded_record_size;
