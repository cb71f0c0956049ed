//! The preferred read replica (KIP-392): the follower a partition's
//! leader names for this client's rack ([`ReadReplica`]), followed until
//! its lease ends or it fails, and when a partition goes back to its
//! leader.

use super::request::{classify, ErrorClass};
use super::{Fetcher, TopicPartition};
use crate::cluster::{Metadata, Target};
use crate::protocol::ErrorCode;
use std::time::Instant;

/// A follower a partition's leader named as the preferred read replica
/// (KIP-392), and until when it is followed (the Java consumer's
/// `SubscriptionState.preferredReadReplica` and
/// `preferredReadReplicaExpireTimeMs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ReadReplica {
    pub(super) broker: i32,
    pub(super) until: Instant,
}

/// Whether a partition keeps its read replica at a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReplicaCheck {
    /// It is still followed.
    Keep,
    /// Its lease ended: the leader is asked again (and names a replica
    /// again if it still prefers one).
    LeaseEnded,
    /// It became the leader.
    Leads,
    /// The metadata does not know the broker.
    Unknown,
}

impl ReadReplica {
    /// Whether `tp` keeps following it at `now` under `metadata`.
    pub(super) fn check(
        &self,
        now: Instant,
        tp: &TopicPartition,
        metadata: &Metadata,
    ) -> ReplicaCheck {
        if now >= self.until {
            ReplicaCheck::LeaseEnded
        } else if metadata.leader(&tp.topic, tp.partition) == Some(self.broker) {
            ReplicaCheck::Leads
        } else if !metadata.brokers.contains_key(&self.broker) {
            ReplicaCheck::Unknown
        } else {
            ReplicaCheck::Keep
        }
    }

    /// The replica to follow once a good answer from `target` named
    /// `named` as the preferred read replica (KIP-392: the leader prefers
    /// that this client read the partition from that replica, one in its
    /// rack, until the lease ends, `until`), `current` being the one
    /// followed: `None` when nothing changes; `Some(None)` when the
    /// leader names itself (it names no other: the partition is read from
    /// it); `Some(Some(_))` for a replica newly named. A negative `named`
    /// names none.
    pub(super) fn named(
        current: Option<ReadReplica>,
        target: Target,
        named: i32,
        until: Instant,
    ) -> Option<Option<ReadReplica>> {
        if named < 0 {
            return None;
        }
        match target {
            Target::Broker(leader) if leader == named => Some(None),
            _ if current.map(|r| r.broker) == Some(named) => None,
            _ => Some(Some(ReadReplica {
                broker: named,
                until,
            })),
        }
    }
}

/// Whether a partition's error `code` from a read replica sends it back
/// to its leader (KIP-392, as the Java consumer's `FetchCollector`): an
/// offset out of range at a read replica (a follower that has not caught
/// up, or lost its log) resets nothing, and a replica that no longer
/// serves the partition (NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE, a
/// fenced epoch, ...) is dropped.
pub(super) fn leaves_replica(code: ErrorCode) -> bool {
    code == ErrorCode::OffsetOutOfRange
        || code == ErrorCode::FencedLeaderEpoch
        || (code != ErrorCode::UnknownLeaderEpoch && classify(code) == ErrorClass::Leader)
}

impl Fetcher {
    /// Drops read replicas (KIP-392) that are no longer to be followed:
    /// the lease ended (the leader is asked again, and names a replica
    /// again if it still prefers one), the replica became the leader, or
    /// the metadata does not know the broker (the Java consumer's
    /// `AbstractFetch.selectReadReplica`: fetch from the leader and refresh
    /// the metadata; the partition also waits `retry.backoff.ms`, so that a
    /// leader that keeps naming an unknown broker is not asked in a tight
    /// loop).
    pub(super) fn check_replicas(&mut self, now: Instant, metadata: &Metadata) {
        let Fetcher {
            partitions,
            backoff,
            metadata_wanted,
            dirty,
            replicas,
            ..
        } = self;
        *replicas = false;
        for (tp, st) in partitions.iter_mut() {
            let Some(replica) = st.replica else {
                continue;
            };
            match replica.check(now, tp, metadata) {
                ReplicaCheck::Keep => {
                    *replicas = true;
                    continue;
                }
                ReplicaCheck::LeaseEnded => log::debug!(
                    "{tp}: the lease of read replica {} ended; asking the leader again",
                    replica.broker
                ),
                ReplicaCheck::Leads => {}
                ReplicaCheck::Unknown => {
                    log::debug!(
                        "{tp}: read replica {} is not in the metadata; fetching from the leader",
                        replica.broker
                    );
                    *metadata_wanted = true;
                    backoff.failed(&mut st.retry, now);
                }
            }
            // Fetched from its leader from now on.
            st.replica = None;
            dirty.insert(tp.clone());
        }
    }

