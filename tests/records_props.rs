//! Property tests of the records layer: round trips through the batch
//! builder for every codec, single-byte corruption, cut-off record sets,
//! and arbitrary bytes.

mod support;

// The fuzz target's checks: decode every way, check every outcome.
#[path = "../fuzz/src/lib.rs"]
#[allow(dead_code)] // the other targets' bodies
mod fuzz_body;

use bytes::Bytes;
use lazykafka::records::{
    AbortedTransaction, Compression, IsolationLevel, RecordBatchBuilder, RecordSetDecoder,
    Timestamp,
};
use proptest::prelude::*;
use support::{check_corruption, decode};

/// The timestamp a record written with `millis` reads back as: none for
/// Kafka's -1 (`NO_TIMESTAMP`).
fn timestamp(millis: i64, kind: fn(i64) -> Timestamp) -> Timestamp {
    if millis == -1 {
        Timestamp::NotAvailable
    } else {
        kind(millis)
    }
}

#[derive(Debug, Clone)]
struct Rec {
    gap: i64,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

fn bytes_field(max: usize) -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::weighted(0.9, proptest::collection::vec(any::<u8>(), 0..max))
}

fn rec() -> impl Strategy<Value = Rec> {
    (
        1i64..4,
        any::<i64>(),
        bytes_field(24),
        bytes_field(200),
        proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..8), bytes_field(8)),
            0..3,
        ),
    )
        .prop_map(|(gap, timestamp, key, value, headers)| Rec {
            gap,
            timestamp,
            key,
            value,
            headers,
        })
}

fn codec() -> impl Strategy<Value = Compression> {
    let enabled: Vec<_> = Compression::ALL
        .into_iter()
        .filter(|c| c.is_enabled())
        .collect();
    proptest::sample::select(enabled)
}

#[derive(Debug, Clone)]
struct Batch {
    base_offset: i64,
    codec: Compression,
    leader_epoch: i32,
    log_append_time: Option<i64>,
    records: Vec<Rec>,
}

fn batch() -> impl Strategy<Value = Batch> {
    (
        0i64..1 << 40,
        codec(),
        -1i32..100,
        proptest::option::of(any::<i64>()),
        proptest::collection::vec(rec(), 1..12),
    )
        .prop_map(
            |(base_offset, codec, leader_epoch, log_append_time, records)| Batch {
                base_offset,
                codec,
                leader_epoch,
                log_append_time,
                records,
            },
        )
}

/// Builds the batch; returns its bytes and each record's offset.
fn build(b: &Batch) -> (Bytes, Vec<i64>) {
    let mut builder = RecordBatchBuilder::new(b.base_offset)
        .compression(b.codec)
        .partition_leader_epoch(b.leader_epoch);
    if let Some(ts) = b.log_append_time {
        builder = builder.log_append_time(ts);
    }
    let mut offset = b.base_offset - 1;
    let mut offsets = Vec::new();
    for r in &b.records {
        offset += r.gap;
        offsets.push(offset);
        let headers: Vec<_> = r
            .headers
            .iter()
            .map(|(k, v)| (&k[..], v.as_deref()))
            .collect();
        builder
            .append_at(
                offset,
                r.timestamp,
                r.key.as_deref(),
                r.value.as_deref(),
                &headers,
            )
            .unwrap();
    }
    (builder.build().unwrap(), offsets)
}

