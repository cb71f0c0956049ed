//! Idempotence: the producer id and epoch (InitProducerId), and each
//! partition's sequence numbers: given as batches are taken, resolved as
//! they are answered, and started again at 0 under a new epoch after a
//! gap (KIP-360). The core asks it what to stamp and tells it what
//! happened; it owns these fields and nothing else touches them.

use super::super::accumulator::Stamp;
use super::entry_of;
use crate::cluster::{ExponentialBackoff, Retry};
use crate::group::TopicPartition;
use crate::protocol::messages::init_producer_id::InitProducerIdRequest;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Batches of one partition in flight at once, at most (the broker keeps
/// the last five batches of a producer per partition to recognise a
/// duplicate).
const MAX_IN_FLIGHT_PER_PARTITION: usize = 5;

/// The producer id and epoch, and where getting one stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pid {
    /// None asked for yet (or the last request failed: the retry says
    /// when to ask again).
    None,
    /// InitProducerId in flight.
    Asking,
    /// Known.
    Known { id: i64, epoch: i16 },
    /// A batch failed with its sequence numbers used: new sequences need a
    /// new epoch, asked for once nothing is in flight (KIP-360).
    Bump { id: i64, epoch: i16 },
}

/// A partition's sequence numbers.
#[derive(Debug, Default)]
struct Sequences {
    /// The next base sequence to give.
    next: i32,
    /// Base sequences given and not yet resolved, in order.
    unresolved: BTreeSet<i32>,
    /// Requests carrying a batch of this partition.
    in_flight: usize,
    /// The broker those requests went to (while `in_flight` > 0).
    in_flight_to: i32,
    /// A batch of this epoch was written: the leader knows the producer,
    /// and refuses a batch that skips one before it.
    acked: bool,
}

impl Sequences {
    /// Gives the sequence numbers of `records` records.
    fn give(&mut self, records: usize) -> i32 {
        let base = self.next;
        self.next = self.next.wrapping_add(records as i32) & i32::MAX;
        self.unresolved.insert(base);
        base
    }
}

/// The producer id, its epoch, and the partitions' sequence numbers.
#[derive(Debug)]
pub(super) struct Idempotence {
    /// `enable.idempotence`: without it, nothing is asked or stamped.
    enabled: bool,
    pid: Pid,
    /// The InitProducerId requests' run of failures.
    retry: Retry,
    sequences: BTreeMap<TopicPartition, Sequences>,
}

impl Idempotence {
    pub(super) fn new(enabled: bool) -> Self {
        Idempotence {
            enabled,
            pid: Pid::None,
            retry: Retry::default(),
            sequences: BTreeMap::new(),
        }
    }

    pub(super) fn pid(&self) -> Pid {
        self.pid
    }

    /// When InitProducerId may be asked again after a failure.
    pub(super) fn not_before(&self) -> Option<Instant> {
        self.retry.not_before()
    }

