use super::*;
use crate::records::{producer_state, IsolationLevel, RecordSetDecoder};
use proptest::prelude::*;
use std::collections::BTreeMap;

const MS: Duration = Duration::from_millis(1);

fn tp(partition: i32) -> TopicPartition {
    TopicPartition::new("t", partition)
}

fn rec(value: &[u8], timestamp: i64) -> NewRecord {
    NewRecord {
        value: Some(Bytes::copy_from_slice(value)),
        timestamp,
        ..NewRecord::default()
    }
}

/// The encoded size of `rec(&[_; len], ts)` as the `offset_delta`-th record
/// of a batch whose first record has the same timestamp.
fn rec_size(offset_delta: i32, len: usize) -> usize {
    encoded_record_size(offset_delta, 0, None, Some(&vec![0; len]), &[])
}

fn leader(broker: i32) -> impl Fn(&TopicPartition) -> Option<i32> {
    move |_| Some(broker)
}

/// The sender of a producer without idempotence: takes every batch.
fn plain(_: &TopicPartition, _: &ProducerBatchInfo) -> Option<Option<Stamp>> {
    Some(None)
}

fn drain(acc: &mut Accumulator, now: Instant) -> Vec<ProducerBatch> {
    let drained = acc.drain(now, 1, leader(1), plain);
    assert!(drained.failed.is_empty());
    drained.batches
}

fn partitions(batches: &[ProducerBatch]) -> Vec<i32> {
    batches.iter().map(|b| b.tp.partition).collect()
}

type Header = (Vec<u8>, Option<Vec<u8>>);
/// Key, value, headers and timestamp.
type Decoded = (Option<Vec<u8>>, Option<Vec<u8>>, Vec<Header>, i64);

/// Key, value, headers and timestamp of every record of `batch`, decoded
/// with its CRC checked.
fn decode(batch: &Bytes) -> Vec<Decoded> {
    let decoded = RecordSetDecoder::default()
        .decode(batch.clone(), IsolationLevel::ReadUncommitted, &[])
        .unwrap();
    assert_eq!(decoded.batches, 1);
    decoded
        .iter()
        .enumerate()
        .map(|(i, r)| {
            assert_eq!(r.offset(), i as i64);
            (
                r.key().map(<[u8]>::to_vec),
                r.value().map(<[u8]>::to_vec),
                r.headers()
                    .iter()
                    .map(|h| (h.key_bytes().to_vec(), h.value().map(<[u8]>::to_vec)))
                    .collect(),
                r.timestamp().millis().unwrap_or(-1),
            )
        })
        .collect()
}

#[test]
fn only_a_record_that_opens_a_batch_reads_the_clock() {
    let t0 = Instant::now();
    let exact = BATCH_HEADER_LEN + rec_size(0, 10) + rec_size(1, 10);
    let mut acc = Accumulator::new(AccumulatorConfig {
        batch_size: exact,
        ..AccumulatorConfig::default()
    });
    let mut reads = 0;
    let mut clock = || {
        reads += 1;
        t0
    };
    // Two records fill a batch; the third opens the next one.
    let mut read_by = Vec::new();
    for _ in 0..3 {
        let mut now = Memo::new(&mut clock);
        acc.append(&mut now, &tp(0), &rec(&[1; 10], 1000)).unwrap();
        read_by.push(now.read().is_some());
    }
    assert_eq!(read_by, [true, false, true]);
    assert_eq!(reads, 2);
}

#[test]
fn a_batch_closes_at_batch_size() {
    let t0 = Instant::now();
    let exact = BATCH_HEADER_LEN + rec_size(0, 10) + rec_size(1, 10) + rec_size(2, 10);
    for (batch_size, first_batch) in [(exact, 3), (exact - 1, 2), (exact + 1, 3)] {
        let mut acc = Accumulator::new(AccumulatorConfig {
            batch_size,
            ..AccumulatorConfig::default()
        });
        let ids: Vec<RecordId> = (0..4)
            .map(|_| acc.append(t0, &tp(0), &rec(&[1; 10], 1000)).unwrap().id)
            .collect();
        // The first batch is full: ready before its linger ends.
        assert_eq!(acc.ready(t0, leader(1)).brokers, BTreeSet::from([1]));
        let first = drain(&mut acc, t0);
        assert_eq!(first.len(), 1);
        assert_eq!(
            first[0].records,
            ids[..first_batch],
            "batch.size {batch_size}"
        );
        assert!(first[0].size <= batch_size);
        assert_eq!(first[0].bytes.len(), first[0].size);
        let second = drain(&mut acc, t0);
        assert_eq!(second[0].records, ids[first_batch..]);
        assert!(acc.is_empty());
    }
}

#[test]
fn a_record_larger_than_a_batch_gets_a_batch_of_its_own() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(AccumulatorConfig {
        batch_size: 200,
        ..AccumulatorConfig::default()
    });
    let small = acc.append(t0, &tp(0), &rec(&[1; 10], 0)).unwrap().id;
    let big = acc.append(t0, &tp(0), &rec(&[2; 500], 0)).unwrap().id;
    let after = acc.append(t0, &tp(0), &rec(&[3; 10], 0)).unwrap().id;
    let batches: Vec<Vec<RecordId>> = (0..3)
        .map(|_| drain(&mut acc, t0).remove(0).records)
        .collect();
    assert_eq!(batches, [vec![small], vec![big], vec![after]]);
    assert!(acc.is_empty());
}

