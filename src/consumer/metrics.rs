//! [`Consumer::metrics`](crate::Consumer::metrics): a snapshot of what the
//! consumer knows of its partitions, brokers and group, for monitoring.
//!
//! Nothing here asks a broker anything: positions move with `poll` and
//! `seek`, the high watermark and the last stable offset come with every
//! Fetch answer, broker counters with every request, the group state with
//! every membership step. The snapshot serialises with serde (the
//! `consume` example prints it as JSON with `--stats N`).

use crate::events::ConnectionInfo;
pub use crate::metrics::{BrokerMetrics, Latency};
use serde::Serialize;
use std::collections::BTreeMap;

/// Everything [`Consumer::metrics`](crate::Consumer::metrics) reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ConsumerMetrics {
    /// When the snapshot was taken, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Each assigned partition, by topic then partition.
    pub partitions: Vec<PartitionMetrics>,
    /// The sum of the known lags of the assigned partitions.
    pub total_lag: i64,
    /// Counters per broker address, kept for the consumer's life.
    pub brokers: BTreeMap<String, BrokerMetrics>,
    /// The live connections.
    pub connections: Vec<ConnectionInfo>,
    /// The group membership, with a `group.id`.
    pub group: Option<GroupMetrics>,
    /// Metadata requests sent.
    pub metadata_requests: u64,
    /// Partition leaders learned from Fetch answers that refused a
    /// partition because the leader moved (KIP-951), used at once with no
    /// Metadata round trip.
    pub leader_hints: u64,
}

/// One assigned partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PartitionMetrics {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset of the next record `poll` returns, once known.
    pub position: Option<i64>,
    /// The high watermark of the last Fetch answer for it.
    pub high_watermark: Option<i64>,
    /// The last stable offset of the last Fetch answer for it.
    pub last_stable_offset: Option<i64>,
    /// Records between the position and the end of the log: the high
    /// watermark (under `read_committed`, the last stable offset) minus the
    /// position, never negative; `None` until both are known.
    pub lag: Option<i64>,
    /// Whether the application paused it.
    pub paused: bool,
    /// Records fetched (decoded from Fetch answers) since it was assigned.
    pub records_fetched: u64,
    /// Bytes of record sets fetched (as sent, compressed) since it was
    /// assigned.
    pub bytes_fetched: u64,
    /// Records `poll` returned since it was assigned.
    pub records_consumed: u64,
}

impl PartitionMetrics {
    pub(crate) fn new(stats: crate::fetch::PartitionStats, read_committed: bool) -> Self {
        let end = if read_committed {
            stats.last_stable_offset
        } else {
            stats.high_watermark
        };
        let lag = match (end, stats.position) {
            (Some(end), Some(position)) => Some(end.saturating_sub(position).max(0)),
            _ => None,
        };
        PartitionMetrics {
            topic: stats.partition.topic,
            partition: stats.partition.partition,
            position: stats.position,
            high_watermark: stats.high_watermark,
            last_stable_offset: stats.last_stable_offset,
            lag,
            paused: stats.paused,
            records_fetched: stats.counters.records_fetched,
            bytes_fetched: stats.counters.bytes_fetched,
            records_consumed: stats.counters.records_consumed,
        }
    }
}

/// The group membership.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct GroupMetrics {
    /// `group.id`.
    pub group: String,
    /// `classic` or `consumer`.
    pub protocol: String,
    /// `unjoined`, `joining`, `awaiting_metadata`, `syncing`,
    /// `reconciling`, `stable` or `failed`.
    pub state: String,
    /// The member id (empty before the first join under `classic`).
    pub member_id: String,
    /// The generation (`classic`; -1 out of a stable group) or the member
    /// epoch (`consumer`; 0 before joining).
    pub generation: i32,
    /// Rebalances completed (assignments received) since the consumer
    /// started.
    pub rebalances: u64,
    /// JoinGroup requests sent since the consumer started, by reason
    /// (`first join`, `a heartbeat answered REBALANCE_IN_PROGRESS`,
    /// `MEMBER_ID_REQUIRED: ...`, `the subscription changed`, ...; the
    /// same reason goes in the request, KIP-800, and in a debug line).
    /// Empty under the `consumer` protocol, whose member joins by
    /// heartbeat.
    pub joins: BTreeMap<String, u64>,
    /// When the last one completed, in milliseconds since the Unix epoch.
    pub last_rebalance_ms: Option<u64>,
    /// How long ago it completed, in milliseconds.
    pub last_rebalance_age_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::{PartitionCounters, PartitionStats};
    use crate::group::TopicPartition;

    fn stats(position: Option<i64>, hw: Option<i64>, lso: Option<i64>) -> PartitionStats {
        PartitionStats {
            partition: TopicPartition::new("t", 0),
            position,
            high_watermark: hw,
            last_stable_offset: lso,
            paused: false,
            counters: PartitionCounters::default(),
        }
    }

    #[test]
    fn lag_is_the_high_watermark_or_under_read_committed_the_lso_minus_the_position() {
        let lag = |s, rc| PartitionMetrics::new(s, rc).lag;
        assert_eq!(lag(stats(Some(4), Some(10), Some(7)), false), Some(6));
        assert_eq!(lag(stats(Some(4), Some(10), Some(7)), true), Some(3));
        // Unknown either side: unknown lag; never negative.
        assert_eq!(lag(stats(None, Some(10), Some(7)), false), None);
        assert_eq!(lag(stats(Some(4), Some(10), None), true), None);
        assert_eq!(lag(stats(Some(12), Some(10), Some(10)), false), Some(0));
    }
}