    /// The InitProducerId to send at `now`, if one is needed: a first
    /// producer id once `records_waiting`, a new epoch once nothing is in
    /// flight (the sequences restart). It counts as asked.
    /// `records_waiting` is asked only when it matters.
    pub(super) fn request(
        &mut self,
        now: Instant,
        records_waiting: impl FnOnce() -> bool,
        produce_in_flight: usize,
    ) -> Option<InitProducerIdRequest> {
        if !self.enabled || !self.retry.ready(now) {
            return None;
        }
        let (producer_id, producer_epoch) = match self.pid {
            Pid::None if records_waiting() => (-1, -1),
            Pid::Bump { id, epoch } if produce_in_flight == 0 => (id, epoch),
            _ => return None,
        };
        self.pid = Pid::Asking;
        Some(InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: i32::MAX,
            producer_id,
            producer_epoch,
            ..Default::default()
        })
    }

    /// InitProducerId answered with `id` and `epoch`: every partition's
    /// sequences restart at 0 (batches waiting for a retry take theirs
    /// from [`Idempotence::restamp`], in their order).
    pub(super) fn granted(&mut self, id: i64, epoch: i16) {
        self.pid = Pid::Known { id, epoch };
        self.retry.succeeded();
        self.sequences.clear();
    }

    /// The stamp of a batch of `records` records of `tp` waiting for a
    /// retry, under the epoch just granted (in the batches' order).
    pub(super) fn restamp(&mut self, tp: &TopicPartition, records: usize) -> Option<Stamp> {
        let Pid::Known { id, epoch } = self.pid else {
            return None;
        };
        let base = entry_of(&mut self.sequences, tp).give(records);
        Some(Stamp {
            producer_id: id,
            epoch,
            base_sequence: base,
        })
    }

    /// InitProducerId failed at `now`: asked again after the returned
    /// delay (`policy`, with jitter `unit`).
    pub(super) fn refused(
        &mut self,
        now: Instant,
        policy: &ExponentialBackoff,
        unit: f64,
    ) -> Duration {
        if self.pid == Pid::Asking {
            self.pid = Pid::None;
        }
        self.retry.failed(now, policy, unit)
    }

    /// What a batch of `records` records of `tp`, carrying `carried` (a
    /// retry's), taken for `broker` is stamped with: `Some(None)` without
    /// idempotence; `None` when it must wait (no producer id, a retry not
    /// first in its partition's order, or a new batch that could overtake
    /// the ones in flight).
    pub(super) fn stamp(
        &mut self,
        tp: &TopicPartition,
        records: usize,
        carried: Option<Stamp>,
        broker: i32,
    ) -> Option<Option<Stamp>> {
        if !self.enabled {
            return Some(None);
        }
        let Pid::Known { id, epoch } = self.pid else {
            return None;
        };
        let seq = entry_of(&mut self.sequences, tp);
        match carried {
            // A retry goes alone, first among its partition's unresolved
            // batches: order is kept.
            Some(stamp) => (seq.in_flight == 0
                && seq.unresolved.first() == Some(&stamp.base_sequence)
                && stamp.epoch == epoch)
                .then_some(Some(stamp)),
            None => {
                // A leader that knows nothing of this producer takes any
                // sequence as its first. So until a batch of the epoch is
                // written, one goes at a time, and never to another broker
                // while earlier ones are in flight: a later batch could be
                // written first (on a topic just created, the leader
                // refuses the first requests with NOT_LEADER_OR_FOLLOWER
                // and takes the next), and the earlier ones, sent again,
                // would come after it.
                if seq.in_flight >= MAX_IN_FLIGHT_PER_PARTITION
                    || (seq.in_flight > 0 && (!seq.acked || seq.in_flight_to != broker))
                {
                    return None;
                }
                Some(Some(Stamp {
                    producer_id: id,
                    epoch,
                    base_sequence: seq.give(records),
                }))
            }
        }
    }

    /// A request carrying a batch of `tp` went to `broker`.
    pub(super) fn sent(&mut self, tp: &TopicPartition, broker: i32) {
        if let Some(seq) = self.sequences.get_mut(tp) {
            seq.in_flight += 1;
            seq.in_flight_to = broker;
        }
    }

    /// A request carrying a batch of `tp` was answered (or failed).
    pub(super) fn answered(&mut self, tp: &TopicPartition) {
        if let Some(seq) = self.sequences.get_mut(tp) {
            seq.in_flight = seq.in_flight.saturating_sub(1);
        }
    }

    /// A batch of `tp` stamped `stamp` was written: its sequences are
    /// resolved, and under the current epoch the leader now knows the
    /// producer.
    pub(super) fn written(&mut self, tp: &TopicPartition, stamp: Option<Stamp>) {
        if let (Some(stamp), Some(seq)) = (stamp, self.sequences.get_mut(tp)) {
            seq.unresolved.remove(&stamp.base_sequence);
            if matches!(self.pid, Pid::Known { epoch, .. } if epoch == stamp.epoch) {
                seq.acked = true;
            }
        }
    }

    /// A half of a split batch of `tp`, stamped with the sequences its
    /// records had, waits to be sent again.
    pub(super) fn queued_again(&mut self, tp: &TopicPartition, stamp: Option<Stamp>) {
        if let (Some(stamp), Some(seq)) = (stamp, self.sequences.get_mut(tp)) {
            seq.unresolved.insert(stamp.base_sequence);
        }
    }

    /// Whether a batch of `tp` before the one stamped `stamp` is still
    /// unresolved.
    pub(super) fn earlier_unresolved(&self, tp: &TopicPartition, stamp: Option<Stamp>) -> bool {
        match (stamp, self.sequences.get(tp)) {
            (Some(stamp), Some(seq)) => seq
                .unresolved
                .first()
                .is_some_and(|first| *first != stamp.base_sequence),
            _ => false,
        }
    }

    /// Sends nothing more until a new epoch came (asked for once nothing
    /// is in flight).
    pub(super) fn bump(&mut self) {
        if let Pid::Known { id, epoch } = self.pid {
            self.pid = Pid::Bump { id, epoch };
        }
    }

    /// A batch that failed for good left a gap in its partition's
    /// sequences: later batches would be refused as out of order, so the
    /// producer takes a new epoch (KIP-360) before it sends again.
    /// (`tp`'s batch stamped `stamp`.)
    pub(super) fn forget(&mut self, tp: &TopicPartition, stamp: Option<Stamp>) {
        let Some(stamp) = stamp else {
            return;
        };
        if let Some(seq) = self.sequences.get_mut(tp) {
            seq.unresolved.remove(&stamp.base_sequence);
        }
        if matches!(self.pid, Pid::Known { epoch, .. } if epoch == stamp.epoch) {
            self.bump();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    /// An idempotent producer's state with producer id 7, epoch 0.
    fn granted() -> Idempotence {
        let mut idem = Idempotence::new(true);
        let now = Instant::now();
        assert!(
            idem.request(now, || false, 0).is_none(),
            "no id is asked before a record waits"
        );
        let ask = idem
            .request(now, || true, 0)
            .expect("asked once a record waits");
        assert_eq!((ask.producer_id, ask.producer_epoch), (-1, -1));
        assert!(idem.request(now, || true, 0).is_none(), "asked once");
        idem.granted(7, 0);
        idem
    }

    #[test]
    fn without_idempotence_nothing_is_asked_or_stamped() {
        let mut idem = Idempotence::new(false);
        assert!(idem.request(Instant::now(), || true, 0).is_none());
        assert_eq!(idem.stamp(&tp(0), 10, None, 1), Some(None));
    }

    #[test]
    fn sequences_follow_on_per_partition_and_wait_for_a_producer_id() {
        let mut idem = Idempotence::new(true);
        assert_eq!(idem.stamp(&tp(0), 10, None, 1), None, "no producer id yet");
        let mut idem = granted();
        let first = idem.stamp(&tp(0), 10, None, 1).flatten().expect("stamped");
        assert_eq!(
            (first.producer_id, first.epoch, first.base_sequence),
            (7, 0, 0)
        );
        idem.sent(&tp(0), 1);
        // Until a batch of the epoch is written, one goes at a time.
        assert_eq!(idem.stamp(&tp(0), 5, None, 1), None);
        // Another partition has sequences of its own.
        let other = idem.stamp(&tp(1), 3, None, 1).flatten().expect("stamped");
        assert_eq!(other.base_sequence, 0);
        idem.answered(&tp(0));
        idem.written(&tp(0), Some(first));
        let second = idem.stamp(&tp(0), 5, None, 1).flatten().expect("stamped");
        assert_eq!(second.base_sequence, 10);
        idem.sent(&tp(0), 1);
        // Once the leader knows the producer, more follow to the same
        // broker, never to another while some are in flight.
        assert_eq!(idem.stamp(&tp(0), 5, None, 2), None);
        let third = idem.stamp(&tp(0), 5, None, 1).flatten().expect("stamped");
        assert_eq!(third.base_sequence, 15);
    }

    #[test]
    fn a_retry_goes_alone_and_first_in_its_partition() {
        let mut idem = granted();
        let first = idem.stamp(&tp(0), 10, None, 1).flatten().unwrap();
        idem.sent(&tp(0), 1);
        idem.answered(&tp(0));
        idem.written(&tp(0), Some(first));
        let a = idem.stamp(&tp(0), 4, None, 1).flatten().unwrap();
        idem.sent(&tp(0), 1);
        let b = idem.stamp(&tp(0), 4, None, 1).flatten().unwrap();
        idem.sent(&tp(0), 1);
        // Both failed (answered): `b` may not go before `a`, and neither
        // while something is in flight.
        idem.answered(&tp(0));
        assert!(idem.earlier_unresolved(&tp(0), Some(b)));
        assert!(!idem.earlier_unresolved(&tp(0), Some(a)));
        assert_eq!(idem.stamp(&tp(0), 4, Some(a), 1), None, "b is in flight");
        idem.answered(&tp(0));
        assert_eq!(idem.stamp(&tp(0), 4, Some(b), 1), None, "a first");
        assert_eq!(idem.stamp(&tp(0), 4, Some(a), 1), Some(Some(a)));
    }

    #[test]
    fn a_gap_takes_a_new_epoch_once_nothing_is_in_flight_and_sequences_restart() {
        let mut idem = granted();
        let now = Instant::now();
        let lost = idem.stamp(&tp(0), 10, None, 1).flatten().unwrap();
        idem.sent(&tp(0), 1);
        idem.answered(&tp(0));
        idem.forget(&tp(0), Some(lost));
        assert_eq!(idem.pid(), Pid::Bump { id: 7, epoch: 0 });
        assert_eq!(
            idem.stamp(&tp(0), 1, None, 1),
            None,
            "nothing under the old epoch"
        );
        assert!(
            idem.request(now, || true, 1).is_none(),
            "a Produce in flight"
        );
        let ask = idem.request(now, || true, 0).expect("a new epoch");
        assert_eq!((ask.producer_id, ask.producer_epoch), (7, 0));
        idem.granted(7, 1);
        let restamped = idem.restamp(&tp(0), 3).expect("a waiting retry");
        assert_eq!((restamped.epoch, restamped.base_sequence), (1, 0));
        // (The queue gives the retry first.)
        assert_eq!(
            idem.stamp(&tp(0), 3, Some(restamped), 1),
            Some(Some(restamped))
        );
        idem.sent(&tp(0), 1);
        assert_eq!(
            idem.stamp(&tp(0), 2, None, 1),
            None,
            "nothing of the new epoch is written yet"
        );
    }

    #[test]
    fn a_refused_request_is_asked_again_after_the_backoff() {
        let mut idem = Idempotence::new(true);
        let now = Instant::now();
        assert!(idem.request(now, || true, 0).is_some());
        let policy = ExponentialBackoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
            jitter: 0.2,
        };
        let delay = idem.refused(now, &policy, 0.5);
        assert!(delay > Duration::ZERO);
        assert_eq!(idem.pid(), Pid::None);
        assert!(idem.request(now, || true, 0).is_none(), "backing off");
        assert!(idem.request(now + delay, || true, 0).is_some());
    }
}
