//! The public [`Consumer`] on a runtime: the application's calls, handed to
//! the sans-IO [`ConsumerCore`] while no socket exists and to the
//! runtime's background task from the first [`Consumer::poll`] on.
//!
//! A consumer opens nothing until the application first calls
//! [`Consumer::poll`]: `new`, `subscribe`, `assign`, `pause`, `resume`,
//! `seek` and every getter work on local state only. The first `poll`
//! starts a background task that owns the sockets and keeps the group
//! membership alive (heartbeats) between polls.

use super::core::{CommitId, ConsumerCore, Mode};
use super::metrics::ConsumerMetrics;
use super::offsets::OffsetAndEpoch;
use crate::cluster::Retry;
use crate::config::ConsumerConfig;
use crate::error::Error;
use crate::events::{BrokerCounters, ConnectionEvents, ConnectionInfo, EventHub, EVENT_BUFFER};
use crate::fetch::{ConsumerRecord, DecodeJob, OffsetAndTimestamp, OffsetSpec};
use crate::group::errors::{classify, GroupErrorClass};
use crate::group::membership::GroupEvent;
use crate::group::{TopicPartition, TopicPattern};
use crate::runtime::background_task;

/// The consumer's background task.
type Engine = background_task::BackgroundTask<ConsumerCore>;
/// A waiting call's handle on the consumer's background task.
type Link = background_task::Link<ConsumerCore>;
use crate::runtime::SocketOptions;
use futures::{FutureExt, Stream};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Told of partition assignment changes, from inside [`Consumer::poll`]
/// (as the Java client's `ConsumerRebalanceListener`).
///
/// The group does not move on until `poll` has called the listener: a
/// commit made in [`RebalanceListener::on_partitions_revoked`] through the
/// [`Revocation`] lands before the partitions go to another member.
pub trait RebalanceListener: Send {
    /// Partitions newly assigned to this consumer. Called after every
    /// completed rebalance, with an empty set when nothing new came (under
    /// `cooperative-sticky`, partitions kept are not repeated), as the Java
    /// client does (KIP-429).
    fn on_partitions_assigned(&mut self, partitions: &BTreeSet<TopicPartition>) {
        let _ = partitions;
    }

    /// Partitions given up in an orderly rebalance.
    fn on_partitions_revoked(
        &mut self,
        partitions: &BTreeSet<TopicPartition>,
        revocation: &mut Revocation<'_>,
    ) {
        let _ = (partitions, revocation);
    }

    /// Partitions lost (session expired, fenced): another member may own
    /// them already, so committing for them would fail.
    fn on_partitions_lost(&mut self, partitions: &BTreeSet<TopicPartition>) {
        let _ = partitions;
    }
}

/// What a [`RebalanceListener`] may do while partitions are revoked.
pub struct Revocation<'a> {
    consumer: &'a Consumer,
    positions: BTreeMap<TopicPartition, i64>,
}

impl std::fmt::Debug for Revocation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revocation")
            .field("positions", &self.positions)
            .finish_non_exhaustive()
    }
}

impl Revocation<'_> {
    /// The consumed positions the revoked partitions had.
    pub fn positions(&self) -> BTreeMap<TopicPartition, i64> {
        self.positions.clone()
    }

    /// Commits `offsets` before the group moves on. A refusal is logged at
    /// warn level; use [`Revocation::commit_with`] to handle it.
    pub fn commit(&mut self, offsets: BTreeMap<TopicPartition, i64>) {
        self.commit_with(offsets, |result| {
            if let Err(e) = result {
                log::warn!("a commit made while revoking partitions failed: {e}");
            }
        });
    }

    /// Commits `offsets` before the group moves on; `callback` runs with
    /// the outcome inside a later `poll` (or `close`), like
    /// [`Consumer::commit_async`]'s.
    pub fn commit_with(
        &mut self,
        offsets: BTreeMap<TopicPartition, i64>,
        callback: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) {
        let offsets = at_offsets(offsets);
        let id = self.consumer.with_core(|core, now| {
            let id = core.commit(now, Some(offsets));
            core.block_group_on_commit(id);
            id
        });
        self.consumer
            .local()
            .callbacks
            .push((id, Box::new(callback)));
    }
}

type CommitCallback = Box<dyn FnOnce(Result<(), Error>) + Send>;

/// Forgets the outcome of a commit nobody waits for any more (its `commit`
/// future was dropped, or it timed out), so outcomes do not pile up.
struct AbandonCommit {
    link: Option<Link>,
    id: CommitId,
}

impl AbandonCommit {
    /// The outcome was taken (`true`), or the wait timed out (`false`:
    /// the outcome still to come is dropped).
    fn answered(mut self, taken: bool) {
        if taken {
            self.link = None;
        }
    }
}

impl Drop for AbandonCommit {
    fn drop(&mut self) {
        if let Some(link) = self.link.take() {
            link.shared().lock().abandon_commit(self.id);
        }
    }
}

/// How long one `poll` of a [`RecordStream`] waits before it polls again
/// (an empty batch is not yielded).
const STREAM_POLL: Duration = Duration::from_secs(60);

