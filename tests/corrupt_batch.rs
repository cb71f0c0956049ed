//! A broker that serves a corrupt record batch: a raw TCP server speaking
//! just enough Kafka (ApiVersions, Metadata, ListOffsets, Fetch) for a topic
//! with two partitions. Partition 0's batch has a flipped byte after its
//! CRC; partition 1's is sound. The consumer must deliver partition 1's
//! records, report partition 0's fault as a typed error naming the topic,
//! partition and offset, never skip past it, and keep the connection.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use bytes::Bytes;
use lazykafka::fetch::FetchError;
use lazykafka::protocol::frame::{encode_response, RequestHeader};
use lazykafka::protocol::messages::api_versions::{ApiVersionRange, ApiVersionsResponse};
use lazykafka::protocol::messages::fetch::{
    FetchRequest, FetchResponse, FetchableTopicResponse, PartitionData,
};
use lazykafka::protocol::messages::list_offsets::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use lazykafka::protocol::messages::metadata::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use lazykafka::protocol::{ApiKey, Message, Reader};
use lazykafka::records::RecordBatchBuilder;
use lazykafka::{Consumer, ConsumerConfig, Error, OffsetReset, TopicPartition};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(15);

/// A v2 batch of five records `p{partition}-{i}` at offsets 0..5.
fn batch(partition: i32) -> Bytes {
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..5 {
        let value = format!("p{partition}-{i}");
        b.append(1_700_000_000_000, None, Some(value.as_bytes()), &[])
            .unwrap();
    }
    b.build().unwrap()
}

/// The same batch with one byte of a record flipped: the CRC-32C no longer
/// matches.
fn corrupt_batch() -> Bytes {
    let mut bytes = batch(0).to_vec();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x5a;
    Bytes::from(bytes)
}

fn read_frame(s: &mut TcpStream) -> Option<Bytes> {
    let mut prefix = [0u8; 4];
    s.read_exact(&mut prefix).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(prefix) as usize];
    s.read_exact(&mut body).ok()?;
    Some(Bytes::from(body))
}

fn serve(mut s: TcpStream, port: u16) {
    while let Some(frame) = read_frame(&mut s) {
        let mut r = Reader::new(frame);
        let header = RequestHeader::decode(&mut r).unwrap();
        let (v, corr) = (header.api_version, header.correlation_id);
        let reply = match ApiKey::from_code(header.api_key) {
            Some(ApiKey::ApiVersions) => {
                // Classic (non-flexible) versions keep the server short.
                let ranges = [
                    (ApiKey::ApiVersions, 0, 2),
                    (ApiKey::Metadata, 1, 8),
                    (ApiKey::ListOffsets, 1, 5),
                    (ApiKey::Fetch, 4, 11),
                ];
                let resp = ApiVersionsResponse {
                    api_keys: ranges
                        .iter()
                        .map(|(k, min, max)| ApiVersionRange {
                            api_key: k.code(),
                            min_version: *min,
                            max_version: *max,
                            unknown_tagged_fields: Vec::new(),
                        })
                        .collect(),
                    error_code: if v > 2 { 35 } else { 0 },
                    ..ApiVersionsResponse::default()
                };
                encode_response(&resp, v.min(2), corr)
            }
            Some(ApiKey::Metadata) => encode_response(
                &MetadataResponse {
                    brokers: vec![MetadataResponseBroker {
                        node_id: 1,
                        host: "127.0.0.1".into(),
                        port: i32::from(port),
                        ..MetadataResponseBroker::default()
                    }],
                    controller_id: 1,
                    topics: vec![MetadataResponseTopic {
                        name: Some("t".into()),
                        partitions: (0..2)
                            .map(|p| MetadataResponsePartition {
                                partition_index: p,
                                leader_id: 1,
                                replica_nodes: vec![1],
                                isr_nodes: vec![1],
                                ..MetadataResponsePartition::default()
                            })
                            .collect(),
                        ..MetadataResponseTopic::default()
                    }],
                    ..MetadataResponse::default()
                },
                v,
                corr,
            ),
            Some(ApiKey::ListOffsets) => encode_response(
                &ListOffsetsResponse {
                    topics: vec![ListOffsetsTopicResponse {
                        name: "t".into(),
                        partitions: (0..2)
                            .map(|p| ListOffsetsPartitionResponse {
                                partition_index: p,
                                timestamp: -1,
                                offset: 0,
                                ..ListOffsetsPartitionResponse::default()
                            })
                            .collect(),
                        ..ListOffsetsTopicResponse::default()
                    }],
                    ..ListOffsetsResponse::default()
                },
                v,
                corr,
            ),
            Some(ApiKey::Fetch) => {
                let request = FetchRequest::decode(&mut r, v).unwrap();
                let partitions = request
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .map(|p| {
                        let records = match (p.partition, p.fetch_offset) {
                            (0, 0) => Some(corrupt_batch()),
                            (1, o) if o < 5 => Some(batch(1)),
                            _ => Some(Bytes::new()),
                        };
                        PartitionData {
                            partition_index: p.partition,
                            high_watermark: 5,
                            last_stable_offset: 5,
                            records,
                            ..PartitionData::default()
                        }
                    })
                    .collect();
                // Nothing new: wait a little, as a broker's long poll does.
                std::thread::sleep(Duration::from_millis(20));
                encode_response(
                    &FetchResponse {
                        responses: vec![FetchableTopicResponse {
                            topic: "t".into(),
                            partitions,
                            ..FetchableTopicResponse::default()
                        }],
                        ..FetchResponse::default()
                    },
                    v,
                    corr,
                )
            }
            other => panic!("this broker does not serve {other:?}"),
        };
        if s.write_all(&reply.unwrap()).is_err() {
            return;
        }
    }
}

