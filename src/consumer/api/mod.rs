//! The public [`Consumer`] on a runtime: the application's calls, handed to
//! the sans-IO [`ConsumerCore`] while no socket exists and to the
//! runtime's background task from the first [`Consumer::poll`] on.
//!
//! A consumer opens nothing until the application first calls
//! [`Consumer::poll`]: `new`, `subscribe`, `assign`, `pause`, `resume`,
//! `seek` and every getter work on local state only. The first `poll`
//! starts a background task that owns the sockets and keeps the group
//! membership alive (heartbeats) between polls.
//!
//! This file holds the `Consumer` itself, its state on the caller's side,
//! the start of its background task, and the calls that only look at or
//! change local state (subscribe, assign, seek, pause, getters) or end it
//! (`close`). The rest is split by job:
//!
//! - `poll`: `poll`, the step of it that does not wait, and its wait;
//! - `listener`: the [`RebalanceListener`], the [`Revocation`] it is
//!   handed, and the delivery of group events to it inside `poll`;
//! - `commits`: commits (waited for, or with a callback), committed
//!   offsets read back, and the offsets stored for the next commit;
//! - `lookups`: offsets by time or position (ListOffsets) and the
//!   partitions of a topic;
//! - `streams`: the records ([`RecordStream`]) and the metrics
//!   ([`StatisticsStream`]) as streams.

mod commits;
mod listener;
mod lookups;
mod poll;
mod streams;

/// A consumer's statistics stream: [`ConsumerMetrics`] every
/// `statistics.interval.ms` ([`Consumer::statistics`]); the stream type
/// both clients share, its metrics named.
///
/// [`ConsumerMetrics`]: crate::consumer::metrics::ConsumerMetrics
pub type StatisticsStream<M = crate::consumer::metrics::ConsumerMetrics> =
    crate::statistics::StatisticsStream<M>;
pub use listener::{RebalanceListener, Revocation};
pub use streams::RecordStream;

use super::core::{CommitId, ConsumerCore, Mode};
use super::metrics::ConsumerMetrics;
use super::offsets::OffsetAndEpoch;
use crate::cluster::Changes;
use crate::config::ConsumerConfig;
use crate::error::Error;
use crate::events::{BrokerCounters, ConnectionEvents, ConnectionInfo, EventHub, EVENT_BUFFER};
use crate::group::{TopicPartition, TopicPattern};
use crate::runtime::background_task;
use crate::runtime::SocketOptions;
use commits::CommitCallback;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The consumer's background task.
type Task = background_task::BackgroundTask<ConsumerCore>;
/// A waiting call's handle on the consumer's background task.
type Link = background_task::Link<ConsumerCore>;

/// An async Kafka consumer.
///
/// ```
/// # // The same body on whichever runtime feature is enabled.
/// # let body = async {
/// use lazykafka::{Consumer, ConsumerConfig};
///
/// let config = ConsumerConfig::builder()
///     .bootstrap_servers("127.0.0.1:9")
///     .group_id("billing")
///     .build()?;
/// let consumer = Consumer::new(config)?; // no socket, no DNS, no task
/// consumer.subscribe(["invoices"])?;         // still none
/// assert!(consumer.connections().is_empty());
/// # Ok::<(), lazykafka::Error>(())
/// # };
/// # #[cfg(feature = "runtime-async-std")]
/// # async_std::task::block_on(body).unwrap();
/// # #[cfg(not(feature = "runtime-async-std"))]
/// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
/// ```
#[derive(Clone)]
pub struct Consumer {
    inner: Arc<Inner>,
}

/// What every clone of a consumer shares.
struct Inner {
    config: ConsumerConfig,
    /// The TLS settings every connection uses, when the protocol has TLS.
    tls: Option<crate::tls::TlsConnector>,
    events: Arc<EventHub>,
    /// The runtime the background task runs on (`client.runtime`).
    runtime: Arc<dyn crate::runtime::rt::Runtime>,
    /// The state the calls and the background task share: the core, made
    /// with the consumer, driven by the task from the first poll on.
    link: Link,
    /// Locked for each use, never across an `.await`; before the state of
    /// the background task when both are taken.
    local: Mutex<Local>,
}