#[test]
fn a_record_too_large_for_a_request_or_the_buffer_is_refused() {
    let t0 = Instant::now();
    let max_request_size = BATCH_HEADER_LEN + rec_size(0, 100);
    let mut acc = Accumulator::new(AccumulatorConfig {
        max_request_size,
        ..AccumulatorConfig::default()
    });
    assert_eq!(
        acc.append(t0, &tp(0), &rec(&[0; 101], 0)),
        Err(AppendError::RecordTooLarge {
            size: max_request_size + 1,
            max: max_request_size
        })
    );
    assert_eq!(acc.buffered_bytes(), 0);
    assert!(acc.is_empty());
    acc.append(t0, &tp(0), &rec(&[0; 100], 0)).unwrap();
    assert_eq!(acc.buffered_bytes(), max_request_size);

    let mut acc = Accumulator::new(AccumulatorConfig {
        buffer_memory: 100,
        ..AccumulatorConfig::default()
    });
    assert_eq!(
        acc.append(t0, &tp(0), &rec(&[0; 100], 0)),
        Err(AppendError::RecordTooLarge {
            size: max_request_size,
            max: 100
        })
    );
}

#[test]
fn linger_decides_readiness() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(AccumulatorConfig {
        linger: 5 * MS,
        ..AccumulatorConfig::default()
    });
    acc.append(t0, &tp(0), &rec(b"a", 0)).unwrap();
    acc.append(t0 + 2 * MS, &tp(1), &rec(b"b", 0)).unwrap();
    let leaders = |tp: &TopicPartition| (tp.partition == 0).then_some(7);
    for now in [t0, t0 + 4 * MS] {
        let ready = acc.ready(now, leaders);
        assert!(ready.brokers.is_empty());
        assert_eq!(ready.next_check, Some(t0 + 5 * MS));
        // Partition 1 has no known leader: named, and no check for it.
        assert_eq!(ready.unknown_leaders, BTreeSet::from([tp(1)]));
    }
    assert_eq!(acc.next_deadline(t0), Some(t0 + 5 * MS));
    let ready = acc.ready(t0 + 5 * MS, leaders);
    assert_eq!(ready.brokers, BTreeSet::from([7]));
    assert_eq!(ready.next_check, None);
    // Partition 1's linger ends later.
    assert_eq!(acc.next_deadline(t0 + 5 * MS), Some(t0 + 7 * MS));
    let ready = acc.ready(t0 + 7 * MS, |_| Some(7));
    assert_eq!(ready.brokers, BTreeSet::from([7]));
    // Past the lingers, the next deadline is the delivery timeout.
    assert_eq!(
        acc.next_deadline(t0 + 7 * MS),
        Some(t0 + AccumulatorConfig::default().delivery_timeout)
    );
}

#[test]
fn a_flush_makes_everything_ready_until_the_records_before_it_complete() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(AccumulatorConfig::default());
    acc.append(t0, &tp(0), &rec(b"a", 0)).unwrap();
    assert!(acc.ready(t0, leader(1)).brokers.is_empty());
    let marker = acc.flush();
    assert!(!acc.flush_done(marker));
    assert_eq!(acc.ready(t0, leader(1)).brokers, BTreeSet::from([1]));
    assert_eq!(
        acc.next_deadline(t0),
        Some(t0 + acc.config().delivery_timeout)
    );
    let sent = drain(&mut acc, t0);
    // In flight: not done yet, and records appended meanwhile go at once.
    acc.append(t0, &tp(1), &rec(b"b", 0)).unwrap();
    assert!(!acc.flush_done(marker));
    assert_eq!(acc.ready(t0, leader(2)).brokers, BTreeSet::from([2]));
    acc.complete(&sent[0]);
    assert!(acc.flush_done(marker));
    // Over: the later record lingers again.
    assert!(acc.ready(t0, leader(2)).brokers.is_empty());
    // A flush with nothing incomplete is done at once.
    let mut empty = Accumulator::new(AccumulatorConfig::default());
    let marker = empty.flush();
    assert!(empty.flush_done(marker));
}

