//! Each queued batch's outcome, as the core holds it until decided (a
//! batch split in two holds a part each), and the outcomes decided under
//! the lock, handed to the records' futures once it is released.

use super::super::accumulator::ProducerBatch;
use super::super::delivery::{BatchOutcome, Written};
use super::entry_of;
use super::front::lock;
use super::ProducerCore;
use crate::error::DeliveryError;
use crate::group::TopicPartition;
use std::sync::Arc;
use std::task::Waker;

/// A batch's outcome as the core holds it until it is decided: dropped
/// undecided (the core went away), it decides `Closed`, so that no
/// record's future waits forever.
#[derive(Debug)]
pub(super) struct Slot(pub(super) Option<Part>);

/// The records of a queued batch in the outcome their futures read: the
/// whole of it, or a part of a batch that was split (see
/// [`BatchOutcome::decide_part`]).
#[derive(Debug, Clone)]
pub(super) struct Part {
    pub(super) outcome: Arc<BatchOutcome>,
    pub(super) start: u32,
    pub(super) end: u32,
}

impl Part {
    pub(super) fn whole(outcome: Arc<BatchOutcome>) -> Part {
        Part {
            outcome,
            start: 0,
            end: u32::MAX,
        }
    }

    /// Decides it; returns the wakers to wake once no lock is held.
    fn decide(&self, outcome: Result<Written, DeliveryError>) -> Vec<Waker> {
        self.outcome.decide_part(self.start, self.end, outcome)
    }

    pub(super) fn closed(&self) -> DeliveryError {
        DeliveryError::Closed {
            topic: self.outcome.topic().to_owned(),
            partition: self.outcome.partition(),
        }
    }
}

impl Slot {
    /// The outcome, to be decided by the caller.
    pub(super) fn take(mut self) -> Part {
        self.0.take().expect("a slot holds its outcome until taken")
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(part) = self.0.take() {
            part.decide(Err(part.closed()))
                .into_iter()
                .for_each(Waker::wake);
        }
    }
}

/// Hashes a [`RecordId`] (a counter, unique within the producer) with one
/// multiplication: every record is entered and removed once, and no key
/// comes from outside, so SipHash's protection buys nothing here.
#[derive(Default, Clone, Copy)]
pub(super) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: the high bits, which hashbrown uses, depend on
        // every bit of the counter.
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub(super) type BuildIdHasher = std::hash::BuildHasherDefault<IdHasher>;

/// Outcomes decided and not yet handed to the records' futures.
pub(super) type Outcomes = Vec<(Part, Result<Written, DeliveryError>)>;

impl ProducerCore {
    /// The outcomes decided since the last call, as one piece of work that
    /// records them and wakes the futures waiting for them, in order;
    /// `None` when there are none. Run it after releasing the lock the core
    /// is under.
    pub fn take_outcomes(&mut self) -> Option<crate::cluster::Deferred> {
        if self.outcomes.is_empty() {
            return None;
        }
        let outcomes = std::mem::take(&mut self.outcomes);
        Some(Box::new(move || {
            for (part, outcome) in outcomes {
                part.decide(outcome).into_iter().for_each(Waker::wake);
            }
        }))
    }

    /// `batch` delivered at `base_offset`: its records' outcome decided,
    /// its memory freed and its buffer kept for a later batch, under one
    /// take of the front's lock.
    pub(super) fn complete(
        &mut self,
        mut batch: ProducerBatch,
        base_offset: i64,
        append_time: i64,
    ) {
        self.retries.delivered(&batch.tp);
        self.idempotence.written(&batch.tp, batch.stamp);
        entry_of(&mut self.counters, &batch.tp).records += batch.records.len() as u64;
        self.settled += 1;
        let mut front = lock(&self.front);
        if let Some(slot) = front.slots.remove(&batch.first()) {
            let n = batch.records.len();
            self.delivered += n as u64;
            front.outstanding = front.outstanding.saturating_sub(n);
            let written = Written {
                base_offset,
                append_time,
            };
            self.outcomes.push((slot.take(), Ok(written)));
        }
        front.acc.complete(&batch);
        front.acc.recycle(std::mem::take(&mut batch.bytes));
    }

    pub(super) fn fail_batch(
        &mut self,
        batch: &ProducerBatch,
        error: impl Fn(&TopicPartition) -> DeliveryError,
    ) {
        entry_of(&mut self.counters, &batch.tp).records_failed += batch.records.len() as u64;
        self.settled += 1;
        let mut front = lock(&self.front);
        if let Some(slot) = front.slots.remove(&batch.first()) {
            let n = batch.records.len();
            self.failed += n as u64;
            front.outstanding = front.outstanding.saturating_sub(n);
            self.outcomes.push((slot.take(), Err(error(&batch.tp))));
        }
        front.acc.complete(batch);
    }
}