fn start_broker() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(s) = stream else { return };
            std::thread::spawn(move || serve(s, port));
        }
    });
    port
}

#[test]
fn a_corrupt_batch_is_a_typed_error_and_the_other_partition_goes_on() {
    crate::common::block_on(async {
        let port = start_broker();
        let config = ConsumerConfig::builder()
            .bootstrap_servers(format!("127.0.0.1:{port}"))
            .auto_offset_reset(OffsetReset::Earliest)
            .fetch_max_wait(Duration::from_millis(50))
            .build()
            .unwrap();
        let consumer = Consumer::new(config).unwrap();
        let (p0, p1) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        consumer.assign([p0.clone(), p1.clone()]).unwrap();

        let mut good = Vec::new();
        let mut corrupt = None;
        let deadline = Instant::now() + WAIT;
        while (good.len() < 5 || corrupt.is_none()) && Instant::now() < deadline {
            match consumer.poll(Duration::from_millis(100)).await {
                Ok(records) => {
                    for r in records {
                        assert_eq!(r.partition(), 1, "nothing from the corrupt partition");
                        good.push(String::from_utf8_lossy(r.value().unwrap()).into_owned());
                    }
                }
                Err(Error::Fetch(FetchError::CorruptRecords {
                    partition,
                    offset,
                    source,
                })) => {
                    assert!(!source.to_string().is_empty());
                    corrupt = Some((partition, offset));
                }
                Err(other) => panic!("unexpected error: {other}"),
            }
        }
        assert_eq!(good, (0..5).map(|i| format!("p1-{i}")).collect::<Vec<_>>());
        assert_eq!(
            corrupt,
            Some((p0.clone(), 0)),
            "names topic, partition, offset"
        );
        // Never skipped: partition 0 stays at the corrupt batch.
        assert_eq!(consumer.position(&p0), Some(0));
        assert_eq!(consumer.position(&p1), Some(5));
        // The connection is not the fault: it stays.
        assert_eq!(consumer.connections().len(), 1);
        consumer.close().await.unwrap();
    })
}
