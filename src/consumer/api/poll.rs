//! `Consumer::poll`: the step that takes what is ready without waiting
//! (the rebalance listener and commit callbacks run first), and the wait
//! for the background task to have something.

use super::{Consumer, Link};
use crate::cluster::Changes;
use crate::error::Error;
use crate::fetch::{ConsumerRecord, DecodeJob};
use futures::FutureExt;
use std::time::{Duration, Instant};

impl Consumer {
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
    pub(super) fn take_now(
        &self,
        link: &Link,
        max: usize,
    ) -> Option<Result<Vec<ConsumerRecord>, Error>> {
        // Closed, and whether commit callbacks wait or another `poll`
        // gives the listener its events: looked at, then let go, before the
        // state is taken (the two are never held together here).
        let now = Instant::now();
        let (callbacks, delivering) = {
            let local = self.local();
            if local.closed {
                return Some(Err(Error::Closed));
            }
            (!local.callbacks.is_empty(), local.delivering)
        };
        // One hold of the state in the steady state: `max.poll.interval.ms`
        // kept and, when neither the listener nor commit callbacks have
        // work first, the records taken.
        //
        // Emptying a partition's buffer (taking its last records, or
        // dropping buffered ones below the position) makes it fetchable
        // again, and taking an error may let the fetcher go on: the task is
        // woken then, and only then (taking 500 of a buffer's 3,000 records
        // changes nothing it could do).
        //
        // Records are decoded here, between two short holds of the state:
        // the background task goes on meanwhile.
        let mut records = Vec::new();
        let (kick, events, taken) = {
            let mut core = link.shared().lock();
            let kick = core.polled(now);
            let events = !delivering && core.has_group_events();
            let taken = (!events && !callbacks).then(|| core.take_for_poll(max, &mut records));
            (kick, events, taken)
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
        let taken = taken.unwrap_or_else(|| link.shared().lock().take_for_poll(max, &mut records));
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
                state.answer_watches(Changes::OUTPUT);
            }
        }
        if wake {
            link.kick();
        }
        (had_buffered || !records.is_empty()).then_some(Ok(records))
    }

    /// [`Consumer::poll`] returning at most `max` records.
    pub(super) async fn poll_up_to(
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
            let output = link.watch(None, Changes::OUTPUT, |core, _| {
                core.has_output().then_some(())
            });
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
}
