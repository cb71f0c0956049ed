//! Idempotent and transactional producers on the broker's side, without IO.
//!
//! - [`ProducerStates`]: per partition, what Kafka's `ProducerStateManager`
//!   keeps of each producer id (apache/kafka
//!   `storage/src/main/java/org/apache/kafka/storage/internals/log/`:
//!   `ProducerStateManager`, `ProducerStateEntry`, `BatchMetadata`,
//!   `ProducerAppendInfo`) and the checks of
//!   `UnifiedLog.analyzeAndValidateProducerState`
//!   (`core/src/main/scala/kafka/log/UnifiedLog.scala`): the epoch and the
//!   sequence ranges of its last 5 batches; a batch repeating one of them
//!   exactly (same epoch) is a duplicate, answered with the offsets it got
//!   and not written again; an older epoch is INVALID_PRODUCER_EPOCH; a
//!   sequence that does not follow the last one is
//!   OUT_OF_ORDER_SEQUENCE_NUMBER; a producer id the partition does not know
//!   may start at any sequence (since KIP-360, Kafka 2.5, no broker answers
//!   UNKNOWN_PRODUCER_ID to a Produce).
//! - [`ProducerIds`]: InitProducerId, as Kafka's `KafkaApis.handleInitProducerIdRequest`
//!   and `TransactionCoordinator.handleInitProducerId` answer it
//!   (`core/src/main/scala/kafka/server/KafkaApis.scala`,
//!   `core/src/main/scala/kafka/coordinator/transaction/`): a new producer
//!   id at epoch 0 for every request without a transactional id; for a
//!   transactional id, its producer id with the epoch bumped (KIP-360's
//!   checks of the producer id and epoch the request names, a new producer
//!   id once the epoch is exhausted).
//!
//! Not modelled: transactions themselves (AddPartitionsToTxn, EndTxn and
//! markers are not served; a transactional batch is checked like an
//! idempotent one, with no transaction state), producer id expiration
//! (`producer.id.expiration.ms`), snapshots.

use std::collections::{HashMap, VecDeque};

use super::log::ParsedBatch;
use crate::error::ErrorCode;
use crate::protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};

/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`.
pub(crate) const BATCHES_RETAINED: usize = 5;
/// `RecordBatch.NO_PRODUCER_EPOCH`.
const NO_EPOCH: i16 = -1;
/// `RecordBatch.NO_SEQUENCE`.
const NO_SEQUENCE: i32 = -1;
/// Kafka's `transaction.max.timeout.ms` default (15 minutes).
pub(crate) const TRANSACTION_MAX_TIMEOUT_MS: i32 = 900_000;

/// `DefaultRecordBatch.incrementSequence`: sequences wrap to 0 after
/// `i32::MAX`.
fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// `DefaultRecordBatch.decrementSequence`.
fn decrement_sequence(sequence: i32, decrement: i32) -> i32 {
    if sequence < decrement {
        i32::MAX - (decrement - sequence) + 1
    } else {
        sequence - decrement
    }
}

/// A batch's last sequence (`DefaultRecordBatch.lastSequence`).
fn last_sequence(batch: &ParsedBatch) -> i32 {
    if batch.base_sequence == NO_SEQUENCE {
        NO_SEQUENCE
    } else {
        increment_sequence(batch.base_sequence, batch.last_offset_delta)
    }
}

/// One batch a producer wrote: Kafka's `BatchMetadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchMetadata {
    pub last_seq: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    /// The batch's max timestamp.
    pub timestamp: i64,
}

impl BatchMetadata {
    pub fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }

    pub fn first_offset(&self) -> i64 {
        self.last_offset - i64::from(self.offset_delta)
    }
}

/// What a partition keeps of one producer id: Kafka's `ProducerStateEntry`
/// (its transaction fields left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProducerEntry {
    pub epoch: i16,
    /// The last batches, lowest sequence first, at most
    /// [`BATCHES_RETAINED`].
    pub batches: VecDeque<BatchMetadata>,
}

impl ProducerEntry {
    fn empty() -> Self {
        ProducerEntry {
            epoch: NO_EPOCH,
            batches: VecDeque::new(),
        }
    }

    fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// `maybeUpdateProducerEpoch`: a new epoch forgets the old one's batches.
    fn set_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }

    /// `addBatch`.
    fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        self.set_epoch(epoch);
        if self.batches.len() == BATCHES_RETAINED {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
    }

    /// `findDuplicateBatch`: a batch of this epoch with exactly the
    /// sequence range of one kept.
    fn duplicate_of(&self, batch: &ParsedBatch) -> Option<BatchMetadata> {
        if batch.producer_epoch != self.epoch {
            return None;
        }
        let (first, last) = (batch.base_sequence, last_sequence(batch));
        self.batches
            .iter()
            .find(|b| b.first_seq() == first && b.last_seq == last)
            .copied()
    }
}

/// What a Produce does to one partition, once its batches are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Append the batches, then record these producers' new state
    /// ([`ProducerStates::update`]).
    Append(Vec<(i64, ProducerEntry)>),
    /// A batch repeats one already written: answer with its offsets
    /// (`BatchMetadata`) and append nothing.
    Duplicate(BatchMetadata),
}

/// The producers of one partition: Kafka's `ProducerStateManager`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProducerStates {
    producers: HashMap<i64, ProducerEntry>,
}

impl ProducerStates {
    /// What a producer id's state is, if the partition knows it.
    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Checks a client's batches, about to be written from `first_offset`
    /// on, as `UnifiedLog.analyzeAndValidateProducerState` does: batch by
    /// batch, a duplicate of a kept batch ends the check (the request is
    /// answered with that batch's offsets), otherwise the epoch and
    /// sequence must follow (`ProducerAppendInfo`), the producer's batches
    /// earlier in the same request counting. Batches without a producer id
    /// are not checked.
    pub fn check(&self, batches: &[ParsedBatch], first_offset: i64) -> Result<Outcome, ErrorCode> {
        // Per producer id: the state before the request, and what this
        // request's batches make of it (`ProducerAppendInfo`'s
        // `currentEntry` and `updatedEntry`).
        let mut updated: Vec<(i64, ProducerEntry)> = Vec::new();
        let mut offset = first_offset;
        for batch in batches {
            let last_offset = offset + i64::from(batch.last_offset_delta);
            let base_offset = offset;
            offset = last_offset + 1;
            if batch.producer_id < 0 {
                continue;
            }
            let current = self.producers.get(&batch.producer_id);
            if let Some(duplicate) = current.and_then(|c| c.duplicate_of(batch)) {
                return Ok(Outcome::Duplicate(duplicate));
            }
            let empty = ProducerEntry::empty();
            let current = current.unwrap_or(&empty);
            let i = match updated.iter().position(|(id, _)| *id == batch.producer_id) {
                Some(i) => i,
                None => {
                    updated.push((
                        batch.producer_id,
                        ProducerEntry {
                            epoch: current.epoch,
                            batches: VecDeque::new(),
                        },
                    ));
                    updated.len() - 1
                }
            };
            let entry = &mut updated[i].1;
            check_epoch(entry, batch.producer_epoch)?;
            check_sequence(current, entry, batch.producer_epoch, batch.base_sequence)?;
            entry.add_batch(
                batch.producer_epoch,
                BatchMetadata {
                    last_seq: last_sequence(batch),
                    last_offset,
                    offset_delta: (last_offset - base_offset) as i32,
                    timestamp: batch.max_timestamp,
                },
            );
        }
        Ok(Outcome::Append(updated))
    }

    /// Records the producers' state after an append
    /// (`ProducerStateManager.update`).
    pub fn update(&mut self, updated: Vec<(i64, ProducerEntry)>) {
        for (producer_id, next) in updated {
            let entry = self
                .producers
                .entry(producer_id)
                .or_insert_with(ProducerEntry::empty);
            entry.set_epoch(next.epoch);
            for batch in next.batches {
                entry.add_batch(next.epoch, batch);
            }
        }
    }

    /// The state the batches of a log (base offset and header, oldest
    /// first) leave, unchecked, as Kafka rebuilds it after truncating a
    /// log (`UnifiedLog.rebuildProducerState`).
    pub fn rebuild(batches: impl Iterator<Item = (i64, ParsedBatch)>) -> Self {
        let mut states = ProducerStates::default();
        for (base_offset, batch) in batches {
            if batch.producer_id < 0 || batch.control {
                continue;
            }
            let last_offset = base_offset + i64::from(batch.last_offset_delta);
            states
                .producers
                .entry(batch.producer_id)
                .or_insert_with(ProducerEntry::empty)
                .add_batch(
                    batch.producer_epoch,
                    BatchMetadata {
                        last_seq: last_sequence(&batch),
                        last_offset,
                        offset_delta: batch.last_offset_delta,
                        timestamp: batch.max_timestamp,
                    },
                );
        }
        states
    }
}

