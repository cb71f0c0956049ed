//! What a producer says about each record it was given: where it was
//! written, or why it was not.

use crate::error::DeliveryError;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Waker;

/// Where a record was written: its partition, offset and timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordMetadata {
    /// The topic (shared by the records of a batch: a record's metadata
    /// costs no allocation of its own).
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The record's offset; -1 when the broker did not say (a batch it had
    /// written already, recognised by its sequence number, is answered
    /// without one by older brokers).
    pub offset: i64,
    /// The record's timestamp: the one it was sent with, or the broker's
    /// append time for a topic with `message.timestamp.type=LogAppendTime`.
    pub timestamp: i64,
}

/// Where a batch was written: what its records' metadata is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Written {
    /// The first record's offset, -1 when the broker did not say.
    pub base_offset: i64,
    /// The broker's append time, -1 for the records' own timestamps.
    pub append_time: i64,
}

/// The outcome of one batch, shared by the futures of its records: decided
/// once for the whole batch by the producer's core (or once for each part,
/// when the broker found the batch too large and it was split), read by
/// each record's future with its place in the batch. One allocation per
/// batch, not per record.
#[derive(Debug)]
pub(crate) struct BatchOutcome {
    topic: Arc<str>,
    partition: i32,
    state: Mutex<OutcomeState>,
}

#[derive(Debug, Default)]
struct OutcomeState {
    /// The parts decided: one for a whole batch, or one per part of a
    /// batch that was split.
    decided: Vec<Decided>,
    /// The futures waiting, by their place in the batch (places are
    /// dense from 0, so a poll finds its slot at once).
    waiting: Vec<Option<Waker>>,
    /// The records given to `Producer::send_reported`: their place, token
    /// and timestamp, in place order; and where their reports go.
    reported: Vec<(u32, u64, i64)>,
    reports: Option<Arc<ReportQueue>>,
}

/// The outcome of the records of a batch from `start` up to `end` (places
/// in the batch as appended); `Written::base_offset` is the offset of the
/// record at `start`.
#[derive(Debug)]
struct Decided {
    start: u32,
    end: u32,
    outcome: Result<Written, DeliveryError>,
}

impl BatchOutcome {
    /// An undecided outcome for a batch of `topic`'s `partition`.
    pub(crate) fn new(topic: &str, partition: i32) -> BatchOutcome {
        BatchOutcome {
            topic: topic.into(),
            partition,
            state: Mutex::default(),
        }
    }

    /// The batch's topic.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// The batch's partition.
    pub(crate) fn partition(&self) -> i32 {
        self.partition
    }

    fn state(&self) -> MutexGuard<'_, OutcomeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The metadata of the record at `index` (sent with `timestamp`) in the
    /// part from `start` written as `w`.
    fn metadata(&self, index: u32, timestamp: i64, start: u32, w: &Written) -> RecordMetadata {
        RecordMetadata {
            topic: self.topic.clone(),
            partition: self.partition,
            offset: if w.base_offset >= 0 {
                w.base_offset + i64::from(index - start)
            } else {
                -1
            },
            timestamp: if w.append_time >= 0 {
                w.append_time
            } else {
                timestamp
            },
        }
    }