/// Timestamps deltas must fit an i64: keep them in a sane range.
fn sane(mut b: Batch) -> Batch {
    for r in &mut b.records {
        r.timestamp >>= 2;
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn batches_round_trip_with_every_codec(b in batch().prop_map(sane)) {
        let (bytes, offsets) = build(&b);
        let decoded = decode(&bytes).unwrap();
        prop_assert_eq!(decoded.len(), b.records.len());
        prop_assert_eq!(decoded.next_offset, Some(offsets.last().unwrap() + 1));
        prop_assert_eq!(decoded.partial_tail, None);
        for ((got, want), offset) in decoded.iter().zip(&b.records).zip(&offsets) {
            prop_assert_eq!(got.offset(), *offset);
            match b.log_append_time {
                Some(ts) => {
                    prop_assert_eq!(got.timestamp(), timestamp(ts, Timestamp::LogAppendTime));
                }
                None => {
                    prop_assert_eq!(got.timestamp(), timestamp(want.timestamp, Timestamp::CreateTime));
                }
            }
            prop_assert_eq!(got.key().map(|k| k.to_vec()), want.key.clone());
            prop_assert_eq!(got.value().map(|v| v.to_vec()), want.value.clone());
            let headers: Vec<_> = got
                .headers()
                .iter()
                .map(|h| (h.key_bytes().to_vec(), h.value().map(|v| v.to_vec())))
                .collect();
            prop_assert_eq!(&headers, &want.headers);
            prop_assert_eq!(got.leader_epoch(), (b.leader_epoch >= 0).then_some(b.leader_epoch));
        }
    }

    #[test]
    fn single_byte_corruption_is_detected(
        b in batch().prop_map(sane),
        at in any::<prop::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let (bytes, _) = build(&b);
        let pos = at.index(bytes.len());
        if let Err(e) = check_corruption(&bytes, pos, mask) {
            prop_assert!(false, "{} ({:?})", e, b.codec);
        }
    }

    #[test]
    fn cut_record_sets_keep_the_whole_batches(
        batches in proptest::collection::vec(batch().prop_map(sane), 1..5),
        cut in any::<prop::sample::Index>(),
    ) {
        // Consecutive batches, as one partition's log.
        let mut set = Vec::new();
        let mut ends = Vec::new(); // (end byte, records so far, next offset)
        let mut next = 0;
        let mut count = 0;
        for b in &batches {
            let b = Batch { base_offset: next, ..b.clone() };
            let (bytes, offsets) = build(&b);
            set.extend_from_slice(&bytes);
            next = offsets.last().unwrap() + 1;
            count += offsets.len();
            ends.push((set.len(), count, next));
        }
        let cut = cut.index(set.len() + 1);
        let decoded = decode(&Bytes::copy_from_slice(&set[..cut])).unwrap();
        let whole = ends.iter().take_while(|(end, _, _)| *end <= cut).last();
        prop_assert_eq!(decoded.len(), whole.map_or(0, |w| w.1));
        prop_assert_eq!(decoded.next_offset, whole.map(|w| w.2));
        let start = whole.map_or(0, |w| w.0);
        prop_assert_eq!(decoded.partial_tail.map(|t| (t.position, t.bytes)), (cut > start).then_some((start, cut - start)));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        fuzz_body::record_set(&bytes);
    }

    #[test]
    fn damaged_batches_never_panic_without_crc_checks(
        b in batch().prop_map(sane),
        hits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        // With CRCs off the damage reaches the record parser and codecs.
        let (bytes, _) = build(&b);
        let mut bad = bytes.to_vec();
        for (at, byte) in hits {
            let i = at.index(bad.len());
            bad[i] = byte;
        }
        fuzz_body::record_set(&bad);
    }
}

#[test]
fn transactions_built_here_follow_kip_98() {
    // Producer 1 aborts twice (two aborted entries), producer 2 commits in
    // between; producer 3 is idempotent only.
    let txn = |base: i64, pid: i64| {
        let mut b = RecordBatchBuilder::new(base)
            .producer(pid, 0, 0)
            .transactional(true);
        b.append(0, None, Some(b"x"), &[]).unwrap();
        b.append(0, None, Some(b"y"), &[]).unwrap();
        b.build().unwrap()
    };
    let marker = |base: i64, pid: i64, kind| {
        RecordBatchBuilder::control_batch(base, pid, 0, kind, 5, 0).unwrap()
    };
    use lazykafka::records::ControlRecordType::{Abort, Commit};
    let mut idem = RecordBatchBuilder::new(8).producer(3, 0, 0);
    idem.append(0, None, Some(b"i"), &[]).unwrap();
    let set = [
        txn(0, 1),
        txn(2, 2),
        marker(4, 1, Abort),
        marker(5, 2, Commit),
        txn(6, 1),
        idem.build().unwrap(),
        marker(9, 1, Abort),
        txn(10, 1),
        marker(12, 1, Commit),
    ]
    .concat();
    let aborted = [
        AbortedTransaction {
            producer_id: 1,
            first_offset: 6,
        },
        AbortedTransaction {
            producer_id: 1,
            first_offset: 0,
        },
    ];
    let offsets = |isolation| {
        let d = RecordSetDecoder::default()
            .decode(Bytes::from(set.clone()), isolation, &aborted)
            .unwrap();
        assert_eq!(d.next_offset, Some(13));
        assert_eq!(d.control_batches, 4);
        d.iter().map(|r| r.offset()).collect::<Vec<_>>()
    };
    assert_eq!(offsets(IsolationLevel::ReadCommitted), [2, 3, 8, 10, 11]);
    assert_eq!(
        offsets(IsolationLevel::ReadUncommitted),
        [0, 1, 2, 3, 6, 7, 8, 10, 11]
    );
}

#[test]
fn empty_batches_left_by_compaction_advance_the_offset() {
    // A batch compaction emptied keeps its offsets: lastOffsetDelta 9.
    let empty = RecordBatchBuilder::new(20)
        .last_offset_delta(9)
        .build()
        .unwrap();
    let d = decode(&empty).unwrap();
    assert!(d.is_empty());
    assert_eq!(d.next_offset, Some(30));
    assert_eq!(d.batches, 1);
}
