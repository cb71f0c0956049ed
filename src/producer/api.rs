//! The async producer: a handle on [`ProducerCore`] and the background
//! task that drives it.

use super::core::{lock_front, Front, OutRecord, ProducerCore, Refused, TopicState};
use super::delivery::{BatchOutcome, DeliveryReport, ReportQueue};
use super::partitioner::Partitioner;
use crate::cluster::Changes;
use crate::error::DeliveryError;
use crate::error::{Error, ErrorCode};
use crate::events::{BrokerCounters, ConnectionEvents, ConnectionInfo, EventHub, EVENT_BUFFER};
use crate::runtime::background_task;
use crate::runtime::rt::Runtime;
use crate::runtime::SocketOptions;
use crate::statistics::Source;
/// The stream [`Producer::statistics`] returns: the consumer's, of
/// [`ProducerMetrics`].
pub use crate::statistics::StatisticsStream;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

type Task = background_task::BackgroundTask<ProducerCore>;
type Link = background_task::Link<ProducerCore>;

/// Everything [`Producer::metrics`] reports. Serialisable with serde.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct ProducerMetrics {
    /// When the snapshot was taken, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Records delivered since the producer started.
    pub records_delivered: u64,
    /// Records failed since the producer started.
    pub records_failed: u64,
    /// Records given to `send` and not yet delivered or failed.
    pub records_outstanding: usize,
    /// Bytes of records held (queued or in flight), of `buffer.memory`.
    pub buffered_bytes: usize,
    /// Each partition written to, by topic then partition.
    pub partitions: Vec<ProducerPartitionMetrics>,
    /// Counters per broker address, kept for the producer's life.
    pub brokers: BTreeMap<String, crate::metrics::BrokerMetrics>,
    /// The live connections.
    pub connections: Vec<ConnectionInfo>,
    /// Produce answers that asked the producer to wait before it sends
    /// that broker anything more (`throttle_time_ms`: a quota, KIP-219);
    /// it waits.
    pub throttled_answers: u64,
    /// The longest such wait, in milliseconds.
    pub throttle_time_max_ms: u64,
    /// Metadata requests sent.
    pub metadata_requests: u64,
    /// Partition leaders learned from Produce answers that refused a
    /// batch because the leader moved (KIP-951), used at once with no
    /// Metadata round trip.
    pub leader_hints: u64,
}

/// What the producer did for one partition.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct ProducerPartitionMetrics {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Records delivered.
    pub records: u64,
    /// Records failed.
    pub records_failed: u64,
    /// Batches sent, retries included.
    pub batches: u64,
    /// Bytes of batches sent, as sent (compressed).
    pub bytes: u64,
    /// Uncompressed over compressed bytes of the batches sent (1.0
    /// uncompressed; `None` before the first batch).
    pub compression_ratio: Option<f64>,
    /// Batches sent again after a retriable failure.
    pub retries: u64,
    /// Failed attempts (refusals, lost connections, timeouts).
    pub errors: u64,
    /// Batches the broker found too large (MESSAGE_TOO_LARGE), split in
    /// two and sent again (the Java client's `batch-split-rate`).
    pub splits: u64,
    /// Mean time from a batch's first record to its first sending, in
    /// milliseconds (`linger.ms` and waiting for the leader).
    pub queue_time_ms: Option<f64>,
    /// Mean time from sending a batch to its answer, in milliseconds.
    pub request_latency_ms: Option<f64>,
}

/// A record to send: its topic, and optionally its partition, key, value,
/// headers and timestamp.
///
/// ```
/// use lazykafka::ProducerRecord;
///
/// let record = ProducerRecord::new("invoices")
///     .key("customer-7")
///     .value("paid")
///     .header("source", Some("billing"));
/// assert_eq!(record.topic(), "invoices");
/// ```
#[derive(Debug, Clone)]
pub struct ProducerRecord {
    topic: String,
    partition: Option<i32>,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<(String, Option<Bytes>)>,
    timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A record for `topic` with no key, no value and no header.
    pub fn new(topic: impl Into<String>) -> Self {
        ProducerRecord {
            topic: topic.into(),
            partition: None,
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: None,
        }
    }

    /// Sends it to this partition (else the partitioner chooses).
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Its key.
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Its value.
    pub fn value(mut self, value: impl Into<Bytes>) -> Self {
        self.value = Some(value.into());
        self
    }