/// The consumer's side of its state.
struct Local {
    /// The background task, from the first call that needs the network.
    task: Option<Task>,
    listener: Option<Box<dyn RebalanceListener>>,
    /// A `poll` is giving group events to the listener (one at a time).
    delivering: bool,
    callbacks: Vec<(CommitId, CommitCallback)>,
    closed: bool,
}

impl Drop for Inner {
    /// Closes every socket without blocking (no commit, no LeaveGroup: use
    /// [`Consumer::close`] for those) when the last clone goes.
    fn drop(&mut self) {
        let local = self.local.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(task) = local.task.take() {
            task.stop();
        }
        self.events.close();
    }
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("config", &self.inner.config)
            .field("started", &self.local().task.is_some())
            .finish_non_exhaustive()
    }
}

fn seed() -> u64 {
    // Only spreads bootstrap choices and jitter across processes; reading
    // the wall clock here opens nothing.
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    t.as_nanos() as u64 ^ u64::from(std::process::id()).rotate_left(32)
}

impl Consumer {
    /// A consumer for `config`. Opens no socket, resolves no name and starts
    /// no task.
    ///
    /// Under TLS (`security.protocol` `SSL` or `SASL_SSL`) it reads the
    /// certificate and key files and, without a configured CA, the system's
    /// root certificates, so that a missing file or an unusable PEM is an
    /// [`Error::Config`] here rather than a failure of every connection.
    ///
    /// It also chooses the runtime the consumer runs on (`client.runtime`,
    /// [`ClientRuntime`](crate::config::ClientRuntime)): by default tokio
    /// when called inside a tokio runtime, async-std otherwise. A
    /// `client.runtime` whose cargo feature is not built, or `tokio`
    /// outside a tokio runtime, is an [`Error::Config`].
    pub fn new(config: ConsumerConfig) -> Result<Self, Error> {
        let tls = crate::tls::TlsConnector::from_config(&config)?;
        let core = ConsumerCore::from_config(&config, Instant::now(), seed());
        let runtime = crate::runtime::rt::select(config.client_runtime())?;
        Ok(Consumer {
            inner: Arc::new(Inner {
                config,
                tls,
                events: Arc::new(EventHub::default()),
                link: Link::new(core, runtime.clone()),
                runtime,
                local: Mutex::new(Local {
                    task: None,
                    listener: None,
                    delivering: false,
                    callbacks: Vec::new(),
                    closed: false,
                }),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ConsumerConfig {
        &self.inner.config
    }

    /// The consumer's side of its state, locked (a poisoned lock is taken
    /// over, as the background task's is).
    fn local(&self) -> MutexGuard<'_, Local> {
        self.inner
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the state and wakes the background task afterwards (a
    /// wake before the task runs is nothing: it starts with a pass).
    fn with_core<T>(&self, f: impl FnOnce(&mut ConsumerCore, Instant) -> T) -> T {
        let t = self.peek_core(f);
        self.inner.link.kick();
        t
    }

    /// Like [`Consumer::with_core`] without waking the background task: for
    /// changes it need not act on (every wake-up costs the task a pass).
    fn peek_core<T>(&self, f: impl FnOnce(&mut ConsumerCore, Instant) -> T) -> T {
        let now = Instant::now();
        f(&mut self.inner.link.shared().lock(), now)
    }

    fn read_core<T>(&self, f: impl FnOnce(&ConsumerCore) -> T) -> T {
        f(&self.inner.link.shared().lock())
    }

    fn check_open(&self) -> Result<(), Error> {
        if self.local().closed {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Subscribes to `topics` (group mode; needs `group.id`). Replaces any
    /// earlier subscription or assignment. Opens nothing.
    pub fn subscribe<T: Into<String>>(
        &self,
        topics: impl IntoIterator<Item = T>,
    ) -> Result<(), Error> {
        self.check_open()?;
        if self.inner.config.group_id().is_none() {
            return Err(Error::Config {
                property: "group.id".into(),
                reason: "subscribe needs a group.id; use assign without one".into(),
            });
        }
        let topics: BTreeSet<String> = topics.into_iter().map(Into::into).collect();
        self.with_core(|core, now| core.set_mode(now, Mode::Subscribed(topics)));
        Ok(())
    }

    /// Subscribes and registers a listener for assignment changes.
    pub fn subscribe_with_listener<T: Into<String>>(
        &self,
        topics: impl IntoIterator<Item = T>,
        listener: impl RebalanceListener + 'static,
    ) -> Result<(), Error> {
        self.local().listener = Some(Box::new(listener));
        self.with_core(|core, _| core.set_hold_for_listener(true));
        self.subscribe(topics)
    }

    /// Subscribes to every topic whose whole name matches `pattern`, a
    /// regular expression in RE2 syntax (group mode; needs `group.id`).
    /// Replaces any earlier subscription or assignment. Opens nothing.
    ///
    /// - Under the classic protocol (`group.protocol=classic`, the
    ///   default) the consumer matches the pattern itself, as the Java
    ///   client does: Metadata asks for every topic (over the same
    ///   connections as any Metadata: a leader connection once leaders are
    ///   known), refreshed every `metadata.max.age.ms`; when matching
    ///   topics appear or disappear the subscription changes and the member
    ///   rejoins the group. Internal topics (`__consumer_offsets`, ...)
    ///   never match while `exclude.internal.topics` is `true` (the
    ///   default).
    /// - Under `group.protocol=consumer` (KIP-848) the pattern goes to the
    ///   coordinator as SubscribedTopicRegex (ConsumerGroupHeartbeat v1+),
    ///   which resolves it with RE2/J and assigns the matching topics,
    ///   those created later too; their names are looked up by topic id
    ///   (Metadata v12+).
    ///
    /// An empty pattern, one that is not valid RE2 syntax, or one too large
    /// to compile is [`Error::InvalidPattern`], and the subscription stays
    /// as it was. The `regex` crate's syntax and RE2/J's agree on what a
    /// topic name needs (classes, alternation, repetition); a pattern the
    /// broker's RE2/J refuses ends in `Error::Group` with
    /// INVALID_REGULAR_EXPRESSION from `poll`. [`Consumer::subscription`]
    /// lists the topics the pattern brought.
    ///
    /// ```
    /// # // The same body on whichever runtime feature is enabled.
    /// # let body = async {
    /// # use lazykafka::mock::{MockCluster, MockRecord};
    /// # let mock = MockCluster::new(1).unwrap();
    /// # for topic in ["invoices-eu", "invoices-us", "audit"] {
    /// #     mock.create_topic(topic, 1).unwrap();
    /// #     mock.produce(topic, 0, [MockRecord::new(topic)]).unwrap();
    /// # }
    /// # let bootstrap = mock.bootstrap_servers();
    /// use lazykafka::{Consumer, ConsumerConfig, Error, OffsetReset};
    /// use std::collections::BTreeSet;
    /// use std::time::Duration;
    ///
    /// let config = ConsumerConfig::builder()
    ///     .bootstrap_servers(&bootstrap)
    ///     .group_id("billing")
    ///     .auto_offset_reset(OffsetReset::Earliest)
    ///     .build()?;
    /// let consumer = Consumer::new(config)?;
    /// assert!(matches!(
    ///     consumer.subscribe_pattern("invoices-("),
    ///     Err(Error::InvalidPattern { .. })
    /// ));
    /// consumer.subscribe_pattern("invoices-.*")?; // opens nothing yet
    /// let mut topics = BTreeSet::new();
    /// while topics.len() < 2 {
    ///     for record in consumer.poll(Duration::from_millis(500)).await? {
    ///         topics.insert(record.topic().to_owned());
    ///     }
    /// }
    /// assert_eq!(topics, BTreeSet::from(["invoices-eu".into(), "invoices-us".into()]));
    /// assert_eq!(consumer.subscription(), topics);
    /// consumer.close().await?;
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    pub fn subscribe_pattern(&self, pattern: &str) -> Result<(), Error> {
        self.check_open()?;
        if self.inner.config.group_id().is_none() {
            return Err(Error::Config {
                property: "group.id".into(),
                reason: "subscribe_pattern needs a group.id".into(),
            });
        }
        let pattern = TopicPattern::new(pattern)?;
        self.with_core(|core, now| core.set_mode(now, Mode::Pattern(pattern)));
        Ok(())
    }

    /// [`Consumer::subscribe_pattern`] with a listener for assignment
    /// changes.
    pub fn subscribe_pattern_with_listener(
        &self,
        pattern: &str,
        listener: impl RebalanceListener + 'static,
    ) -> Result<(), Error> {
        // Checked before the listener replaces the one in place.
        TopicPattern::new(pattern)?;
        self.local().listener = Some(Box::new(listener));
        self.with_core(|core, _| core.set_hold_for_listener(true));
        self.subscribe_pattern(pattern)
    }

    /// Assigns partitions manually (no group membership). Opens nothing.
    ///
    /// ```
    /// use lazykafka::{Consumer, ConsumerConfig, TopicPartition};
    ///
    /// let config = ConsumerConfig::builder().bootstrap_servers("127.0.0.1:9").build()?;
    /// let consumer = Consumer::new(config)?;
    /// consumer.assign([TopicPartition::new("invoices", 0), TopicPartition::new("invoices", 1)])?;
    /// assert_eq!(consumer.assignment().len(), 2);
    /// assert!(consumer.connections().is_empty()); // still nothing opened
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn assign(
        &self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<(), Error> {
        self.check_open()?;
        let partitions: BTreeSet<TopicPartition> = partitions.into_iter().collect();
        self.with_core(|core, now| core.set_mode(now, Mode::Assigned(partitions)));
        Ok(())
    }

    /// Drops the subscription or assignment (leaving the group).
    pub fn unsubscribe(&self) -> Result<(), Error> {
        self.check_open()?;
        self.with_core(|core, now| core.set_mode(now, Mode::Idle));
        Ok(())
    }

    /// The partitions assigned now.
    pub fn assignment(&self) -> BTreeSet<TopicPartition> {
        self.read_core(|core| core.assignment())
    }

    /// The topics subscribed to. Under [`Consumer::subscribe_pattern`]:
    /// the topics the pattern matches in the metadata so far (classic
    /// protocol), or the topics of the partitions the coordinator assigned
    /// (`group.protocol=consumer`, where the coordinator resolves the
    /// pattern).
    pub fn subscription(&self) -> BTreeSet<String> {
        self.read_core(|core| core.subscription())
    }

    /// The pattern given to [`Consumer::subscribe_pattern`], while it is
    /// the subscription.
    pub fn subscription_pattern(&self) -> Option<String> {
        self.read_core(|core| core.subscription_pattern())
    }

    /// Starts the background task, if it does not run yet, and returns a
    /// handle on it; [`Error::Closed`] after [`Consumer::close`].
    fn start(&self) -> Result<Link, Error> {
        let mut local = self.local();
        if local.closed {
            return Err(Error::Closed);
        }
        if local.task.is_none() {
            self.inner.runtime.ready()?;
            let options = SocketOptions {
                keepalive: self.inner.config.socket_keepalive(),
                tls: self.inner.tls.clone(),
            };
            local.task = Some(Task::start(
                self.inner.link.clone(),
                options,
                self.inner.events.clone(),
            ));
        }
        Ok(self.inner.link.clone())
    }

    /// The offset of the next record `poll` returns for `partition`, once
    /// known.
    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.read_core(|core| core.position(partition))
    }

    /// Makes the next `poll` return records of `partition` from `offset`.
    /// Opens nothing. The partition must be assigned.
    ///
    /// ```
    /// use lazykafka::{Consumer, ConsumerConfig, TopicPartition};
    ///
    /// let config = ConsumerConfig::builder().bootstrap_servers("127.0.0.1:9").build()?;
    /// let consumer = Consumer::new(config)?;
    /// let tp = TopicPartition::new("invoices", 0);
    /// consumer.assign([tp.clone()])?;
    /// consumer.seek(&tp, 42)?;
    /// assert_eq!(consumer.position(&tp), Some(42));
    /// // Only assigned partitions can be sought.
    /// assert!(consumer.seek(&TopicPartition::new("other", 0), 0).is_err());
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn seek(&self, partition: &TopicPartition, offset: i64) -> Result<(), Error> {
        self.with_core(|core, _| core.seek(partition, offset))
            .map_err(Error::Seek)
    }

    /// Moves to the first offset of each partition; looked up at the next
    /// `poll`. Opens nothing now.
    pub fn seek_to_beginning<'a>(
        &self,
        partitions: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> Result<(), Error> {
        self.with_core(|core, _| core.seek_to_beginning(partitions))
            .map_err(Error::Seek)
    }

    /// Moves past the last offset of each partition; looked up at the next
    /// `poll`. Opens nothing now.
    pub fn seek_to_end<'a>(
        &self,
        partitions: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> Result<(), Error> {
        self.with_core(|core, _| core.seek_to_end(partitions))
            .map_err(Error::Seek)
    }

    /// Stops fetching from `partitions` (they stay assigned; records already
    /// fetched are kept for after `resume`).
    ///
    /// ```
    /// use lazykafka::{Consumer, ConsumerConfig, TopicPartition};
    ///
    /// let config = ConsumerConfig::builder().bootstrap_servers("127.0.0.1:9").build()?;
    /// let consumer = Consumer::new(config)?;
    /// let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
    /// consumer.assign([a.clone(), b.clone()])?;
    /// consumer.pause([&a]);
    /// assert!(consumer.paused().contains(&a));
    /// consumer.resume([&a]);
    /// assert!(consumer.paused().is_empty());
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn pause<'a>(&self, partitions: impl IntoIterator<Item = &'a TopicPartition>) {
        self.with_core(|core, _| core.pause(partitions));
    }

    /// Fetches from `partitions` again.
    pub fn resume<'a>(&self, partitions: impl IntoIterator<Item = &'a TopicPartition>) {
        self.with_core(|core, _| core.resume(partitions));
    }

    /// The paused partitions.
    pub fn paused(&self) -> BTreeSet<TopicPartition> {
        self.read_core(|core| core.paused())
    }

    /// A snapshot of the live connections (empty before the first poll).
    ///
    /// ```
    /// # // The same body on whichever runtime feature is enabled.
    /// # let body = async {
    /// # use lazykafka::mock::{MockCluster, MockRecord};
    /// # let mock = MockCluster::new(3).unwrap();
    /// # mock.create_topic_with_leaders("invoices", &[1, 3]).unwrap();
    /// # for p in 0..2 {
    /// #     let records = (0..3).map(|i| MockRecord::new(format!("{p}-{i}")).timestamp(1000 * (i + 1)));
    /// #     mock.produce("invoices", p, records).unwrap();
    /// # }
    /// # let bootstrap = mock.bootstrap_servers();
    /// use lazykafka::events::Purpose;
    /// use lazykafka::{Consumer, ConsumerConfig, OffsetReset, TopicPartition};
    /// use std::time::Duration;
    ///
    /// let config = ConsumerConfig::builder()
    ///     .bootstrap_servers(&bootstrap)
    ///     .auto_offset_reset(OffsetReset::Earliest)
    ///     .build()?;
    /// let consumer = Consumer::new(config)?;
    /// consumer.assign([TopicPartition::new("invoices", 0), TopicPartition::new("invoices", 1)])?;
    /// assert!(consumer.connections().is_empty());
    /// let mut seen = 0;
    /// while seen < 6 {
    ///     seen += consumer.poll(Duration::from_millis(200)).await?.len();
    /// }
    /// // Partition 0 is led by broker 1 and partition 1 by broker 3: one
    /// // leader connection each, and no socket to broker 2.
    /// let mut leaders: Vec<_> = consumer
    ///     .connections()
    ///     .iter()
    ///     .filter(|c| c.purpose == Purpose::Leader)
    ///     .map(|c| c.broker)
    ///     .collect();
    /// leaders.sort();
    /// assert_eq!(leaders, [Some(1), Some(3)]);
    /// assert!(consumer.connections().iter().all(|c| c.broker != Some(2)));
    /// consumer.close().await?;
    /// assert!(consumer.connections().is_empty());
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.read_core(|core| core.connections(Instant::now()))
    }

    /// Counters per broker address.
    pub fn broker_counters(&self) -> BTreeMap<String, BrokerCounters> {
        self.read_core(|core| core.counters().clone())
    }

    /// A snapshot for monitoring: per assigned partition its position,
    /// high watermark, last stable offset, lag and fetch counters; per
    /// broker requests, bytes, round trips, connects and errors; the live
    /// connections; the group's state, generation (or member epoch) and
    /// rebalances. It asks no broker anything: the high watermark and the
    /// last stable offset come with every Fetch answer, so the lag follows
    /// the log while the consumer fetches (a partition whose fetched
    /// records wait for `poll` is not fetched again until they are taken).
    /// Serialisable with serde.
    ///
    /// ```
    /// # // The same body on whichever runtime feature is enabled.
    /// # let body = async {
    /// # use lazykafka::mock::{MockCluster, MockRecord};
    /// # let mock = MockCluster::new(1).unwrap();
    /// # mock.create_topic("invoices", 1).unwrap();
    /// # mock.produce("invoices", 0, [MockRecord::new("a"), MockRecord::new("b")]).unwrap();
    /// # let bootstrap = mock.bootstrap_servers();
    /// use lazykafka::{Consumer, ConsumerConfig, OffsetReset, TopicPartition};
    /// use std::time::Duration;
    ///
    /// let config = ConsumerConfig::builder()
    ///     .bootstrap_servers(&bootstrap)
    ///     .auto_offset_reset(OffsetReset::Earliest)
    ///     .build()?;
    /// let consumer = Consumer::new(config)?;
    /// consumer.assign([TopicPartition::new("invoices", 0)])?;
    /// let mut seen = 0;
    /// while seen < 2 {
    ///     seen += consumer.poll(Duration::from_millis(200)).await?.len();
    /// }
    /// let metrics = consumer.metrics();
    /// let p0 = &metrics.partitions[0];
    /// assert_eq!((p0.position, p0.high_watermark, p0.lag), (Some(2), Some(2), Some(0)));
    /// assert_eq!(p0.records_consumed, 2);
    /// assert!(metrics.brokers.values().any(|b| b.responses > 0));
    /// consumer.close().await?;
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    pub fn metrics(&self) -> ConsumerMetrics {
        let read_committed =
            self.inner.config.isolation_level() == crate::config::IsolationLevel::ReadCommitted;
        self.read_core(|core| core.metrics(Instant::now(), SystemTime::now(), read_committed))
    }

    /// A stream of connection events from now on. It keeps at most
    /// [`EVENT_BUFFER`] unread events: a reader that falls behind loses the
    /// newest ones (counted by [`ConnectionEvents::dropped`]), never memory.
    /// It ends when the consumer is closed or dropped.
    ///
    /// ```
    /// # // The same body on whichever runtime feature is enabled.
    /// # let body = async {
    /// # use lazykafka::mock::{MockCluster, MockRecord};
    /// # let mock = MockCluster::new(3).unwrap();
    /// # mock.create_topic_with_leaders("invoices", &[1, 3]).unwrap();
    /// # for p in 0..2 {
    /// #     let records = (0..3).map(|i| MockRecord::new(format!("{p}-{i}")).timestamp(1000 * (i + 1)));
    /// #     mock.produce("invoices", p, records).unwrap();
    /// # }
    /// # let bootstrap = mock.bootstrap_servers();
    /// use futures::{FutureExt, StreamExt};
    /// use lazykafka::events::{EventKind, Purpose};
    /// use lazykafka::{Consumer, ConsumerConfig, OffsetReset, TopicPartition};
    /// use std::time::Duration;
    ///
    /// let config = ConsumerConfig::builder()
    ///     .bootstrap_servers(&bootstrap)
    ///     .auto_offset_reset(OffsetReset::Earliest)
    ///     .build()?;
    /// let consumer = Consumer::new(config)?;
    /// let mut events = consumer.connection_events();
    /// consumer.assign([TopicPartition::new("invoices", 1)])?;
    /// while consumer.poll(Duration::from_millis(200)).await?.is_empty() {}
    /// consumer.close().await?;
    /// let mut all = Vec::new();
    /// while let Some(Some(e)) = events.next().now_or_never() {
    ///     all.push(e);
    /// }
    /// // The first socket goes to a bootstrap address; the last event is a close.
    /// assert_eq!(all[0].purpose, Purpose::Bootstrap);
    /// assert!(all.iter().any(|e| matches!(e.kind, EventKind::Opened)));
    /// assert!(matches!(all.last().unwrap().kind, EventKind::Closed { .. }));
    /// for e in &all {
    ///     println!("{:?} {:?} broker {:?} {}", e.kind, e.purpose, e.broker, e.addr);
    /// }
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    pub fn connection_events(&self) -> ConnectionEvents {
        self.inner.events.subscribe(EVENT_BUFFER)
    }

    /// Commits (when auto-commit is on), leaves the group and closes every
    /// socket, within `default.api.timeout.ms` (60 s by default): as
    /// [`Consumer::close_timeout`] with that time. The consumer can't be
    /// used afterwards.
    pub async fn close(&self) -> Result<(), Error> {
        self.close_timeout(self.inner.config.default_api_timeout())
            .await
    }

    /// Commits (when auto-commit is on), hands the partitions back (the
    /// rebalance listener hears of it, and what it commits lands), leaves
    /// the group and closes every socket, all within `timeout`: a step
    /// still waiting for the group coordinator when it runs out is given
    /// up, and the sockets are closed anyway. The final commit's refusal
    /// is returned, or [`Error::Timeout`] (with the last failure seen) when
    /// it got no answer in time. The Java consumer's `close(Duration)`. The
    /// consumer can't be used afterwards; closing it again returns at once.
    pub async fn close_timeout(&self, timeout: Duration) -> Result<(), Error> {
        let link = {
            let mut local = self.local();
            if local.closed {
                return Ok(());
            }
            local.closed = true;
            match &local.task {
                Some(_) => self.inner.link.clone(),
                None => {
                    // Never polled: nothing was opened.
                    self.inner.events.close();
                    return Ok(());
                }
            }
        };
        let deadline = Instant::now() + timeout;
        let left = || deadline.saturating_duration_since(Instant::now());
        let commit = link.shared().lock().begin_close(Instant::now());
        link.kick();
        let mut result = Ok(());
        if let Some(id) = commit {
            match link
                .wait(left(), None, Changes::ANSWERS, move |core, _| {
                    or_refused(core, |core| core.take_commit_result(id))
                })
                .await
            {
                Some(Ok(Ok(Err(e)) | Err(e))) => result = Err(e),
                None => result = Err(timed_out(&link, "close: the commit", timeout)),
                _ => {}
            }
        }
        // The partitions are revoked before the member leaves: the rebalance
        // listener hears of it here, and what it commits lands first.
        self.with_core(|core, now| core.prepare_leave(now));
        self.run_callbacks();
        link.wait(left(), None, Changes::ANSWERS, |core, _| {
            or_refused(core, |core| core.revocation_commits_done().then_some(()))
        })
        .await;
        self.run_commit_callbacks();
        let leave = link.shared().lock().send_leave(Instant::now());
        link.kick();
        if let Some(id) = leave {
            link.wait(left(), None, Changes::ANSWERS, move |core, _| {
                or_refused(core, |core| (!core.is_in_flight(id)).then_some(()))
            })
            .await;
        }
        if let Some(task) = &self.local().task {
            task.stop();
        }
        result
    }
}

/// What `check` finds, or the failure that makes waiting for it pointless
/// ([`ConsumerCore::refused`]: every bootstrap address refused, does not
/// resolve, or failed authentication or TLS): a call that waits on the
/// network names that cause within seconds instead of at its timeout.
fn or_refused<T>(
    core: &mut ConsumerCore,
    check: impl FnOnce(&mut ConsumerCore) -> Option<T>,
) -> Option<Result<T, Error>> {
    match check(core) {
        Some(found) => Some(Ok(found)),
        None => core.refused().map(Err),
    }
}

/// The error of an operation that timed out after `after`, naming the last
/// failure the consumer saw meanwhile.
fn timed_out(link: &Link, what: &'static str, after: Duration) -> Error {
    link.shared().lock().timeout_error(what, after)
}

/// Offsets given by the application, with no leader epoch.
fn at_offsets(
    offsets: impl IntoIterator<Item = (TopicPartition, i64)>,
) -> BTreeMap<TopicPartition, OffsetAndEpoch> {
    offsets
        .into_iter()
        .map(|(tp, offset)| {
            let o = OffsetAndEpoch {
                offset,
                leader_epoch: None,
            };
            (tp, o)
        })
        .collect()
}
