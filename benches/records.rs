//! Record-set decoding throughput, next to a bare parse-plus-CRC loop.
//!
//! For values of 10 B, 100 B and 1 KiB (each record with an 8-byte key and
//! one 4-byte header), a record set of 500-record batches is decoded:
//! uncompressed and with every codec. `bare_parse_crc` is the floor the
//! decoder is measured against: the CRC-32C of every batch and a walk
//! over every record's varints and slices, building nothing. The goal is
//! uncompressed decoding at no less than half of its rate.
//!
//! ```sh
//! cargo bench --bench records -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Criterion reports records per second (throughput "elements"); GB/s is
//! that times the uncompressed set's bytes per record, printed once per
//! size at the start.
//!
//! `build_one_record` builds the batches a producer sends with 10 KiB
//! values and the Java client's `batch.size` (16384): one record each, as the
//! `produce` example generates them (ten digits, then dots), with each
//! codec, so that a batch's fixed costs (buffers, a codec's set-up) show.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lazykafka::records::{
    Compression, DecodedRecords, IsolationLevel, RecordBatchBuilder, RecordSetDecoder,
};
use std::hint::black_box;

#[path = "support/floor.rs"]
mod floor;
use floor::bare_parse_crc;

const RECORDS_PER_BATCH: usize = 500;

/// Text-like values: lowercase letters from a xorshift generator, so the
/// codecs have something realistic to do (about 2-3x compression).
fn value(i: u64, len: usize) -> Vec<u8> {
    let mut x = i
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
        | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x.is_multiple_of(7) {
                b' '
            } else {
                b'a' + (x % 16) as u8
            }
        })
        .collect()
}

fn record_set(value_len: usize, records: usize, codec: Compression) -> Bytes {
    let mut set = Vec::new();
    let mut offset = 0i64;
    while (offset as usize) < records {
        let mut b = RecordBatchBuilder::new(offset).compression(codec);
        for _ in 0..RECORDS_PER_BATCH.min(records - offset as usize) {
            let key = (offset as u64).to_be_bytes();
            b.append(
                1_700_000_000_000 + offset,
                Some(&key),
                Some(&value(offset as u64, value_len)),
                &[(b"tr", Some(b"abcd"))],
            )
            .unwrap();
            offset += 1;
        }
        set.extend_from_slice(&b.build().unwrap());
    }
    Bytes::from(set)
}

fn bench(c: &mut Criterion) {
    let decoder = RecordSetDecoder::default();
    for (value_len, records) in [(10, 50_000), (100, 20_000), (1024, 4_000)] {
        let mut group = c.benchmark_group(format!("value_{value_len}B"));
        group.throughput(Throughput::Elements(records as u64));
        let plain = record_set(value_len, records, Compression::None);
        println!(
            "value_{value_len}B: {records} records, {} bytes uncompressed ({:.1} B/record)",
            plain.len(),
            plain.len() as f64 / records as f64
        );
        group.bench_function("bare_parse_crc", |b| {
            b.iter(|| bare_parse_crc(black_box(&plain)))
        });
        let mut out = DecodedRecords::new();
        for codec in Compression::ALL {
            let set = record_set(value_len, records, codec);
            println!(
                "value_{value_len}B/{codec}: {} bytes on the wire",
                set.len()
            );
            group.bench_with_input(BenchmarkId::new("decode", codec), &set, |b, set| {
                b.iter(|| {
                    out.clear();
                    decoder
                        .decode_into(set.clone(), IsolationLevel::ReadUncommitted, &[], &mut out)
                        .unwrap();
                    assert_eq!(out.len(), records);
                })
            });
        }
        group.finish();
    }
}

fn build_one_record(c: &mut Criterion) {
    let mut value = b"0000012345".to_vec();
    value.resize(10 * 1024, b'.');
    let mut group = c.benchmark_group("build_one_record_10KiB");
    group.throughput(Throughput::Elements(1));
    for codec in Compression::ALL {
        group.bench_function(BenchmarkId::from_parameter(codec), |b| {
            b.iter(|| {
                let mut batch = RecordBatchBuilder::new(0).compression(codec);
                batch
                    .append(1_700_000_000_000, None, Some(black_box(&value)), &[])
                    .unwrap();
                black_box(batch.build().unwrap())
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench, build_one_record
}
criterion_main!(benches);