    /// The record at `index` (sent with `timestamp`) is reported to
    /// `queue` with `token` once decided (at once, if it is already).
    /// Returns a waker to wake once the caller holds no lock.
    #[cfg_attr(
        not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
        allow(dead_code)
    )]
    pub(crate) fn report(
        &self,
        index: u32,
        token: u64,
        timestamp: i64,
        queue: &Arc<ReportQueue>,
    ) -> Option<Waker> {
        let mut state = self.state();
        let decided = state
            .decided
            .iter()
            .find(|d| (d.start..d.end).contains(&index))
            .map(|d| match &d.outcome {
                Ok(w) => Ok(self.metadata(index, timestamp, d.start, w)),
                Err(e) => Err(e.clone()),
            });
        match decided {
            Some(outcome) => queue.push([DeliveryReport { token, outcome }], false),
            None => {
                queue.expect_one();
                state.reports.get_or_insert_with(|| queue.clone());
                state.reported.push((index, token, timestamp));
                None
            }
        }
    }

    /// Decides it for every record (the first decision stands) and
    /// returns the wakers of the futures waiting, to wake once the caller
    /// holds no lock.
    #[cfg(test)]
    pub(crate) fn decide(&self, outcome: Result<Written, DeliveryError>) -> Vec<std::task::Waker> {
        self.decide_part(0, u32::MAX, outcome)
    }

    /// Decides it for the records from place `start` up to `end` (a part
    /// of a split batch; `0..u32::MAX` for the whole batch), unless one of
    /// them was decided already (the first decision stands), and returns
    /// the wakers of their futures, to wake once the caller holds no lock:
    /// one per task, when a run of records is awaited by one task (a loop
    /// or a `join_all` over them), not one per record.
    pub(crate) fn decide_part(
        &self,
        start: u32,
        end: u32,
        outcome: Result<Written, DeliveryError>,
    ) -> Vec<std::task::Waker> {
        let mut state = self.state();
        if state.decided.iter().any(|d| d.start < end && start < d.end) {
            return Vec::new();
        }
        state.decided.push(Decided {
            start,
            end,
            outcome,
        });
        let len = state.waiting.len();
        let (from, to) = (len.min(start as usize), len.min(end as usize));
        let mut woken: Vec<Waker> = Vec::new();
        for waker in state.waiting[from..to].iter_mut().filter_map(Option::take) {
            if !woken.last().is_some_and(|last| last.will_wake(&waker)) {
                woken.push(waker);
            }
        }
        if let Some(queue) = state.reports.clone() {
            // The reported records of this part, in place order, go to the
            // queue together: one lock and one wake for the part.
            let outcome = &state.decided.last().expect("pushed above").outcome;
            let reports = state
                .reported
                .iter()
                .filter(|(i, _, _)| (start..end).contains(i))
                .map(|&(index, token, timestamp)| DeliveryReport {
                    token,
                    outcome: match outcome {
                        Ok(w) => Ok(self.metadata(index, timestamp, start, w)),
                        Err(e) => Err(e.clone()),
                    },
                });
            woken.extend(queue.push(reports, true));
            state.reported.retain(|(i, _, _)| !(start..end).contains(i));
        }
        woken
    }

    /// The outcome of the record at `index` of the batch (sent with
    /// `timestamp`), or `Pending` with `waker` kept to be woken.
    #[cfg_attr(
        not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
        allow(dead_code)
    )]
    pub(crate) fn poll(
        &self,
        index: u32,
        timestamp: i64,
        waker: &Waker,
    ) -> std::task::Poll<Result<RecordMetadata, DeliveryError>> {
        let mut state = self.state();
        let part = state
            .decided
            .iter()
            .find(|d| (d.start..d.end).contains(&index))
            .map(|d| (d.start, &d.outcome));
        match part {
            Some((start, Ok(w))) => {
                std::task::Poll::Ready(Ok(self.metadata(index, timestamp, start, w)))
            }
            Some((_, Err(e))) => std::task::Poll::Ready(Err(e.clone())),
            None => {
                // A record's place is below the count of records appended
                // to its batch: the slots grow with the batch, no further.
                let i = index as usize;
                if state.waiting.len() <= i {
                    state.waiting.resize_with(i + 1, || None);
                }
                match &mut state.waiting[i] {
                    Some(w) if w.will_wake(waker) => {}
                    slot => *slot = Some(waker.clone()),
                }
                std::task::Poll::Pending
            }
        }
    }
}

/// The outcome of a record given to
/// [`Producer::send_reported`](crate::Producer::send_reported), as
/// [`DeliveryReports`](crate::producer::DeliveryReports) yields it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeliveryReport {
    /// The token the record was sent with.
    pub token: u64,
    /// Where it was written, or why it was not.
    pub outcome: Result<RecordMetadata, DeliveryError>,
}

/// Where a producer's delivery reports wait for their reader: filled a
/// decided batch at a time, read by [`DeliveryReports`](crate::producer::DeliveryReports).
#[derive(Debug, Default)]
pub(crate) struct ReportQueue {
    state: Mutex<ReportState>,
    /// Records given to `send_reported` and not reported yet (counted
    /// without the lock: `send_reported` holds its batch's lock only).
    expected: AtomicU64,
}

#[cfg_attr(
    not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
    allow(dead_code)
)]
#[derive(Debug, Default)]
struct ReportState {
    ready: VecDeque<DeliveryReport>,
    /// The producer is closed: once nothing is expected, the reports end.
    closed: bool,
    /// The reader waiting.
    waker: Option<Waker>,
}

#[cfg_attr(
    not(any(feature = "runtime-async-std", feature = "runtime-tokio")),
    allow(dead_code)
)]
impl ReportQueue {
    fn state(&self) -> MutexGuard<'_, ReportState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One more record will be reported.
    fn expect_one(&self) {
        self.expected.fetch_add(1, Ordering::SeqCst);
    }

    /// Adds `reports` (of records `expected` already, or not); returns the
    /// reader's waker to wake once the caller holds no lock.
    fn push(
        &self,
        reports: impl IntoIterator<Item = DeliveryReport>,
        expected: bool,
    ) -> Option<Waker> {
        let mut state = self.state();
        let before = state.ready.len();
        state.ready.extend(reports);
        let added = (state.ready.len() - before) as u64;
        if expected {
            self.expected.fetch_sub(added, Ordering::SeqCst);
        }
        if added > 0 {
            state.waker.take()
        } else {
            None
        }
    }

    /// The producer is closed; returns the reader's waker.
    pub(crate) fn close(&self) -> Option<Waker> {
        let mut state = self.state();
        state.closed = true;
        state.waker.take()
    }

