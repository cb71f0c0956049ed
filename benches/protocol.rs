//! Decode speed of the two largest responses a consumer reads: Fetch (100
//! partitions with 1 KiB of records each) and Metadata (1000 partitions),
//! at the newest and the oldest version this client speaks.
//!
//! Run: `cargo bench --bench protocol -- --warm-up-time 1 --measurement-time 3`

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lazykafka::protocol::messages::fetch::{FetchResponse, FetchableTopicResponse, PartitionData};
use lazykafka::protocol::messages::metadata::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use lazykafka::protocol::{Message, Reader, Writer};
use std::hint::black_box;

fn encode<M: Message>(m: &M, version: i16) -> Bytes {
    let mut w = Writer::new();
    m.encode(&mut w, version).expect("encodes");
    w.into_inner().freeze()
}

/// 10 topics of 10 partitions, each partition with 1 KiB of records.
fn fetch_response(version: i16) -> Bytes {
    let records = Bytes::from(vec![0x5a; 1024]);
    let response = FetchResponse {
        responses: (0..10u8)
            .map(|t| FetchableTopicResponse {
                topic: if version < 13 {
                    format!("topic-{t}")
                } else {
                    String::new()
                },
                topic_id: if version >= 13 { [t + 1; 16] } else { [0; 16] },
                partitions: (0..10)
                    .map(|p| PartitionData {
                        partition_index: p,
                        high_watermark: 1_000_000,
                        last_stable_offset: 1_000_000,
                        log_start_offset: if version >= 5 { 0 } else { -1 },
                        aborted_transactions: None,
                        records: Some(records.clone()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    encode(&response, version)
}

/// 3 brokers; 10 topics of 100 partitions, each with 3 replicas in sync.
fn metadata_response(version: i16) -> Bytes {
    let response = MetadataResponse {
        brokers: (1..=3)
            .map(|id| MetadataResponseBroker {
                node_id: id,
                host: format!("broker-{id}.example.com"),
                port: 9092,
                rack: Some(format!("rack-{id}")),
                ..Default::default()
            })
            .collect(),
        cluster_id: (version >= 2).then(|| "cluster".to_owned()),
        controller_id: 1,
        topics: (0..10u8)
            .map(|t| MetadataResponseTopic {
                name: Some(format!("topic-{t}")),
                topic_id: if version >= 10 { [t + 1; 16] } else { [0; 16] },
                partitions: (0..100)
                    .map(|p| MetadataResponsePartition {
                        partition_index: p,
                        leader_id: p % 3 + 1,
                        leader_epoch: if version >= 7 { 5 } else { -1 },
                        replica_nodes: vec![1, 2, 3],
                        isr_nodes: vec![1, 2, 3],
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    encode(&response, version)
}

fn decode<M: Message>(bytes: &Bytes, version: i16) -> M {
    let mut r = Reader::new(bytes.clone());
    let m = M::decode(&mut r, version).expect("decodes");
    r.finish().expect("uses every byte");
    m
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode");
    for version in [17, 4] {
        let bytes = fetch_response(version);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(format!("fetch_response_100_partitions_v{version}"), |b| {
            b.iter(|| decode::<FetchResponse>(black_box(&bytes), version))
        });
    }
    for version in [12, 1] {
        let bytes = metadata_response(version);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(
            format!("metadata_response_1000_partitions_v{version}"),
            |b| b.iter(|| decode::<MetadataResponse>(black_box(&bytes), version)),
        );
    }
    group.finish();
}

criterion_group!(protocol, benches);
criterion_main!(protocol);