/// `ProducerAppendInfo.checkProducerEpoch`, for a client's batch.
fn check_epoch(updated: &ProducerEntry, epoch: i16) -> Result<(), ErrorCode> {
    if epoch < updated.epoch {
        // Since Kafka 2.7 (KIP-588) a Produce gets INVALID_PRODUCER_EPOCH
        // here, not PRODUCER_FENCED.
        return Err(ErrorCode::InvalidProducerEpoch);
    }
    Ok(())
}

/// `ProducerAppendInfo.checkSequence` (no transaction verification state).
fn check_sequence(
    current: &ProducerEntry,
    updated: &ProducerEntry,
    epoch: i16,
    first_seq: i32,
) -> Result<(), ErrorCode> {
    if epoch != updated.epoch {
        // A new epoch starts at sequence 0, unless the partition knew no
        // epoch of this producer at all.
        if first_seq != 0 && updated.epoch != NO_EPOCH {
            return Err(ErrorCode::OutOfOrderSequenceNumber);
        }
        return Ok(());
    }
    let last_seq = if !updated.batches.is_empty() {
        updated.last_seq()
    } else if epoch == current.epoch {
        current.last_seq()
    } else {
        NO_SEQUENCE
    };
    let in_sequence =
        i64::from(first_seq) == i64::from(last_seq) + 1 || (first_seq == 0 && last_seq == i32::MAX);
    // With no epoch known (every batch of the producer gone), any sequence
    // is accepted.
    if current.epoch == NO_EPOCH || in_sequence {
        Ok(())
    } else {
        Err(ErrorCode::OutOfOrderSequenceNumber)
    }
}

/// A transactional id's producer, as the transaction coordinator keeps it
/// (`TransactionMetadata`, its transaction fields left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TransactionalProducer {
    pub producer_id: i64,
    pub previous_producer_id: i64,
    pub epoch: i16,
    pub last_epoch: i16,
}

/// `TransactionMetadata.isEpochExhausted`.
fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// Producer ids given out, and the transactional ids' producers.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProducerIds {
    /// The next id to give (Kafka's controller gives blocks from 0).
    next: i64,
    pub transactional: HashMap<String, TransactionalProducer>,
}

impl ProducerIds {
    fn allocate(&mut self) -> i64 {
        let id = self.next;
        self.next += 1;
        id
    }

