//! The errors the fetch layer hands to the application.

use super::TopicPartition;
use crate::cluster::RequestError;
use crate::protocol::ErrorCode;
use crate::protocol::{ApiKey, DecodeError};
use crate::records::RecordsError;
use std::fmt;

/// Something the application should hear about while consuming: what
/// [`Consumer::poll`](crate::Consumer::poll) returns as [`Error::Fetch`](crate::Error::Fetch).
///
/// None of these stops consumption of the other partitions. Whether the
/// named partition goes on by itself is told by
/// [`FetchError::is_retriable`]: when it is not, the partition stays at the
/// offset named until the application seeks (or the partition is assigned
/// again).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FetchError {
    /// `auto.offset.reset` is `none` and these partitions have no committed
    /// offset. Every such partition is named, not only the latest; they wait
    /// for a seek.
    NoOffset {
        /// The partitions, sorted.
        partitions: Vec<TopicPartition>,
    },
    /// The fetch position is not in the log (OFFSET_OUT_OF_RANGE) and
    /// `auto.offset.reset` is `none`. The partition waits for a seek.
    OffsetOutOfRange {
        /// The partition.
        partition: TopicPartition,
        /// The position that is out of range.
        offset: i64,
    },
    /// The leader's log was truncated below the position (found after a
    /// leader change by OffsetForLeaderEpoch, or by a Fetch's
    /// `diverging_epoch`, KIP-320) and `auto.offset.reset` is `none`: the
    /// records from `divergent_offset` up to `offset` that were delivered
    /// are no longer in the log, and others may take their offsets. The
    /// partition stays at `offset` and waits for a seek (to
    /// `divergent_offset` to read what the log now holds there).
    LogTruncation {
        /// The partition.
        partition: TopicPartition,
        /// The position: the first offset not delivered.
        offset: i64,
        /// Where the leader's log diverges from what was delivered (the
        /// end offset of the position's leader epoch), when the leader
        /// knows it.
        divergent_offset: Option<i64>,
    },
    /// A record batch could not be decoded (checksum, framing, codec). The
    /// records before it were delivered; the position stays at `offset` and
    /// the partition waits for a seek: nothing is skipped silently.
    CorruptRecords {
        /// The partition.
        partition: TopicPartition,
        /// The position consumption stopped at: the first offset not
        /// delivered.
        offset: i64,
        /// What is wrong, with the base offset of the faulty batch.
        source: RecordsError,
    },
    /// The batch at `offset` is larger than this client accepts in one
    /// fetch, so the partition cannot make progress. It waits for a seek.
    RecordTooLarge {
        /// The partition.
        partition: TopicPartition,
        /// The position of the batch.
        offset: i64,
        /// The batch's declared size in bytes, when it was readable.
        size: Option<usize>,
    },
    /// TOPIC_AUTHORIZATION_FAILED: the principal may not read the topic.
    /// Fetching is retried with backoff, so access granted later is
    /// picked up.
    TopicAuthorization {
        /// The topic.
        topic: String,
    },
    /// A broker answered a Fetch, ListOffsets or OffsetForLeaderEpoch
    /// request with an error code (for a partition, or for a whole Fetch
    /// response when `partition` is `None`). The request is
    /// retried with backoff, the metadata refreshed first for an error it
    /// should cure (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR, ...). Said
    /// once while the failures last: at the first for an error of no
    /// known cure, after a second of failures in a row for one a refresh
    /// should cure (a leader that moved is found within it), and again
    /// after [`REPORT_AGAIN_AFTER`](crate::error::REPORT_AGAIN_AFTER).
    Broker {
        /// The broker that answered.
        broker: i32,
        /// The partition, when the error was given for one.
        partition: Option<TopicPartition>,
        /// The error.
        code: ErrorCode,
    },
    /// The partition's position reached the end of its log: the high
    /// watermark (the last stable offset under `read_committed`) its
    /// leader last gave. Said only with `enable.partition.eof=true`, once
    /// each time the end is reached (again after more records were read,
    /// or after a seek), after the partition's records before it. Not a
    /// fault: the consumer goes on fetching the partition
    /// ([`is_retriable`](Self::is_retriable) is `true`), as librdkafka's
    /// `RD_KAFKA_RESP_ERR__PARTITION_EOF`.
    PartitionEof {
        /// The partition.
        partition: TopicPartition,
        /// The position: the end of the log when it was reached.
        offset: i64,
    },
    /// A response body could not be decoded. The request is retried with
    /// backoff.
    Decode {
        /// The broker that answered.
        broker: i32,
        /// The API of the response.
        api: ApiKey,
        /// Where decoding failed.
        source: DecodeError,
    },
    /// A request got no response for a reason that will not pass by
    /// itself (no common version, a request that cannot be encoded). It is
    /// retried with backoff all the same, in case metadata or versions
    /// change.
    Request {
        /// The broker the request was for.
        broker: i32,
        /// The API of the request.
        api: ApiKey,
        /// Why it failed.
        error: RequestError,
    },
}

