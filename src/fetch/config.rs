//! The settings of the fetch layer ([`FetchConfig`]) and what to do when
//! a partition has no valid offset ([`OffsetReset`]).

use super::OffsetSpec;
use crate::cluster::ExponentialBackoff;
use crate::records::{self, IsolationLevel};
use std::fmt;
use std::time::Duration;

/// What to do when a partition has no committed offset, or its position is
/// out of range (`auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum OffsetReset {
    /// Start from the earliest offset still in the log (`earliest`).
    Earliest,
    /// Start from the end: only records produced from now on (`latest`).
    #[default]
    Latest,
    /// Fail with an error naming the partitions (`none`).
    None,
}

impl OffsetReset {
    /// The property value: `earliest`, `latest` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            OffsetReset::Earliest => "earliest",
            OffsetReset::Latest => "latest",
            OffsetReset::None => "none",
        }
    }
}

impl fmt::Display for OffsetReset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The settings of the fetch layer (a subset of the consumer's). The
/// defaults are the Java consumer's.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FetchConfig {
    /// `fetch.min.bytes`: the broker answers once it has this many bytes
    /// (or `max_wait` passed). Default 1.
    pub min_bytes: i32,
    /// `fetch.max.bytes`: the most bytes one Fetch response should carry
    /// (the broker still returns a first batch larger than it, KIP-74).
    /// Default 52428800 (50 MiB).
    pub max_bytes: i32,
    /// `fetch.max.wait.ms`: how long the broker may hold a Fetch waiting
    /// for `min_bytes`. Default 500 ms.
    pub max_wait: Duration,
    /// `max.partition.fetch.bytes`: the most bytes per partition in a
    /// Fetch response (again, a first larger batch still comes). Default
    /// 1048576 (1 MiB).
    pub max_partition_bytes: i32,
    /// `isolation.level`. Default read_uncommitted.
    pub isolation: IsolationLevel,
    /// `check.crcs`: verify every batch's checksum. Default true.
    pub check_crcs: bool,
    /// `auto.offset.reset`. Default latest.
    pub auto_offset_reset: OffsetReset,
    /// `client.rack`, sent with Fetch v11+ (KIP-392): a leader that knows a
    /// replica in this rack may name it as the preferred read replica, and
    /// the partition is then fetched from there. Default none.
    pub rack_id: Option<String>,
    /// `metadata.max.age.ms`: how long a preferred read replica is fetched
    /// from before the partition's leader is asked again (the Java
    /// consumer's `preferredReadReplicaExpireTimeMs`, KIP-392). Default
    /// 300 s.
    pub replica_lease: Duration,
    /// The most bytes one compressed batch may decompress to (see
    /// [`DecodeOptions::with_max_decompressed_bytes`](crate::records::DecodeOptions::with_max_decompressed_bytes)). Default 64 MiB.
    pub max_decompressed_bytes: usize,
    /// `retry.backoff.ms` growing to `retry.backoff.max.ms`: how long a
    /// partition waits before it is fetched or reset again after an error.
    /// Default 100 ms to 1 s, ±20% jitter.
    pub retry_backoff: ExponentialBackoff,
    /// `request.timeout.ms`, sent as ListOffsets' `timeout_ms` (v10+,
    /// KIP-1075). Default 30 s.
    pub request_timeout: Duration,
    /// Seeds the jitter of `retry_backoff` (the consumer passes a random
    /// value; tests a constant).
    pub seed: u64,
    /// `fetch.sessions.enable`: incremental fetch sessions (KIP-227), one
    /// per leader connection. Default true.
    pub sessions: bool,
    /// `enable.partition.eof`: report [`FetchError::PartitionEof`](super::FetchError::PartitionEof) once
    /// each time a partition's position reaches the end of its log.
    /// Default false.
    pub partition_eof: bool,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            min_bytes: 1,
            max_bytes: 52_428_800,
            max_wait: Duration::from_millis(500),
            max_partition_bytes: 1_048_576,
            isolation: IsolationLevel::ReadUncommitted,
            check_crcs: true,
            auto_offset_reset: OffsetReset::Latest,
            rack_id: None,
            replica_lease: Duration::from_millis(300_000),
            max_decompressed_bytes: records::DEFAULT_MAX_DECOMPRESSED_BYTES,
            retry_backoff: ExponentialBackoff {
                base: Duration::from_millis(100),
                max: Duration::from_millis(1000),
                jitter: 0.2,
            },
            request_timeout: Duration::from_millis(30_000),
            seed: 0,
            sessions: true,
            partition_eof: false,
        }
    }
}

impl OffsetReset {
    /// What a reset under this policy looks up: the earliest offset for
    /// `earliest`, else the latest (`none` never resets).
    pub(super) fn spec(self) -> OffsetSpec {
        match self {
            OffsetReset::Earliest => OffsetSpec::Earliest,
            _ => OffsetSpec::Latest,
        }
    }
}