    /// Every partition read from `replica` (KIP-392) goes back to its
    /// leader.
    pub(super) fn drop_replica(&mut self, replica: i32) {
        for (tp, st) in &mut self.partitions {
            if st.replica.is_some_and(|r| r.broker == replica) {
                st.replica = None;
                self.dirty.insert(tp.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{BrokerAddress, PartitionInfo, TopicInfo};
    use std::time::Duration;

    fn metadata(leader: i32, brokers: &[i32]) -> Metadata {
        let mut md = Metadata::default();
        let info = PartitionInfo {
            leader,
            leader_epoch: 0,
            error: ErrorCode::None,
        };
        md.topics.insert(
            "t".into(),
            TopicInfo {
                error: ErrorCode::None,
                topic_id: [1; 16],
                is_internal: false,
                partitions: [(0, info)].into(),
            },
        );
        for &b in brokers {
            let address = BrokerAddress {
                id: b,
                host: "localhost".into(),
                port: 9092,
                rack: None,
            };
            md.brokers.insert(b, address);
        }
        md
    }

    #[test]
    fn a_replica_is_kept_while_its_lease_lasts_it_follows_and_is_known() {
        let tp = TopicPartition::new("t", 0);
        let now = Instant::now();
        let replica = ReadReplica {
            broker: 2,
            until: now + Duration::from_secs(1),
        };
        let md = metadata(1, &[1, 2]);
        assert_eq!(replica.check(now, &tp, &md), ReplicaCheck::Keep);
        let ended = now + Duration::from_secs(1);
        assert_eq!(replica.check(ended, &tp, &md), ReplicaCheck::LeaseEnded);
        assert_eq!(
            replica.check(now, &tp, &metadata(2, &[1, 2])),
            ReplicaCheck::Leads
        );
        assert_eq!(
            replica.check(now, &tp, &metadata(1, &[1])),
            ReplicaCheck::Unknown
        );
    }

    #[test]
    fn a_named_replica_is_followed_until_its_leader_names_itself() {
        let now = Instant::now();
        let two = ReadReplica {
            broker: 2,
            until: now,
        };
        let later = now + Duration::from_secs(5);
        // None named.
        assert_eq!(
            ReadReplica::named(Some(two), Target::Broker(1), -1, later),
            None
        );
        // A new one: followed until the new lease ends.
        let three = ReadReplica {
            broker: 3,
            until: later,
        };
        assert_eq!(
            ReadReplica::named(Some(two), Target::Broker(1), 3, later),
            Some(Some(three))
        );
        // The same one again: its lease goes on unchanged.
        assert_eq!(
            ReadReplica::named(Some(two), Target::Replica(2), 2, later),
            None
        );
        assert_eq!(
            ReadReplica::named(Some(two), Target::Broker(1), 2, later),
            None
        );
        // The leader names itself: read from it.
        assert_eq!(
            ReadReplica::named(Some(two), Target::Broker(1), 1, later),
            Some(None)
        );
        assert_eq!(
            ReadReplica::named(None, Target::Broker(1), 1, later),
            Some(None)
        );
    }

    #[test]
    fn replica_errors_that_send_a_partition_back_to_its_leader() {
        for code in [
            ErrorCode::OffsetOutOfRange,
            ErrorCode::FencedLeaderEpoch,
            ErrorCode::NotLeaderOrFollower,
            ErrorCode::ReplicaNotAvailable,
        ] {
            assert!(leaves_replica(code), "{code}");
        }
        for code in [
            ErrorCode::UnknownLeaderEpoch,
            ErrorCode::TopicAuthorizationFailed,
            ErrorCode::CorruptMessage,
            ErrorCode::None,
        ] {
            assert!(!leaves_replica(code), "{code}");
        }
    }
}
