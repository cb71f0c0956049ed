//! The consumer's streams: its records one at a time ([`RecordStream`],
//! from `Consumer::stream`) and its metrics every `statistics.interval.ms`
//! ([`StatisticsStream`], from `Consumer::statistics`: the stream both
//! clients share, over the consumer as its [`Source`]).

use super::Consumer;
use super::StatisticsStream;
use crate::consumer::metrics::ConsumerMetrics;
use crate::error::Error;
use crate::fetch::ConsumerRecord;
use crate::runtime::rt::Runtime;
use crate::statistics::Source;
use futures::{FutureExt, Stream};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

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

/// What the shared statistics stream looks at: the consumer's state,
/// through a clone of its handle.
impl Source for Consumer {
    type Metrics = ConsumerMetrics;

    fn closed(&self) -> bool {
        self.local().closed
    }

    fn metrics(&self) -> ConsumerMetrics {
        Consumer::metrics(self)
    }

    fn runtime(&self) -> &Arc<dyn Runtime> {
        &self.inner.runtime
    }
}

impl Consumer {
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
        StatisticsStream::start(self.clone(), self.inner.config.statistics_interval())
    }
}
