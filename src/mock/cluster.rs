//! [`MockCluster`], the handle of a running cluster: its threads, its
//! brokers and topics, and the records produced from code. What a test
//! does to it (faults) is in `faults.rs`, what it reads of it in
//! `observe.rs`.

use std::collections::HashMap;
use std::fmt;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::builder::MockClusterBuilder;
use super::server::{self, Listener, Shared};
use super::state::{self, State};
use super::{BrokerClose, MockError, MockRecord};
use crate::error::ErrorCode;
use crate::records::{Compression, RecordBatchBuilder};

/// A Kafka cluster in this process. See the [module docs](crate::mock).
///
/// Dropping it closes every connection and stops every thread it started.
pub struct MockCluster {
    pub(super) shared: Arc<Shared>,
    listeners: Mutex<HashMap<i32, Listener>>,
    /// The ports of the brokers that are down, each held by a socket that
    /// is bound and does not listen: connecting is refused, as to a
    /// stopped broker, and no other socket (another cluster, another test
    /// process) can take the port before the broker comes back on it.
    held: Mutex<HashMap<i32, socket2::Socket>>,
    timer: Option<JoinHandle<()>>,
}

impl fmt::Debug for MockCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockCluster")
            .field("bootstrap_servers", &self.bootstrap_servers())
            .finish_non_exhaustive()
    }
}