#[test]
fn drain_stays_within_max_request_size_and_takes_partitions_in_turn() {
    let t0 = Instant::now();
    // One record per batch, each batch `size` bytes; two fit a request.
    let size = BATCH_HEADER_LEN + rec_size(0, 50);
    let mut acc = Accumulator::new(AccumulatorConfig {
        batch_size: size,
        max_request_size: 3 * size - 1,
        ..AccumulatorConfig::default()
    });
    for _ in 0..4 {
        for p in 0..3 {
            acc.append(t0, &tp(p), &rec(&[0; 50], 0)).unwrap();
        }
    }
    let mut order = Vec::new();
    for _ in 0..6 {
        let batches = drain(&mut acc, t0);
        assert_eq!(batches.len(), 2);
        assert!(batches.iter().map(|b| b.bytes.len()).sum::<usize>() < 3 * size);
        order.extend(partitions(&batches));
    }
    assert_eq!(order, [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]);

    // When all fit, each drain starts one partition further.
    let mut acc = Accumulator::new(AccumulatorConfig::default());
    let mut firsts = Vec::new();
    for _ in 0..4 {
        for p in 0..3 {
            acc.append(t0, &tp(p), &rec(b"x", 0)).unwrap();
        }
        let batches = drain(&mut acc, t0);
        assert_eq!(batches.len(), 3);
        firsts.push(batches[0].tp.partition);
    }
    assert_eq!(firsts, [0, 1, 2, 0]);

    // Only the broker's own partitions.
    acc.append(t0, &tp(0), &rec(b"x", 0)).unwrap();
    acc.append(t0, &tp(1), &rec(b"x", 0)).unwrap();
    let leaders = |tp: &TopicPartition| Some(tp.partition + 10);
    let drained = acc.drain(t0, 11, leaders, plain);
    assert_eq!(partitions(&drained.batches), [1]);
    assert!(acc.drain(t0, 12, leaders, plain).is_empty());
}

#[test]
fn a_partition_the_sender_skips_keeps_its_open_batch() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(AccumulatorConfig::default());
    let a = acc.append(t0, &tp(0), &rec(b"a", 0)).unwrap().id;
    acc.append(t0, &tp(1), &rec(b"b", 0)).unwrap();
    let mut asked = Vec::new();
    let drained = acc.drain(t0, 1, leader(1), |tp, info| {
        asked.push((tp.partition, info.record_count, info.stamp));
        (tp.partition != 0).then_some(None)
    });
    assert_eq!(asked, [(0, 1, None), (1, 1, None)]);
    assert_eq!(partitions(&drained.batches), [1]);
    // Still open: the next record joins it.
    let b = acc.append(t0, &tp(0), &rec(b"b", 0)).unwrap().id;
    let batches = drain(&mut acc, t0);
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].records, [a, b]);
}

#[test]
fn built_batches_decode_to_the_records_with_the_stamp_for_every_codec() {
    let t0 = Instant::now();
    let compressible = vec![b'z'; 3000];
    let records = [
        NewRecord {
            key: Some(Bytes::from_static(b"key")),
            value: Some(Bytes::from_static(b"value")),
            headers: vec![
                ("a".into(), Some(Bytes::from_static(b"1"))),
                ("b".into(), None),
                ("a".into(), Some(Bytes::new())),
            ],
            timestamp: 1_700_000_000_000,
        },
        // Null key and value, an earlier timestamp.
        NewRecord {
            timestamp: 1_699_999_999_000,
            ..NewRecord::default()
        },
        NewRecord {
            key: Some(Bytes::new()),
            value: Some(Bytes::from(compressible.clone())),
            headers: vec![],
            timestamp: 1_700_000_000_123,
        },
    ];
    let expected: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r.key.as_ref().map(|b| b.to_vec()),
                r.value.as_ref().map(|b| b.to_vec()),
                r.headers
                    .iter()
                    .map(|(k, v)| (k.as_bytes().to_vec(), v.as_ref().map(|b| b.to_vec())))
                    .collect::<Vec<_>>(),
                r.timestamp,
            )
        })
        .collect();
    let stamp = Stamp {
        producer_id: 42,
        epoch: 3,
        base_sequence: 100,
    };
    let codecs: Vec<Compression> = Compression::ALL
        .into_iter()
        .filter(|c| c.is_enabled())
        .collect();
    assert_eq!(codecs.len(), 5, "every codec's feature is on in tests");
    for codec in codecs {
        for (given, transactional) in [(Some(stamp), false), (Some(stamp), true), (None, false)] {
            let mut acc = Accumulator::new(AccumulatorConfig {
                compression: codec,
                transactional,
                ..AccumulatorConfig::default()
            });
            for r in &records {
                acc.append(t0, &tp(0), r).unwrap();
            }
            let drained = acc.drain(t0, 1, leader(1), |_, info| {
                assert_eq!(info.record_count, 3);
                Some(given)
            });
            let batch = &drained.batches[0];
            assert_eq!(batch.compression, codec);
            assert_eq!(batch.stamp, given);
            assert_eq!(batch.attempts, 1);
            assert_eq!(decode(&batch.bytes), expected, "{codec}");
            assert_eq!(
                producer_state(&batch.bytes),
                Some(given.map_or((-1, -1, -1), |s| (s.producer_id, s.epoch, s.base_sequence)))
            );
            let attributes = i16::from_be_bytes([batch.bytes[21], batch.bytes[22]]);
            assert_eq!(attributes & 0x07, i16::from(codec.id()));
            assert_eq!(attributes & 0x10 != 0, transactional);
            if codec != Compression::None {
                assert!(batch.bytes.len() < batch.size, "{codec} compresses");
            }
        }
    }
}

/// The sender of an idempotent producer: each new batch gets the next
/// sequence numbers of its partition.
struct Sequences(BTreeMap<TopicPartition, i32>);

