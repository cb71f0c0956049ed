//! What one Fetch answer costs the fetch layer, against the partitions
//! assigned.
//!
//! A [`Fetcher`] holds N partitions of one topic (N = 100, 1,000, 2,000,
//! 10,000) led by 3 brokers, caught up, each broker in a fetch session
//! (KIP-227). One iteration is what a trickle of records makes the
//! consumer do: a broker answers its Fetch with one record of one
//! partition, the record is taken, and the next Fetch to that broker is
//! planned. With parked partitions (docs/fetching.md) that costs what the
//! answer carries, not what is assigned: the time per answer should barely
//! grow with N.
//!
//! ```sh
//! cargo bench --bench fetcher -- --warm-up-time 1 --measurement-time 3
//! ```

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use lazykafka::cluster::{Metadata, PartitionInfo, Response, Target, TopicInfo};
use lazykafka::fetch::{FetchConfig, FetchToken, Fetcher, TopicPartition};
use lazykafka::protocol::messages::fetch::{FetchResponse, FetchableTopicResponse, PartitionData};
use lazykafka::protocol::{ApiKey, Message, Writer};
use lazykafka::records::RecordBatchBuilder;
use lazykafka::ErrorCode;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

const BROKERS: i32 = 3;
const TOPIC: &str = "many";
const VERSION: i16 = 12;

fn metadata(partitions: i32) -> Metadata {
    let mut md = Metadata::default();
    md.topics.insert(
        TOPIC.into(),
        TopicInfo {
            error: ErrorCode::None,
            topic_id: [7; 16],
            is_internal: false,
            partitions: (0..partitions)
                .map(|p| {
                    let info = PartitionInfo {
                        leader: p % BROKERS,
                        leader_epoch: 0,
                        error: ErrorCode::None,
                    };
                    (p, info)
                })
                .collect(),
        },
    );
    md
}

/// A Fetch answer in session `session`, carrying `partitions` (each with
/// its records, if any) and high watermark `hw`.
fn answer(
    broker: i32,
    session: i32,
    partitions: Vec<(i32, Option<bytes::Bytes>, i64)>,
) -> Response {
    let body = FetchResponse {
        session_id: session,
        responses: vec![FetchableTopicResponse {
            topic: TOPIC.into(),
            partitions: partitions
                .into_iter()
                .map(|(p, records, hw)| PartitionData {
                    partition_index: p,
                    high_watermark: hw,
                    last_stable_offset: hw,
                    records,
                    ..PartitionData::default()
                })
                .collect(),
            ..FetchableTopicResponse::default()
        }],
        ..FetchResponse::default()
    };
    let mut w = Writer::new();
    body.encode(&mut w, VERSION).expect("encodes");
    Response {
        api: ApiKey::Fetch,
        version: VERSION,
        broker: Some(broker),
        body: w.into_inner().freeze(),
    }
}

fn one_record(offset: i64) -> bytes::Bytes {
    let mut batch = RecordBatchBuilder::new(offset);
    batch
        .append(1_700_000_000_000, None, Some(b"trickle"), &[])
        .expect("appends");
    batch.build().expect("builds")
}

/// A fetcher with `n` partitions at offset 0, every broker in a session,
/// and the token of each broker's Fetch out.
fn steady(n: i32, md: &Metadata, now: Instant) -> (Fetcher, BTreeMap<i32, FetchToken>) {
    let mut f = Fetcher::new(FetchConfig::default());
    f.set_metadata_generation(1);
    f.assign((0..n).map(|p| TopicPartition::new(TOPIC, p)));
    for tp in f.needs_committed() {
        f.set_committed(&tp, Some((0, None)));
    }
    let mut out = BTreeMap::new();
    for (target, _, token) in f.poll_requests(now, md) {
        let Target::Broker(b) = target else {
            unreachable!("no read replica here")
        };
        // The full Fetch's answer opens the session and names every
        // partition, caught up at 0.
        let all = (0..n)
            .filter(|p| p % BROKERS == b)
            .map(|p| (p, None, 0))
            .collect();
        f.handle_response(now, token, &answer(b, 100 + b, all));
    }
    for (target, _, token) in f.poll_requests(now, md) {
        let Target::Broker(b) = target else {
            unreachable!("no read replica here")
        };
        out.insert(b, token);
    }
    assert_eq!(out.len(), BROKERS as usize, "a Fetch out to every broker");
    (f, out)
}

fn per_answer(c: &mut Criterion) {
    let mut group = c.benchmark_group("fetch_answer_one_record");
    for n in [100, 1_000, 2_000, 10_000] {
        let md = metadata(n);
        let now = Instant::now();
        let (mut f, mut tokens) = steady(n, &md, now);
        // Round the brokers and their partitions, one record each time.
        let mut offsets = vec![0i64; n as usize];
        let mut next = 0i32;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter(|| {
                let p = next % n;
                next = next.wrapping_add(7919) % n;
                let broker = p % BROKERS;
                let offset = offsets[p as usize];
                offsets[p as usize] += 1;
                let response = answer(
                    broker,
                    100 + broker,
                    vec![(p, Some(one_record(offset)), offset + 1)],
                );
                let token = tokens[&broker];
                f.handle_response(now, token, &response);
                let records = f.take_records(500);
                assert_eq!(records.len(), 1);
                let planned = f.poll_requests(now, &md);
                assert_eq!(planned.len(), 1, "the next Fetch to broker {broker}");
                tokens.insert(broker, planned[0].2);
                black_box(planned);
            });
        });
    }
    group.finish();
}

criterion_group!(benches, per_answer);
criterion_main!(benches);