    /// Adds a header (keys may repeat).
    pub fn header(mut self, key: impl Into<String>, value: Option<impl Into<Bytes>>) -> Self {
        self.headers.push((key.into(), value.map(Into::into)));
        self
    }

    /// Its timestamp, in milliseconds since the epoch (else the time of
    /// `send`).
    pub fn timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }
}

/// The outcome of one record given to [`Producer::send`]: where it was
/// written, or why it was not. Dropping it changes nothing: the record is
/// still sent.
#[derive(Debug)]
#[must_use = "the record is sent either way; await this to learn where it went"]
pub struct DeliveryFuture {
    /// The outcome of the record's batch, shared with the batch's other
    /// records.
    batch: Arc<BatchOutcome>,
    /// The record's place in the batch.
    index: u32,
    /// The record's timestamp.
    timestamp: i64,
}

impl Future for DeliveryFuture {
    type Output = Result<super::RecordMetadata, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.batch
            .poll(self.index, self.timestamp, cx.waker())
            .map(|outcome| outcome.map_err(Error::Delivery))
    }
}

/// The stream of [`Producer::delivery_reports`]: each record given to
/// [`Producer::send_reported`], reported once its batch is decided. Takes
/// every report ready under one lock, then yields them one by one.
#[derive(Debug)]
pub struct DeliveryReports {
    queue: Arc<ReportQueue>,
    taken: std::collections::VecDeque<DeliveryReport>,
}

impl futures::Stream for DeliveryReports {
    type Item = DeliveryReport;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<DeliveryReport>> {
        let this = &mut *self;
        if let Some(report) = this.taken.pop_front() {
            return Poll::Ready(Some(report));
        }
        match this.queue.poll_take(&mut this.taken, cx.waker()) {
            Poll::Ready(true) => Poll::Ready(this.taken.pop_front()),
            Poll::Ready(false) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// An async Kafka producer: idempotent by default, careful with
/// connections as the [`Consumer`](crate::Consumer) is. `Clone + Send +
/// Sync`: clones share one producer (one background task, one set of
/// connections).
///
/// Nothing is opened by `new`. The first [`Producer::send`] connects to
/// one bootstrap address and asks Metadata for the topics produced to
/// only; then each partition leader with records waiting gets one
/// connection; the bootstrap connection is retired (or kept as the leader
/// connection when that broker leads).
///
/// ```
/// # let body = async {
/// # let mock = lazykafka::mock::MockCluster::new(1).unwrap();
/// # mock.create_topic("invoices", 1).unwrap();
/// # let bootstrap = mock.bootstrap_servers();
/// use lazykafka::{Producer, ProducerConfig, ProducerRecord};
///
/// let config = ProducerConfig::builder().bootstrap_servers(&bootstrap).build()?;
/// let producer = Producer::new(config)?; // no socket, no task
/// let delivery = producer
///     .send(ProducerRecord::new("invoices").key("c-7").value("paid"))
///     .await?;
/// let written = delivery.await?;
/// assert_eq!((written.partition, written.offset), (0, 0));
/// producer.close_timeout(std::time::Duration::from_secs(5)).await?;
/// # Ok::<(), lazykafka::Error>(())
/// # };
/// # #[cfg(feature = "runtime-async-std")]
/// # async_std::task::block_on(body).unwrap();
/// # #[cfg(not(feature = "runtime-async-std"))]
/// # tokio::runtime::Runtime::new().unwrap().block_on(body).unwrap();
/// ```
#[derive(Clone)]
pub struct Producer {
    inner: Arc<Inner>,
}

struct Inner {
    config: crate::ProducerConfig,
    tls: Option<crate::tls::TlsConnector>,
    events: Arc<EventHub>,
    runtime: Arc<dyn Runtime>,
    local: Mutex<Local>,
    /// The state the calls and the background task share: the core, made
    /// with the producer, driven by the task from the first `send` on.
    link: Link,
    /// The core's way in for records, which `send` appends through
    /// without the lock the task drives the core under.
    front: Arc<Mutex<Front>>,
    /// Whether the task runs: what `send` checks, without taking `local`'s
    /// lock.
    started: std::sync::atomic::AtomicBool,
    /// Set by `close`, read by every call.
    closed: std::sync::atomic::AtomicBool,
    /// The reports of the records given to `send_reported`.
    reports: Arc<ReportQueue>,
}

struct Local {
    /// The background task, from the first call that needs the network.
    task: Option<Task>,
    closed: bool,
}

impl Drop for Inner {
    /// Closes every socket without waiting (records not yet delivered fail
    /// with [`DeliveryError::Closed`]: use [`Producer::close`] to deliver
    /// them first) when the last clone goes.
    fn drop(&mut self) {
        let local = self.local.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(task) = local.task.take() {
            task.stop();
        }
        self.events.close();
        if let Some(waker) = self.reports.close() {
            waker.wake();
        }
    }
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("config", &self.inner.config)
            .field("started", &self.local().task.is_some())
            .finish_non_exhaustive()
    }
}

fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn seed() -> u64 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    t.as_nanos() as u64 ^ u64::from(std::process::id()).rotate_left(32)
}

impl Producer {
    /// A producer for `config`. Opens nothing: no socket, no DNS lookup, no
    /// task.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for TLS settings that cannot be used, or a
    /// `client.runtime` that is not built.
    pub fn new(config: crate::ProducerConfig) -> Result<Self, Error> {
        Self::build(config, None)
    }