impl Sequences {
    fn stamp(&mut self, tp: &TopicPartition, info: &ProducerBatchInfo) -> Option<Option<Stamp>> {
        if info.stamp.is_some() {
            // A retry keeps its own, whatever is answered.
            return Some(Some(Stamp {
                producer_id: -7,
                epoch: -7,
                base_sequence: -7,
            }));
        }
        let next = self.0.entry(tp.clone()).or_default();
        let base_sequence = *next;
        *next += info.record_count as i32;
        Some(Some(Stamp {
            producer_id: 9,
            epoch: 0,
            base_sequence,
        }))
    }
}

#[test]
fn retries_go_first_in_sequence_order_with_their_bytes() {
    let t0 = Instant::now();
    // Every record a batch of its own.
    let mut acc = Accumulator::new(AccumulatorConfig {
        batch_size: 1,
        ..AccumulatorConfig::default()
    });
    let mut seq = Sequences(BTreeMap::new());
    for i in 0..3 {
        acc.append(t0, &tp(0), &rec(&[i], 0)).unwrap();
    }
    let mut sent: Vec<ProducerBatch> = (0..3)
        .flat_map(|_| {
            acc.drain(t0, 1, leader(1), |tp, i| seq.stamp(tp, i))
                .batches
        })
        .collect();
    let bytes: Vec<Bytes> = sent.iter().map(|b| b.bytes.clone()).collect();
    let sequences = |batches: &[ProducerBatch]| -> Vec<i32> {
        batches
            .iter()
            .map(|b| b.stamp.unwrap().base_sequence)
            .collect()
    };
    assert_eq!(sequences(&sent), [0, 1, 2]);
    let newer = acc.append(t0, &tp(0), &rec(b"newer", 0)).unwrap().id;
    // The answers come back in another order.
    let retry_at = t0 + 100 * MS;
    for i in [2, 0, 1] {
        let batch = std::mem::replace(&mut sent[i], dummy(&acc));
        acc.reenqueue(batch, retry_at);
    }
    // Backing off: not ready, not drained, whatever the flush.
    acc.flush();
    let ready = acc.ready(t0 + 50 * MS, leader(1));
    assert!(ready.brokers.is_empty());
    assert_eq!(ready.next_check, Some(retry_at));
    assert!(acc
        .drain(t0 + 50 * MS, 1, leader(1), |tp, i| seq.stamp(tp, i))
        .is_empty());
    assert_eq!(acc.ready(retry_at, leader(1)).brokers, BTreeSet::from([1]));
    let again: Vec<ProducerBatch> = (0..4)
        .flat_map(|_| {
            acc.drain(retry_at, 1, leader(1), |tp, i| seq.stamp(tp, i))
                .batches
        })
        .collect();
    assert_eq!(sequences(&again), [0, 1, 2, 3]);
    assert_eq!(again[3].records, [newer]);
    for (batch, before) in again.iter().zip(&bytes) {
        assert_eq!(&batch.bytes, before);
        assert_eq!(batch.attempts, 2);
    }
    assert_eq!(again[3].attempts, 1);
}

/// A batch to leave in place of one moved out (never given to `acc`).
fn dummy(acc: &Accumulator) -> ProducerBatch {
    ProducerBatch {
        tp: tp(-1),
        records: vec![],
        bytes: Bytes::new(),
        created: Instant::now(),
        attempts: 0,
        stamp: None,
        size: 0,
        compression: acc.config().compression,
        first: RecordId(u64::MAX),
    }
}

#[test]
fn restamping_rewrites_the_header_and_the_crc_still_holds() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(AccumulatorConfig {
        compression: Compression::None,
        ..AccumulatorConfig::default()
    });
    let mut seq = Sequences(BTreeMap::new());
    acc.append(t0, &tp(0), &rec(b"one", 5)).unwrap();
    acc.append(t0, &tp(0), &rec(b"two", 6)).unwrap();
    let mut batch = acc
        .drain(t0, 1, leader(1), |tp, i| seq.stamp(tp, i))
        .batches
        .remove(0);
    let records = decode(&batch.bytes);
    let bumped = Stamp {
        producer_id: 9,
        epoch: 1,
        base_sequence: 0,
    };
    // In flight: rewritten in the batch.
    let before = batch.bytes.clone();
    batch.restamp(bumped).unwrap();
    assert_eq!(batch.stamp, Some(bumped));
    assert_eq!(producer_state(&batch.bytes), Some((9, 1, 0)));
    assert_ne!(batch.bytes[17..21], before[17..21]);
    assert_eq!(decode(&batch.bytes), records);

    // Queued for a retry: rewritten there.
    acc.reenqueue(batch, t0);
    let again = Stamp {
        producer_id: 10,
        epoch: 0,
        base_sequence: 4,
    };
    let mut seen = Vec::new();
    let n = acc
        .restamp(&tp(0), |info| {
            seen.push(info.stamp);
            Some(again)
        })
        .unwrap();
    assert_eq!((n, seen), (1, vec![Some(bumped)]));
    let batch = acc
        .drain(t0, 1, leader(1), |tp, i| seq.stamp(tp, i))
        .batches
        .remove(0);
    assert_eq!(batch.stamp, Some(again));
    assert_eq!(producer_state(&batch.bytes), Some((10, 0, 4)));
    assert_eq!(decode(&batch.bytes), records);

    // A batch never built has no header to rewrite.
    acc.append(t0, &tp(0), &rec(b"three", 7)).unwrap();
    let mut aborted = acc.abort_all().remove(0);
    assert!(aborted.restamp(again).is_err());
    assert_eq!((aborted.bytes.len(), aborted.stamp), (0, None));
}