    /// Moves every report ready into `into`; `Ready(false)` when there was
    /// none and none will come (closed, nothing expected); `Pending` with
    /// `waker` kept otherwise.
    pub(crate) fn poll_take(
        &self,
        into: &mut VecDeque<DeliveryReport>,
        waker: &Waker,
    ) -> std::task::Poll<bool> {
        let mut state = self.state();
        if !state.ready.is_empty() {
            into.append(&mut state.ready);
            return std::task::Poll::Ready(true);
        }
        if state.closed && self.expected.load(Ordering::SeqCst) == 0 {
            return std::task::Poll::Ready(false);
        }
        match &mut state.waker {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
        std::task::Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Poll, Wake, Waker};

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn each_record_of_a_batch_reads_its_own_offset_once_decided() {
        let outcome = BatchOutcome::new("t", 3);
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        assert!(outcome.poll(0, 10, &waker).is_pending());
        // Polled again, the same record keeps one waker.
        assert!(outcome.poll(0, 10, &waker).is_pending());
        assert!(outcome.poll(2, 12, &waker).is_pending());
        let wakers = outcome.decide(Ok(Written {
            base_offset: 100,
            append_time: -1,
        }));
        // One task awaits both records: it is woken once.
        assert_eq!(wakers.len(), 1);
        wakers.into_iter().for_each(Waker::wake);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        let Poll::Ready(Ok(m)) = outcome.poll(2, 12, &waker) else {
            panic!("decided")
        };
        assert_eq!(
            (&*m.topic, m.partition, m.offset, m.timestamp),
            ("t", 3, 102, 12)
        );
        // The first decision stands.
        assert!(outcome
            .decide(Err(DeliveryError::Closed {
                topic: "t".into(),
                partition: 3
            }))
            .is_empty());
        assert!(matches!(outcome.poll(1, 11, &waker), Poll::Ready(Ok(m)) if m.offset == 101));
    }

    /// Records awaited by tasks of their own (`FuturesUnordered`, a task
    /// per record) wake each task once; a run of records awaited by one
    /// task wakes it once.
    #[test]
    fn each_waiting_task_is_woken_once() {
        let outcome = BatchOutcome::new("t", 0);
        let counts: Vec<Arc<Count>> = (0..3)
            .map(|_| Arc::new(Count(AtomicUsize::new(0))))
            .collect();
        let wakers: Vec<Waker> = counts.iter().map(|c| Waker::from(c.clone())).collect();
        // Records 0..100 awaited by task 0, 100..102 by tasks 1 and 2 in
        // turn, 102..1000 by task 0 again.
        for i in 0..1000u32 {
            let task = match i {
                100 => 1,
                101 => 2,
                _ => 0,
            };
            assert!(outcome.poll(i, 10, &wakers[task]).is_pending());
        }
        let woken = outcome.decide(Ok(Written {
            base_offset: 0,
            append_time: -1,
        }));
        assert_eq!(woken.len(), 4, "task 0, task 1, task 2, task 0");
        woken.into_iter().for_each(Waker::wake);
        let times: Vec<usize> = counts.iter().map(|c| c.0.load(Ordering::SeqCst)).collect();
        assert_eq!(times, [2, 1, 1]);
        assert!(matches!(outcome.poll(999, 10, &wakers[0]), Poll::Ready(Ok(m)) if m.offset == 999));
    }

    #[test]
    fn the_parts_of_a_split_batch_are_decided_each_on_its_own() {
        let outcome = BatchOutcome::new("t", 0);
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        for i in 0..4 {
            assert!(outcome.poll(i, 10, &waker).is_pending());
        }
        // Records 2 and 3, split off, written first at offset 50.
        let woken = outcome.decide_part(
            2,
            4,
            Ok(Written {
                base_offset: 50,
                append_time: -1,
            }),
        );
        assert_eq!(woken.len(), 1, "one task awaits the part's records");
        assert!(matches!(outcome.poll(3, 10, &waker), Poll::Ready(Ok(m)) if m.offset == 51));
        assert!(outcome.poll(1, 10, &waker).is_pending());
        // A decision overlapping a decided part changes nothing.
        assert!(outcome
            .decide(Err(DeliveryError::Closed {
                topic: "t".into(),
                partition: 0
            }))
            .is_empty());
        assert!(outcome.poll(0, 10, &waker).is_pending());
        let woken = outcome.decide_part(
            0,
            2,
            Ok(Written {
                base_offset: 40,
                append_time: -1,
            }),
        );
        assert_eq!(woken.len(), 1, "one task awaits the part's records");
        assert!(matches!(outcome.poll(0, 10, &waker), Poll::Ready(Ok(m)) if m.offset == 40));
        assert!(matches!(outcome.poll(1, 10, &waker), Poll::Ready(Ok(m)) if m.offset == 41));
        assert!(matches!(outcome.poll(2, 10, &waker), Poll::Ready(Ok(m)) if m.offset == 50));
    }

    #[test]
    fn append_time_and_unknown_offsets() {
        let outcome = BatchOutcome::new("t", 0);
        outcome.decide(Ok(Written {
            base_offset: -1,
            append_time: 555,
        }));
        let waker = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
        let Poll::Ready(Ok(m)) = outcome.poll(4, 12, &waker) else {
            panic!("decided")
        };
        assert_eq!((m.offset, m.timestamp), (-1, 555));
    }
}