    /// A producer whose records that name no partition are placed by
    /// `partitioner` (keyed or not), as the Java client's
    /// `partitioner.class`. Records that name a partition keep it.
    ///
    /// ```
    /// use lazykafka::producer::Partitioner;
    /// use lazykafka::{Producer, ProducerConfig};
    ///
    /// /// Every record to the last partition.
    /// struct Last;
    /// impl Partitioner for Last {
    ///     fn partition(&self, _: &str, _: Option<&[u8]>, _: Option<&[u8]>, count: i32) -> i32 {
    ///         count - 1
    ///     }
    /// }
    /// let config = ProducerConfig::builder().bootstrap_servers("127.0.0.1:9").build()?;
    /// let producer = Producer::with_partitioner(config, Last)?;
    /// # Ok::<(), lazykafka::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Producer::new`].
    pub fn with_partitioner(
        config: crate::ProducerConfig,
        partitioner: impl Partitioner + 'static,
    ) -> Result<Self, Error> {
        Self::build(config, Some(Arc::new(partitioner)))
    }

    fn build(
        config: crate::ProducerConfig,
        partitioner: Option<Arc<dyn Partitioner>>,
    ) -> Result<Self, Error> {
        let tls = crate::tls::TlsConnector::from_config(&config)?;
        let runtime = crate::runtime::rt::select(config.client_runtime())?;
        let mut core = ProducerCore::from_config(&config, Instant::now(), seed());
        core.set_partitioner(partitioner);
        let front = core.front();
        Ok(Producer {
            inner: Arc::new(Inner {
                config,
                tls,
                front,
                events: Arc::new(EventHub::default()),
                link: Link::new(core, runtime.clone()),
                started: std::sync::atomic::AtomicBool::new(false),
                runtime,
                local: Mutex::new(Local {
                    task: None,
                    closed: false,
                }),
                closed: std::sync::atomic::AtomicBool::new(false),
                reports: Arc::default(),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &crate::ProducerConfig {
        &self.inner.config
    }

    fn local(&self) -> MutexGuard<'_, Local> {
        self.inner
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn read_core<T>(&self, f: impl FnOnce(&mut ProducerCore) -> T) -> T {
        f(&mut self.inner.link.shared().lock())
    }

    /// Starts the background task if it does not run yet.
    fn start(&self) -> Result<&Link, Error> {
        if self.inner.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self
            .inner
            .started
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return Ok(&self.inner.link);
        }
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
            self.inner
                .started
                .store(true, std::sync::atomic::Ordering::Release);
        }
        Ok(&self.inner.link)
    }

    /// Queues `record` and returns the future of its delivery.
    ///
    /// Waits (up to `max.block.ms`) only for what queueing needs: the
    /// topic's metadata the first time the topic is produced to, and room
    /// in `buffer.memory` while it is full. The record goes out with
    /// others of its partition once `linger.ms` passed or `batch.size`
    /// filled.
    ///
    /// A topic that does not exist and that the cluster does not create
    /// (the brokers' `auto.create.topics.enable` off, or
    /// `allow.auto.create.topics=false`) fails the `send` within seconds,
    /// not after `max.block.ms`: once a Metadata answer that came at least
    /// `topic.metadata.propagation.max.ms` (5 s) after the first one that
    /// said UNKNOWN_TOPIC_OR_PARTITION for it says so too, every answer in
    /// between having said the same. The answers are asked for on the
    /// retry policy's backoff (`retry.backoff.ms` doubling to
    /// `retry.backoff.max.ms`, ±20%): with the defaults the ninth answer
    /// or so decides, 5 to 6.6 s after the first. A topic created a moment ago
    /// has that long to reach the broker that answers; later `send`s fail
    /// at once while the answers go on saying so, and one after the topic
    /// appears is queued as usual.
    ///
    /// # Errors
    ///
    /// [`Error::Topic`] for a topic the cluster refuses for good (not
    /// authorised: TOPIC_AUTHORIZATION_FAILED; a name Kafka refuses:
    /// INVALID_TOPIC_EXCEPTION), as soon as a Metadata answer says so;
    /// [`Error::Delivery`] with [`DeliveryError::UnknownTopic`] (the topic,
    /// the code) for a topic that does not exist (above): not retriable,
    /// the record is not queued; [`Error::Authentication`],
    /// [`Error::Connection`] or [`Error::BrokersUnreachable`] when the
    /// cluster refuses the producer or no bootstrap address answers (said
    /// within seconds); [`Error::Timeout`] when `max.block.ms` passed before the
    /// metadata came or room was made;
    /// [`Error::Partitioner`] for a partition outside the topic;
    /// [`Error::Config`] for a record larger than `max.request.size`;
    /// [`Error::Closed`] after [`Producer::close`].
    pub async fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture, Error> {
        let (batch, index, timestamp) = self.queue(record).await?;
        Ok(DeliveryFuture {
            batch,
            index,
            timestamp,
        })
    }

    /// Queues `record` as [`Producer::send`] does, with no future of its
    /// own: its outcome comes with `token` (any number the application
    /// keys its records by) in the stream of
    /// [`Producer::delivery_reports`]. The way to produce at high volume:
    /// a record costs no allocation of its own, and each decided batch
    /// adds its records' reports to the stream under one lock and one
    /// wake, where awaiting a future per record (in a
    /// `FuturesUnordered`, say) wakes each record's task. This is the
    /// delivery-report queue librdkafka's producer is polled for, and
    /// rust-rdkafka's `BaseProducer` delivers from.
    ///
    /// Reports come in the order batches are decided: in send order
    /// within a partition, interleaved across partitions. The records of
    /// `send` and `send_reported` may be mixed; only the latter are
    /// reported.
    ///
    /// ```
    /// # let body = async {
    /// # let mock = lazykafka::mock::MockCluster::new(1).unwrap();
    /// # mock.create_topic("clicks", 3).unwrap();
    /// # let bootstrap = mock.bootstrap_servers();
    /// use futures::StreamExt;
    /// use lazykafka::{Producer, ProducerConfig, ProducerRecord};
    ///
    /// let config = ProducerConfig::builder().bootstrap_servers(&bootstrap).build()?;
    /// let producer = Producer::new(config)?;
    /// let mut reports = producer.delivery_reports();
    /// for i in 0..1000u64 {
    ///     let record = ProducerRecord::new("clicks").key(format!("user-{}", i % 7)).value("click");
    ///     producer.send_reported(record, i).await?;
    /// }
    /// producer.close_timeout(std::time::Duration::from_secs(5)).await?;
    /// // After `close`, the stream ends once every record is reported.
    /// let mut delivered = 0;
    /// while let Some(report) = reports.next().await {
    ///     assert!(report.token < 1000);
    ///     delivered += usize::from(report.outcome.is_ok());
    /// }
    /// assert_eq!(delivered, 1000);
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
    /// As [`Producer::send`]'s: a record refused here is not queued and
    /// not reported.
    pub async fn send_reported(&self, record: ProducerRecord, token: u64) -> Result<(), Error> {
        let (batch, index, timestamp) = self.queue(record).await?;
        if let Some(waker) = batch.report(index, token, timestamp, &self.inner.reports) {
            waker.wake();
        }
        Ok(())
    }

    /// The reports of the records given to [`Producer::send_reported`],
    /// from now on: a stream that yields each record's
    /// [`DeliveryReport`] once its batch is decided, and ends once the
    /// producer is closed and every record given to `send_reported` has
    /// been reported. Meant for one reader: the streams of two calls
    /// share the reports (each goes to one of them). It opens nothing and
    /// keeps the producer from nothing (its connections close when the
    /// last `Producer` clone goes).
    pub fn delivery_reports(&self) -> DeliveryReports {
        DeliveryReports {
            queue: self.inner.reports.clone(),
            taken: std::collections::VecDeque::new(),
        }
    }

    /// Queues `record` (what `send` and `send_reported` share): its batch's
    /// outcome, its place in the batch and its timestamp.
    async fn queue(&self, record: ProducerRecord) -> Result<(Arc<BatchOutcome>, u32, i64), Error> {
        let link = self.start()?;
        let max_block = self.inner.config.max_block();
        // Set when the call first has to wait: an append that goes in at
        // once reads no monotonic clock (the core reads one only for a
        // record that opens a batch).
        let mut deadline: Option<Instant> = None;
        let mut out = OutRecord {
            topic: record.topic,
            partition: record.partition,
            key: record.key,
            value: record.value,
            headers: record.headers,
            timestamp: record.timestamp.unwrap_or_else(wall_clock_ms),
        };
        // One lock when the topic is known and there is room: the usual
        // case. It is the lock of the records' way in, not the one the
        // background task holds while it reads answers and writes
        // requests. Otherwise the record comes back, and the call waits
        // for what is missing (up to `max.block.ms` in all) and tries
        // again.
        loop {
            let timestamp = out.timestamp;
            let refused = lock_front(&self.inner.front).append(Instant::now, out);
            let mut left = || {
                let deadline = *deadline.get_or_insert_with(|| Instant::now() + max_block);
                deadline.saturating_duration_since(Instant::now())
            };
            match refused {
                Ok(queued) => {
                    // A record that joins an open batch changes nothing
                    // the task waits for: it is not woken for it.
                    if queued.news {
                        link.kick();
                    }
                    return Ok((queued.outcome, queued.index, timestamp));
                }
                Err(Refused::Invalid(e)) => return Err(e),
                Err(Refused::Unknown(back)) => {
                    out = *back;
                    wait_for_topic(link, &out.topic, left(), max_block).await?;
                }
                Err(Refused::Full(back)) => {
                    out = *back;
                    let needed = out.key.as_ref().map_or(0, Bytes::len)
                        + out.value.as_ref().map_or(0, Bytes::len);
                    wait_for_room(link, needed, left(), max_block).await?;
                }
            }
        }
    }

    /// Sends every queued record now (without waiting for `linger.ms`)
    /// and waits up to `timeout` until each record given so far is
    /// delivered or failed.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] when records are still outstanding after
    /// `timeout` (they stay queued).
    pub async fn flush(&self, timeout: Duration) -> Result<(), Error> {
        let link = {
            let local = self.local();
            match &local.task {
                Some(_) => self.inner.link.clone(),
                // Never sent: nothing to flush.
                None => return Ok(()),
            }
        };
        let marker = link.shared().lock().flush();
        let answer = link
            .wait(timeout, None, Changes::DELIVERIES, move |core, _| {
                if core.flush_done(marker) {
                    Some(Ok(()))
                } else {
                    // Refused by the cluster: said now, not after
                    // `timeout`; the records stay queued.
                    core.refusal().map(Err)
                }
            })
            .await;
        match answer {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(Error::Closed),
            None => Err(Error::Timeout {
                what: "flush",
                after: timeout,
                last_error: Some(format!(
                    "{} records not yet delivered",
                    link.shared().lock().outstanding()
                )),
            }),
        }
    }

    /// The partitions of `topic`, in order, waiting up to `max.block.ms`
    /// for its metadata (which may open a connection); as
    /// [`Consumer::partitions_for`](crate::Consumer::partitions_for).
    ///
    /// # Errors
    ///
    /// [`Error::Topic`] with the code for a topic the cluster refuses
    /// (at once for TOPIC_AUTHORIZATION_FAILED or INVALID_TOPIC_EXCEPTION)
    /// or that does not exist (UNKNOWN_TOPIC_OR_PARTITION in every
    /// Metadata answer for `topic.metadata.propagation.max.ms`, as for
    /// [`Producer::send`]); the refusals `send` names; [`Error::Timeout`]
    /// when `max.block.ms` passed first; [`Error::Closed`] after `close`.
    pub async fn partitions_for(
        &self,
        topic: &str,
    ) -> Result<Vec<crate::group::TopicPartition>, Error> {
        let link = self.start()?;
        let max_block = self.inner.config.max_block();
        let wanted = topic.to_owned();
        let answer = link
            .wait(max_block, None, Changes::METADATA, move |core, now| {
                core.use_topic(now, &wanted);
                core.partitions(&wanted).map(Ok).or_else(|| {
                    gives_up(core, &wanted, |topic, code, _| Error::Topic { topic, code }).map(Err)
                })
            })
            .await;
        match answer {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(Error::Closed),
            None => Err(Error::Timeout {
                what: "partitions_for",
                after: max_block,
                last_error: link.shared().lock().last_problem(),
            }),
        }
    }

    /// Delivers what is queued, then closes every connection: as
    /// [`Producer::close_timeout`] with `delivery.timeout.ms` (by then every
    /// record queued is delivered or has failed). The Java producer's
    /// `close()`; [`Consumer::close`](crate::Consumer::close) likewise waits
    /// a bound set by the configuration.
    pub async fn close(&self) -> Result<(), Error> {
        self.close_timeout(self.inner.config.delivery_timeout())
            .await
    }

    /// Delivers what is queued (waiting up to `timeout`), then closes every
    /// connection. Records still outstanding then fail with
    /// [`DeliveryError::Closed`](super::DeliveryError::Closed), and the
    /// call returns [`Error::Timeout`]. The producer can't be used
    /// afterwards; closing it again returns at once.
    pub async fn close_timeout(&self, timeout: Duration) -> Result<(), Error> {
        let flushed = self.flush(timeout).await;
        let mut local = self.local();
        if local.closed {
            return Ok(());
        }
        local.closed = true;
        self.inner
            .closed
            .store(true, std::sync::atomic::Ordering::Release);
        // The task stays, stopped: its state still answers `metrics`,
        // `connections` and `broker_counters`.
        match &local.task {
            Some(task) => task.stop(),
            None => self.inner.events.close(),
        }
        drop(local);
        if let Some(waker) = self.inner.reports.close() {
            waker.wake();
        }
        flushed
    }

    /// The live connections, with their purpose.
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.read_core(|core| core.io().connections(Instant::now()))
    }

    /// Counters per broker address.
    pub fn broker_counters(&self) -> BTreeMap<String, BrokerCounters> {
        self.read_core(|core| core.io().counters().clone())
    }

    /// Every connection event from now on (opened, ready, closed, with
    /// purpose and reason), as the consumer's.
    pub fn connection_events(&self) -> ConnectionEvents {
        self.inner.events.subscribe(EVENT_BUFFER)
    }

    /// The producer's [metrics](Producer::metrics) every
    /// `statistics.interval.ms`, as librdkafka's statistics callback gives
    /// them (and as [`Consumer::statistics`](crate::Consumer::statistics)
    /// does): a stream that yields a [`ProducerMetrics`]
    /// (serde-serializable, e.g. to JSON) at each interval, from the call
    /// on, and ends when the producer is closed. Poll it in a task of its
    /// own, beside the code that sends. Taking statistics opens no
    /// connection and wakes nothing in the producer (before the first
    /// `send` too): each item is a look at its state.
    ///
    /// ```
    /// # // The same body on whichever runtime feature is enabled.
    /// # let body = async {
    /// # let mock = lazykafka::mock::MockCluster::new(1).unwrap();
    /// # mock.create_topic("invoices", 1).unwrap();
    /// # let bootstrap = mock.bootstrap_servers();
    /// use futures::StreamExt;
    /// use lazykafka::{Producer, ProducerConfig, ProducerRecord};
    /// use std::time::Duration;
    ///
    /// let config = ProducerConfig::builder()
    ///     .bootstrap_servers(&bootstrap)
    ///     .statistics_interval(Duration::from_millis(100))
    ///     .build()?;
    /// let producer = Producer::new(config)?;
    /// let mut statistics = producer.statistics()?;
    /// producer.send(ProducerRecord::new("invoices").value("paid")).await?.await?;
    /// let metrics = statistics.next().await.expect("the producer is open");
    /// let json = serde_json::to_string(&metrics).unwrap();
    /// assert!(json.contains("\"records_delivered\":1"));
    /// producer.close_timeout(Duration::from_secs(5)).await?;
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
    pub fn statistics(&self) -> Result<StatisticsStream<ProducerMetrics>, Error> {
        StatisticsStream::start(self.clone(), self.inner.config.statistics_interval())
    }

    /// A snapshot for monitoring: per partition written to its records,
    /// batches, bytes, compression ratio, queue time, request latency,
    /// retries and errors; per broker requests, bytes, round trips,
    /// connects and errors; the live connections. It asks no broker
    /// anything.
    pub fn metrics(&self) -> ProducerMetrics {
        let now = Instant::now();
        self.read_core(|core| {
            let mean =
                |total: Duration, n: u64| (n > 0).then(|| total.as_secs_f64() * 1e3 / n as f64);
            let (records_delivered, records_failed) = core.counts();
            let (throttled_answers, throttle_max) = core.throttles();
            let (metadata_requests, leader_hints) = core.io().metadata_counts();
            ProducerMetrics {
                at_ms: wall_clock_ms().max(0) as u64,
                records_delivered,
                records_failed,
                records_outstanding: core.outstanding(),
                buffered_bytes: core.buffered_bytes(),
                partitions: core
                    .partition_counters()
                    .iter()
                    .map(|(tp, c)| ProducerPartitionMetrics {
                        topic: tp.topic.clone(),
                        partition: tp.partition,
                        records: c.records,
                        records_failed: c.records_failed,
                        batches: c.batches,
                        bytes: c.bytes,
                        compression_ratio: (c.bytes > 0)
                            .then(|| c.uncompressed_bytes as f64 / c.bytes as f64),
                        retries: c.retries,
                        errors: c.errors,
                        splits: c.splits,
                        queue_time_ms: mean(c.queue_time, c.first_sent),
                        request_latency_ms: mean(c.latency, c.answered),
                    })
                    .collect(),
                brokers: core
                    .io()
                    .counters()
                    .iter()
                    .map(|(addr, c)| (addr.clone(), c.into()))
                    .collect(),
                connections: core.io().connections(now),
                throttled_answers,
                throttle_time_max_ms: throttle_max.as_millis() as u64,
                metadata_requests,
                leader_hints,
            }
        })
    }
}

/// What the shared statistics stream looks at: the producer's state,
/// through a clone of its handle.
impl Source for Producer {
    type Metrics = ProducerMetrics;

    fn closed(&self) -> bool {
        self.inner.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    fn metrics(&self) -> ProducerMetrics {
        Producer::metrics(self)
    }

    fn runtime(&self) -> &Arc<dyn Runtime> {
        &self.inner.runtime
    }
}

/// Waits up to `left` (of `max_block` in all) until the cluster knows
/// `topic`'s partitions, asking for its metadata; a topic the cluster
/// refuses for good fails at once.
async fn wait_for_topic(
    link: &Link,
    topic: &str,
    left: Duration,
    max_block: Duration,
) -> Result<(), Error> {
    let wanted = topic.to_owned();
    let answer = link
        .wait(left, None, Changes::METADATA, move |core, now| {
            core.use_topic(now, &wanted);
            if let TopicState::Known(_) = core.topic_state(&wanted) {
                // The records' way in learns it before `send` appends again.
                core.sync_front();
                return Some(Ok(()));
            }
            // Not there for topic.metadata.propagation.max.ms: the record
            // is not kept.
            gives_up(core, &wanted, |topic, code, after| {
                Error::Delivery(DeliveryError::UnknownTopic { topic, code, after })
            })
            .map(Err)
        })
        .await;
    match answer {
        Some(Ok(result)) => result,
        Some(Err(_stopped)) => Err(Error::Closed),
        None => {
            let (state, last) = {
                let core = link.shared().lock();
                (core.topic_state(topic), core.last_problem())
            };
            let last = match state {
                TopicState::Failed(code) => format!("topic {topic:?}: {code} in the metadata"),
                _ => last.unwrap_or_else(|| format!("no partitions known for topic {topic}")),
            };
            Err(Error::Timeout {
                what: "send (the topic's metadata)",
                after: max_block,
                last_error: Some(last),
            })
        }
    }
}

/// Why a call waiting for `topic`'s metadata gives up now, if it does: the
/// cluster refuses the topic for good (TOPIC_AUTHORIZATION_FAILED,
/// INVALID_TOPIC_EXCEPTION: [`Error::Topic`], as soon as an answer says
/// so), every Metadata answer for `topic.metadata.propagation.max.ms` said
/// it does not exist (the error `missing` makes of the topic, the code and
/// how long), or the cluster refuses the producer
/// ([`ProducerCore::refusal`]).
fn gives_up(
    core: &ProducerCore,
    topic: &str,
    missing: impl FnOnce(String, ErrorCode, Duration) -> Error,
) -> Option<Error> {
    match core.topic_state(topic) {
        TopicState::Failed(code) if !code.is_retriable() => Some(Error::Topic {
            topic: topic.to_owned(),
            code,
        }),
        TopicState::Missing { code, after } => Some(missing(topic.to_owned(), code, after)),
        // Refused by the cluster: said now, not after max.block.ms.
        _ => core.refusal(),
    }
}

/// Waits up to `left` (of `max_block` in all) until `buffer.memory` has
/// room for `needed` bytes.
async fn wait_for_room(
    link: &Link,
    needed: usize,
    left: Duration,
    max_block: Duration,
) -> Result<(), Error> {
    let room = link
        .wait(left, None, Changes::DELIVERIES, move |core, _| {
            core.has_room(needed).then_some(())
        })
        .await;
    match room {
        Some(Ok(())) => Ok(()),
        Some(Err(_stopped)) => Err(Error::Closed),
        None => Err(Error::Timeout {
            what: "send (room in buffer.memory)",
            after: max_block,
            last_error: None,
        }),
    }
}

#[cfg(all(test, feature = "mock"))]
mod tests {
    use super::*;
    use futures::FutureExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    /// Runs futures to completion on one runtime, kept for the test's
    /// length (a producer stays on the runtime it started on).
    struct Runner {
        #[cfg(not(feature = "runtime-async-std"))]
        rt: tokio::runtime::Runtime,
    }

    impl Runner {
        fn new() -> Self {
            Runner {
                #[cfg(not(feature = "runtime-async-std"))]
                rt: tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .expect("tokio runtime"),
            }
        }

        fn block_on<F: Future>(&self, future: F) -> F::Output {
            #[cfg(not(feature = "runtime-async-std"))]
            {
                self.rt.block_on(future)
            }
            #[cfg(feature = "runtime-async-std")]
            {
                async_std::task::block_on(future)
            }
        }
    }

    /// A `send` to a topic whose metadata is known queues its record under
    /// the lock of the records' way in only: while another thread holds the
    /// lock the background task drives the core under, records still go
    /// in, each `send` ready at its first poll.
    #[test]
    fn a_send_does_not_wait_for_the_lock_the_task_drives_under() {
        let mock = crate::mock::MockCluster::new(1).unwrap();
        mock.create_topic("front", 3).unwrap();
        let config = crate::ProducerConfig::builder()
            .bootstrap_servers(mock.bootstrap_servers())
            .build()
            .unwrap();
        let runner = Runner::new();
        let producer = runner.block_on(async {
            let producer = Producer::new(config).unwrap();
            let first = producer.send(ProducerRecord::new("front").value("first"));
            first.await.unwrap().await.unwrap();
            producer
        });
        // Another thread holds the client's lock until told to let go, or
        // until its deadline, which only a `send` that waits for the lock
        // lets pass.
        let (release, released) = mpsc::channel::<()>();
        let (locked_tx, locked_rx) = mpsc::channel::<()>();
        let gave_up = Arc::new(AtomicBool::new(false));
        let holder = {
            let inner = producer.inner.clone();
            let gave_up = gave_up.clone();
            std::thread::spawn(move || {
                let _held = inner.link.shared().lock();
                locked_tx.send(()).unwrap();
                if released.recv_timeout(Duration::from_secs(10)).is_err() {
                    gave_up.store(true, Ordering::SeqCst);
                }
            })
        };
        locked_rx.recv().unwrap();
        let mut reports = producer.delivery_reports();
        let mut queued = 0;
        for i in 0..100u64 {
            let record = ProducerRecord::new("front").value(format!("while held {i}"));
            match producer.send_reported(record, i).now_or_never() {
                Some(Ok(())) => queued += 1,
                other => panic!("send {i} did not queue at once: {other:?}"),
            }
        }
        release.send(()).unwrap();
        holder.join().unwrap();
        assert!(
            !gave_up.load(Ordering::SeqCst),
            "the sends waited for the client's lock until its holder gave up"
        );
        assert_eq!(queued, 100);
        runner.block_on(async {
            producer
                .close_timeout(Duration::from_secs(10))
                .await
                .unwrap();
            let mut delivered = 0;
            while let Some(report) = futures::StreamExt::next(&mut reports).await {
                delivered += usize::from(report.outcome.is_ok());
            }
            assert_eq!(delivered, 100);
        });
    }
}