impl MockCluster {
    /// Serves `state` on the bound `sockets` (each broker's): a listener
    /// thread per broker and the group coordinator's timer thread.
    pub(super) fn start(
        state: State,
        sockets: Vec<(i32, TcpListener)>,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Result<MockCluster, MockError> {
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            changed: Condvar::new(),
            conns: Mutex::new(HashMap::new()),
            tls,
        });
        let mut listeners = HashMap::new();
        for (id, listener) in sockets {
            listeners.insert(id, Listener::start(shared.clone(), id, listener)?);
        }
        let timer_shared = shared.clone();
        let timer = std::thread::Builder::new()
            .name("mock-group-timer".into())
            .spawn(move || server::run_timer(timer_shared))?;
        Ok(MockCluster {
            shared,
            listeners: Mutex::new(listeners),
            held: Mutex::new(HashMap::new()),
            timer: Some(timer),
        })
    }

    /// A cluster of `brokers` brokers (ids 1..=n) with default settings.
    pub fn new(brokers: i32) -> Result<MockCluster, MockError> {
        Self::builder().brokers(brokers).build()
    }

    /// Settings for a cluster: one broker, no initial rebalance delay.
    pub fn builder() -> MockClusterBuilder {
        MockClusterBuilder::new()
    }

    /// `host:port` of every broker, comma-separated, for
    /// `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> String {
        let st = self.shared.lock();
        let addrs: Vec<String> = st.brokers.values().map(|b| b.addr.to_string()).collect();
        addrs.join(",")
    }

    /// When the cluster started: the zero of every [`MockEvent::at`](crate::mock::MockEvent::at) and
    /// [`MockRequest::at`](crate::mock::MockRequest::at).
    pub fn started(&self) -> Instant {
        self.shared.lock().started
    }

    /// The broker ids.
    pub fn broker_ids(&self) -> Vec<i32> {
        self.shared.lock().brokers.keys().copied().collect()
    }

    /// The address a broker listens on.
    pub fn broker_addr(&self, broker: i32) -> Option<SocketAddr> {
        self.shared.lock().brokers.get(&broker).map(|b| b.addr)
    }

    /// The broker whose address is `addr`.
    pub fn broker_at(&self, addr: SocketAddr) -> Option<i32> {
        let st = self.shared.lock();
        st.brokers
            .iter()
            .find(|(_, b)| b.addr == addr)
            .map(|(&id, _)| id)
    }

    pub(super) fn change<T>(
        &self,
        f: impl FnOnce(&mut State) -> Result<T, MockError>,
    ) -> Result<T, MockError> {
        let out = f(&mut self.shared.lock());
        self.shared.changed.notify_all();
        out
    }

    /// Creates a topic of `partitions` partitions, leaders spread over the
    /// brokers.
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), MockError> {
        self.change(|st| {
            st.create_topic(topic, partitions, None)
                .map_err(MockError::Refused)
        })
    }

    /// Creates a topic with one partition per entry of `leaders`, led by
    /// that broker.
    pub fn create_topic_with_leaders(&self, topic: &str, leaders: &[i32]) -> Result<(), MockError> {
        self.change(|st| {
            st.create_topic(topic, leaders.len() as i32, Some(leaders))
                .map_err(MockError::Refused)
        })
    }

    /// Topics a Metadata request names get created on demand with this many
    /// partitions (when the client allows it); `None`, the default,
    /// answers `UNKNOWN_TOPIC_OR_PARTITION` instead.
    pub fn set_auto_create_topics(&self, partitions: Option<i32>) {
        let _ = self.change(|st| {
            st.auto_create_partitions = partitions;
            Ok(())
        });
    }

    pub(super) fn with_partition<T>(
        &self,
        topic: &str,
        partition: i32,
        f: impl FnOnce(&mut state::Partition) -> Result<T, MockError>,
    ) -> Result<T, MockError> {
        self.change(|st| {
            let t = st
                .topics
                .get_mut(topic)
                .ok_or_else(|| MockError::UnknownTopic(topic.into()))?;
            let p = usize::try_from(partition)
                .ok()
                .and_then(|i| t.partitions.get_mut(i))
                .ok_or_else(|| MockError::UnknownPartition {
                    topic: topic.into(),
                    partition,
                })?;
            f(p)
        })
    }

    /// Moves a partition's leadership to `broker`; its leader epoch grows.
    /// A follower that becomes the leader swaps places with the old
    /// leader, which stays a follower.
    pub fn set_leader(&self, topic: &str, partition: i32, broker: i32) -> Result<(), MockError> {
        if self.broker_addr(broker).is_none() {
            return Err(MockError::UnknownBroker(broker));
        }
        self.with_partition(topic, partition, |p| {
            if let Some(f) = p.followers.iter_mut().find(|f| **f == broker) {
                *f = p.leader;
            }
            p.leader = broker;
            p.bump_epoch();
            Ok(())
        })
    }

    /// Makes `followers` replicate a partition besides its leader (by
    /// default none does: replication factor 1). Followers share the
    /// leader's log, so they are always in sync: Metadata lists them as
    /// replicas (in the ISR while up, offline while down), and they serve
    /// Fetch from consumers (KIP-392; ListOffsets and OffsetForLeaderEpoch
    /// stay the leader's). A leader names a follower in a fetching
    /// client's rack as the preferred read replica (see
    /// [`MockClusterBuilder::rack`]); to make one answer errors, use
    /// [`MockCluster::push_broker_errors`] with [`ApiKey::Fetch`](crate::error::ApiKey::Fetch). The
    /// leader itself in `followers` is ignored; an unknown broker is
    /// [`MockError::UnknownBroker`].
    pub fn set_followers(
        &self,
        topic: &str,
        partition: i32,
        followers: &[i32],
    ) -> Result<(), MockError> {
        if let Some(&b) = followers.iter().find(|b| self.broker_addr(**b).is_none()) {
            return Err(MockError::UnknownBroker(b));
        }
        self.with_partition(topic, partition, |p| {
            let mut set: Vec<i32> = followers
                .iter()
                .copied()
                .filter(|&b| b != p.leader)
                .collect();
            set.sort_unstable();
            set.dedup();
            p.followers = set;
            Ok(())
        })
    }

    /// The followers of a partition (see [`MockCluster::set_followers`]).
    pub fn followers(&self, topic: &str, partition: i32) -> Option<Vec<i32>> {
        self.with_partition(topic, partition, |p| Ok(p.followers.clone()))
            .ok()
    }

    /// A broker's rack (see [`MockClusterBuilder::rack`]).
    pub fn rack(&self, broker: i32) -> Option<String> {
        self.shared
            .lock()
            .brokers
            .get(&broker)
            .and_then(|b| b.rack.clone())
    }

    /// Moves a partition's leadership to `broker`, whose copy of the log
    /// ends at `end_offset`: the records from there on never reached it
    /// and are gone (an unclean election, the case KIP-320 detects). The
    /// log is cut at the batch boundary at or below `end_offset`, the
    /// leader epoch grows, and the new epoch starts at the cut, so
    /// OffsetForLeaderEpoch and Fetch (`diverging_epoch`, v12+) tell a
    /// consumer past it where the log diverges. Returns the new log end.
    pub fn set_leader_truncated(
        &self,
        topic: &str,
        partition: i32,
        broker: i32,
        end_offset: i64,
    ) -> Result<i64, MockError> {
        if self.broker_addr(broker).is_none() {
            return Err(MockError::UnknownBroker(broker));
        }
        self.with_partition(topic, partition, |p| {
            if let Some(f) = p.followers.iter_mut().find(|f| **f == broker) {
                *f = p.leader;
            }
            p.leader = broker;
            Ok(p.truncate_to(end_offset))
        })
    }

    /// A partition's leader epoch.
    pub fn leader_epoch(&self, topic: &str, partition: i32) -> Option<i32> {
        self.with_partition(topic, partition, |p| Ok(p.leader_epoch))
            .ok()
    }

    /// The broker leading a partition (whether up or not).
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.with_partition(topic, partition, |p| Ok(p.leader)).ok()
    }

    /// Makes `broker` coordinate `group` (moving it if it was elsewhere:
    /// members get `NOT_COORDINATOR` from the old one).
    pub fn set_coordinator(&self, group: &str, broker: i32) -> Result<(), MockError> {
        self.change(|st| {
            if !st.brokers.contains_key(&broker) {
                return Err(MockError::UnknownBroker(broker));
            }
            st.coordinators.insert(group.to_owned(), broker);
            Ok(())
        })
    }

    /// The heartbeat interval and session timeout of consumer groups of
    /// the KIP-848 protocol (Kafka's `group.consumer.heartbeat.interval.ms`
    /// and `group.consumer.session.timeout.ms`; defaults 5 s and 45 s).
    pub fn set_consumer_group_timing(
        &self,
        heartbeat_interval: Duration,
        session_timeout: Duration,
    ) {
        let mut st = self.shared.lock();
        st.consumer_groups.heartbeat_interval = heartbeat_interval;
        st.consumer_groups.session_timeout = session_timeout;
    }

    /// The least time between two resolutions of a consumer group's
    /// regex subscriptions (KIP-848 SubscribedTopicRegex) for topics
    /// created since the last one: Kafka 4.0 waits 10 s (the default here),
    /// 4.1 `group.consumer.regex.refresh.interval.ms` (10 minutes by
    /// default). A regex no member had before is resolved at once.
    pub fn set_consumer_group_regex_refresh(&self, interval: Duration) {
        self.shared.lock().consumer_groups.regex_refresh_interval = interval;
    }

    /// The broker coordinating `group`.
    pub fn coordinator(&self, group: &str) -> i32 {
        self.shared.lock().coordinator(group)
    }

    /// Appends `records` to a partition as one uncompressed batch; returns
    /// the offset of the first.
    pub fn produce(
        &self,
        topic: &str,
        partition: i32,
        records: impl IntoIterator<Item = MockRecord>,
    ) -> Result<i64, MockError> {
        self.produce_compressed(topic, partition, Compression::None, records)
    }

    /// Appends `records` to a partition as one batch compressed with
    /// `compression`; returns the offset of the first.
    pub fn produce_compressed(
        &self,
        topic: &str,
        partition: i32,
        compression: Compression,
        records: impl IntoIterator<Item = MockRecord>,
    ) -> Result<i64, MockError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut builder = RecordBatchBuilder::new(0).compression(compression);
        for r in records {
            let headers: Vec<_> = r
                .headers
                .iter()
                .map(|(k, v)| (&k[..], v.as_deref()))
                .collect();
            builder
                .append(
                    r.timestamp.unwrap_or(now),
                    r.key.as_deref(),
                    r.value.as_deref(),
                    &headers,
                )
                .map_err(MockError::Records)?;
        }
        if builder.is_empty() {
            return self.high_watermark(topic, partition).ok_or_else(|| {
                MockError::UnknownPartition {
                    topic: topic.into(),
                    partition,
                }
            });
        }
        let batch = builder.build().map_err(MockError::Records)?;
        self.with_partition(topic, partition, |p| {
            p.log
                .append(&batch, p.leader_epoch)
                .map_err(|_| MockError::Refused(ErrorCode::CorruptMessage))
        })
    }

    /// The offset the next record of a partition gets.
    pub fn high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        self.with_partition(topic, partition, |p| Ok(p.log.high_watermark()))
            .ok()
    }

    /// The first offset a partition still holds.
    pub fn log_start_offset(&self, topic: &str, partition: i32) -> Option<i64> {
        self.with_partition(topic, partition, |p| Ok(p.log.log_start_offset()))
            .ok()
    }

    /// Drops a partition's records below `offset`, as retention would.
    pub fn delete_records_before(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<(), MockError> {
        self.with_partition(topic, partition, |p| {
            p.log.truncate_before(offset);
            Ok(())
        })
    }

    pub(super) fn listeners(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Listener>> {
        self.listeners.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn held_ports(&self) -> std::sync::MutexGuard<'_, HashMap<i32, socket2::Socket>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for MockCluster {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.changed.notify_all();
        for (_, mut l) in self.listeners().drain() {
            l.stop();
        }
        self.shared
            .close_connections(BrokerClose::Shutdown, |_, _| true);
        if let Some(t) = self.timer.take() {
            let _ = t.join();
        }
    }
}
