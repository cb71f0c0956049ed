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
//! Each partition (`topic.rs`) keeps its `ProducerStates`, checked by
//! `api/produce.rs`; the cluster's state keeps the `ProducerIds`, given
//! by `api/init_producer_id.rs`.
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
        init_answer(version, self.init_result(req, coordinates))
    }

    /// The producer id and epoch an InitProducerId gets, or why none.
    fn init_result(
        &mut self,
        req: &InitProducerIdRequest,
        coordinates: impl FnOnce(&str) -> bool,
    ) -> Result<(i64, i16), ErrorCode> {
        let expected = match (req.producer_id, req.producer_epoch) {
            (-1, NO_EPOCH) => None,
            (-1, _) | (_, NO_EPOCH) => return Err(ErrorCode::InvalidRequest),
            (id, epoch) => Some((id, epoch)),
        };
        let Some(transactional_id) = req.transactional_id.as_deref() else {
            // Without a transactional id, always a new producer id (an
            // idempotent producer that must start over gets one; it bumps
            // its epoch by itself otherwise, KIP-360).
            return Ok((self.allocate(), 0));
        };
        if transactional_id.is_empty() {
            return Err(ErrorCode::InvalidRequest);
        }
        if req.transaction_timeout_ms <= 0
            || req.transaction_timeout_ms > TRANSACTION_MAX_TIMEOUT_MS
        {
            return Err(ErrorCode::InvalidTransactionTimeout);
        }
        if !coordinates(transactional_id) {
            return Err(ErrorCode::NotCoordinator);
        }
        self.init_transactional(transactional_id, expected)
    }

    /// A transactional id's producer id and next epoch, as Kafka's
    /// `TransactionCoordinator.handleInitProducerId` gives them; `expected`
    /// is the producer id and epoch the request names (KIP-360).
    fn init_transactional(
        &mut self,
        transactional_id: &str,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), ErrorCode> {
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
            return Err(ErrorCode::ProducerFenced);
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
            return Ok((rotated.producer_id, 0));
        }
        // `prepareIncrementProducerEpoch`, which Kafka refuses with an
        // IllegalStateException (UNKNOWN_SERVER_ERROR) for an exhausted
        // epoch (reached only by a request naming neither it nor the last).
        if epoch_exhausted(txn.epoch) {
            return Err(ErrorCode::UnknownServerError);
        }
        let bumped = txn.epoch + 1;
        let (epoch, last_epoch) = match expected {
            None => (bumped, NO_EPOCH),
            Some((_, e)) if txn.epoch == NO_EPOCH || e == txn.epoch => (bumped, txn.epoch),
            // A retry of a bump whose answer was lost: the same epoch again.
            Some((_, e)) if e == txn.last_epoch => (txn.epoch, txn.last_epoch),
            Some(_) => return Err(ErrorCode::ProducerFenced),
        };
        txn.previous_producer_id = txn.producer_id;
        txn.epoch = epoch;
        txn.last_epoch = last_epoch;
        Ok((txn.producer_id, epoch))
    }
}

/// InitProducerId's answer at `version` for `result`.
fn init_answer(version: i16, result: Result<(i64, i16), ErrorCode>) -> InitProducerIdResponse {
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
}

#[cfg(test)]
mod tests;
