//! The clients' statistics streams: a client's metrics every
//! `statistics.interval.ms`, as librdkafka's statistics callback gives
//! them. One stream serves both clients ([`Consumer::statistics`] and
//! [`Producer::statistics`]); a client hands it a [`Source`]: whether it
//! is closed, a look at its metrics, and its runtime's timer.
//!
//! [`Consumer::statistics`]: crate::Consumer::statistics
//! [`Producer::statistics`]: crate::Producer::statistics

use crate::error::Error;
use crate::runtime::rt::{BoxFuture, Runtime};
use futures::{FutureExt, Stream};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// What a statistics stream looks at: a client (a clone of its handle).
pub(crate) trait Source: Send + 'static {
    /// What each item is.
    type Metrics;
    /// Whether the client was closed: the stream then ends.
    fn closed(&self) -> bool;
    /// A look at the client's state, asking no broker anything.
    fn metrics(&self) -> Self::Metrics;
    /// The runtime whose timer paces the stream.
    fn runtime(&self) -> &Arc<dyn Runtime>;
}

/// A client's metrics every `statistics.interval.ms`, as a [`Stream`]:
/// `StatisticsStream` (of
/// [`ConsumerMetrics`](crate::consumer::metrics::ConsumerMetrics), the
/// consumer's name for it) from
/// [`Consumer::statistics`](crate::Consumer::statistics),
/// `StatisticsStream<ProducerMetrics>` from
/// [`Producer::statistics`](crate::Producer::statistics).
///
/// An item comes at each beat of the interval, counted from the call that
/// made the stream; a stream not polled for several intervals yields one
/// item when it is polled again, then keeps the beat. The stream ends
/// once the client is closed (at once when polled after `close`; a poll
/// already waiting ends at the next beat). It holds a clone of the client
/// and is `Unpin`; taking an item opens no connection and wakes nothing in
/// the client.
pub struct StatisticsStream<M> {
    source: Box<dyn Source<Metrics = M>>,
    interval: Duration,
    next: Instant,
    sleeping: Option<BoxFuture<()>>,
}

impl<M> std::fmt::Debug for StatisticsStream<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatisticsStream")
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl<M: 'static> StatisticsStream<M> {
    /// The stream of `source`'s metrics every `interval`, from now on.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming `statistics.interval.ms` when there is no
    /// interval (it is 0, the default), or when the client's runtime can't
    /// be used here (built with `runtime-tokio` alone, outside a tokio
    /// runtime).
    pub(crate) fn start(
        source: impl Source<Metrics = M>,
        interval: Option<Duration>,
    ) -> Result<Self, Error> {
        let Some(interval) = interval else {
            return Err(Error::Config {
                property: "statistics.interval.ms".to_owned(),
                reason: "is 0: no statistics are taken; set an interval to have them".to_owned(),
            });
        };
        source.runtime().ready()?;
        Ok(StatisticsStream {
            source: Box::new(source),
            interval,
            next: Instant::now() + interval,
            sleeping: None,
        })
    }
}

impl<M: 'static> Stream for StatisticsStream<M> {
    type Item = M;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<M>> {
        let this = &mut *self;
        loop {
            if this.source.closed() {
                this.sleeping = None;
                return Poll::Ready(None);
            }
            if let Some(sleeping) = &mut this.sleeping {
                std::task::ready!(sleeping.poll_unpin(cx));
                this.sleeping = None;
            }
            let now = Instant::now();
            if now >= this.next {
                // One item per interval, on the interval's beat; a stream
                // not polled for a while yields once, not once per
                // interval missed.
                this.next += this.interval;
                if this.next <= now {
                    this.next = now + this.interval;
                }
                return Poll::Ready(Some(this.source.metrics()));
            }
            // Before the beat (or a timer that fired early, on a coarse
            // clock): wait for it.
            this.sleeping = Some(this.source.runtime().sleep(this.next - now));
        }
    }
}
