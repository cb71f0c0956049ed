//! The application's reads (assignment, subscription, positions, paused
//! partitions, connections, metrics) and its commands on positions (seek,
//! pause, resume).

use super::super::metrics::{self, ConsumerMetrics};
use super::{ConsumerCore, Mode};
use crate::events::{BrokerCounters, ConnectionInfo};
use crate::fetch::SeekError;
use crate::group::{GroupProtocol, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

impl ConsumerCore {
    /// The partitions assigned now.
    pub fn assignment(&self) -> BTreeSet<TopicPartition> {
        self.fetcher.assignment()
    }

    /// The topics subscribed to (see `Consumer::subscription`).
    pub fn subscription(&self) -> BTreeSet<String> {
        match &self.mode {
            Mode::Subscribed(t) => t.clone(),
            Mode::Pattern(_) => match self.membership.as_ref() {
                Some(m) if m.protocol() == GroupProtocol::Classic => m.topics().clone(),
                _ => self
                    .fetcher
                    .assignment()
                    .into_iter()
                    .map(|tp| tp.topic)
                    .collect(),
            },
            _ => BTreeSet::new(),
        }
    }

    /// The pattern subscribed to, while it is the subscription.
    pub fn subscription_pattern(&self) -> Option<String> {
        match &self.mode {
            Mode::Pattern(p) => Some(p.as_str().to_owned()),
            _ => None,
        }
    }

    /// The offset of the next record for `tp`, once known.
    pub fn position(&self, tp: &TopicPartition) -> Option<i64> {
        self.fetcher.position(tp)
    }

    /// The paused partitions.
    pub fn paused(&self) -> BTreeSet<TopicPartition> {
        self.fetcher.paused()
    }

    /// The live connections.
    pub fn connections(&self, now: Instant) -> Vec<ConnectionInfo> {
        self.cluster.connections(now)
    }

    /// Counters per broker address.
    pub fn counters(&self) -> &BTreeMap<String, BrokerCounters> {
        self.cluster.counters()
    }

    /// The monitoring snapshot at `now`, stamped with the wall-clock time
    /// `wall_now` (read by the caller: the core reads no clock).
    pub fn metrics(
        &self,
        now: Instant,
        wall_now: SystemTime,
        read_committed: bool,
    ) -> ConsumerMetrics {
        let partitions: Vec<metrics::PartitionMetrics> = self
            .fetcher
            .partition_stats()
            .into_iter()
            .map(|p| metrics::PartitionMetrics::new(p, read_committed))
            .collect();
        let group = self.membership.as_ref().map(|m| {
            let (rebalances, last) = self.rebalances();
            metrics::GroupMetrics {
                group: m.group_id().to_owned(),
                protocol: m.protocol().to_string(),
                state: m.state_name().to_owned(),
                member_id: m.member_id().to_owned(),
                generation: m.generation_or_epoch(),
                rebalances,
                joins: m.joins(),
                last_rebalance_ms: last.map(|at| {
                    let ago = now.saturating_duration_since(at);
                    crate::metrics::unix_ms(wall_now.checked_sub(ago).unwrap_or(UNIX_EPOCH))
                }),
                last_rebalance_age_ms: last.map(|at| {
                    u64::try_from(now.saturating_duration_since(at).as_millis()).unwrap_or(u64::MAX)
                }),
            }
        });
        ConsumerMetrics {
            at_ms: crate::metrics::unix_ms(wall_now),
            total_lag: partitions.iter().filter_map(|p| p.lag).sum(),
            partitions,
            brokers: self
                .cluster
                .counters()
                .iter()
                .map(|(addr, c)| (addr.clone(), c.into()))
                .collect(),
            connections: self.cluster.connections(now),
            group,
            metadata_requests: self.cluster.metadata_counts().0,
            leader_hints: self.cluster.metadata_counts().1,
        }
    }

    /// Makes the next records of `tp` start at `offset`.
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<(), SeekError> {
        self.fetcher.seek(tp, offset)
    }

    /// Moves partitions to their first offset (looked up by the next step).
    pub fn seek_to_beginning<'a>(
        &mut self,
        tps: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> Result<(), SeekError> {
        self.fetcher.seek_to_beginning(tps)
    }

    /// Moves partitions past their last offset (looked up by the next step).
    pub fn seek_to_end<'a>(
        &mut self,
        tps: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> Result<(), SeekError> {
        self.fetcher.seek_to_end(tps)
    }

    /// Stops fetching from `tps`.
    pub fn pause<'a>(&mut self, tps: impl IntoIterator<Item = &'a TopicPartition>) {
        self.fetcher.pause(tps);
    }

    /// Fetches from `tps` again.
    pub fn resume<'a>(&mut self, tps: impl IntoIterator<Item = &'a TopicPartition>) {
        self.fetcher.resume(tps);
    }
}