    /// The answer to an InitProducerId of `version`; `coordinates` says
    /// whether this broker is the transaction coordinator of the request's
    /// transactional id (when it has one).
    pub fn init(
        &mut self,
        version: i16,
        req: &InitProducerIdRequest,
        coordinates: impl FnOnce(&str) -> bool,
    ) -> InitProducerIdResponse {
        let answer = |result: Result<(i64, i16), ErrorCode>| {
            let (producer_id, producer_epoch, error) = match result {
                Ok((id, epoch)) => (id, epoch, ErrorCode::None),
                Err(code) => (-1, NO_EPOCH, code),
            };
            // `KafkaApis`: older clients do not know PRODUCER_FENCED.
            let error = if version < 4 && error == ErrorCode::ProducerFenced {
                ErrorCode::InvalidProducerEpoch
            } else {
                error
            };
            InitProducerIdResponse {
                error_code: error.code(),
                producer_id,
                producer_epoch,
                ..Default::default()
            }
        };
        let expected = match (req.producer_id, req.producer_epoch) {
            (-1, NO_EPOCH) => None,
            (-1, _) | (_, NO_EPOCH) => return answer(Err(ErrorCode::InvalidRequest)),
            (id, epoch) => Some((id, epoch)),
        };
        let Some(transactional_id) = req.transactional_id.as_deref() else {
            // Without a transactional id, always a new producer id (an
            // idempotent producer that must start over gets one; it bumps
            // its epoch by itself otherwise, KIP-360).
            return answer(Ok((self.allocate(), 0)));
        };
        if transactional_id.is_empty() {
            return answer(Err(ErrorCode::InvalidRequest));
        }
        if req.transaction_timeout_ms <= 0
            || req.transaction_timeout_ms > TRANSACTION_MAX_TIMEOUT_MS
        {
            return answer(Err(ErrorCode::InvalidTransactionTimeout));
        }
        if !coordinates(transactional_id) {
            return answer(Err(ErrorCode::NotCoordinator));
        }
        if !self.transactional.contains_key(transactional_id) {
            // A transactional id seen for the first time gets a producer
            // id, with no epoch yet.
            let producer_id = self.allocate();
            self.transactional.insert(
                transactional_id.to_owned(),
                TransactionalProducer {
                    producer_id,
                    previous_producer_id: -1,
                    epoch: NO_EPOCH,
                    last_epoch: NO_EPOCH,
                },
            );
        }
        let txn = self
            .transactional
            .get_mut(transactional_id)
            .expect("inserted above");
        // `prepareInitProducerIdTransit`: fenced unless the id named is
        // this one, or the previous one at an exhausted epoch (a retry of
        // a rotation whose answer was lost), or nothing was given out yet.
        let valid = |(id, epoch): (i64, i16)| {
            txn.epoch == NO_EPOCH
                || id == txn.producer_id
                || (id == txn.previous_producer_id && epoch_exhausted(epoch))
        };
        if expected.is_some_and(|e| !valid(e)) {
            return answer(Err(ErrorCode::ProducerFenced));
        }
        if epoch_exhausted(txn.epoch) && expected.is_none_or(|(_, epoch)| epoch == txn.epoch) {
            // A new producer id at epoch 0 (`prepareProducerIdRotation`).
            let rotated = TransactionalProducer {
                producer_id: self.next,
                previous_producer_id: txn.producer_id,
                epoch: 0,
                last_epoch: if expected.is_some() {
                    txn.epoch
                } else {
                    NO_EPOCH
                },
            };
            self.next += 1;
            *txn = rotated;
            return answer(Ok((rotated.producer_id, 0)));
        }
        // `prepareIncrementProducerEpoch`, which Kafka refuses with an
        // IllegalStateException (UNKNOWN_SERVER_ERROR) for an exhausted
        // epoch (reached only by a request naming neither it nor the last).
        if epoch_exhausted(txn.epoch) {
            return answer(Err(ErrorCode::UnknownServerError));
        }
        let bumped = txn.epoch + 1;
        let (epoch, last_epoch) = match expected {
            None => (bumped, NO_EPOCH),
            Some((_, e)) if txn.epoch == NO_EPOCH || e == txn.epoch => (bumped, txn.epoch),
            // A retry of a bump whose answer was lost: the same epoch again.
            Some((_, e)) if e == txn.last_epoch => (txn.epoch, txn.last_epoch),
            Some(_) => return answer(Err(ErrorCode::ProducerFenced)),
        };
        txn.previous_producer_id = txn.producer_id;
        txn.epoch = epoch;
        txn.last_epoch = last_epoch;
        answer(Ok((txn.producer_id, epoch)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of `count` records from `producer_id` at `epoch`, sequences
    /// from `base_sequence`.
    fn batch(producer_id: i64, epoch: i16, base_sequence: i32, count: i32) -> ParsedBatch {
        ParsedBatch {
            at: 0,
            len: 61,
            last_offset_delta: count - 1,
            max_timestamp: 1000 + i64::from(base_sequence),
            producer_id,
            producer_epoch: epoch,
            base_sequence,
            transactional: false,
            control: false,
        }
    }

    /// Checks `batches` at `offset` and applies them; the outcome.
    fn produce(
        states: &mut ProducerStates,
        offset: i64,
        batches: &[ParsedBatch],
    ) -> Result<Outcome, ErrorCode> {
        let outcome = states.check(batches, offset)?;
        if let Outcome::Append(updated) = &outcome {
            states.update(updated.clone());
        }
        Ok(outcome)
    }

    fn appended(outcome: Result<Outcome, ErrorCode>) {
        assert!(matches!(outcome, Ok(Outcome::Append(_))), "{outcome:?}");
    }

    #[test]
    fn sequences_follow_on_and_the_last_five_batches_are_kept() {
        let mut st = ProducerStates::default();
        let mut offset = 0;
        for i in 0..7 {
            appended(produce(&mut st, offset, &[batch(1, 0, i * 3, 3)]));
            offset += 3;
        }
        let entry = st.get(1).unwrap();
        assert_eq!(entry.epoch, 0);
        let kept: Vec<(i32, i32, i64)> = entry
            .batches
            .iter()
            .map(|b| (b.first_seq(), b.last_seq, b.first_offset()))
            .collect();
        assert_eq!(
            kept,
            [
                (6, 8, 6),
                (9, 11, 9),
                (12, 14, 12),
                (15, 17, 15),
                (18, 20, 18)
            ]
        );
    }

    #[test]
    fn an_exact_repeat_of_a_kept_batch_is_a_duplicate_with_its_offsets() {
        let mut st = ProducerStates::default();
        for i in 0..6 {
            appended(produce(
                &mut st,
                100 + i64::from(i) * 2,
                &[batch(1, 0, i * 2, 2)],
            ));
        }
        // Batches 1..=5 (sequences 2..11) are kept; batch 3 again:
        let outcome = produce(&mut st, 999, &[batch(1, 0, 6, 2)]).unwrap();
        let Outcome::Duplicate(original) = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!((original.first_offset(), original.last_offset), (106, 107));
        assert_eq!(original.timestamp, 1006);
        // Nothing changed.
        assert_eq!(st.get(1).unwrap().batches.len(), 5);
        assert_eq!(st.get(1).unwrap().last_seq(), 11);
        // The oldest batch (sequences 0-1) is no longer kept: its repeat is
        // out of order, as in Kafka.
        assert_eq!(
            produce(&mut st, 999, &[batch(1, 0, 0, 2)]),
            Err(ErrorCode::OutOfOrderSequenceNumber)
        );
        // A batch overlapping a kept one but not the same range is no
        // duplicate either.
        assert_eq!(
            produce(&mut st, 999, &[batch(1, 0, 6, 3)]),
            Err(ErrorCode::OutOfOrderSequenceNumber)
        );
        // Nor is the same range at another epoch (which must start at 0).
        assert_eq!(
            produce(&mut st, 999, &[batch(1, 1, 6, 2)]),
            Err(ErrorCode::OutOfOrderSequenceNumber)
        );
    }

    #[test]
    fn a_duplicate_anywhere_in_the_request_answers_for_all_of_it() {
        let mut st = ProducerStates::default();
        appended(produce(&mut st, 0, &[batch(1, 0, 0, 2)]));
        // A new batch of another producer, then a repeat: nothing of either
        // is appended; the repeat's offsets are the answer.
        let outcome = st
            .check(&[batch(2, 0, 0, 1), batch(1, 0, 0, 2)], 2)
            .unwrap();
        assert_eq!(
            outcome,
            Outcome::Duplicate(BatchMetadata {
                last_seq: 1,
                last_offset: 1,
                offset_delta: 1,
                timestamp: 1000
            })
        );
    }

    #[test]
    fn gaps_and_repeats_that_are_not_exact_are_out_of_order() {
        let mut st = ProducerStates::default();
        appended(produce(&mut st, 0, &[batch(1, 0, 0, 5)]));
        assert_eq!(
            produce(&mut st, 5, &[batch(1, 0, 6, 1)]),
            Err(ErrorCode::OutOfOrderSequenceNumber)
        );
        assert_eq!(
            produce(&mut st, 5, &[batch(1, 0, 4, 1)]),
            Err(ErrorCode::OutOfOrderSequenceNumber)
        );
        appended(produce(&mut st, 5, &[batch(1, 0, 5, 1)]));
        // Within one request, the second batch follows the first.
        appended(produce(&mut st, 6, &[batch(1, 0, 6, 2), batch(1, 0, 8, 1)]));
        assert_eq!(
            st.check(&[batch(1, 0, 9, 2), batch(1, 0, 12, 1)], 9),
            Err(ErrorCode::OutOfOrderSequenceNumber)
        );
    }

    #[test]
    fn sequences_wrap_after_i32_max() {
        let mut st = ProducerStates::default();
        appended(produce(&mut st, 0, &[batch(1, 0, i32::MAX - 1, 2)]));
        assert_eq!(st.get(1).unwrap().last_seq(), i32::MAX);
        appended(produce(&mut st, 2, &[batch(1, 0, 0, 1)]));
        // A batch across the wrap: sequences MAX-1, MAX, 0, 1.
        let mut st = ProducerStates::default();
        appended(produce(&mut st, 0, &[batch(1, 0, i32::MAX - 1, 4)]));
        assert_eq!(st.get(1).unwrap().last_seq(), 1);
        assert_eq!(st.get(1).unwrap().batches[0].first_seq(), i32::MAX - 1);
        let outcome = st.check(&[batch(1, 0, i32::MAX - 1, 4)], 4).unwrap();
        assert!(matches!(outcome, Outcome::Duplicate(_)), "{outcome:?}");
    }

    #[test]
    fn an_unknown_producer_may_start_anywhere() {
        // Kafka since KIP-360 (2.5): a producer id the partition has no
        // state for (new, or expired) is accepted at any sequence, not
        // refused with UNKNOWN_PRODUCER_ID.
        let mut st = ProducerStates::default();
        appended(produce(&mut st, 0, &[batch(7, 3, 42, 2)]));
        assert_eq!(st.get(7).unwrap().last_seq(), 43);
        appended(produce(&mut st, 2, &[batch(7, 3, 44, 1)]));
    }

    #[test]
    fn older_epochs_are_refused_and_newer_ones_start_at_zero() {
        let mut st = ProducerStates::default();
        appended(produce(&mut st, 0, &[batch(1, 2, 0, 3)]));
        assert_eq!(
            produce(&mut st, 3, &[batch(1, 1, 3, 1)]),
            Err(ErrorCode::InvalidProducerEpoch)
        );
        // A bumped epoch must start over at 0 ...
        assert_eq!(
            produce(&mut st, 3, &[batch(1, 3, 3, 1)]),
            Err(ErrorCode::OutOfOrderSequenceNumber)
        );
        appended(produce(&mut st, 3, &[batch(1, 3, 0, 1)]));
        // ... and fences the old one, whose batches are forgotten.
        let entry = st.get(1).unwrap();
        assert_eq!((entry.epoch, entry.batches.len()), (3, 1));
        assert_eq!(
            produce(&mut st, 4, &[batch(1, 2, 3, 1)]),
            Err(ErrorCode::InvalidProducerEpoch)
        );
        assert_eq!(
            st.check(&[batch(1, 2, 0, 3)], 4),
            Err(ErrorCode::InvalidProducerEpoch),
            "not a duplicate: another epoch"
        );
    }

    #[test]
    fn batches_without_a_producer_id_are_not_checked() {
        let mut st = ProducerStates::default();
        appended(produce(&mut st, 0, &[batch(-1, -1, -1, 3)]));
        appended(produce(&mut st, 3, &[batch(-1, -1, -1, 3)]));
        assert_eq!(st, ProducerStates::default());
    }

    #[test]
    fn rebuilding_from_a_log_gives_the_state_its_batches_left() {
        let mut st = ProducerStates::default();
        let mut log = Vec::new();
        let mut offset = 0;
        for (pid, epoch, seq, n) in [(1, 0, 0, 2), (2, 0, 0, 1), (1, 0, 2, 3), (1, 1, 0, 1)] {
            let b = batch(pid, epoch, seq, n);
            appended(produce(&mut st, offset, &[b]));
            log.push((offset, b));
            offset += i64::from(n);
        }
        assert_eq!(ProducerStates::rebuild(log.iter().copied()), st);
        // Cut after the third batch: producer 1 is back at epoch 0.
        let cut = ProducerStates::rebuild(log[..3].iter().copied());
        assert_eq!(cut.get(1).unwrap().epoch, 0);
        assert_eq!(cut.get(1).unwrap().last_seq(), 4);
    }

    fn init(
        ids: &mut ProducerIds,
        version: i16,
        transactional_id: Option<&str>,
        expected: (i64, i16),
    ) -> (i16, i64, i16) {
        let req = InitProducerIdRequest {
            transactional_id: transactional_id.map(str::to_owned),
            transaction_timeout_ms: 60_000,
            producer_id: expected.0,
            producer_epoch: expected.1,
            ..Default::default()
        };
        let resp = ids.init(version, &req, |_| true);
        (resp.error_code, resp.producer_id, resp.producer_epoch)
    }

    #[test]
    fn without_a_transactional_id_every_request_gets_a_new_id() {
        let mut ids = ProducerIds::default();
        assert_eq!(init(&mut ids, 4, None, (-1, -1)), (0, 0, 0));
        assert_eq!(init(&mut ids, 0, None, (-1, -1)), (0, 1, 0));
        // Naming the current id and epoch (KIP-360) changes nothing: a new
        // id at epoch 0 (`TransactionCoordinator.handleInitProducerId`).
        assert_eq!(init(&mut ids, 4, None, (1, 0)), (0, 2, 0));
        // Only one of the two named: INVALID_REQUEST.
        let bad = ErrorCode::InvalidRequest.code();
        assert_eq!(init(&mut ids, 4, None, (1, -1)), (bad, -1, -1));
        assert_eq!(init(&mut ids, 4, None, (-1, 0)), (bad, -1, -1));
    }

    #[test]
    fn a_transactional_id_keeps_its_producer_id_and_bumps_the_epoch() {
        let mut ids = ProducerIds::default();
        let (_, other, _) = init(&mut ids, 4, None, (-1, -1));
        let (e, pid, epoch) = init(&mut ids, 4, Some("tx"), (-1, -1));
        assert_eq!((e, epoch), (0, 0));
        assert_ne!(pid, other);
        // Re-initialising without naming the id: the next epoch (a new
        // instance fencing the old one).
        assert_eq!(init(&mut ids, 4, Some("tx"), (-1, -1)), (0, pid, 1));
        // KIP-360: naming the current id and epoch bumps it.
        assert_eq!(init(&mut ids, 4, Some("tx"), (pid, 1)), (0, pid, 2));
        // The same request again (its answer was lost): epoch 2 again.
        assert_eq!(init(&mut ids, 4, Some("tx"), (pid, 1)), (0, pid, 2));
        // An older epoch, or another producer id: fenced. PRODUCER_FENCED
        // from version 4, INVALID_PRODUCER_EPOCH before.
        let fenced = ErrorCode::ProducerFenced.code();
        let old = ErrorCode::InvalidProducerEpoch.code();
        assert_eq!(init(&mut ids, 4, Some("tx"), (pid, 0)), (fenced, -1, -1));
        assert_eq!(init(&mut ids, 3, Some("tx"), (pid, 0)), (old, -1, -1));
        assert_eq!(init(&mut ids, 4, Some("tx"), (other, 2)), (fenced, -1, -1));
        // Nothing changed for the fenced requests.
        assert_eq!(init(&mut ids, 4, Some("tx"), (pid, 2)), (0, pid, 3));
        // Another transactional id: its own producer id.
        let (_, pid2, epoch2) = init(&mut ids, 4, Some("tx2"), (-1, -1));
        assert_ne!(pid2, pid);
        assert_eq!(epoch2, 0);
    }

    #[test]
    fn an_exhausted_epoch_moves_to_a_new_producer_id() {
        let mut ids = ProducerIds::default();
        let (_, pid, _) = init(&mut ids, 4, Some("tx"), (-1, -1));
        ids.transactional.get_mut("tx").unwrap().epoch = i16::MAX - 1;
        let (e, rotated, epoch) = init(&mut ids, 4, Some("tx"), (pid, i16::MAX - 1));
        assert_eq!((e, epoch), (0, 0));
        assert_ne!(rotated, pid);
        // The rotation's answer lost: the old id at the exhausted epoch is
        // still accepted, and bumps the new id.
        assert_eq!(
            init(&mut ids, 4, Some("tx"), (pid, i16::MAX - 1)),
            (0, rotated, 0)
        );
    }

    #[test]
    fn transactional_requests_are_checked_before_any_state_changes() {
        let mut ids = ProducerIds::default();
        let req = |id: &str, timeout: i32| InitProducerIdRequest {
            transactional_id: Some(id.to_owned()),
            transaction_timeout_ms: timeout,
            ..Default::default()
        };
        let code = |r: InitProducerIdResponse| (r.error_code, r.producer_id, r.producer_epoch);
        assert_eq!(
            code(ids.init(4, &req("", 1000), |_| true)),
            (ErrorCode::InvalidRequest.code(), -1, -1)
        );
        for timeout in [0, -1, TRANSACTION_MAX_TIMEOUT_MS + 1] {
            assert_eq!(
                code(ids.init(4, &req("tx", timeout), |_| true)),
                (ErrorCode::InvalidTransactionTimeout.code(), -1, -1)
            );
        }
        assert_eq!(
            code(ids.init(4, &req("tx", 1000), |_| false)),
            (ErrorCode::NotCoordinator.code(), -1, -1)
        );
        assert!(ids.transactional.is_empty());
        assert_eq!(
            code(ids.init(4, &req("tx", TRANSACTION_MAX_TIMEOUT_MS), |_| true)),
            (0, 0, 0)
        );
    }
}