#[test]
fn a_split_batch_is_two_halves_with_its_records_and_sequences_for_every_codec() {
    let t0 = Instant::now();
    for compression in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut acc = Accumulator::new(AccumulatorConfig {
            compression,
            ..AccumulatorConfig::default()
        });
        let mut seq = Sequences(BTreeMap::new());
        // Two records first, so the batch split is the second (base
        // sequence 2).
        acc.append(t0, &tp(0), &rec(b"a", 1)).unwrap();
        acc.append(t0, &tp(0), &rec(b"b", 2)).unwrap();
        acc.drain(t0, 1, leader(1), |tp, i| seq.stamp(tp, i));
        let mut ids = Vec::new();
        for i in 0..5u8 {
            let mut r = rec(&[b'0' + i], 100 + i64::from(i));
            r.key = Some(Bytes::from(vec![b'k', i]));
            r.headers = vec![(format!("h{i}"), Some(Bytes::from_static(b"v")))];
            ids.push(acc.append(t0, &tp(0), &r).unwrap().id);
        }
        let batch = acc
            .drain(t0, 1, leader(1), |tp, i| seq.stamp(tp, i))
            .batches
            .remove(0);
        let whole = decode(&batch.bytes);
        let halves = batch.split().unwrap();
        assert_eq!(halves.len(), 2, "{compression:?}");
        let (first, second) = (&halves[0].0, &halves[1].0);
        assert_eq!((halves[0].1, halves[1].1), (0, 2), "{compression:?}");
        assert_eq!(first.records, ids[..2], "{compression:?}");
        assert_eq!(second.records, ids[2..], "{compression:?}");
        assert_eq!((first.first(), second.first()), (ids[0], ids[2]));
        // Each half carries the sequences its records had, with the codec.
        let seqs = |b: &ProducerBatch| b.stamp.map(|s| s.base_sequence);
        assert_eq!((seqs(first), seqs(second)), (Some(2), Some(4)));
        assert_eq!(
            crate::records::producer_state(&second.bytes),
            Some((9, 0, 4))
        );
        for (half, _) in &halves {
            assert_eq!(half.compression, compression);
            assert_eq!(half.created, batch.created);
            assert_eq!(half.attempts, 0);
        }
        let mut rejoined = decode(&first.bytes);
        rejoined.extend(decode(&second.bytes));
        assert_eq!(rejoined, whole, "{compression:?}");
        // A half of one record cannot be split again.
        let one = first.split().unwrap().remove(0).0.split();
        assert!(one.is_err(), "{compression:?}");
    }
}

#[test]
fn expire_takes_only_batches_past_the_delivery_timeout() {
    let t0 = Instant::now();
    let timeout = 100 * MS;
    let mut acc = Accumulator::new(AccumulatorConfig {
        delivery_timeout: timeout,
        ..AccumulatorConfig::default()
    });
    let a = acc.append(t0, &tp(0), &rec(b"a", 0)).unwrap().id;
    let r = acc.append(t0 + 10 * MS, &tp(2), &rec(b"r", 0)).unwrap().id;
    let only_2 = |tp: &TopicPartition| Some(if tp.partition == 2 { 2 } else { 1 });
    let retry = acc.drain(t0 + 10 * MS, 2, only_2, plain).batches.remove(0);
    acc.reenqueue(retry, t0 + 1000 * MS);
    let b = acc.append(t0 + 60 * MS, &tp(1), &rec(b"b", 0)).unwrap().id;
    // The open batch of partition 0 takes a later record: its time still
    // counts from the first.
    let a2 = acc.append(t0 + 90 * MS, &tp(0), &rec(b"a2", 0)).unwrap().id;
    let held = acc.buffered_bytes();

    assert!(acc.expire(t0 + 99 * MS).is_empty());
    assert_eq!(acc.next_deadline(t0 + 99 * MS), Some(t0 + timeout));
    let expired = acc.expire(t0 + timeout);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].records, [a, a2]);
    assert!(expired[0].bytes.is_empty());
    assert_eq!(acc.buffered_bytes(), held - expired[0].size);

    let expired = acc.expire(t0 + 110 * MS);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].records, [r]);
    assert_eq!(expired[0].attempts, 1);
    assert!(!expired[0].bytes.is_empty());
    // Completing what expire handed out changes nothing.
    let left = acc.buffered_bytes();
    acc.complete(&expired[0]);
    assert_eq!(acc.buffered_bytes(), left);

    assert!(acc.expire(t0 + 159 * MS).is_empty());
    let expired = acc.expire(t0 + 160 * MS);
    assert_eq!(expired[0].records, [b]);
    assert!(acc.is_empty());
    assert_eq!(acc.buffered_bytes(), 0);
    assert_eq!(acc.next_deadline(t0 + 160 * MS), None);
}

