//! Producer states and producer ids rule by rule: sequences, duplicates,
//! epochs, rebuilding from a log, InitProducerId with and without a
//! transactional id.

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