type PollFuture = Pin<Box<dyn Future<Output = Result<Vec<ConsumerRecord>, Error>> + Send>>;

/// The records of a [`Consumer`] as a [`Stream`]: see
/// [`Consumer::stream`]. It holds a clone of the consumer, borrows
/// nothing, and is `Unpin`.
pub struct RecordStream {
    consumer: Consumer,
    polling: Option<PollFuture>,
}

impl std::fmt::Debug for RecordStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordStream")
            .field("polling", &self.polling.is_some())
            .finish_non_exhaustive()
    }
}

impl Stream for RecordStream {
    type Item = Result<ConsumerRecord, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            let outcome = match &mut this.polling {
                Some(polling) => {
                    let outcome = std::task::ready!(polling.poll_unpin(cx));
                    this.polling = None;
                    outcome
                }
                // A record already fetched is taken at once, with no future
                // to allocate; else a `poll` waits for one.
                None => match this.consumer.start() {
                    Ok(link) => match this.consumer.take_now(&link, 1) {
                        Some(outcome) => outcome,
                        None => {
                            // One record at a time: what the loop does with
                            // the consumer (a seek, a pause) applies from
                            // the next one.
                            let consumer = this.consumer.clone();
                            this.polling = Some(Box::pin(async move {
                                consumer.poll_up_to(STREAM_POLL, 1).await
                            }));
                            continue;
                        }
                    },
                    Err(e) => Err(e),
                },
            };
            match outcome {
                Ok(records) => {
                    if let Some(record) = records.into_iter().next() {
                        return Poll::Ready(Some(Ok(record)));
                    }
                }
                Err(Error::Closed) => return Poll::Ready(None),
                Err(e) => return Poll::Ready(Some(Err(e))),
            }
        }
    }
}

/// The consumer's [metrics](ConsumerMetrics) every
/// `statistics.interval.ms`, as a [`Stream`]: see
/// [`Consumer::statistics`]. It holds a clone of the consumer and is
/// `Unpin`.
pub struct StatisticsStream {
    consumer: Consumer,
    interval: Duration,
    next: Instant,
    sleeping: Option<crate::runtime::rt::BoxFuture<()>>,
}

impl std::fmt::Debug for StatisticsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatisticsStream")
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl Stream for StatisticsStream {
    type Item = ConsumerMetrics;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.consumer.local().closed {
                return Poll::Ready(None);
            }
            match &mut this.sleeping {
                Some(sleeping) => {
                    std::task::ready!(sleeping.poll_unpin(cx));
                    this.sleeping = None;
                    let now = Instant::now();
                    if now < this.next {
                        // A timer that fired early (a coarse clock): wait on.
                        continue;
                    }
                    // One item per interval, on the interval's beat; a
                    // stream not polled for a while yields once, not once
                    // per interval missed.
                    this.next += this.interval;
                    if this.next <= now {
                        this.next = now + this.interval;
                    }
                    return Poll::Ready(Some(this.consumer.metrics()));
                }
                None => {
                    let left = this.next.saturating_duration_since(Instant::now());
                    this.sleeping = Some(this.consumer.inner.runtime.sleep(left));
                }
            }
        }
    }
}

/// Ends the delivery of group events by one `poll` (see
/// [`Consumer::deliver_group_events`]), whatever way it ends, the
/// listener's panic included.
struct Delivering<'a> {
    consumer: &'a Consumer,
    listener: Option<Box<dyn RebalanceListener>>,
}

impl Drop for Delivering<'_> {
    fn drop(&mut self) {
        self.consumer
            .with_core(|core, _| core.set_listener_busy(false));
        let mut local = self.consumer.local();
        local.delivering = false;
        // A listener given meanwhile (a new subscription) replaces it.
        if local.listener.is_none() {
            local.listener = self.listener.take();
        }
    }
}

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
    /// Locked for each use, never across an `.await`; before the state of
    /// the background task when both are taken.
    local: Mutex<Local>,
}

/// The consumer's side of its state.
struct Local {
    engine: Option<Engine>,
    /// State kept until the first poll hands it to the engine.
    pending: Option<ConsumerCore>,
    listener: Option<Box<dyn RebalanceListener>>,
    /// A `poll` is giving group events to the listener (one at a time).
    delivering: bool,
    callbacks: Vec<(CommitId, CommitCallback)>,
    closed: bool,
}

impl Local {
    /// Runs `f` on the state, wherever it lives now.
    fn core<T>(&mut self, f: impl FnOnce(&mut ConsumerCore) -> T) -> T {
        match (&mut self.pending, &self.engine) {
            (Some(core), _) => f(core),
            (None, Some(engine)) => f(&mut engine.link().shared().lock()),
            (None, None) => unreachable!("a consumer always has its state somewhere"),
        }
    }
}