#[test]
fn memory_is_held_until_complete_and_a_full_buffer_says_how_much() {
    let t0 = Instant::now();
    let first = BATCH_HEADER_LEN + rec_size(0, 100);
    let second = rec_size(1, 100);
    let mut acc = Accumulator::new(AccumulatorConfig {
        buffer_memory: first + second + 5,
        ..AccumulatorConfig::default()
    });
    acc.append(t0, &tp(0), &rec(&[0; 100], 0)).unwrap();
    assert_eq!(acc.buffered_bytes(), first);
    acc.append(t0, &tp(0), &rec(&[0; 100], 0)).unwrap();
    assert_eq!(acc.buffered_bytes(), first + second);
    assert_eq!(acc.available(), 5);
    assert_eq!(
        acc.append(t0, &tp(0), &rec(&[0; 100], 0)),
        Err(AppendError::BufferFull {
            needed: rec_size(2, 100),
            available: 5
        })
    );
    // Refused for memory: ready at once, so that memory frees.
    assert_eq!(acc.ready(t0, leader(1)).brokers, BTreeSet::from([1]));
    let batch = drain(&mut acc, t0).remove(0);
    assert_eq!(batch.size, first + second);
    // In flight, still held.
    assert_eq!(acc.buffered_bytes(), first + second);
    assert!(acc.has_incomplete());
    acc.complete(&batch);
    assert_eq!(
        (acc.buffered_bytes(), acc.available()),
        (0, first + second + 5)
    );
    acc.complete(&batch);
    assert_eq!(acc.buffered_bytes(), 0);
    assert!(!acc.has_incomplete());
    // Appended again: lingering as usual.
    acc.append(t0, &tp(0), &rec(&[0; 100], 0)).unwrap();
    assert!(acc.ready(t0, leader(1)).brokers.is_empty());
    // A new batch needs its header too.
    let mut acc = Accumulator::new(AccumulatorConfig {
        buffer_memory: first + 10,
        ..AccumulatorConfig::default()
    });
    acc.append(t0, &tp(0), &rec(&[0; 100], 0)).unwrap();
    assert_eq!(
        acc.append(t0, &tp(1), &rec(&[0; 100], 0)),
        Err(AppendError::BufferFull {
            needed: first,
            available: 10
        })
    );
}

#[test]
fn abort_all_hands_out_the_queued_batches_and_frees_them() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(AccumulatorConfig::default());
    acc.append(t0, &tp(0), &rec(b"a", 0)).unwrap();
    let in_flight = drain(&mut acc, t0).remove(0);
    let b = acc.append(t0, &tp(0), &rec(b"b", 0)).unwrap().id;
    let c = acc.append(t0, &tp(1), &rec(b"c", 0)).unwrap().id;
    let aborted = acc.abort_all();
    let records: Vec<_> = aborted.iter().map(|b| b.records.clone()).collect();
    assert_eq!(records, [vec![b], vec![c]]);
    assert!(acc.is_empty());
    assert_eq!(acc.partitions_with_data().count(), 0);
    assert_eq!(acc.buffered_bytes(), in_flight.size);
    acc.complete(&in_flight);
    assert_eq!(acc.buffered_bytes(), 0);
}

/// What the model knows of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Queued,
    InFlight,
    Done,
}

#[derive(Debug, Clone)]
enum Op {
    Append {
        partition: i32,
        len: usize,
        ts_step: i64,
    },
    Drain {
        broker: i32,
        skip: u8,
    },
    Complete(usize),
    Retry(usize),
    Tick(u64),
    Expire,
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..4i32, 0..60usize, -3..20i64)
            .prop_map(|(partition, len, ts_step)| Op::Append { partition, len, ts_step }),
        3 => (0..2i32, any::<u8>()).prop_map(|(broker, skip)| Op::Drain { broker, skip }),
        2 => any::<usize>().prop_map(Op::Complete),
        1 => any::<usize>().prop_map(Op::Retry),
        2 => (0..40u64).prop_map(Op::Tick),
        1 => Just(Op::Expire),
        1 => Just(Op::Flush),
    ]
}

/// Drives an accumulator and a model of its records side by side.
struct Harness {
    acc: Accumulator,
    now: Instant,
    ts: i64,
    records: BTreeMap<RecordId, (i32, State)>,
    in_flight: Vec<ProducerBatch>,
    seq: Sequences,
}

impl Harness {
    fn leader(tp: &TopicPartition) -> Option<i32> {
        Some(tp.partition % 2)
    }

    fn append(&mut self, partition: i32, len: usize) {
        let mut value = self.acc.next_id.to_be_bytes().to_vec();
        value.resize(8 + len, 0xab);
        let available = self.acc.available();
        let record = NewRecord {
            key: Some(Bytes::from(partition.to_be_bytes().to_vec())),
            value: Some(Bytes::from(value)),
            headers: vec![],
            timestamp: self.ts,
        };
        match self.acc.append(self.now, &tp(partition), &record) {
            Ok(crate::producer::accumulator::Appended { id, .. }) => {
                assert!(self
                    .records
                    .insert(id, (partition, State::Queued))
                    .is_none());
            }
            Err(AppendError::BufferFull {
                needed,
                available: said,
            }) => {
                assert_eq!(said, available);
                assert!(needed > available);
            }
            Err(e) => panic!("{e}"),
        }
    }