impl FetchError {
    /// Whether the fetch layer retries by itself. When `false`, the
    /// partitions named wait for the application (a seek), or the fault
    /// needs someone's attention (versions, ids, access).
    pub fn is_retriable(&self) -> bool {
        match self {
            FetchError::Broker { code, .. } => code.is_retriable(),
            FetchError::Decode { .. } | FetchError::PartitionEof { .. } => true,
            FetchError::NoOffset { .. }
            | FetchError::OffsetOutOfRange { .. }
            | FetchError::LogTruncation { .. }
            | FetchError::CorruptRecords { .. }
            | FetchError::RecordTooLarge { .. }
            | FetchError::TopicAuthorization { .. }
            | FetchError::Request { .. } => false,
        }
    }
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::NoOffset { partitions } => {
                f.write_str("no committed offset and auto.offset.reset is none for ")?;
                for (i, tp) in partitions.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{tp}")?;
                }
                Ok(())
            }
            FetchError::OffsetOutOfRange { partition, offset } => write!(
                f,
                "offset {offset} is out of range for {partition} and auto.offset.reset is none"
            ),
            FetchError::LogTruncation {
                partition,
                offset,
                divergent_offset: Some(end),
            } => write!(
                f,
                "log truncation detected for {partition}: the log diverges at offset {end}, below the position {offset}, and auto.offset.reset is none"
            ),
            FetchError::LogTruncation {
                partition,
                offset,
                divergent_offset: None,
            } => write!(
                f,
                "log truncation detected for {partition} at position {offset} (the leader knows no end for its epoch) and auto.offset.reset is none"
            ),
            FetchError::CorruptRecords {
                partition,
                offset,
                source,
            } => write!(
                f,
                "corrupt records in {partition} at offset {offset} ({source}); seek past it to go on"
            ),
            FetchError::RecordTooLarge {
                partition,
                offset,
                size,
            } => {
                write!(f, "the batch at offset {offset} of {partition} is too large")?;
                if let Some(size) = size {
                    write!(f, " ({size} bytes)")?;
                }
                f.write_str(" to fetch; seek past it to go on")
            }
            FetchError::TopicAuthorization { topic } => {
                write!(f, "not authorized to read topic {topic}")
            }
            FetchError::PartitionEof { partition, offset } => write!(
                f,
                "{partition} reached the end of its log at offset {offset} (enable.partition.eof); fetching goes on"
            ),
            FetchError::Broker {
                broker,
                partition: Some(tp),
                code,
            } => write!(f, "broker {broker} answered {code} for {tp}"),
            FetchError::Broker {
                broker,
                partition: None,
                code,
            } => write!(f, "broker {broker} answered {code}"),
            FetchError::Decode {
                broker,
                api,
                source,
            } => write!(f, "cannot decode {api} response of broker {broker}: {source}"),
            FetchError::Request { broker, api, error } => {
                write!(f, "{api} request to broker {broker} failed: {error}")
            }
        }
    }
}

impl std::error::Error for FetchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FetchError::CorruptRecords { source, .. } => Some(source),
            FetchError::Decode { source, .. } => Some(source),
            FetchError::Request { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Why a seek was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SeekError {
    /// The partition is not assigned.
    NotAssigned(TopicPartition),
    /// Offsets are never negative.
    NegativeOffset {
        /// The partition.
        partition: TopicPartition,
        /// The offset given.
        offset: i64,
    },
}

impl fmt::Display for SeekError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SeekError::NotAssigned(tp) => write!(f, "cannot seek {tp}: it is not assigned"),
            SeekError::NegativeOffset { partition, offset } => {
                write!(f, "cannot seek {partition} to negative offset {offset}")
            }
        }
    }
}

impl std::error::Error for SeekError {}