impl Drop for Inner {
    /// Closes every socket without blocking (no commit, no LeaveGroup: use
    /// [`Consumer::close`] for those) when the last clone goes.
    fn drop(&mut self) {
        let local = self.local.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(engine) = local.engine.take() {
            engine.stop();
        }
        self.events.close();
    }
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("config", &self.inner.config)
            .field("started", &self.local().engine.is_some())
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
                runtime,
                local: Mutex::new(Local {
                    engine: None,
                    pending: Some(core),
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

    /// Runs `f` on the state, wherever it lives now, and wakes the
    /// background task afterwards.
    fn with_core<T>(&self, f: impl FnOnce(&mut ConsumerCore, Instant) -> T) -> T {
        let now = Instant::now();
        let mut local = self.local();
        let t = local.core(|core| f(core, now));
        if let Some(engine) = &local.engine {
            engine.link().kick();
        }
        t
    }

    /// Like [`Consumer::with_core`] without waking the background task: for
    /// changes it need not act on (every wake-up costs the task a pass).
    fn peek_core<T>(&self, f: impl FnOnce(&mut ConsumerCore, Instant) -> T) -> T {
        let now = Instant::now();
        self.local().core(|core| f(core, now))
    }

    fn read_core<T>(&self, f: impl FnOnce(&ConsumerCore) -> T) -> T {
        self.local().core(|core| f(core))
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
        if local.pending.is_some() {
            self.inner.runtime.ready()?;
        }
        if let Some(core) = local.pending.take() {
            let options = SocketOptions {
                keepalive: self.inner.config.socket_keepalive(),
                tls: self.inner.tls.clone(),
            };
            local.engine = Some(Engine::start(
                core,
                options,
                self.inner.events.clone(),
                self.inner.runtime.clone(),
            ));
        }
        Ok(local.engine.as_ref().expect("started").link().clone())
    }

    /// Waits up to `timeout` for records and returns at most
    /// `max.poll.records` of them (an empty batch when none came).
    ///
    /// The first call starts the connections: the least-loaded bootstrap
    /// broker first, then the group coordinator, then each partition
    /// leader. Rebalance listener callbacks and asynchronous commit
    /// callbacks run inside this call.
    ///
    /// ```
    /// # // The same body on whichever runtime feature is enabled.
    /// # let body = async {
    /// # use lazykafka::mock::{MockCluster, MockRecord};
    /// # let mock = MockCluster::new(1).unwrap();
    /// # mock.create_topic("invoices", 1).unwrap();
    /// # mock.produce("invoices", 0, [MockRecord::new("paid")]).unwrap();
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
    /// let mut records = Vec::new();
    /// while records.is_empty() {
    ///     records = consumer.poll(Duration::from_millis(500)).await?;
    /// }
    /// assert_eq!(records[0].value(), Some(&b"paid"[..]));
    /// consumer.close().await?;
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    ///
    /// # Cancel safety
    ///
    /// `poll` is cancel-safe: a `poll` future dropped before it finished
    /// (a timeout around it, the losing branch of a `select!`) took no
    /// record, and the next `poll` returns the records it would have
    /// returned. Records are taken from the fetched buffer only in the
    /// step that returns them, never across an `.await`. The background
    /// task goes on fetching and heartbeating meanwhile.
    ///
    /// # Errors
    ///
    /// Besides the errors of the cluster and the group: built with the
    /// feature `runtime-tokio` alone, a consumer created outside any tokio
    /// runtime starts its background task on the runtime its first `poll`
    /// runs in; where there is none, `poll` returns an [`Error::Config`]
    /// naming `client.runtime` and starts nothing (a later `poll` inside a
    /// tokio runtime starts it).
    pub async fn poll(&self, timeout: Duration) -> Result<Vec<ConsumerRecord>, Error> {
        let max = self.inner.config.max_poll_records().max(1) as usize;
        self.poll_up_to(timeout, max).await
    }

    /// The step of a `poll` that does not wait: the rebalance listener and
    /// commit callbacks, then at most `max` records or an error; `None`
    /// when there is nothing to return yet.
    fn take_now(&self, link: &Link, max: usize) -> Option<Result<Vec<ConsumerRecord>, Error>> {
        // One look at the state: closed, `max.poll.interval.ms` kept,
        // and whether the listener or commit callbacks have work.
        let now = Instant::now();
        let (kick, events, callbacks) = {
            let mut local = self.local();
            if local.closed {
                return Some(Err(Error::Closed));
            }
            let callbacks = !local.callbacks.is_empty();
            let (kick, events) = local.core(|core| (core.polled(now), core.has_group_events()));
            (kick, events && !local.delivering, callbacks)
        };
        if kick {
            link.kick();
        }
        if events {
            self.deliver_group_events();
        }
        if callbacks {
            self.run_commit_callbacks();
        }
        // Emptying a partition's buffer (taking its last records, or
        // dropping buffered ones below the position) makes it fetchable
        // again, and taking an error may let the fetcher go on: the task is
        // woken then, and only then (taking 500 of a buffer's 3,000 records
        // changes nothing it could do).
        //
        // Records are decoded here, between two short holds of the state:
        // the background task goes on meanwhile.
        let mut records = Vec::new();
        let taken = link.shared().lock().take_for_poll(max, &mut records);
        let (had_buffered, mut wake, mut decode) = (taken.had_buffered, taken.wake, taken.decode);
        if let Some(e) = taken.error {
            link.kick();
            return Some(Err(e));
        }
        while !decode.is_empty() {
            let decoded: Vec<_> = decode.into_iter().map(DecodeJob::run).collect();
            let mut state = link.shared().lock();
            let taken = state.take_decoded(decoded, max, &mut records);
            (wake, decode) = (wake || taken.wake, taken.decode);
            if decode.is_empty() && state.has_output() {
                // What was put back and not taken is for another `poll`
                // that may be waiting.
                state.answer_watches();
            }
        }
        if wake {
            link.kick();
        }
        (had_buffered || !records.is_empty()).then_some(Ok(records))
    }

    /// [`Consumer::poll`] returning at most `max` records.
    async fn poll_up_to(
        &self,
        timeout: Duration,
        max: usize,
    ) -> Result<Vec<ConsumerRecord>, Error> {
        let link = self.start()?;
        let deadline = Instant::now() + timeout;
        // One timer for the whole call, however often it is woken.
        let mut timer = None;
        loop {
            if let Some(outcome) = self.take_now(&link, max) {
                return outcome;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            // Answered by the task when there is something to take (a step
            // with nothing for `poll`, a Fetch answered empty or a
            // heartbeat, does not answer it).
            let output = link.watch(None, |core, _| core.has_output().then_some(()));
            let wait = timer.get_or_insert_with(|| link.timer(left));
            futures::select_biased! {
                answer = output.fuse() => {
                    if answer.is_err() {
                        // Stopped: closed by another clone.
                        return Err(Error::Closed);
                    }
                }
                _ = wait.fuse() => {
                    // Fired: a new one if the clocks leave time still.
                    timer = None;
                }
            }
        }
    }

    /// The records as a [`Stream`], as rust-rdkafka's
    /// `StreamConsumer::stream`: each item is a record or an error (errors
    /// end nothing: they are yielded and the stream goes on); it ends when
    /// the consumer is closed. The stream holds a clone of the consumer and
    /// borrows nothing: committing, storing offsets, pausing or seeking
    /// inside the loop works, through the consumer itself.
    ///
    /// The stream takes one record at a time from the consumer, so what the
    /// loop does (a seek, a pause) applies from the next record on, and it
    /// holds no record of its own: dropping it loses nothing, and a dropped
    /// `next()` future neither (the stream keeps its place, as `poll` is
    /// cancel-safe).
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
    /// use futures::StreamExt;
    /// use lazykafka::{Consumer, ConsumerConfig, OffsetReset, TopicPartition};
    ///
    /// let config = ConsumerConfig::builder()
    ///     .bootstrap_servers(&bootstrap)
    ///     .group_id("billing")
    ///     .auto_offset_reset(OffsetReset::Earliest)
    ///     .enable_auto_commit(false)
    ///     .build()?;
    /// let consumer = Consumer::new(config)?;
    /// let p0 = TopicPartition::new("invoices", 0);
    /// consumer.assign([p0.clone()])?;
    /// let mut stream = consumer.stream();
    /// let mut offsets = Vec::new();
    /// while let Some(record) = stream.next().await {
    ///     let record = record?;
    ///     offsets.push(record.offset());
    ///     consumer.store_offset(&record).ok(); // the consumer is usable here
    ///     if offsets.len() == 3 {
    ///         break;
    ///     }
    /// }
    /// assert_eq!(offsets, [0, 1, 2]);
    /// consumer.commit().await?;
    /// assert_eq!(consumer.committed([p0.clone()]).await?[&p0], Some(3));
    /// consumer.close().await?;
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    pub fn stream(&self) -> RecordStream {
        RecordStream {
            consumer: self.clone(),
            polling: None,
        }
    }

    fn run_callbacks(&self) {
        self.deliver_group_events();
        self.run_commit_callbacks();
    }

    /// Gives the group events to the rebalance listener, with no lock held
    /// (the listener may call the consumer), one `poll` at a time: another
    /// `poll` meanwhile leaves them to this one.
    fn deliver_group_events(&self) {
        let listener = {
            let mut local = self.local();
            if local.delivering || !local.core(|core| core.has_group_events()) {
                return;
            }
            local.delivering = true;
            local.core(|core| core.set_listener_busy(true));
            local.listener.take()
        };
        let mut delivering = Delivering {
            consumer: self,
            listener,
        };
        while let Some(event) = self.peek_core(|core, _| core.take_group_event()) {
            if let Some(listener) = delivering.listener.as_mut() {
                match &event {
                    GroupEvent::Assigned(p) => listener.on_partitions_assigned(p),
                    GroupEvent::Revoked(p) => {
                        let positions = self.read_core(|core| core.revoked_positions().clone());
                        let mut revocation = Revocation {
                            consumer: self,
                            positions,
                        };
                        listener.on_partitions_revoked(p, &mut revocation);
                    }
                    GroupEvent::Lost(p) => listener.on_partitions_lost(p),
                }
            }
            self.with_core(|core, _| core.group_event_delivered());
        }
    }

    /// Runs the callbacks of commits that finished, with no lock held.
    fn run_commit_callbacks(&self) {
        let done = {
            let mut local = self.local();
            if local.callbacks.is_empty() {
                return;
            }
            let mut callbacks = std::mem::take(&mut local.callbacks);
            let mut done = Vec::new();
            local.core(|core| {
                let mut i = 0;
                while i < callbacks.len() {
                    match core.take_commit_result(callbacks[i].0) {
                        Some(result) => done.push((callbacks.remove(i).1, result)),
                        None => i += 1,
                    }
                }
            });
            local.callbacks = callbacks;
            if let (Some(engine), false) = (&local.engine, done.is_empty()) {
                engine.link().kick();
            }
            done
        };
        for (callback, result) in done {
            callback(result);
        }
    }

    /// Commits the consumed positions of every assigned partition (with
    /// `enable.auto.offset.store=false`: the offsets stored with
    /// [`Consumer::store_offset`]) and waits for the coordinator's answer.
    ///
    /// # Cancel safety
    ///
    /// The OffsetCommit is sent when the future is first polled. Dropped
    /// before the answer, the commit lands or not (there is no telling
    /// which: read it back with [`Consumer::committed`], or commit again),
    /// and the consumer stays usable: later polls and commits work, and
    /// the dropped commit's outcome is discarded. The same holds for
    /// [`Consumer::commit_offsets`].
    pub async fn commit(&self) -> Result<(), Error> {
        let link = self.start()?;
        let id = self.with_core(|core, now| core.commit(now, None));
        self.wait_commit(&link, id).await
    }

    /// Commits the given offsets (the next offset to consume, per
    /// partition) and waits for the answer.
    pub async fn commit_offsets(
        &self,
        offsets: impl IntoIterator<Item = (TopicPartition, i64)>,
    ) -> Result<(), Error> {
        let link = self.start()?;
        let offsets = at_offsets(offsets);
        let id = self.with_core(|core, now| core.commit(now, Some(offsets)));
        self.wait_commit(&link, id).await
    }

    /// Starts a commit of the consumed positions without waiting; `callback`
    /// runs with the outcome inside a later `poll` (or `commit`, `close`).
    pub fn commit_async(&self, callback: impl FnOnce(Result<(), Error>) + Send + 'static) {
        if let Err(e) = self.start() {
            callback(Err(e));
            return;
        }
        let id = self.with_core(|core, now| core.commit(now, None));
        self.local().callbacks.push((id, Box::new(callback)));
    }

    async fn wait_commit(&self, link: &Link, id: CommitId) -> Result<(), Error> {
        let timeout = self.inner.config.default_api_timeout();
        // Dropped before the answer (a timeout, `select!`): the commit may
        // still land, and its outcome is dropped when it comes.
        let abandon = AbandonCommit {
            link: Some(link.clone()),
            id,
        };
        let result = match link
            .wait(timeout, None, move |core, _| {
                or_refused(core, |core| core.take_commit_result(id))
            })
            .await
        {
            Some(Ok(outcome)) => outcome.and_then(|r| r),
            Some(Err(_stopped)) => Err(Error::Closed),
            None => Err(timed_out(link, "commit", timeout)),
        };
        abandon.answered(!matches!(result, Err(Error::Timeout { .. })));
        self.run_callbacks();
        result
    }

    /// The committed offsets of `partitions` (`None` where nothing is
    /// committed), read from the group coordinator.
    pub async fn committed(
        &self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<BTreeMap<TopicPartition, Option<i64>>, Error> {
        let link = self.start()?;
        let partitions: BTreeSet<TopicPartition> = partitions.into_iter().collect();
        let timeout = self.inner.config.default_api_timeout();
        let deadline = Instant::now() + timeout;
        // A coordinator that moved, is loading its offsets or is briefly
        // unavailable is asked again under the retry policy, as the Java
        // client's `committed` does, until the call's timeout.
        let mut retry = Retry::default();
        loop {
            let Some(q) = self.with_core(|core, now| core.query_committed(now, partitions.clone()))
            else {
                return Err(Error::Config {
                    property: "group.id".into(),
                    reason: "committed offsets belong to a group; set group.id".into(),
                });
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let response = link
                .wait(left, None, move |core, _| {
                    or_refused(core, |core| core.take_query(q))
                })
                .await
                .ok_or_else(|| timed_out(&link, "committed offsets lookup", timeout))?
                .map_err(|_stopped| Error::Closed)??;
            let outcome = match response {
                Ok(response) => self.read_core(|core| core.read_committed_query(&response)),
                Err(source) => Err(Error::Request {
                    api: "OffsetFetch",
                    source,
                }),
            };
            let error = match outcome {
                Ok(offsets) => {
                    return Ok(offsets
                        .into_iter()
                        .map(|(tp, o)| (tp, o.map(|o| o.offset)))
                        .collect())
                }
                Err(e) => e,
            };
            let delay = match &error {
                Error::Group {
                    code: Some(code), ..
                } if matches!(
                    classify(*code),
                    GroupErrorClass::Coordinator | GroupErrorClass::Transient
                ) =>
                {
                    self.with_core(|core, now| core.committed_lookup_failed(now, *code, &mut retry))
                }
                Error::Request { .. } => {
                    self.peek_core(|core, now| core.retry_wait(now, &mut retry))
                }
                _ => return Err(error),
            };
            if Instant::now() + delay >= deadline {
                return Err(error);
            }
            log::debug!("committed offsets lookup: {error}; asked again in {delay:?}");
            link.timer(delay).await;
        }
    }

    /// For each partition, the earliest offset whose timestamp is at or
    /// after the given one (milliseconds since the Unix epoch), with that
    /// record's timestamp; `None` where no such record exists. Asks each
    /// partition's leader (ListOffsets), so it may open leader connections.
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
    /// use lazykafka::{Consumer, ConsumerConfig, TopicPartition};
    ///
    /// let config = ConsumerConfig::builder().bootstrap_servers(&bootstrap).build()?;
    /// let consumer = Consumer::new(config)?;
    /// let p0 = TopicPartition::new("invoices", 0);
    /// // Records at 1000, 2000 and 3000 ms: the first at or after 1500 is offset 1.
    /// let found = consumer.offsets_for_times([(p0.clone(), 1500)]).await?;
    /// let hit = found[&p0].expect("a record at or after 1500 ms");
    /// assert_eq!((hit.offset, hit.timestamp), (1, 2000));
    /// consumer.assign([p0.clone()])?;
    /// consumer.seek(&p0, hit.offset)?;
    /// # consumer.close().await?;
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    pub async fn offsets_for_times(
        &self,
        timestamps: impl IntoIterator<Item = (TopicPartition, i64)>,
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndTimestamp>>, Error> {
        let query = timestamps
            .into_iter()
            .map(|(tp, t)| (tp, OffsetSpec::Timestamp(t)))
            .collect();
        self.list_offsets(query).await
    }

    /// The first offset of each partition.
    pub async fn beginning_offsets(
        &self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<BTreeMap<TopicPartition, i64>, Error> {
        let query = partitions
            .into_iter()
            .map(|tp| (tp, OffsetSpec::Earliest))
            .collect();
        Ok(Self::offsets_only(self.list_offsets(query).await?))
    }

    /// The offset after the last record of each partition (the high
    /// watermark, or the last stable offset under read_committed).
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
    /// use lazykafka::{Consumer, ConsumerConfig, TopicPartition};
    ///
    /// let config = ConsumerConfig::builder().bootstrap_servers(&bootstrap).build()?;
    /// let consumer = Consumer::new(config)?;
    /// let partitions = [TopicPartition::new("invoices", 0), TopicPartition::new("invoices", 1)];
    /// let ends = consumer.end_offsets(partitions.clone()).await?;
    /// let starts = consumer.beginning_offsets(partitions.clone()).await?;
    /// let lag: i64 = partitions.iter().map(|p| ends[p] - starts[p]).sum();
    /// assert_eq!(lag, 6);
    /// # consumer.close().await?;
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    pub async fn end_offsets(
        &self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<BTreeMap<TopicPartition, i64>, Error> {
        let query = partitions
            .into_iter()
            .map(|tp| (tp, OffsetSpec::Latest))
            .collect();
        Ok(Self::offsets_only(self.list_offsets(query).await?))
    }

    fn offsets_only(
        listed: BTreeMap<TopicPartition, Option<OffsetAndTimestamp>>,
    ) -> BTreeMap<TopicPartition, i64> {
        listed
            .into_iter()
            .filter_map(|(tp, o)| o.map(|o| (tp, o.offset)))
            .collect()
    }

    async fn list_offsets(
        &self,
        query: BTreeMap<TopicPartition, OffsetSpec>,
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndTimestamp>>, Error> {
        let link = self.start()?;
        let timeout = self.inner.config.default_api_timeout();
        let deadline = Instant::now() + timeout;
        let partitions: BTreeSet<TopicPartition> = query.keys().cloned().collect();
        // The leaders must be known first.
        link.wait(timeout, None, move |core, _| {
            or_refused(core, |core| {
                core.want_leaders(&partitions).is_empty().then_some(())
            })
        })
        .await
        .ok_or_else(|| timed_out(&link, "offsets lookup (leaders unknown)", timeout))?
        .map_err(|_stopped| Error::Closed)??;
        let queries = link.shared().lock().query_offsets(Instant::now(), &query);
        link.kick();
        let mut out = BTreeMap::new();
        for q in queries {
            let left = deadline.saturating_duration_since(Instant::now());
            let response = link
                .wait(left, None, move |core, _| {
                    or_refused(core, |core| core.take_query(q))
                })
                .await
                .ok_or_else(|| timed_out(&link, "offsets lookup", timeout))?
                .map_err(|_stopped| Error::Closed)??
                .map_err(|source| Error::Request {
                    api: "ListOffsets",
                    source,
                })?;
            out.extend(self.read_core(|core| core.read_offsets_query(&response))?);
        }
        Ok(out)
    }

    /// The partitions of `topic`, in order, as the cluster metadata
    /// describes them (for assigning every partition of a topic).
    ///
    /// Waits up to `default.api.timeout.ms` until the metadata covers the
    /// topic with a leader for each partition, so it may open a connection
    /// (a bootstrap one when none is live). A topic the broker does not
    /// know (and does not create under `allow.auto.create.topics`) ends in
    /// [`Error::Topic`] with its error code once
    /// `topic.metadata.propagation.max.ms` passed, or at once for an error
    /// retrying can't fix (authorization, invalid name). When no broker
    /// answers, [`Error::Timeout`] names the last failure (a refused
    /// connection, say).
    ///
    /// ```
    /// # // The same body on whichever runtime feature is enabled.
    /// # let body = async {
    /// # let mock = lazykafka::mock::MockCluster::new(3).unwrap();
    /// # mock.create_topic("invoices", 3).unwrap();
    /// # let bootstrap = mock.bootstrap_servers();
    /// use lazykafka::{Consumer, ConsumerConfig};
    ///
    /// let config = ConsumerConfig::builder()
    ///     .bootstrap_servers(&bootstrap)
    ///     .build()?;
    /// let consumer = Consumer::new(config)?;
    /// let partitions = consumer.partitions_for("invoices").await?;
    /// assert_eq!(partitions.len(), 3);
    /// consumer.assign(partitions)?;
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    pub async fn partitions_for(&self, topic: &str) -> Result<Vec<TopicPartition>, Error> {
        let link = self.start()?;
        let timeout = self.inner.config.default_api_timeout();
        let asked = Instant::now();
        // Looked at again when the metadata changes, and once the topic's
        // propagation time is over (a retriable error is final then).
        let propagation = asked + self.inner.config.topic_metadata_propagation_max();
        let wanted = topic.to_owned();
        match link
            .wait(timeout, Some(propagation), move |core, now| {
                or_refused(core, |core| core.want_partitions(&wanted, now, asked))
            })
            .await
        {
            Some(Ok(Ok(Ok(partitions)))) => Ok(partitions),
            Some(Ok(Err(refused))) => Err(refused),
            Some(Ok(Ok(Err(code)))) => Err(Error::Topic {
                topic: topic.to_owned(),
                code,
            }),
            Some(Err(_stopped)) => Err(Error::Closed),
            None => match self.read_core(|core| core.topic_error(topic)) {
                Some(code) => Err(Error::Topic {
                    topic: topic.to_owned(),
                    code,
                }),
                None => Err(timed_out(
                    &link,
                    "partitions lookup (topic metadata)",
                    timeout,
                )),
            },
        }
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

    /// The consumer's [metrics](Consumer::metrics) every
    /// `statistics.interval.ms`, as librdkafka's statistics callback gives
    /// them: a stream that yields a [`ConsumerMetrics`] (serde-serializable,
    /// e.g. to JSON) at each interval, from the call on, and ends when the
    /// consumer is closed. Poll it in a task of its own, beside the loop
    /// that polls records. Taking statistics opens no connection and
    /// wakes nothing in the consumer: each item is a look at its state.
    ///
    /// ```
    /// # // The same body on whichever runtime feature is enabled.
    /// # let body = async {
    /// # use lazykafka::mock::{MockCluster, MockRecord};
    /// # let mock = MockCluster::new(1).unwrap();
    /// # mock.create_topic("invoices", 1).unwrap();
    /// # mock.produce("invoices", 0, [MockRecord::new("paid")]).unwrap();
    /// # let bootstrap = mock.bootstrap_servers();
    /// use futures::StreamExt;
    /// use lazykafka::{Consumer, ConsumerConfig, OffsetReset, TopicPartition};
    /// use std::time::Duration;
    ///
    /// let config = ConsumerConfig::builder()
    ///     .bootstrap_servers(&bootstrap)
    ///     .auto_offset_reset(OffsetReset::Earliest)
    ///     .statistics_interval(Duration::from_millis(100))
    ///     .build()?;
    /// let consumer = Consumer::new(config)?;
    /// consumer.assign([TopicPartition::new("invoices", 0)])?;
    /// let mut statistics = consumer.statistics()?;
    /// while consumer.poll(Duration::from_millis(200)).await?.is_empty() {}
    /// let metrics = statistics.next().await.expect("the consumer is open");
    /// let json = serde_json::to_string(&metrics).unwrap();
    /// assert!(json.contains("\"records_consumed\":1"));
    /// consumer.close().await?;
    /// assert!(statistics.next().await.is_none()); // closed: the stream ends
    /// # Ok::<(), lazykafka::Error>(())
    /// # };
    /// # #[cfg(feature = "runtime-async-std")]
    /// # async_std::task::block_on(body).unwrap();
    /// # #[cfg(not(feature = "runtime-async-std"))]
    /// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming `statistics.interval.ms` when it is 0 (the
    /// default: no statistics), or, built with `runtime-tokio` alone, when
    /// called outside a tokio runtime (its timers need one).
    pub fn statistics(&self) -> Result<StatisticsStream, Error> {
        let Some(interval) = self.inner.config.statistics_interval() else {
            return Err(Error::Config {
                property: "statistics.interval.ms".to_owned(),
                reason: "is 0: no statistics are taken; set an interval to have them".to_owned(),
            });
        };
        self.inner.runtime.ready()?;
        Ok(StatisticsStream {
            consumer: self.clone(),
            interval,
            next: Instant::now() + interval,
            sleeping: None,
        })
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

    /// Stores the offset after `record` (its offset + 1, with its leader
    /// epoch) as what the next commit takes for its partition: the record
    /// was processed. Needs `enable.auto.offset.store=false` (with the
    /// default `true`, commits take the consumed positions, and this is an
    /// [`Error::Config`]); the partition must be assigned
    /// ([`Error::NotAssigned`]). Auto-commit, [`Consumer::commit`],
    /// [`Consumer::commit_async`], a commit while revoking (auto-commit)
    /// and [`Consumer::close`] then commit only what was stored, as in
    /// librdkafka. Stored offsets of a partition are forgotten when it is
    /// no longer assigned. Opens nothing.
    ///
    /// ```
    /// use lazykafka::{Consumer, ConsumerConfig, TopicPartition};
    ///
    /// let config = ConsumerConfig::builder()
    ///     .bootstrap_servers("127.0.0.1:9")
    ///     .group_id("billing")
    ///     .enable_auto_offset_store(false)
    ///     .build()?;
    /// let consumer = Consumer::new(config)?;
    /// let tp = TopicPartition::new("invoices", 0);
    /// consumer.assign([tp.clone()])?;
    /// // After processing the record at offset 41:
    /// consumer.store_offsets([(tp.clone(), 42)])?;
    /// assert_eq!(consumer.stored_offsets()[&tp], 42);
    /// assert!(consumer.store_offsets([(TopicPartition::new("other", 0), 1)]).is_err());
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    pub fn store_offset(&self, record: &ConsumerRecord) -> Result<(), Error> {
        let tp = TopicPartition::new(record.topic(), record.partition());
        let o = OffsetAndEpoch {
            offset: record.offset().saturating_add(1),
            leader_epoch: record.leader_epoch(),
        };
        self.peek_core(|core, _| core.store_offsets(BTreeMap::from([(tp, o)])))
    }

    /// Stores offsets (the next offset to consume, per partition) for the
    /// next commit, as [`Consumer::store_offset`] does for one record. All
    /// or nothing: one partition not assigned stores none.
    pub fn store_offsets(
        &self,
        offsets: impl IntoIterator<Item = (TopicPartition, i64)>,
    ) -> Result<(), Error> {
        let offsets = at_offsets(offsets);
        self.peek_core(|core, _| core.store_offsets(offsets))
    }

    /// The offsets stored with [`Consumer::store_offset`] for the next
    /// commit (empty with `enable.auto.offset.store=true`).
    pub fn stored_offsets(&self) -> BTreeMap<TopicPartition, i64> {
        self.read_core(|core| {
            core.stored_offsets()
                .map(|s| s.iter().map(|(tp, o)| (tp.clone(), o.offset)).collect())
                .unwrap_or_default()
        })
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
    /// socket. The consumer can't be used afterwards.
    pub async fn close(&self) -> Result<(), Error> {
        let link = {
            let mut local = self.local();
            if local.closed {
                return Ok(());
            }
            local.closed = true;
            match &local.engine {
                Some(engine) => engine.link().clone(),
                None => {
                    // Never polled: nothing was opened.
                    self.inner.events.close();
                    return Ok(());
                }
            }
        };
        let timeout = self.inner.config.default_api_timeout();
        let commit = link.shared().lock().begin_close(Instant::now());
        link.kick();
        let mut result = Ok(());
        if let Some(id) = commit {
            if let Some(Ok(Ok(Err(e)) | Err(e))) = link
                .wait(timeout, None, move |core, _| {
                    or_refused(core, |core| core.take_commit_result(id))
                })
                .await
            {
                result = Err(e);
            }
        }
        // The partitions are revoked before the member leaves: the rebalance
        // listener hears of it here, and what it commits lands first.
        self.with_core(|core, now| core.prepare_leave(now));
        self.run_callbacks();
        link.wait(timeout, None, |core, _| {
            or_refused(core, |core| core.revocation_commits_done().then_some(()))
        })
        .await;
        self.run_commit_callbacks();
        let leave = link.shared().lock().send_leave(Instant::now());
        link.kick();
        if let Some(id) = leave {
            link.wait(timeout, None, move |core, _| {
                or_refused(core, |core| (!core.is_in_flight(id)).then_some(()))
            })
            .await;
        }
        if let Some(engine) = &self.local().engine {
            engine.stop();
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