    fn drain(&mut self, broker: i32, skip: u8) {
        let seq = &mut self.seq;
        let drained = self.acc.drain(self.now, broker, Self::leader, |tp, info| {
            if (skip >> tp.partition) & 1 == 1 {
                None
            } else {
                seq.stamp(tp, info)
            }
        });
        assert!(drained.failed.is_empty());
        let max = self.acc.config().max_request_size;
        let total: usize = drained.batches.iter().map(|b| b.bytes.len()).sum();
        assert!(drained.batches.len() <= 1 || total <= max);
        let mut seen = BTreeSet::new();
        for batch in drained.batches {
            assert!(seen.insert(batch.tp.clone()), "one batch per partition");
            assert_eq!(Self::leader(&batch.tp), Some(broker));
            // The partition's first records still queued, in order.
            let queued: Vec<RecordId> = self
                .records
                .iter()
                .filter(|(_, (p, s))| *p == batch.tp.partition && *s == State::Queued)
                .map(|(id, _)| *id)
                .take(batch.records.len())
                .collect();
            assert_eq!(batch.records, queued);
            let decoded = decode(&batch.bytes);
            assert_eq!(decoded.len(), batch.records.len());
            for (record, id) in decoded.iter().zip(&batch.records) {
                let value = record.1.as_ref().unwrap();
                assert_eq!(value[..8], id.0.to_be_bytes());
            }
            let stamp = batch.stamp.unwrap();
            assert_eq!(
                producer_state(&batch.bytes),
                Some((stamp.producer_id, stamp.epoch, stamp.base_sequence))
            );
            for id in &batch.records {
                self.records.get_mut(id).unwrap().1 = State::InFlight;
            }
            self.in_flight.push(batch);
        }
    }

    fn take(&mut self, i: usize) -> Option<ProducerBatch> {
        (!self.in_flight.is_empty()).then(|| {
            let i = i % self.in_flight.len();
            self.in_flight.remove(i)
        })
    }

    fn complete(&mut self, batch: ProducerBatch) {
        for id in &batch.records {
            let state = &mut self.records.get_mut(id).unwrap().1;
            assert_eq!(*state, State::InFlight);
            *state = State::Done;
        }
        self.acc.complete(&batch);
    }

    fn expire(&mut self) {
        for batch in self.acc.expire(self.now) {
            assert!(batch.created + self.acc.config().delivery_timeout <= self.now);
            for id in &batch.records {
                let state = &mut self.records.get_mut(id).unwrap().1;
                assert_eq!(*state, State::Queued);
                *state = State::Done;
            }
        }
    }

    fn check(&self) {
        let in_flight: usize = self.in_flight.iter().map(|b| b.size).sum();
        assert!(self.acc.buffered_bytes() >= in_flight);
        assert!(self.acc.buffered_bytes() <= self.acc.config().buffer_memory);
        let queued = self
            .records
            .values()
            .filter(|(_, s)| *s == State::Queued)
            .count();
        assert_eq!(self.acc.is_empty(), queued == 0);
    }
}

proptest! {
    #[test]
    fn every_record_goes_exactly_once_in_order(
        ops in proptest::collection::vec(op(), 0..120),
        lz4 in any::<bool>(),
    ) {
        let t0 = Instant::now();
        let mut h = Harness {
            acc: Accumulator::new(AccumulatorConfig {
                batch_size: 150,
                linger: 5 * MS,
                buffer_memory: 1500,
                compression: if lz4 && Compression::Lz4.is_enabled() {
                    Compression::Lz4
                } else {
                    Compression::None
                },
                max_request_size: 400,
                delivery_timeout: 200 * MS,
                transactional: false,
            }),
            now: t0,
            ts: 1_700_000_000_000,
            records: BTreeMap::new(),
            in_flight: Vec::new(),
            seq: Sequences(BTreeMap::new()),
        };
        for op in ops {
            match op {
                Op::Append { partition, len, ts_step } => {
                    h.ts += ts_step;
                    h.append(partition, len);
                }
                Op::Drain { broker, skip } => h.drain(broker, skip),
                Op::Complete(i) => {
                    if let Some(batch) = h.take(i) {
                        h.complete(batch);
                    }
                }
                Op::Retry(i) => {
                    if let Some(batch) = h.take(i) {
                        for id in &batch.records {
                            h.records.get_mut(id).unwrap().1 = State::Queued;
                        }
                        h.acc.reenqueue(batch, h.now + 3 * MS);
                    }
                }
                Op::Tick(ms) => h.now += Duration::from_millis(ms),
                Op::Expire => h.expire(),
                Op::Flush => {
                    h.acc.flush();
                }
            }
            h.check();
        }
        // Everything left goes.
        let marker = h.acc.flush();
        let mut rounds = 0;
        while !h.acc.is_empty() {
            h.now += 3 * MS;
            let ready = h.acc.ready(h.now, Harness::leader);
            prop_assert!(ready.unknown_leaders.is_empty());
            for broker in ready.brokers {
                h.drain(broker, 0);
            }
            while let Some(batch) = h.take(0) {
                h.complete(batch);
            }
            rounds += 1;
            prop_assert!(rounds < 1000);
        }
        while let Some(batch) = h.take(0) {
            h.complete(batch);
        }
        prop_assert!(h.records.values().all(|(_, s)| *s == State::Done));
        prop_assert_eq!(h.acc.buffered_bytes(), 0);
        prop_assert!(h.acc.flush_done(marker));
        prop_assert!(!h.acc.has_incomplete());
    }
}

