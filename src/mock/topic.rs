//! A topic of the mock and its partitions: each partition's leader and
//! followers, its leader epochs (Kafka's `LeaderEpochFileCache`), its log
//! of record batches (`log.rs`) and what it keeps of idempotent producers
//! (`producers.rs`). The cluster's [`State`](super::state::State) holds
//! the topics by name; the request handlers under `api/` and
//! [`MockCluster`](super::MockCluster)'s methods read and change them.

use std::collections::BTreeMap;

use super::log::PartitionLog;
use super::producers::ProducerStates;

/// The most partitions a topic of the mock may have.
pub(crate) const MAX_PARTITIONS: i32 = 10_000;

/// One partition.
#[derive(Debug)]
pub(crate) struct Partition {
    /// The broker that leads it (reported as -1 while that broker is down).
    pub leader: i32,
    /// The other brokers that replicate it (KIP-392: they serve Fetch from
    /// consumers too). They share the leader's log, so they are always in
    /// sync while up.
    pub followers: Vec<i32>,
    pub leader_epoch: i32,
    pub log: PartitionLog,
    /// The leader epoch cache: each epoch with the offset its leader
    /// started at, oldest first (Kafka's `LeaderEpochFileCache`; an epoch
    /// starts at the log end when its leader is elected).
    pub epochs: Vec<(i32, i64)>,
    /// What the log holds of each idempotent producer (Kafka's
    /// `ProducerStateManager`).
    pub producers: ProducerStates,
}

impl Partition {
    pub fn new(leader: i32) -> Self {
        Partition {
            leader,
            followers: Vec::new(),
            leader_epoch: 0,
            log: PartitionLog::default(),
            epochs: vec![(0, 0)],
            producers: ProducerStates::default(),
        }
    }

    /// A new leader epoch, starting at the log end.
    pub fn bump_epoch(&mut self) {
        self.leader_epoch += 1;
        self.epochs
            .push((self.leader_epoch, self.log.high_watermark()));
    }

    /// Cuts the log back to `offset` (at the batch boundary at or below
    /// it) and starts a new epoch there: what a leader that never had the
    /// later records would hold after an unclean election. Returns the new
    /// log end.
    pub fn truncate_to(&mut self, offset: i64) -> i64 {
        let end = self.log.truncate_after(offset);
        self.epochs.retain(|&(_, start)| start <= end);
        // As Kafka rebuilds it from what the log still holds.
        self.producers = ProducerStates::rebuild(self.log.headers());
        self.bump_epoch();
        end
    }

    /// The largest epoch at or below `requested` and the offset where it
    /// ends (the start of the next epoch, or the log end for the current
    /// one): Kafka's `LeaderEpochFileCache.endOffsetFor`. `(-1, -1)` when
    /// `requested` is newer than every epoch known.
    pub fn end_offset_for(&self, requested: i32) -> (i32, i64) {
        if requested == self.leader_epoch {
            return (requested, self.log.high_watermark());
        }
        let Some(&(_, next_start)) = self.epochs.iter().find(|(e, _)| *e > requested) else {
            return (-1, -1);
        };
        let floor = self
            .epochs
            .iter()
            .rev()
            .find(|(e, _)| *e <= requested)
            .map_or(requested, |(e, _)| *e);
        (floor, next_start)
    }
}

/// One topic.
#[derive(Debug)]
pub(crate) struct Topic {
    pub id: [u8; 16],
    pub partitions: Vec<Partition>,
}

/// Whether a topic partition exists (for offset commits).
pub(crate) fn partition_exists(
    topics: &BTreeMap<String, Topic>,
    topic: &str,
    partition: i32,
) -> bool {
    topics
        .get(topic)
        .is_some_and(|t| partition >= 0 && (partition as usize) < t.partitions.len())
}

/// Kafka's internal topics (`Topic.INTERNAL_TOPICS`): a topic of one of
/// these names, created in the mock, is described with IsInternal set, as
/// a broker describes its own (a classic pattern subscription leaves them
/// out under `exclude.internal.topics`).
pub(crate) fn is_internal_topic(name: &str) -> bool {
    matches!(
        name,
        "__consumer_offsets" | "__transaction_state" | "__share_group_state"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::RecordBatchBuilder;
    use bytes::Bytes;

    fn ten() -> Bytes {
        let mut b = RecordBatchBuilder::new(0);
        for i in 0..10 {
            b.append(i, None, Some(b"v"), &[]).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn the_epoch_cache_says_where_each_epoch_ends() {
        let mut p = Partition::new(1);
        p.log.append(&ten(), p.leader_epoch).unwrap(); // 0..10 at epoch 0
        assert_eq!(p.end_offset_for(0), (0, 10));
        p.bump_epoch(); // epoch 1 from 10
        p.log.append(&ten(), p.leader_epoch).unwrap(); // 10..20
        p.bump_epoch(); // epoch 2 from 20, nothing written yet
        assert_eq!(p.end_offset_for(0), (0, 10));
        assert_eq!(p.end_offset_for(1), (1, 20));
        assert_eq!(p.end_offset_for(2), (2, 20));
        assert_eq!(p.end_offset_for(3), (-1, -1), "an epoch not seen yet");
    }

    #[test]
    fn truncation_cuts_at_a_batch_boundary_and_starts_an_epoch_there() {
        let mut p = Partition::new(1);
        for _ in 0..5 {
            p.log.append(&ten(), p.leader_epoch).unwrap(); // 0..50 at epoch 0
        }
        assert_eq!(p.truncate_to(35), 30);
        assert_eq!(p.log.high_watermark(), 30);
        assert_eq!(p.leader_epoch, 1);
        // A consumer at 50 in epoch 0 learns the log diverges at 30.
        assert_eq!(p.end_offset_for(0), (0, 30));
        p.log.append(&ten(), p.leader_epoch).unwrap(); // 30..40 at epoch 1
        assert_eq!(p.end_offset_for(1), (1, 40));
        // A second cut drops the epochs that started after it.
        p.bump_epoch(); // epoch 2 from 40
        assert_eq!(p.truncate_to(20), 20);
        assert_eq!(p.epochs, [(0, 0), (3, 20)]);
        assert_eq!(p.end_offset_for(1), (0, 20));
    }
}