#[test]
fn an_append_names_its_batch_and_its_place_in_it() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(AccumulatorConfig {
        batch_size: 200,
        ..AccumulatorConfig::default()
    });
    let a = acc.append(t0, &tp(0), &rec(&[1; 10], 0)).unwrap();
    let b = acc.append(t0, &tp(0), &rec(&[1; 10], 0)).unwrap();
    let other = acc.append(t0, &tp(1), &rec(&[1; 10], 0)).unwrap();
    let big = acc.append(t0, &tp(0), &rec(&[2; 500], 0)).unwrap();
    assert_eq!((a.batch, a.index), (a.id, 0));
    assert_eq!((b.batch, b.index), (a.id, 1));
    assert_eq!((other.batch, other.index), (other.id, 0));
    assert_eq!((big.batch, big.index), (big.id, 0));
    // A drained batch is named by the same record.
    let drained = drain(&mut acc, t0);
    let first = drained.iter().find(|x| x.tp == tp(0)).unwrap();
    assert_eq!(first.first(), a.id);
    assert_eq!(first.records, vec![a.id, b.id]);
}

/// A batch's bytes handed back once it is done ([`Accumulator::recycle`])
/// change nothing of what comes next: every batch built after it decodes
/// to its own records and nothing else, and a batch still held elsewhere
/// (a request being written, say) keeps its bytes, whatever is built
/// after it.
#[test]
fn batches_built_after_a_done_one_is_handed_back_are_whole_and_a_held_one_keeps_its_bytes() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(AccumulatorConfig {
        linger: Duration::ZERO,
        ..AccumulatorConfig::default()
    });
    acc.append(t0, &tp(0), &rec(&[1; 10_000], 7)).unwrap();
    // Another batch in flight all along: the producer is busy.
    acc.append(t0, &tp(5), &rec(&[5; 100], 7)).unwrap();
    let mut drained = drain(&mut acc, t0);
    let _in_flight = drained.pop().unwrap();
    let first = drained.remove(0);
    acc.complete(&first);
    acc.recycle(first.bytes);
    // The next batch, with a shorter record: its own record only.
    acc.append(t0, &tp(1), &rec(&[2; 9_000], 8)).unwrap();
    let second = drain(&mut acc, t0).remove(0);
    assert_eq!(
        decode(&second.bytes),
        [(None, Some(vec![2; 9_000]), vec![], 8)]
    );
    acc.complete(&second);
    // Still held elsewhere: it keeps its bytes.
    let held = second.bytes.clone();
    acc.recycle(second.bytes);
    acc.append(t0, &tp(1), &rec(&[3; 10_000], 9)).unwrap();
    let third = drain(&mut acc, t0).remove(0);
    assert_eq!(
        decode(&third.bytes),
        [(None, Some(vec![3; 10_000]), vec![], 9)]
    );
    assert_eq!(decode(&held), [(None, Some(vec![2; 9_000]), vec![], 8)]);
}

#[test]
fn kept_buffers_stay_within_buffer_memory_and_go_when_nothing_is_held() {
    let t0 = Instant::now();
    let one = BATCH_HEADER_LEN + rec_size(0, 10_000);
    let mut acc = Accumulator::new(AccumulatorConfig {
        linger: Duration::ZERO,
        buffer_memory: 4 * one,
        ..AccumulatorConfig::default()
    });
    for p in 0..4 {
        acc.append(t0, &tp(p), &rec(&[1; 10_000], 7)).unwrap();
    }
    let mut batches = drain(&mut acc, t0);
    assert_eq!(batches.len(), 4);
    // Three done while one is in flight: kept, within the memory the
    // records held leave free.
    let last = batches.pop().unwrap();
    for batch in batches {
        acc.complete(&batch);
        acc.recycle(batch.bytes);
        assert!(acc.spare_bytes > 0);
        assert!(acc.spare_bytes + acc.buffered_bytes() <= 4 * one);
    }
    // The records held grow again: the kept buffers give way.
    for p in 0..3 {
        acc.append(t0, &tp(p), &rec(&[2; 10_000], 8)).unwrap();
        assert!(acc.spare_bytes + acc.buffered_bytes() <= 4 * one);
    }
    for batch in drain(&mut acc, t0) {
        acc.complete(&batch);
        acc.recycle(batch.bytes);
        assert!(acc.spare_bytes + acc.buffered_bytes() <= 4 * one);
    }
    // The last one done: nothing held, nothing kept.
    acc.complete(&last);
    acc.recycle(last.bytes);
    assert_eq!((acc.buffered_bytes(), acc.spare_bytes), (0, 0));
    assert!(acc.spare.is_empty());
}
