//! The fetch layer stepped through with hand-built Fetch and ListOffsets
//! responses and a manual clock: no broker, no sleep.

use super::buffer::{batches_end, crcs_hold, BatchesEnd, DECODE_CHUNK};
use super::failure::LEADER_ERRORS_REPORTED_AFTER;
use super::*;
use crate::cluster::{PartitionInfo, RequestError, Response, TopicInfo, REPORT_AGAIN_AFTER};
use crate::protocol::messages::fetch::{
    AbortedTransaction as WireAborted, FetchRequest, FetchResponse, FetchableTopicResponse,
    PartitionData,
};
use crate::protocol::messages::list_offsets::{
    ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use crate::protocol::messages::offset_for_leader_epoch::{
    EpochEndOffset as WireEpochEnd, OffsetForLeaderTopicResult,
};
use crate::protocol::messages::offset_for_leader_epoch::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};
use crate::protocol::{ApiKey, ErrorCode};
use crate::protocol::{EncodeError, Message, Reader, Writer};
use crate::records::{self, IsolationLevel};
use crate::records::{ControlRecordType, RecordBatchBuilder, RecordsErrorKind};
use bytes::Bytes;
use proptest::prelude::*;
use std::time::Duration;

// ===== fixtures =====

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

/// A topic id derived from the name, never all zeros.
fn topic_id(name: &str) -> [u8; 16] {
    let mut id = [0xa5; 16];
    for (i, b) in name.bytes().enumerate().take(15) {
        id[i] = b;
    }
    id
}

/// Metadata with these `(topic, partition, leader)`; leader epoch 7, topic
/// ids from the name.
fn metadata(parts: &[(&str, i32, i32)]) -> Metadata {
    let mut md = Metadata::default();
    for &(topic, partition, leader) in parts {
        md.topics
            .entry(topic.to_owned())
            .or_insert_with(|| TopicInfo {
                error: ErrorCode::None,
                topic_id: topic_id(topic),
                is_internal: false,
                partitions: BTreeMap::new(),
            })
            .partitions
            .insert(
                partition,
                PartitionInfo {
                    leader,
                    leader_epoch: 7,
                    error: ErrorCode::None,
                },
            );
    }
    md
}

fn config() -> FetchConfig {
    FetchConfig {
        auto_offset_reset: OffsetReset::Earliest,
        ..FetchConfig::default()
    }
}

/// A fetcher assigned `parts`, each at the committed offset given.
fn fetcher(config: FetchConfig, parts: &[(TopicPartition, i64)]) -> Fetcher {
    let mut f = Fetcher::new(config);
    f.set_metadata_generation(1);
    f.assign(parts.iter().map(|(tp, _)| tp.clone()));
    for (tp, offset) in parts {
        assert!(f.set_committed(tp, Some((*offset, None))));
    }
    f
}

/// A batch of `n` records from `base`, each value the offset in decimal.
fn batch(base: i64, n: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(base).partition_leader_epoch(3);
    for i in 0..n {
        let value = (base + i as i64).to_string();
        b.append(
            1_700_000_000_000 + i as i64,
            Some(b"k"),
            Some(value.as_bytes()),
            &[],
        )
        .unwrap();
    }
    b.build().unwrap()
}

fn concat(parts: &[&Bytes]) -> Bytes {
    let mut v = Vec::new();
    for p in parts {
        v.extend_from_slice(p);
    }
    Bytes::from(v)
}

fn data(partition: i32, records: Bytes) -> PartitionData {
    PartitionData {
        partition_index: partition,
        high_watermark: 1000,
        records: Some(records),
        ..PartitionData::default()
    }
}

fn error(partition: i32, code: ErrorCode) -> PartitionData {
    PartitionData {
        partition_index: partition,
        error_code: code.code(),
        high_watermark: 1000,
        log_start_offset: 0,
        records: None,
        ..PartitionData::default()
    }
}

fn encode<M: Message>(m: &M, version: i16) -> Bytes {
    let mut w = Writer::new();
    m.encode(&mut w, version).unwrap();
    w.into_inner().freeze()
}

/// A Fetch response at `version`, topics named by id from v13.
fn fetch_response(version: i16, topics: Vec<(&str, Vec<PartitionData>)>) -> Response {
    let responses = topics
        .into_iter()
        .map(|(name, partitions)| FetchableTopicResponse {
            topic: if version < 13 {
                name.to_owned()
            } else {
                String::new()
            },
            topic_id: if version >= 13 {
                topic_id(name)
            } else {
                [0; 16]
            },
            partitions,
            ..FetchableTopicResponse::default()
        })
        .collect();
    let body = FetchResponse {
        responses,
        ..FetchResponse::default()
    };
    Response {
        api: ApiKey::Fetch,
        version,
        broker: Some(1),
        body: encode(&body, version),
    }
}

fn list_offsets_response(parts: Vec<(&str, i32, ErrorCode, i64)>) -> Response {
    let mut topics: Vec<ListOffsetsTopicResponse> = Vec::new();
    for (name, partition, code, offset) in parts {
        let p = ListOffsetsPartitionResponse {
            partition_index: partition,
            error_code: code.code(),
            offset,
            timestamp: -1,
            leader_epoch: 7,
            ..ListOffsetsPartitionResponse::default()
        };
        match topics.iter_mut().find(|t| t.name == name) {
            Some(t) => t.partitions.push(p),
            None => topics.push(ListOffsetsTopicResponse {
                name: name.to_owned(),
                partitions: vec![p],
                ..ListOffsetsTopicResponse::default()
            }),
        }
    }
    let body = ListOffsetsResponse {
        topics,
        ..ListOffsetsResponse::default()
    };
    Response {
        api: ApiKey::ListOffsets,
        version: 7,
        broker: Some(1),
        body: encode(&body, 7),
    }
}

fn write_body(body: &dyn RequestBody, version: i16) -> Result<Bytes, EncodeError> {
    let mut w = Writer::new();
    body.encode_body(&mut w, version)?;
    Ok(w.into_inner().freeze())
}

fn decode_fetch(body: &dyn RequestBody, version: i16) -> FetchRequest {
    assert_eq!(body.api_key(), ApiKey::Fetch);
    let bytes = write_body(body, version).unwrap();
    FetchRequest::decode(&mut Reader::new(bytes), version).unwrap()
}

fn decode_list_offsets(body: &dyn RequestBody, version: i16) -> ListOffsetsRequest {
    assert_eq!(body.api_key(), ApiKey::ListOffsets);
    let bytes = write_body(body, version).unwrap();
    ListOffsetsRequest::decode(&mut Reader::new(bytes), version).unwrap()
}

/// `(topic, partition, fetch offset)` of every partition in a Fetch
/// request written at v12, in request order.
fn fetched(body: &dyn RequestBody) -> Parts {
    decode_fetch(body, 12)
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic.clone(), p.partition, p.fetch_offset))
        })
        .collect()
}

type Planned = Vec<(Target, Box<dyn RequestBody>, FetchToken)>;

/// `(topic, partition, fetch offset)` in request order.
type Parts = Vec<(String, i32, i64)>;

/// The Fetches planned, each to a leader: `(broker, partitions, token)`.
fn fetches(planned: &Planned) -> Vec<(i32, Parts, FetchToken)> {
    routed(planned)
        .into_iter()
        .map(|(target, parts, token)| match target {
            Target::Broker(broker) => (broker, parts, token),
            other => panic!("a Fetch to {other:?}, not to a leader"),
        })
        .collect()
}

/// The Fetches planned, to leaders or read replicas: `(target, partitions,
/// token)`.
fn routed(planned: &Planned) -> Vec<(Target, Parts, FetchToken)> {
    planned
        .iter()
        .filter(|(_, body, _)| body.api_key() == ApiKey::Fetch)
        .map(|(target, body, token)| (*target, fetched(body.as_ref()), *token))
        .collect()
}

fn offsets(records: &[ConsumerRecord]) -> Vec<(String, i32, i64)> {
    records
        .iter()
        .map(|r| (r.topic().to_owned(), r.partition(), r.offset()))
        .collect()
}

fn t0_offsets(records: &[ConsumerRecord]) -> Vec<i64> {
    records.iter().map(|r| r.offset()).collect()
}

/// The offsets of every record `take_records` hands out, 500 at a time,
/// until it hands out none.
fn take_all(f: &mut Fetcher) -> Vec<i64> {
    let mut offsets = Vec::new();
    loop {
        let taken = f.take_records(500);
        if taken.is_empty() {
            return offsets;
        }
        offsets.extend(t0_offsets(&taken));
    }
}

fn lost() -> RequestError {
    RequestError::ConnectionLost {
        addr: "b1:9092".into(),
        cause: crate::events::ConnectionError::Io {
            kind: std::io::ErrorKind::ConnectionReset,
            message: "Connection reset by peer (os error 104)".into(),
        },
    }
}

/// Plans, answers the only Fetch with `topics` at v12, and returns the
/// outcome.
fn fetch_once(
    f: &mut Fetcher,
    now: Instant,
    md: &Metadata,
    topics: Vec<(&str, Vec<PartitionData>)>,
) -> FetchOutcome {
    let planned = f.poll_requests(now, md);
    let list = fetches(&planned);
    assert_eq!(list.len(), 1, "one Fetch expected: {list:?}");
    f.handle_response(now, list[0].2, &fetch_response(12, topics))
}

// ===== planning =====

#[test]
fn one_fetch_per_leader_covering_its_partitions() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1), ("t", 2, 2), ("u", 0, 1)]);
    let mut f = fetcher(
        FetchConfig {
            min_bytes: 10,
            max_bytes: 5000,
            max_wait: Duration::from_millis(250),
            max_partition_bytes: 700,
            isolation: IsolationLevel::ReadCommitted,
            rack_id: Some("rack-a".into()),
            ..config()
        },
        &[
            (tp("t", 0), 10),
            (tp("t", 1), 11),
            (tp("t", 2), 12),
            (tp("u", 0), 20),
        ],
    );
    let now = Instant::now();
    let planned = f.poll_requests(now, &md);
    let list = fetches(&planned);
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].0, 1);
    assert_eq!(
        list[0].1,
        [
            ("t".into(), 0, 10),
            ("t".into(), 1, 11),
            ("u".into(), 0, 20)
        ]
    );
    assert_eq!(list[1].0, 2);
    assert_eq!(list[1].1, [("t".into(), 2, 12)]);

    // The request's settings, at the newest version.
    let request = decode_fetch(planned[0].1.as_ref(), 17);
    assert_eq!(request.replica_id, -1);
    assert_eq!(request.min_bytes, 10);
    assert_eq!(request.max_bytes, 5000);
    assert_eq!(request.max_wait_ms, 250);
    assert_eq!(request.isolation_level, 1);
    // A full Fetch asking for a new session (KIP-227).
    assert_eq!((request.session_id, request.session_epoch), (0, 0));
    assert_eq!(request.rack_id, "rack-a");
    let p = &request.topics[0].partitions[0];
    assert_eq!(p.partition_max_bytes, 700);
    assert_eq!(p.current_leader_epoch, 7);
    assert_eq!(p.last_fetched_epoch, -1);

    // At most one Fetch in flight per broker.
    assert!(f.poll_requests(now, &md).is_empty());
}

#[test]
fn paused_partitions_are_not_fetched() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    f.pause([&tp("t", 0)]);
    assert_eq!(f.paused(), BTreeSet::from([tp("t", 0)]));
    let planned = f.poll_requests(Instant::now(), &md);
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 1, 0)]);

    let mut g = fetcher(config(), &[(tp("t", 0), 0)]);
    g.pause([&tp("t", 0)]);
    assert!(g.poll_requests(Instant::now(), &md).is_empty());
    g.resume([&tp("t", 0)]);
    assert!(g.paused().is_empty());
    assert_eq!(fetches(&g.poll_requests(Instant::now(), &md)).len(), 1);
}

/// `data(partition, records)` with the high watermark where the records
/// end: nothing more to fetch after them.
fn caught_up(partition: i32, records: Bytes) -> PartitionData {
    let end = batches_end(&records).expect("whole batches").next_offset;
    PartitionData {
        high_watermark: end,
        ..data(partition, records)
    }
}

#[test]
fn partitions_with_buffered_records_and_nothing_after_them_are_not_fetched() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    let outcome = fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![caught_up(0, batch(0, 3))])],
    );
    assert_eq!(outcome.records_buffered, 3);
    assert!(f.has_buffered());

    // t-0 waits for its records to be taken; t-1 goes on.
    let planned = f.poll_requests(now, &md);
    let list = fetches(&planned);
    assert_eq!(list[0].1, [("t".into(), 1, 0)]);
    f.handle_response(now, list[0].2, &fetch_response(12, vec![]));

    assert_eq!(t0_offsets(&f.take_records(10)), [0, 1, 2]);
    assert!(!f.has_buffered());
    let planned = f.poll_requests(now, &md);
    // t-1 first: t-0 moved to the back of the line when its records were
    // taken.
    assert_eq!(
        fetches(&planned)[0].1,
        [("t".into(), 1, 0), ("t".into(), 0, 3)]
    );
}

#[test]
fn a_caught_up_partition_waits_for_the_records_of_its_leader_to_be_taken() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    let mut behind = data(1, batch(0, 3));
    behind.high_watermark = 100;
    fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![caught_up(0, batch(0, 3)), behind])],
    );
    assert_eq!(t0_offsets(&f.take_records(3)), [0, 1, 2]);
    // t-0 has nothing more to read: fetched alone it would be held by the
    // broker while t-1's next Fetch waits behind it on the connection.
    // t-1 is fetched ahead of its buffered records, without t-0.
    let planned = f.poll_requests(now, &md);
    let list = fetches(&planned);
    assert_eq!(list[0].1, [("t".into(), 1, 3)]);
    let mut more = data(1, batch(3, 2));
    more.high_watermark = 100;
    f.handle_response(now, list[0].2, &fetch_response(12, vec![("t", vec![more])]));
    // t-1 has its records and the answer fetched ahead: nothing to send.
    assert!(f.poll_requests(now, &md).is_empty());
    assert_eq!(
        offsets(&f.take_records(10)),
        [
            ("t".into(), 1, 0),
            ("t".into(), 1, 1),
            ("t".into(), 1, 2),
            ("t".into(), 1, 3),
            ("t".into(), 1, 4)
        ]
    );
    let planned = f.poll_requests(now, &md);
    assert_eq!(
        fetches(&planned)[0].1,
        [("t".into(), 0, 3), ("t".into(), 1, 5)]
    );
}

#[test]
fn drained_counts_the_buffers_emptied_and_only_those() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 2)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    let planned = f.poll_requests(now, &md);
    for (broker, parts, token) in fetches(&planned) {
        let p = parts[0].1;
        assert_eq!(broker, p + 1);
        f.handle_response(
            now,
            token,
            &fetch_response(12, vec![("t", vec![caught_up(p, batch(0, 3))])]),
        );
    }
    assert_eq!(f.drained(), 0);
    // Records taken, every buffer still holding some: nothing to fetch.
    assert_eq!(t0_offsets(&f.take_records(2)), [0, 1]);
    assert_eq!(f.drained(), 0);
    assert!(f.poll_requests(now, &md).is_empty());
    // Taking goes round the partitions: t-1's first record, then t-0's
    // last, which empties its buffer: it can be fetched again.
    assert_eq!(f.take_records(1)[0].partition(), 1);
    assert_eq!(f.drained(), 0);
    let last = f.take_records(1);
    assert_eq!((last[0].partition(), last[0].offset()), (0, 2));
    assert_eq!(f.drained(), 1);
    assert!(!f.poll_requests(now, &md).is_empty());
    assert_eq!(f.take_records(10).len(), 2);
    assert_eq!(f.drained(), 2);
}

#[test]
fn a_partition_with_records_left_is_fetched_while_others_drain() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    let mut p0 = data(0, batch(0, 3));
    p0.high_watermark = 50;
    fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![p0, caught_up(1, batch(0, 3))])],
    );
    assert_eq!(t0_offsets(&f.take_records(3)), [0, 1, 2]);
    let planned = f.poll_requests(now, &md);
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 0, 3)]);
}

// ===== fetching ahead =====

#[test]
fn batches_end_reads_the_headers_of_whole_batches_only() {
    let two = concat(&[&batch(5, 3), &batch(8, 2)]);
    assert_eq!(
        batches_end(&two),
        Some(BatchesEnd {
            next_offset: 10,
            leader_epoch: 3
        })
    );
    // A batch cut short by the response's size limit does not count.
    let cut = two.slice(..two.len() - 1);
    assert_eq!(batches_end(&cut).map(|e| e.next_offset), Some(8));
    assert_eq!(batches_end(&cut[..20]), None);
    assert_eq!(batches_end(&[]), None);
    // Absurd lengths and unknown magic stop the walk, without a panic.
    let mut absurd = two.to_vec();
    absurd[8..12].copy_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(batches_end(&absurd), None);
    let mut magic = two.to_vec();
    magic[16] = 9;
    assert_eq!(batches_end(&magic), None);
}

#[test]
fn a_partition_is_fetched_ahead_of_its_buffered_records_once() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, batch(0, 3))])]);
    assert_eq!(t0_offsets(&f.take_records(1)), [0]);
    // The high watermark (1000) lies beyond the buffered records: the next
    // Fetch goes out now, from where they end.
    let planned = f.poll_requests(now, &md);
    let list = fetches(&planned);
    assert_eq!(list[0].1, [("t".into(), 0, 3)]);
    assert!(f.poll_requests(now, &md).is_empty(), "one Fetch at a time");
    let outcome = f.handle_response(
        now,
        list[0].2,
        &fetch_response(12, vec![("t", vec![data(0, batch(3, 2))])]),
    );
    assert_eq!(
        outcome.records_buffered, 0,
        "not to be taken before the others"
    );
    assert!(
        f.poll_requests(now, &md).is_empty(),
        "one answer ahead at most"
    );
    assert_eq!(f.position(&tp("t", 0)), Some(1));
    let drained = f.drained();
    assert_eq!(t0_offsets(&f.take_records(3)), [1, 2, 3]);
    assert_eq!(f.drained(), drained + 1, "the buffer was used up");
    // The answer fetched ahead is the buffer now, and is fetched ahead of.
    let planned = f.poll_requests(now, &md);
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 0, 5)]);
    assert_eq!(t0_offsets(&f.take_records(10)), [4]);
    assert_eq!(f.position(&tp("t", 0)), Some(5));
}

#[test]
fn an_answer_ahead_that_is_not_records_is_dropped_and_met_again_later() {
    let md = metadata(&[("t", 0, 1)]);
    let now = Instant::now();
    for answer in [
        error(0, ErrorCode::NotLeaderOrFollower),
        error(0, ErrorCode::OffsetOutOfRange),
        data(0, Bytes::new()),
        data(0, batch(3, 2).slice(..30)),
    ] {
        let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
        fetch_once(&mut f, now, &md, vec![("t", vec![data(0, batch(0, 3))])]);
        let list = fetches(&f.poll_requests(now, &md));
        assert_eq!(list[0].1, [("t".into(), 0, 3)]);
        let outcome = f.handle_response(
            now,
            list[0].2,
            &fetch_response(12, vec![("t", vec![answer.clone()])]),
        );
        assert_eq!(outcome, FetchOutcome::default(), "{answer:?}");
        assert!(!f.has_errors(), "{answer:?}");
        // Not asked again while the records wait, whatever came.
        assert!(f.poll_requests(now, &md).is_empty(), "{answer:?}");
        assert_eq!(t0_offsets(&f.take_records(10)), [0, 1, 2]);
        // Then from the position, as usual.
        let list = fetches(&f.poll_requests(now, &md));
        assert_eq!(list[0].1, [("t".into(), 0, 3)], "{answer:?}");
    }
}

#[test]
fn an_answer_ahead_follows_only_records_that_end_where_it_starts() {
    let md = metadata(&[("t", 0, 1)]);
    let now = Instant::now();
    // A seek while the Fetch ahead is out: its answer is stale.
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, batch(0, 3))])]);
    let list = fetches(&f.poll_requests(now, &md));
    f.seek(&tp("t", 0), 1).unwrap();
    f.handle_response(
        now,
        list[0].2,
        &fetch_response(12, vec![("t", vec![data(0, batch(3, 2))])]),
    );
    assert!(f.take_records(10).is_empty());
    let list = fetches(&f.poll_requests(now, &md));
    assert_eq!(list[0].1, [("t".into(), 0, 1)]);

    // A seek after the answer came: both are dropped.
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, batch(0, 3))])]);
    let list = fetches(&f.poll_requests(now, &md));
    f.handle_response(
        now,
        list[0].2,
        &fetch_response(12, vec![("t", vec![data(0, batch(3, 2))])]),
    );
    f.seek(&tp("t", 0), 2).unwrap();
    assert!(f.take_records(10).is_empty());
    let list = fetches(&f.poll_requests(now, &md));
    assert_eq!(list[0].1, [("t".into(), 0, 2)]);

    // A corrupt batch seen when the records came: no Fetch ahead.
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let mut bad = batch(2, 1).to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    let set = concat(&[&batch(0, 2), &Bytes::from(bad)]);
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, set)])]);
    assert!(f.poll_requests(now, &md).is_empty());

    // A corrupt batch found later, in a chunk decoded as records are
    // taken: the records stop there, and what was fetched after them is
    // not returned.
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let mut set = batches(100, 200);
    let mut bad = set[80].to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    set[80] = Bytes::from(bad);
    let parts: Vec<&Bytes> = set.iter().collect();
    let mut answer = data(0, concat(&parts));
    answer.high_watermark = 50_000;
    fetch_once(&mut f, now, &md, vec![("t", vec![answer])]);
    let list = fetches(&f.poll_requests(now, &md));
    assert_eq!(list[0].1, [("t".into(), 0, 20_000)]);
    f.handle_response(
        now,
        list[0].2,
        &fetch_response(12, vec![("t", vec![data(0, batch(20_000, 2))])]),
    );
    assert_eq!(take_all(&mut f), (0..16_000).collect::<Vec<i64>>());
    let errors = f.take_errors();
    assert!(
        matches!(
            errors[..],
            [FetchError::CorruptRecords { offset: 16_000, .. }]
        ),
        "{errors:?}"
    );
    assert_eq!(f.position(&tp("t", 0)), Some(16_000));
    assert!(f.poll_requests(now, &md).is_empty());
}

#[test]
fn unknown_leader_means_no_fetch() {
    let mut md = metadata(&[("t", 0, -1), ("t", 1, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let planned = f.poll_requests(Instant::now(), &md);
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 1, 0)]);
    assert_eq!(f.leader_unknown(&md), BTreeSet::from([tp("t", 0)]));

    // A topic missing from the metadata altogether.
    md.topics.clear();
    let mut g = fetcher(config(), &[(tp("t", 0), 0)]);
    assert!(g.poll_requests(Instant::now(), &md).is_empty());
    assert_eq!(g.leader_unknown(&md), BTreeSet::from([tp("t", 0)]));
}

#[test]
fn partitions_without_position_wait_for_their_committed_offset() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = Fetcher::new(config());
    f.assign([tp("t", 0), tp("t", 1)]);
    assert_eq!(f.needs_committed(), [tp("t", 0), tp("t", 1)]);
    assert!(f.poll_requests(Instant::now(), &md).is_empty());
    assert_eq!(f.position(&tp("t", 0)), None);

    assert!(f.set_committed(&tp("t", 0), Some((42, None))));
    assert_eq!(f.needs_committed(), [tp("t", 1)]);
    assert_eq!(f.positions(), BTreeMap::from([(tp("t", 0), (42, None))]));
    let planned = f.poll_requests(Instant::now(), &md);
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 0, 42)]);
    // Not twice.
    assert!(!f.set_committed(&tp("t", 0), Some((1, None))));
    assert!(!f.set_committed(&tp("x", 0), Some((1, None))));
}

#[test]
fn a_seek_before_the_committed_offset_arrives_wins() {
    let mut f = Fetcher::new(config());
    f.assign([tp("t", 0)]);
    f.seek(&tp("t", 0), 99).unwrap();
    assert!(f.needs_committed().is_empty());
    assert!(!f.set_committed(&tp("t", 0), Some((5, None))));
    assert_eq!(f.position(&tp("t", 0)), Some(99));
    assert_eq!(
        f.seek(&tp("t", 0), -1),
        Err(SeekError::NegativeOffset {
            partition: tp("t", 0),
            offset: -1
        })
    );
    assert_eq!(
        f.seek(&tp("t", 1), 0),
        Err(SeekError::NotAssigned(tp("t", 1)))
    );
    assert_eq!(
        f.seek_to_end([&tp("t", 0), &tp("t", 1)]),
        Err(SeekError::NotAssigned(tp("t", 1)))
    );
    // Refused as a whole: t-0 did not move.
    assert_eq!(f.position(&tp("t", 0)), Some(99));
}

#[test]
fn assign_keeps_kept_partitions_and_forgets_removed_ones() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 5)]);
    f.pause([&tp("t", 1)]);
    let now = Instant::now();
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, batch(0, 2))])]);

    f.assign([tp("t", 1), tp("t", 2)]);
    assert_eq!(f.assignment(), BTreeSet::from([tp("t", 1), tp("t", 2)]));
    assert_eq!(f.position(&tp("t", 1)), Some(5));
    assert_eq!(f.paused(), BTreeSet::from([tp("t", 1)]));
    assert_eq!(f.needs_committed(), [tp("t", 2)]);
    // t-0's buffered records went with it.
    assert!(f.take_records(10).is_empty());

    // Back again: a fresh start, nothing buffered.
    f.assign([tp("t", 0), tp("t", 1)]);
    assert_eq!(f.position(&tp("t", 0)), None);
    assert!(f.take_records(10).is_empty());
}

#[test]
fn answers_for_unassigned_partitions_are_ignored() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    let token = fetches(&f.poll_requests(now, &md))[0].2;
    f.assign([]);
    f.assign([tp("t", 0)]);
    f.set_committed(&tp("t", 0), Some((0, None)));
    let outcome = f.handle_response(
        now,
        token,
        &fetch_response(12, vec![("t", vec![data(0, batch(0, 2))])]),
    );
    assert_eq!(outcome.records_buffered, 0);
    assert!(f.take_records(10).is_empty());
}

#[test]
fn a_partition_unassigned_while_its_fetch_is_out_is_not_fetched_again() {
    for sessions in [true, false] {
        let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
        let config = FetchConfig {
            sessions,
            ..config()
        };
        let mut f = fetcher(config, &[(tp("t", 0), 0), (tp("t", 1), 0)]);
        let now = Instant::now();
        let planned = f.poll_requests(now, &md);
        assert_eq!(fetched(planned[0].1.as_ref()).len(), 2);
        f.assign([tp("t", 0)]);
        f.handle_response(
            now,
            planned[0].2,
            &session_response(9, ErrorCode::None, vec![]),
        );
        let planned = f.poll_requests(now, &md);
        let (ids, parts, forgotten) = session_request(planned[0].1.as_ref());
        if sessions {
            // The session holds both: t-1 is forgotten, t-0 unchanged.
            assert_eq!(ids, (9, 1));
            assert!(parts.is_empty(), "{parts:?}");
            assert_eq!(forgotten, [("t".into(), 1)]);
        } else {
            assert_eq!(ids, (0, -1));
            assert_eq!(parts, [("t".into(), 0, 0)]);
            assert!(forgotten.is_empty());
        }
    }
}

/// How many Fetches the passes send while `t-0` is not fetchable (each
/// answered with records at offset 0), up to 20.
fn fetches_while_not_fetchable(f: &mut Fetcher, now: Instant, md: &Metadata) -> usize {
    let mut rounds = 0;
    while rounds < 20 {
        let list = fetches(&f.poll_requests(now, md));
        let Some((_, _, token)) = list.first() else {
            break;
        };
        rounds += 1;
        f.handle_response(
            now,
            *token,
            &fetch_response(13, vec![("t", vec![data(0, batch(0, 3))])]),
        );
    }
    rounds
}

#[test]
fn a_partition_revoked_and_assigned_again_while_its_fetch_is_out_is_not_fetched_while_paused() {
    for sessions in [true, false] {
        let md = metadata(&[("t", 0, 1)]);
        let config = FetchConfig {
            sessions,
            ..config()
        };
        let mut f = fetcher(config, &[(tp("t", 0), 0)]);
        let now = Instant::now();
        let token = fetches(&f.poll_requests(now, &md))[0].2;
        // A rebalance: revoked, then the same partition assigned again,
        // paused by the application.
        f.assign([]);
        assert!(f.poll_requests(now, &md).is_empty());
        f.assign([tp("t", 0)]);
        f.pause([&tp("t", 0)]);
        assert!(f.set_committed(&tp("t", 0), Some((0, None))));
        // The answer names the topic by id (v13), as the earlier
        // assignment's Fetch was sent.
        let mut answer = fetch_response(13, vec![("t", vec![data(0, batch(0, 3))])]);
        if sessions {
            let mut body: FetchResponse = answer.decode().unwrap();
            body.session_id = 9;
            answer.body = encode(&body, 13);
        }
        f.handle_response(now, token, &answer);
        assert!(
            !f.has_buffered(),
            "the answer was for the earlier assignment"
        );
        assert_eq!(
            fetches_while_not_fetchable(&mut f, now, &md),
            0,
            "sessions: {sessions}"
        );
    }
}

#[test]
fn a_partition_revoked_and_assigned_again_between_passes_is_not_fetched_while_paused() {
    let md = metadata(&[("t", 0, 1)]);
    let config = FetchConfig {
        sessions: false,
        ..config()
    };
    let mut f = fetcher(config, &[(tp("t", 0), 0)]);
    let now = Instant::now();
    // Parked at broker 1 by an answer with nothing for it.
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, Bytes::new())])]);
    f.assign([]);
    f.assign([tp("t", 0)]);
    f.pause([&tp("t", 0)]);
    assert_eq!(fetches_while_not_fetchable(&mut f, now, &md), 0);
}

#[test]
fn a_partition_assigned_again_and_moved_while_its_fetch_is_out_is_fetched_from_one_leader() {
    let config = FetchConfig {
        sessions: false,
        ..config()
    };
    let mut f = fetcher(config, &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    let first = fetches(&f.poll_requests(now, &metadata(&[("t", 0, 1), ("t", 1, 1)])))[0].2;
    f.assign([tp("t", 1)]);
    f.assign([tp("t", 0), tp("t", 1)]);
    assert!(f.set_committed(&tp("t", 0), Some((5, None))));
    // New metadata: broker 2 leads t-0. It waits for broker 1's answer.
    f.set_metadata_generation(2);
    let md = metadata(&[("t", 0, 2), ("t", 1, 1)]);
    assert!(fetches(&f.poll_requests(now, &md)).is_empty());
    f.handle_response(
        now,
        first,
        &fetch_response(
            12,
            vec![("t", vec![data(0, Bytes::new()), data(1, Bytes::new())])],
        ),
    );
    let mut sent = fetches(&f.poll_requests(now, &md));
    sent.sort_by_key(|(broker, _, _)| *broker);
    let parts: Vec<(i32, Parts)> = sent.iter().map(|(b, p, _)| (*b, p.clone())).collect();
    assert_eq!(
        parts,
        [(1, vec![("t".into(), 1, 0)]), (2, vec![("t".into(), 0, 5)])]
    );
    // Broker 2 answers with nothing; paused, t-0 is in no Fetch.
    f.handle_response(now, sent[1].2, &fetch_response(12, vec![]));
    f.pause([&tp("t", 0)]);
    assert!(fetches(&f.poll_requests(now, &md)).is_empty());
    f.handle_response(now, sent[0].2, &fetch_response(12, vec![]));
    assert_eq!(
        fetches(&f.poll_requests(now, &md))
            .into_iter()
            .map(|(b, p, _)| (b, p))
            .collect::<Vec<_>>(),
        [(1, vec![("t".into(), 1, 0)])]
    );
}

#[test]
fn a_paused_partition_whose_reset_failed_is_asked_again_after_its_backoff() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    f.pause([&tp("t", 0)]);
    f.seek_to_end([&tp("t", 0)]).unwrap();
    let resets = |planned: &Planned| -> Vec<FetchToken> {
        planned
            .iter()
            .filter(|(_, body, _)| body.api_key() == ApiKey::ListOffsets)
            .map(|(_, _, token)| *token)
            .collect()
    };
    let asked = resets(&f.poll_requests(now, &md));
    assert_eq!(asked.len(), 1, "a reset is asked for while paused");
    f.handle_failure(now, asked[0], &lost());
    assert!(f.poll_requests(now, &md).is_empty(), "backing off");
    let retry = f.next_deadline().expect("the retry's deadline");
    assert_eq!(resets(&f.poll_requests(retry, &md)).len(), 1);
}

#[test]
fn partitions_left_out_of_an_answer_follow_a_leader_that_moves() {
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    // Both are asked of broker 1, which answers with nothing.
    fetch_once(&mut f, now, &metadata(&[("t", 0, 1), ("t", 1, 1)]), vec![]);
    // New metadata: broker 2 leads t-1.
    f.set_metadata_generation(2);
    let planned = f.poll_requests(now, &metadata(&[("t", 0, 1), ("t", 1, 2)]));
    let mut sent: Vec<(i32, Parts)> = fetches(&planned)
        .into_iter()
        .map(|(broker, parts, _)| (broker, parts))
        .collect();
    sent.sort();
    assert_eq!(
        sent,
        [(1, vec![("t".into(), 0, 0)]), (2, vec![("t".into(), 1, 0)])]
    );
}

// ===== positions and records =====

#[test]
fn positions_advance_only_when_records_are_taken() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 5)]);
    let now = Instant::now();
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, batch(5, 5))])]);
    assert_eq!(f.position(&tp("t", 0)), Some(5));

    let first = f.take_records(2);
    assert_eq!(t0_offsets(&first), [5, 6]);
    assert_eq!(first[0].topic(), "t");
    assert_eq!(first[0].partition(), 0);
    assert_eq!(first[0].value(), Some(&b"5"[..]));
    assert_eq!(first[0].key(), Some(&b"k"[..]));
    assert_eq!(
        first[0].timestamp(),
        records::Timestamp::CreateTime(1_700_000_000_000)
    );
    assert_eq!(first[0].leader_epoch(), Some(3));
    assert!(first[0].headers().is_empty());
    assert_eq!(f.position(&tp("t", 0)), Some(7));
    assert_eq!(f.positions()[&tp("t", 0)], (7, Some(3)));

    assert_eq!(t0_offsets(&f.take_records(10)), [7, 8, 9]);
    assert_eq!(f.position(&tp("t", 0)), Some(10));
    assert!(f.take_records(10).is_empty());
    assert!(f.take_records(0).is_empty());
}

// ===== partition EOF =====

fn eof_config() -> FetchConfig {
    FetchConfig {
        partition_eof: true,
        ..config()
    }
}

fn eofs(f: &mut Fetcher) -> Vec<(i32, i64)> {
    f.take_errors()
        .into_iter()
        .map(|e| match e {
            FetchError::PartitionEof { partition, offset } => (partition.partition, offset),
            other => panic!("not an EOF: {other}"),
        })
        .collect()
}

#[test]
fn the_end_of_a_partition_is_said_after_its_records_once_per_arrival() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(eof_config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    let empty = PartitionData {
        partition_index: 1,
        high_watermark: 0,
        ..PartitionData::default()
    };
    fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![caught_up(0, batch(0, 3)), empty.clone()])],
    );
    // The empty partition is at its end at once; partition 0 only once its
    // records are taken.
    assert_eq!(eofs(&mut f), [(1, 0)]);
    assert_eq!(t0_offsets(&f.take_records(2)), [0, 1]);
    assert!(!f.has_errors());
    assert_eq!(t0_offsets(&f.take_records(10)), [2]);
    assert_eq!(eofs(&mut f), [(0, 3)]);

    // Caught up, answered empty again: nothing more to say.
    let again = PartitionData {
        partition_index: 0,
        high_watermark: 3,
        ..PartitionData::default()
    };
    fetch_once(&mut f, now, &md, vec![("t", vec![again, empty])]);
    assert!(!f.has_errors());

    // New records: the end again, at the new end, after them.
    fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![caught_up(0, batch(3, 2))])],
    );
    assert!(!f.has_errors());
    assert_eq!(t0_offsets(&f.take_records(10)), [3, 4]);
    assert_eq!(eofs(&mut f), [(0, 5)]);

    // A seek to the end the last answer gave says it again at once (a
    // fetch session may leave the partition out of every answer).
    f.seek(&tp("t", 1), 0).unwrap();
    assert_eq!(eofs(&mut f), [(1, 0)]);
    // A seek below the end: after the records again.
    f.seek(&tp("t", 0), 4).unwrap();
    assert!(!f.has_errors());

    // Paused, a partition says nothing, even seeking to its end; resumed,
    // its next answer says it.
    f.pause([&tp("t", 1)]);
    f.seek(&tp("t", 1), 0).unwrap();
    assert!(!f.has_errors());
    f.resume([&tp("t", 1)]);
    let at_end = PartitionData {
        partition_index: 1,
        high_watermark: 0,
        ..PartitionData::default()
    };
    let planned = f.poll_requests(now, &md);
    let list = fetches(&planned);
    let token = list
        .iter()
        .find(|(_, parts, _)| parts.iter().any(|p| p.0 == "t" && p.1 == 1))
        .map(|(_, _, token)| *token)
        .expect("partition 1 fetched once resumed");
    f.handle_response(now, token, &fetch_response(12, vec![("t", vec![at_end])]));
    assert_eq!(eofs(&mut f), [(1, 0)]);
}

#[test]
fn without_partition_eof_nothing_is_said_at_the_end() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![caught_up(0, batch(0, 3))])],
    );
    assert_eq!(take_all(&mut f), [0, 1, 2]);
    assert!(!f.has_errors());
}

#[test]
fn under_read_committed_the_end_is_the_last_stable_offset() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(
        FetchConfig {
            isolation: IsolationLevel::ReadCommitted,
            ..eof_config()
        },
        &[(tp("t", 0), 0)],
    );
    let now = Instant::now();
    // Records 0..3 stable, an open transaction after them up to 10.
    let open = PartitionData {
        high_watermark: 10,
        last_stable_offset: 3,
        ..data(0, batch(0, 3))
    };
    fetch_once(&mut f, now, &md, vec![("t", vec![open])]);
    assert_eq!(take_all(&mut f), [0, 1, 2]);
    assert_eq!(eofs(&mut f), [(0, 3)]);
}

#[test]
fn records_before_the_fetch_offset_are_not_returned() {
    // A broker returns whole batches: the one holding offset 5 starts at 2.
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 5)]);
    fetch_once(
        &mut f,
        Instant::now(),
        &md,
        vec![("t", vec![data(0, batch(2, 6))])],
    );
    assert_eq!(t0_offsets(&f.take_records(10)), [5, 6, 7]);
    assert_eq!(f.position(&tp("t", 0)), Some(8));
}

#[test]
fn a_seek_discards_buffered_records() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, batch(0, 5))])]);
    assert_eq!(t0_offsets(&f.take_records(2)), [0, 1]);

    f.seek(&tp("t", 0), 100).unwrap();
    assert!(!f.has_buffered());
    assert!(f.take_records(10).is_empty());
    assert_eq!(f.position(&tp("t", 0)), Some(100));
    let planned = f.poll_requests(now, &md);
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 0, 100)]);

    // A seek while a Fetch is out: its answer is stale, even for the same
    // offset.
    let token = fetches(&planned)[0].2;
    f.seek(&tp("t", 0), 100).unwrap();
    let outcome = f.handle_response(
        now,
        token,
        &fetch_response(12, vec![("t", vec![data(0, batch(100, 2))])]),
    );
    assert_eq!(outcome.records_buffered, 0);
    assert!(f.take_records(10).is_empty());
    assert_eq!(f.position(&tp("t", 0)), Some(100));
}

#[test]
fn paused_partitions_keep_their_records_for_later() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![data(0, batch(0, 2)), data(1, batch(0, 2))])],
    );
    f.pause([&tp("t", 0)]);
    assert_eq!(
        offsets(&f.take_records(10)),
        [("t".into(), 1, 0), ("t".into(), 1, 1)]
    );
    assert!(!f.has_buffered());
    assert_eq!(f.position(&tp("t", 0)), Some(0));
    f.resume([&tp("t", 0)]);
    assert!(f.has_buffered());
    assert_eq!(t0_offsets(&f.take_records(10)), [0, 1]);
}

#[test]
fn take_records_serves_partitions_in_turn() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    fetch_once(
        &mut f,
        Instant::now(),
        &md,
        vec![("t", vec![data(0, batch(0, 3)), data(1, batch(10, 3))])],
    );
    assert_eq!(
        offsets(&f.take_records(2)),
        [("t".into(), 0, 0), ("t".into(), 0, 1)]
    );
    assert_eq!(
        offsets(&f.take_records(2)),
        [("t".into(), 1, 10), ("t".into(), 1, 11)]
    );
    assert_eq!(
        offsets(&f.take_records(2)),
        [("t".into(), 0, 2), ("t".into(), 1, 12)]
    );
    assert!(f.take_records(2).is_empty());
}

#[test]
fn compacted_gaps_move_the_position_past_them() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 10)]);
    let now = Instant::now();
    // Offsets 10 and 15 survive in a batch that ran to 19; then a batch
    // that compaction emptied, 20..=24.
    let mut b = RecordBatchBuilder::new(10).last_offset_delta(9);
    b.append(1, None, Some(b"a"), &[]).unwrap();
    b.append_at(15, 2, None, Some(b"b"), &[]).unwrap();
    let gappy = b.build().unwrap();
    let emptied = RecordBatchBuilder::new(20)
        .last_offset_delta(4)
        .build()
        .unwrap();
    fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![data(0, concat(&[&gappy, &emptied]))])],
    );
    assert_eq!(t0_offsets(&f.take_records(1)), [10]);
    assert_eq!(f.position(&tp("t", 0)), Some(11));
    assert_eq!(t0_offsets(&f.take_records(10)), [15]);
    assert_eq!(f.position(&tp("t", 0)), Some(25));

    // A fetch with nothing to deliver moves the position at once.
    let emptied = RecordBatchBuilder::new(25)
        .last_offset_delta(2)
        .build()
        .unwrap();
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, emptied)])]);
    assert!(!f.has_buffered());
    assert_eq!(f.position(&tp("t", 0)), Some(28));
}

#[test]
fn control_batches_are_never_returned() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let marker =
        RecordBatchBuilder::control_batch(0, 9, 0, ControlRecordType::Commit, 1, 5).unwrap();
    fetch_once(
        &mut f,
        Instant::now(),
        &md,
        vec![("t", vec![data(0, marker)])],
    );
    assert!(f.take_records(10).is_empty());
    assert_eq!(f.position(&tp("t", 0)), Some(1));
}

#[test]
fn a_partial_tail_is_left_for_the_next_fetch() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    let whole = batch(0, 3);
    let next = batch(3, 3);
    let cut = next.slice(..30);
    let outcome = fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![data(0, concat(&[&whole, &cut]))])],
    );
    assert_eq!(outcome.records_buffered, 3);
    assert_eq!(outcome.errors, 0);
    assert_eq!(t0_offsets(&f.take_records(10)), [0, 1, 2]);
    assert_eq!(f.position(&tp("t", 0)), Some(3));

    // Only a piece of a batch that fits the partition limit (the response
    // ran out of room): no progress, no error, fetched again as before.
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, cut)])]);
    assert_eq!(f.position(&tp("t", 0)), Some(3));
    assert!(f.take_errors().is_empty());
    let planned = f.poll_requests(now, &md);
    let request = decode_fetch(planned[0].1.as_ref(), 12);
    assert_eq!(request.topics[0].partitions[0].fetch_offset, 3);
    assert_eq!(
        request.topics[0].partitions[0].partition_max_bytes,
        1_048_576
    );
}

#[test]
fn a_batch_larger_than_the_partition_limit_is_fetched_with_a_larger_one() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(
        FetchConfig {
            max_partition_bytes: 64,
            ..config()
        },
        &[(tp("t", 0), 0), (tp("t", 1), 0)],
    );
    let now = Instant::now();
    let big = batch(0, 20);
    assert!(big.len() > 64);
    fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![data(1, big.slice(..64))])],
    );
    assert!(f.take_errors().is_empty());
    let planned = f.poll_requests(now, &md);
    let request = decode_fetch(planned[0].1.as_ref(), 12);
    // t-1 first now, with room for its batch; t-0 keeps the configured
    // limit.
    let parts = &request.topics[0].partitions;
    assert_eq!(
        (parts[0].partition, parts[0].partition_max_bytes),
        (1, big.len() as i32)
    );
    assert_eq!((parts[1].partition, parts[1].partition_max_bytes), (0, 64));
    f.handle_response(
        now,
        planned[0].2,
        &fetch_response(12, vec![("t", vec![data(1, big.clone())])]),
    );
    assert_eq!(f.take_records(100).len(), 20);
    // Back to the configured limit once the batch came.
    let planned = f.poll_requests(now, &md);
    let request = decode_fetch(planned[0].1.as_ref(), 12);
    assert!(request.topics[0]
        .partitions
        .iter()
        .all(|p| p.partition_max_bytes == 64));
}

#[test]
fn a_batch_too_large_to_fetch_stops_its_partition_with_an_error() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 7)]);
    let now = Instant::now();
    // The first 40 bytes of a batch that says it is 200 MB long.
    let mut head = Vec::new();
    head.extend_from_slice(&7i64.to_be_bytes());
    head.extend_from_slice(&200_000_000i32.to_be_bytes());
    head.resize(40, 0);
    let outcome = fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![data(0, Bytes::from(head))])],
    );
    assert_eq!(outcome.errors, 1);
    assert_eq!(
        f.take_errors(),
        [FetchError::RecordTooLarge {
            partition: tp("t", 0),
            offset: 7,
            size: Some(200_000_012),
        }]
    );
    assert_eq!(f.position(&tp("t", 0)), Some(7));
    assert!(f.poll_requests(now, &md).is_empty());
    f.seek(&tp("t", 0), 8).unwrap();
    assert_eq!(
        fetches(&f.poll_requests(now, &md))[0].1,
        [("t".into(), 0, 8)]
    );
}

#[test]
fn read_committed_drops_aborted_transactions() {
    let pid = 77;
    let mut txn = RecordBatchBuilder::new(0)
        .producer(pid, 0, 0)
        .transactional(true);
    for _ in 0..3 {
        txn.append(1, None, Some(b"aborted"), &[]).unwrap();
    }
    let txn = txn.build().unwrap();
    let abort =
        RecordBatchBuilder::control_batch(3, pid, 0, ControlRecordType::Abort, 1, 2).unwrap();
    let plain = batch(4, 2);
    let records = concat(&[&txn, &abort, &plain]);
    let partition = PartitionData {
        aborted_transactions: Some(vec![WireAborted {
            producer_id: pid,
            first_offset: 0,
            ..WireAborted::default()
        }]),
        ..data(0, records)
    };
    let md = metadata(&[("t", 0, 1)]);

    let mut committed = fetcher(
        FetchConfig {
            isolation: IsolationLevel::ReadCommitted,
            ..config()
        },
        &[(tp("t", 0), 0)],
    );
    fetch_once(
        &mut committed,
        Instant::now(),
        &md,
        vec![("t", vec![partition.clone()])],
    );
    assert_eq!(t0_offsets(&committed.take_records(10)), [4, 5]);
    assert_eq!(committed.position(&tp("t", 0)), Some(6));

    let mut uncommitted = fetcher(config(), &[(tp("t", 0), 0)]);
    fetch_once(
        &mut uncommitted,
        Instant::now(),
        &md,
        vec![("t", vec![partition])],
    );
    assert_eq!(t0_offsets(&uncommitted.take_records(10)), [0, 1, 2, 4, 5]);
}

// ===== errors =====

/// `count` batches of `per` records each from offset 0, one after another.
fn batches(count: usize, per: usize) -> Vec<Bytes> {
    (0..count).map(|i| batch((i * per) as i64, per)).collect()
}

/// A response's worth of records for one partition, cut short by the
/// broker's size limit: every whole record comes, once and in order, the
/// counters agree with what came, and the cut batch is fetched again.
#[test]
fn a_large_record_set_cut_short_is_delivered_whole_and_its_cut_batch_fetched_again() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    // 100 batches of 200 records, and half a batch at the end as a
    // broker cuts a response. (Several of the chunks a large set is
    // decoded in, so that delivery crosses their boundaries.)
    let set = batches(100, 200);
    let total: usize = set.iter().map(Bytes::len).sum();
    assert!(total > 2 * DECODE_CHUNK, "{total} bytes");
    let tail = batch(20_000, 5);
    let mut parts: Vec<&Bytes> = set.iter().collect();
    let cut = tail.slice(..tail.len() / 2);
    parts.push(&cut);
    let outcome = fetch_once(&mut f, now, &md, vec![("t", vec![data(0, concat(&parts))])]);
    assert!(outcome.records_buffered > 0);
    assert!(f.has_buffered());
    assert_eq!(t0_offsets(&f.take_records(1)), [0]);
    assert_eq!(f.position(&tp("t", 0)), Some(1));
    assert_eq!(take_all(&mut f), (1..20_000).collect::<Vec<i64>>());
    assert!(f.take_errors().is_empty());
    let counters = f.partition_stats()[0].counters;
    assert_eq!(
        (counters.records_fetched, counters.records_consumed),
        (20_000, 20_000)
    );
    // Past the last whole batch; the cut one is fetched again.
    assert_eq!(f.position(&tp("t", 0)), Some(20_000));
    let planned = f.poll_requests(now, &md);
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 0, 20_000)]);
}

/// The contract of [`Fetcher::take_ready`] and [`Fetcher::put_decoded`],
/// which the consumer's `poll` uses to decode outside the consumer's lock:
/// while a chunk of a partition's records is out, nothing of that
/// partition is handed out (twice or out of order) and it does not count
/// as buffered, the other partitions' records still come; once the chunk
/// is back, the partition's records follow in order from its position.
#[test]
fn while_a_chunk_is_out_its_partition_waits_and_once_back_its_records_follow_in_order() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    let large = concat(&batches(100, 200).iter().collect::<Vec<_>>());
    fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![data(0, large), data(1, batch(0, 3))])],
    );
    // A chunk of t-0 goes out; t-1's records are taken meanwhile.
    let mut out = Vec::new();
    let jobs = f.take_ready(500, &mut out);
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        out.iter()
            .map(|r| (r.partition(), r.offset()))
            .collect::<Vec<_>>(),
        [(1, 0), (1, 1), (1, 2)]
    );
    // While it is out, nothing is taken from that partition and nothing
    // counts as buffered.
    assert!(f.take_ready(500, &mut out).is_empty());
    assert_eq!(out.len(), 3);
    assert!(!f.has_buffered());
    assert_eq!(f.position(&tp("t", 0)), Some(0));
    // Back, its records come in order from the position.
    let decoded: Vec<Decoded> = jobs.into_iter().map(DecodeJob::run).collect();
    for d in decoded {
        f.put_decoded(d);
    }
    assert!(f.has_buffered());
    let mut more = Vec::new();
    let _ = f.take_ready(10, &mut more);
    assert_eq!(t0_offsets(&more), (0..10).collect::<Vec<i64>>());
    assert_eq!(f.position(&tp("t", 0)), Some(10));
    assert_eq!(take_all(&mut f), (10..20_000).collect::<Vec<i64>>());
}

/// Part of the chunk contract of [`Fetcher::take_ready`] and
/// [`Fetcher::put_decoded`]: a chunk put back after its buffer went (a
/// seek while it was out) is dropped, so no record of it reaches the
/// application for the new position; the new buffer's records come, once.
#[test]
fn a_chunk_decoded_for_a_buffer_that_went_is_dropped() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    let large = concat(&batches(100, 200).iter().collect::<Vec<_>>());
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, large.clone())])]);
    let mut out = Vec::new();
    let jobs = f.take_ready(500, &mut out);
    assert_eq!(jobs.len(), 1);
    // A seek while the chunk is out: its records are not for the new
    // position, even once a new answer is buffered from there.
    f.seek(&tp("t", 0), 0).unwrap();
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, large)])]);
    for job in jobs {
        f.put_decoded(job.run());
    }
    let mut out = Vec::new();
    let again = f.take_ready(500, &mut out);
    assert!(out.is_empty());
    assert_eq!(again.len(), 1, "the new buffer's own first chunk");
    for job in again {
        f.put_decoded(job.run());
    }
    assert_eq!(take_all(&mut f), (0..20_000).collect::<Vec<i64>>());
}

/// Part of the chunk contract of [`Fetcher::take_ready`]: a caller that
/// takes exactly the records there are learns the buffer's end before it
/// returns, so the partition is fetched again without waiting for
/// another `poll`.
#[test]
fn a_buffer_whose_last_chunk_comes_back_empty_ends_and_its_partition_is_fetched_again() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    let large = concat(&batches(100, 200).iter().collect::<Vec<_>>());
    // A cut batch after the last whole one: its chunk holds no record.
    let tail = batch(20_000, 5);
    let cut = tail.slice(..tail.len() / 2);
    fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![data(0, concat(&[&large, &cut]))])],
    );
    let mut taken = 0;
    // Taking exactly the whole records, the last decoded chunk is handed
    // out even though `max` was reached, so that the buffer's end is
    // known before the caller returns.
    loop {
        let mut out = Vec::new();
        let jobs = f.take_ready(20_000 - taken, &mut out);
        taken += out.len();
        if jobs.is_empty() {
            break;
        }
        for job in jobs {
            f.put_decoded(job.run());
        }
    }
    assert_eq!(taken, 20_000);
    assert!(!f.has_buffered());
    assert_eq!(f.position(&tp("t", 0)), Some(20_000));
    let planned = f.poll_requests(now, &md);
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 0, 20_000)]);
}

/// What one Fetch answer of `set` for t-0 comes to, as
/// [`delivered_from`] says.
type Delivered = (Vec<i64>, Vec<(&'static str, i64)>, Option<i64>, Option<i64>);

/// What one Fetch answer of `set` for t-0, fetched from `from`, comes to:
/// the offsets taken, the errors (what and at which offset), the position
/// after them, and where t-0 is fetched from next (`None`: not fetched).
fn delivered_from(set: Bytes, from: i64) -> Delivered {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), from)]);
    let now = Instant::now();
    let outcome = fetch_once(&mut f, now, &md, vec![("t", vec![data(0, set)])]);
    let taken = take_all(&mut f);
    assert_eq!(
        outcome.records_buffered > 0,
        !taken.is_empty(),
        "{outcome:?}"
    );
    let errors = f
        .take_errors()
        .into_iter()
        .map(|e| match e {
            FetchError::CorruptRecords {
                partition, offset, ..
            } if partition == tp("t", 0) => ("corrupt", offset),
            FetchError::RecordTooLarge {
                partition, offset, ..
            } if partition == tp("t", 0) => ("too large", offset),
            other => panic!("{other:?}"),
        })
        .collect();
    let next = fetches(&f.poll_requests(now, &md))
        .into_iter()
        .flat_map(|(_, parts, _)| parts)
        .find(|(_, p, _)| *p == 0)
        .map(|(_, _, offset)| offset);
    (taken, errors, f.position(&tp("t", 0)), next)
}

/// However a record set starts (records, a control batch, a batch that
/// ends before the position, a cut, absurd or foreign header), large or
/// small, what comes of it is the same: the records at and after the
/// position, each once and in order, past the control batches; a set that
/// cannot be read is reported or fetched again, never skipped.
#[test]
fn a_record_set_is_delivered_from_the_position_whatever_it_starts_with() {
    let large = concat(&batches(100, 200).iter().collect::<Vec<_>>());
    let all = |from: i64| (from..20_000).collect::<Vec<i64>>();
    assert_eq!(
        delivered_from(large.clone(), 0),
        (all(0), vec![], Some(20_000), Some(20_000))
    );
    // The first batch ends at 199: it holds records for 150, none for 200.
    assert_eq!(
        delivered_from(large.clone(), 150),
        (all(150), vec![], Some(20_000), Some(20_000))
    );
    assert_eq!(
        delivered_from(large.clone(), 200),
        (all(200), vec![], Some(20_000), Some(20_000))
    );
    assert_eq!(
        delivered_from(batch(0, 3), 0),
        (vec![0, 1, 2], vec![], Some(3), Some(3))
    );
    // A transaction marker first (nothing to return) or last.
    let marker = |at: i64| {
        RecordBatchBuilder::control_batch(at, 9, 0, ControlRecordType::Commit, 1, 5).unwrap()
    };
    let after_marker: Vec<Bytes> = (0..100).map(|i| batch(1 + i * 200, 200)).collect();
    let mut parts = vec![marker(0)];
    parts.extend(after_marker);
    let marker_first = concat(&parts.iter().collect::<Vec<_>>());
    assert_eq!(
        delivered_from(marker_first, 0),
        ((1..20_001).collect(), vec![], Some(20_001), Some(20_001))
    );
    let marker_last = concat(&[&large, &marker(20_000)]);
    assert_eq!(
        delivered_from(marker_last, 0),
        (all(0), vec![], Some(20_001), Some(20_001))
    );
    // Cut inside the first batch's header: nothing yet, fetched again.
    let (taken, errors, position, next) = delivered_from(large.slice(..40), 0);
    assert_eq!(
        (taken, errors, position, next),
        (vec![], vec![], Some(0), Some(0))
    );
    // An absurd length or a foreign magic byte in the first batch:
    // reported there, and the partition stops; nothing skipped.
    let mut absurd = large.to_vec();
    absurd[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    assert_eq!(
        delivered_from(Bytes::from(absurd), 0),
        (vec![], vec![("too large", 0)], Some(0), None)
    );
    let mut legacy = large.to_vec();
    legacy[16] = 1;
    assert_eq!(
        delivered_from(Bytes::from(legacy), 0),
        (vec![], vec![("corrupt", 0)], Some(0), None)
    );
}

/// The contract of `crcs_hold`: a set it passes is parsed without its CRCs
/// checked again, so it must fail for a flipped byte in any whole batch
/// and for an entry that is not a v2 batch (whose checksum it cannot
/// judge); a batch cut short at the end is left to the decoder.
#[test]
fn crcs_hold_fails_for_any_corrupt_or_foreign_whole_batch_of_a_set() {
    let set = batches(100, 200);
    let whole = concat(&set.iter().collect::<Vec<_>>());
    assert!(crcs_hold(&whole));
    // A cut batch at the end is left to the decoder.
    assert!(crcs_hold(&whole[..whole.len() - 7]));
    // One flipped byte in any batch, or a legacy entry, fails.
    for at in [30, whole.len() / 2, whole.len() - 1] {
        let mut bad = whole.to_vec();
        bad[at] ^= 0x01;
        assert!(!crcs_hold(&bad), "byte {at}");
    }
    let mut legacy = whole.to_vec();
    let second = set[0].len();
    legacy[second + 16] = 1;
    assert!(!crcs_hold(&legacy));
}

/// A large record set with a corrupt batch: whenever the driver runs
/// [`Fetcher::check_pending_crcs`] (before anything is taken, after some
/// records were, never), the records before the batch come whole and in
/// order, then the batch is reported with its partition and offset, and
/// nothing after it is delivered or fetched: it is never skipped
/// silently. The same holds for an answer fetched ahead. A sound set comes
/// whole whenever the check runs; what waits for the check stays bounded
/// by the partitions when the driver never runs it; with `check.crcs`
/// off, nothing is checked.
#[test]
fn a_corrupt_batch_in_a_large_set_is_reported_after_the_records_before_it_whenever_crcs_are_checked(
) {
    let md = metadata(&[("t", 0, 1)]);
    let now = Instant::now();
    let good = concat(&batches(100, 200).iter().collect::<Vec<_>>());
    // A digit of the last record's value: still a record, not its CRC.
    let mut bad = good.to_vec();
    let digit = bad.len() - 2;
    bad[digit] ^= 0x01;
    let bad = Bytes::from(bad);
    // The one error is the corrupt batch at `at`; t-0 is not fetched
    // again and stays there.
    let stopped_at = |f: &mut Fetcher, at: i64| {
        let errors = f.take_errors();
        assert!(
            matches!(
                &errors[..],
                [FetchError::CorruptRecords { partition, offset, .. }]
                    if *partition == tp("t", 0) && *offset == at
            ),
            "{errors:?}"
        );
        assert_eq!(f.position(&tp("t", 0)), Some(at));
        assert!(f.poll_requests(now, &md).is_empty());
        assert!(f.take_records(500).is_empty());
    };
    // Sound CRCs, checked or not: every record comes.
    for check in [true, false] {
        let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
        fetch_once(&mut f, now, &md, vec![("t", vec![data(0, good.clone())])]);
        if check {
            f.check_pending_crcs();
        }
        assert_eq!(take_all(&mut f), (0..20_000).collect::<Vec<i64>>());
        assert!(f.take_errors().is_empty());
    }
    // A faulty batch (the last), checked before anything is taken or
    // never: the records before it come and the error names it.
    for check in [true, false] {
        let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
        fetch_once(&mut f, now, &md, vec![("t", vec![data(0, bad.clone())])]);
        if check {
            f.check_pending_crcs();
        }
        assert_eq!(take_all(&mut f), (0..19_800).collect::<Vec<i64>>());
        stopped_at(&mut f, 19_800);
    }
    // Checked after some records were taken: the same.
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, bad.clone())])]);
    let first = f.take_records(500);
    assert_eq!(t0_offsets(&first), (0..500).collect::<Vec<i64>>());
    f.check_pending_crcs();
    let rest = take_all(&mut f);
    assert_eq!(rest, (500..19_800).collect::<Vec<i64>>());
    stopped_at(&mut f, 19_800);
    // The answer fetched ahead, corrupt, after a sound one: checked too.
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let mut answer = data(0, good.clone());
    answer.high_watermark = 40_000;
    fetch_once(&mut f, now, &md, vec![("t", vec![answer])]);
    let list = fetches(&f.poll_requests(now, &md));
    assert_eq!(list[0].1, [("t".into(), 0, 20_000)]);
    let later: Vec<Bytes> = (0..100).map(|i| batch(20_000 + i * 200, 200)).collect();
    let mut ahead = concat(&later.iter().collect::<Vec<_>>()).to_vec();
    let digit = ahead.len() - 2;
    ahead[digit] ^= 0x01;
    f.handle_response(
        now,
        list[0].2,
        &fetch_response(12, vec![("t", vec![data(0, Bytes::from(ahead))])]),
    );
    f.check_pending_crcs();
    assert_eq!(take_all(&mut f), (0..39_800).collect::<Vec<i64>>());
    stopped_at(&mut f, 39_800);
    // A driver that never calls the check: what waits for it stays one
    // entry per partition (bounded memory), however many sets come.
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    for round in 0..4 {
        let later: Vec<Bytes> = (0..100)
            .map(|i| batch(round * 20_000 + i * 200, 200))
            .collect();
        let set = concat(&later.iter().collect::<Vec<_>>());
        fetch_once(&mut f, now, &md, vec![("t", vec![data(0, set)])]);
        assert_eq!(
            take_all(&mut f),
            (round * 20_000..(round + 1) * 20_000).collect::<Vec<i64>>()
        );
        assert!(f.crcs_pending.len() <= 1, "round {round}");
    }
    // With check.crcs=false nothing is checked: every record comes,
    // whatever the CRCs say, checked by the driver or not.
    for check in [true, false] {
        let unchecked = FetchConfig {
            check_crcs: false,
            ..config()
        };
        let mut f = fetcher(unchecked, &[(tp("t", 0), 0)]);
        fetch_once(&mut f, now, &md, vec![("t", vec![data(0, bad.clone())])]);
        if check {
            f.check_pending_crcs();
        }
        assert_eq!(take_all(&mut f), (0..20_000).collect::<Vec<i64>>());
        assert!(f.take_errors().is_empty());
    }
}

#[test]
fn a_corrupt_batch_in_a_later_chunk_stops_the_partition_after_the_records_before_it() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    let mut set = batches(100, 200);
    // Far past the first chunk.
    let mut bad = set[80].to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    set[80] = Bytes::from(bad);
    let parts: Vec<&Bytes> = set.iter().collect();
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, concat(&parts))])]);
    assert!(f.take_errors().is_empty());
    assert_eq!(take_all(&mut f), (0..16_000).collect::<Vec<i64>>());
    let errors = f.take_errors();
    assert_eq!(errors.len(), 1);
    assert!(matches!(
        &errors[0],
        FetchError::CorruptRecords { offset: 16_000, .. }
    ));
    assert!(f.poll_requests(now, &md).is_empty());
}

#[test]
fn a_corrupt_batch_is_reported_with_its_offset_and_never_skipped() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    let good = batch(0, 3);
    let mut bad = batch(3, 3).to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    let outcome = fetch_once(
        &mut f,
        now,
        &md,
        vec![(
            "t",
            vec![
                data(0, concat(&[&good, &Bytes::from(bad.clone())])),
                data(1, batch(0, 1)),
            ],
        )],
    );
    // The records before the bad batch come first; the error once they
    // are taken (a seek past it must not lose them).
    assert_eq!(outcome.records_buffered, 4);
    assert!(f.take_errors().is_empty());
    let taken = f.take_records(10);
    assert_eq!(
        offsets(&taken),
        [
            ("t".into(), 0, 0),
            ("t".into(), 0, 1),
            ("t".into(), 0, 2),
            ("t".into(), 1, 0)
        ]
    );
    let errors = f.take_errors();
    assert_eq!(errors.len(), 1);
    match &errors[0] {
        FetchError::CorruptRecords {
            partition,
            offset,
            source,
        } => {
            assert_eq!((partition, *offset), (&tp("t", 0), 3));
            assert_eq!(source.batch_offset(), 3);
            assert!(matches!(
                source.kind(),
                RecordsErrorKind::CrcMismatch { .. }
            ));
        }
        other => panic!("{other:?}"),
    }
    assert!(!errors[0].is_retriable());
    assert!(
        errors[0].to_string().contains("t-0 at offset 3"),
        "{}",
        errors[0]
    );
    assert_eq!(f.position(&tp("t", 0)), Some(3));
    // The partition stops there; the others go on.
    let planned = f.poll_requests(now, &md);
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 1, 1)]);
    f.handle_response(now, planned[0].2, &fetch_response(12, vec![]));

    // Bad from the first byte: nothing delivered, the position stays.
    f.seek(&tp("t", 0), 3).unwrap();
    fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![data(0, Bytes::from(bad))])],
    );
    assert!(f.take_records(10).is_empty());
    assert!(matches!(
        &f.take_errors()[..],
        [FetchError::CorruptRecords { offset: 3, .. }]
    ));
    assert_eq!(f.position(&tp("t", 0)), Some(3));

    // Seeking past it goes on.
    f.seek(&tp("t", 0), 6).unwrap();
    let planned = f.poll_requests(now, &md);
    assert!(fetches(&planned)
        .iter()
        .any(|(_, parts, _)| parts.contains(&("t".into(), 0, 6))));
}

#[test]
fn a_leader_error_that_lasts_a_second_is_reported_once_and_again_a_minute_later() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let start = Instant::now();
    let storage_error = || vec![("t", vec![error(0, ErrorCode::KafkaStorageError)])];
    // Failing again as each backoff ends: silent for the first second.
    let mut now = start;
    let mut reported_at = None;
    while reported_at.is_none() {
        assert!(
            now < start + Duration::from_secs(3),
            "not reported within 3 s"
        );
        let outcome = fetch_once(&mut f, now, &md, storage_error());
        assert!(outcome.refresh_metadata);
        if outcome.errors > 0 {
            reported_at = Some(now);
        }
        now = f.next_deadline().expect("a retry is due");
    }
    let reported_at = reported_at.unwrap();
    assert!(reported_at >= start + LEADER_ERRORS_REPORTED_AFTER);
    let errors = f.take_errors();
    assert_eq!(
        errors,
        [FetchError::Broker {
            broker: 1,
            partition: Some(tp("t", 0)),
            code: ErrorCode::KafkaStorageError,
        }]
    );
    assert!(errors[0].is_retriable());
    // Not again while it lasts, until a minute has passed.
    while now < reported_at + REPORT_AGAIN_AFTER {
        let outcome = fetch_once(&mut f, now, &md, storage_error());
        assert_eq!(outcome.errors, 0);
        now = f.next_deadline().expect("a retry is due");
    }
    let outcome = fetch_once(&mut f, now, &md, storage_error());
    assert_eq!(outcome.errors, 1);
    f.take_errors();
    // Records again end it: the next failure starts a new second.
    now = f.next_deadline().unwrap();
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, batch(0, 1))])]);
    assert_eq!(t0_offsets(&f.take_records(10)), [0]);
    let outcome = fetch_once(&mut f, now, &md, storage_error());
    assert_eq!(outcome.errors, 0);
    now = f.next_deadline().unwrap();
    let outcome = fetch_once(&mut f, now, &md, storage_error());
    assert_eq!(
        outcome.errors, 0,
        "a new streak is silent for its first second"
    );
}

#[test]
fn a_run_of_failures_ends_with_another_code_or_a_long_gap() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let start = Instant::now();
    let answer = |f: &mut Fetcher, now: Instant, code: ErrorCode| -> usize {
        fetch_once(f, now, &md, vec![("t", vec![error(0, code)])]).errors
    };
    // Errors of no known cure: each new code is said at once.
    assert_eq!(answer(&mut f, start, ErrorCode::UnknownServerError), 1);
    let now = f.next_deadline().unwrap();
    assert_eq!(answer(&mut f, now, ErrorCode::UnknownServerError), 0);
    let now = f.next_deadline().unwrap();
    assert_eq!(answer(&mut f, now, ErrorCode::CorruptMessage), 1);
    // A leader error: a run of its own, silent for its first second...
    let mut now = f.next_deadline().unwrap();
    let began = now;
    while now < began + LEADER_ERRORS_REPORTED_AFTER {
        assert_eq!(answer(&mut f, now, ErrorCode::NotLeaderOrFollower), 0);
        now = f.next_deadline().unwrap();
    }
    // ...but not when the same error comes back after minutes without a
    // leader (no request meanwhile): that is a new run.
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    assert_eq!(answer(&mut f, start, ErrorCode::NotLeaderOrFollower), 0);
    let leaderless = metadata(&[("t", 0, -1)]);
    let mut now = f.next_deadline().unwrap();
    while now < start + Duration::from_secs(300) {
        assert!(f.poll_requests(now, &leaderless).is_empty());
        now += Duration::from_secs(10);
    }
    assert_eq!(answer(&mut f, now, ErrorCode::NotLeaderOrFollower), 0);
}

/// KIP-951: a leader error that names the new leader (a newer epoch)
/// gives a hint instead of asking for metadata; the partition backs off
/// until the cluster took the hint, then goes to the new leader at once
/// (its position checked there first, as the epoch changed: KIP-320).
#[test]
fn a_leader_named_in_the_answer_is_used_without_metadata() {
    use crate::protocol::messages::fetch::LeaderIdAndEpoch;
    let md = metadata(&[("t", 0, 1)]);
    let two = BrokerAddress {
        id: 2,
        host: "b2".into(),
        port: 9092,
        rack: None,
    };
    for code in [ErrorCode::NotLeaderOrFollower, ErrorCode::FencedLeaderEpoch] {
        let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
        let now = Instant::now();
        let mut refused = error(0, code);
        refused.current_leader = LeaderIdAndEpoch {
            leader_id: 2,
            leader_epoch: 8,
            ..LeaderIdAndEpoch::default()
        };
        let outcome = fetch_once(&mut f, now, &md, vec![("t", vec![refused])]);
        assert!(!outcome.refresh_metadata, "{code}");
        let hint = LeaderHint {
            topic: "t".into(),
            partition: 0,
            leader: 2,
            leader_epoch: 8,
        };
        assert_eq!(outcome.leader_hints, std::slice::from_ref(&hint), "{code}");
        assert!(f.poll_requests(now, &md).is_empty(), "{code}: backs off");
        let mut moved = md.clone();
        assert!(moved.apply_hint(&hint, std::slice::from_ref(&two)));
        f.set_metadata_generation(2);
        f.leader_moved(&tp("t", 0));
        let planned = f.poll_requests(now, &moved);
        assert!(
            !planned.is_empty(),
            "{code}: nothing asked of the new leader"
        );
        assert!(
            planned.iter().all(|(t, _, _)| *t == Target::Broker(2)),
            "{code}: {:?}",
            planned
                .iter()
                .map(|(t, b, _)| (*t, b.api_key()))
                .collect::<Vec<_>>()
        );
    }
    // Without a leader named, metadata is asked for, as before.
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let refused = error(0, ErrorCode::NotLeaderOrFollower);
    let outcome = fetch_once(&mut f, Instant::now(), &md, vec![("t", vec![refused])]);
    assert!(outcome.refresh_metadata && outcome.leader_hints.is_empty());
}

#[test]
fn leader_errors_ask_for_metadata_and_back_off() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    for code in [
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::FencedLeaderEpoch,
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::KafkaStorageError,
    ] {
        let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
        let outcome = fetch_once(&mut f, now, &md, vec![("t", vec![error(0, code)])]);
        assert!(outcome.refresh_metadata, "{code}");
        assert_eq!(outcome.errors, 0, "{code}");
        assert!(f.next_deadline().is_some(), "{code}");
    }
    // UNKNOWN_LEADER_EPOCH: the broker is behind the epoch we know; it is
    // asked again after the backoff, and the metadata only if it answers
    // the same again.
    let mut g = fetcher(config(), &[(tp("t", 0), 0)]);
    let unknown = || vec![("t", vec![error(0, ErrorCode::UnknownLeaderEpoch)])];
    let outcome = fetch_once(&mut g, now, &md, unknown());
    assert!(!outcome.refresh_metadata && outcome.errors == 0);
    let due = g.next_deadline().expect("backed off");
    assert!(due > now);
    let outcome = fetch_once(&mut g, due, &md, unknown());
    assert!(outcome.refresh_metadata, "the broker stays behind");

    let outcome = fetch_once(
        &mut f,
        now,
        &md,
        vec![(
            "t",
            vec![
                error(0, ErrorCode::NotLeaderOrFollower),
                data(1, batch(0, 1)),
            ],
        )],
    );
    assert!(outcome.refresh_metadata);
    assert_eq!(outcome.records_buffered, 1);
    f.take_records(10);
    // t-0 backs off (100 ms ± 20%); t-1 does not.
    let planned = f.poll_requests(now, &md);
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 1, 1)]);
    f.handle_response(now, planned[0].2, &fetch_response(12, vec![]));
    let deadline = f.next_deadline().expect("a retry is due");
    assert!(
        deadline > now + Duration::from_millis(79) && deadline < now + Duration::from_millis(121)
    );
    let planned = f.poll_requests(deadline - Duration::from_millis(1), &md);
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 1, 1)]);
    f.handle_response(now, planned[0].2, &fetch_response(12, vec![]));
    // The new leader, once the metadata says so.
    let moved = metadata(&[("t", 0, 2), ("t", 1, 1)]);
    let planned = f.poll_requests(deadline, &moved);
    let list = fetches(&planned);
    assert_eq!(list.len(), 2);
    assert!(list
        .iter()
        .any(|(b, parts, _)| *b == 2 && parts == &[("t".into(), 0, 0)]));
    assert_eq!(f.next_deadline(), None);
}

#[test]
fn other_errors_are_reported_and_retried() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    let outcome = fetch_once(
        &mut f,
        now,
        &md,
        vec![(
            "t",
            vec![
                error(0, ErrorCode::TopicAuthorizationFailed),
                error(1, ErrorCode::TopicAuthorizationFailed),
            ],
        )],
    );
    assert_eq!(outcome.errors, 1);
    assert_eq!(
        f.take_errors(),
        [FetchError::TopicAuthorization { topic: "t".into() }]
    );
    assert!(f.next_deadline().is_some());
    assert!(f.poll_requests(now, &md).is_empty());
    let later = now + Duration::from_secs(2);
    let outcome = fetch_once(
        &mut f,
        later,
        &md,
        vec![("t", vec![error(0, ErrorCode::UnsupportedCompressionType)])],
    );
    assert_eq!(outcome.errors, 1);
    assert_eq!(
        f.take_errors(),
        [FetchError::Broker {
            broker: 1,
            partition: Some(tp("t", 0)),
            code: ErrorCode::UnsupportedCompressionType
        }]
    );
}

#[test]
fn a_top_level_error_backs_off_every_partition() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    let token = fetches(&f.poll_requests(now, &md))[0].2;
    let body = FetchResponse {
        error_code: ErrorCode::FetchSessionIdNotFound.code(),
        ..FetchResponse::default()
    };
    let outcome = f.handle_response(
        now,
        token,
        &Response {
            api: ApiKey::Fetch,
            version: 12,
            broker: Some(1),
            body: encode(&body, 12),
        },
    );
    assert_eq!(outcome.errors, 1);
    assert!(f.poll_requests(now, &md).is_empty());
    assert!(f.next_deadline().is_some());
}

#[test]
fn a_top_level_error_is_said_once_while_it_lasts() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let top_error = |f: &mut Fetcher, now: Instant, code: ErrorCode| -> usize {
        let planned = f.poll_requests(now, &md);
        let token = fetches(&planned)[0].2;
        let body = FetchResponse {
            error_code: code.code(),
            ..FetchResponse::default()
        };
        let response = Response {
            api: ApiKey::Fetch,
            version: 12,
            broker: Some(1),
            body: encode(&body, 12),
        };
        f.handle_response(now, token, &response).errors
    };
    // An error of no known cause: said at once, then not at each retry.
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let start = Instant::now();
    assert_eq!(top_error(&mut f, start, ErrorCode::UnknownServerError), 1);
    let mut now = f.next_deadline().unwrap();
    while now < start + Duration::from_secs(30) {
        assert_eq!(top_error(&mut f, now, ErrorCode::UnknownServerError), 0);
        now = f.next_deadline().unwrap();
    }
    // One a metadata refresh should cure: said once it lasted a second.
    let mut f = fetcher(config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let mut now = start;
    let mut said = Vec::new();
    while now < start + Duration::from_secs(30) {
        if top_error(&mut f, now, ErrorCode::KafkaStorageError) > 0 {
            said.push(now);
        }
        now = f.next_deadline().unwrap();
    }
    assert_eq!(
        said.len(),
        1,
        "{:?}",
        said.iter().map(|t| *t - start).collect::<Vec<_>>()
    );
    assert!(said[0] >= start + LEADER_ERRORS_REPORTED_AFTER);
    assert!(said[0] < start + 3 * LEADER_ERRORS_REPORTED_AFTER);
}

#[test]
fn an_undecodable_response_is_reported_and_retried() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    let token = fetches(&f.poll_requests(now, &md))[0].2;
    let outcome = f.handle_response(
        now,
        token,
        &Response {
            api: ApiKey::Fetch,
            version: 12,
            broker: Some(1),
            body: Bytes::from_static(&[0, 0, 1]),
        },
    );
    assert_eq!(outcome.errors, 1);
    assert!(matches!(
        &f.take_errors()[..],
        [FetchError::Decode {
            broker: 1,
            api: ApiKey::Fetch,
            ..
        }]
    ));
    let later = f.next_deadline().unwrap();
    assert_eq!(fetches(&f.poll_requests(later, &md)).len(), 1);
}

#[test]
fn a_failed_request_is_retried_after_backoff() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    let token = fetches(&f.poll_requests(now, &md))[0].2;
    let outcome = f.handle_failure(now, token, &lost());
    assert!(outcome.refresh_metadata);
    assert_eq!(outcome.errors, 0);
    assert!(f.take_errors().is_empty());
    assert!(f.poll_requests(now, &md).is_empty());
    let later = f.next_deadline().unwrap();
    let token = fetches(&f.poll_requests(later, &md))[0].2;

    // Failing again backs off longer.
    f.handle_failure(later, token, &lost());
    let again = f.next_deadline().unwrap();
    assert!(
        again - later > Duration::from_millis(150),
        "{:?}",
        again - later
    );

    // An error that will not pass is reported too.
    let token = fetches(&f.poll_requests(again, &md))[0].2;
    let encode = RequestError::Encode(
        ApiKey::Fetch,
        EncodeError::UnknownTopicId {
            topic: "t".into(),
            version: 13,
        },
    );
    let outcome = f.handle_failure(again, token, &encode);
    assert_eq!(outcome.errors, 1);
    assert!(outcome.refresh_metadata);
    assert!(matches!(
        &f.take_errors()[..],
        [FetchError::Request {
            broker: 1,
            api: ApiKey::Fetch,
            ..
        }]
    ));
    // Unknown tokens change nothing.
    assert_eq!(
        f.handle_failure(again, token, &lost()),
        FetchOutcome::default()
    );
}

#[test]
fn a_throttled_broker_is_left_alone_until_the_time_is_up() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    let token = fetches(&f.poll_requests(now, &md))[0].2;
    let body = FetchResponse {
        throttle_time_ms: 2000,
        ..FetchResponse::default()
    };
    f.handle_response(
        now,
        token,
        &Response {
            api: ApiKey::Fetch,
            version: 12,
            broker: Some(1),
            body: encode(&body, 12),
        },
    );
    assert_eq!(f.next_deadline(), Some(now + Duration::from_secs(2)));
    assert!(f
        .poll_requests(now + Duration::from_millis(1999), &md)
        .is_empty());
    assert_eq!(
        fetches(&f.poll_requests(now + Duration::from_secs(2), &md)).len(),
        1
    );
}

// ===== offset resets =====

/// Answers the only ListOffsets request planned with `offset` for t-0,
/// checking the timestamp it asked for.
fn answer_reset(f: &mut Fetcher, now: Instant, md: &Metadata, timestamp: i64, offset: i64) {
    let planned = f.poll_requests(now, md);
    let resets: Vec<_> = planned
        .iter()
        .filter(|(_, body, _)| body.api_key() == ApiKey::ListOffsets)
        .collect();
    assert_eq!(resets.len(), 1);
    let request = decode_list_offsets(resets[0].1.as_ref(), 7);
    assert_eq!(request.replica_id, -1);
    assert_eq!(request.topics[0].partitions[0].timestamp, timestamp);
    assert_eq!(request.topics[0].partitions[0].current_leader_epoch, 7);
    let outcome = f.handle_response(
        now,
        resets[0].2,
        &list_offsets_response(vec![("t", 0, ErrorCode::None, offset)]),
    );
    assert_eq!(outcome, FetchOutcome::default());
}

#[test]
fn out_of_range_resets_to_the_earliest_offset() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 50)]);
    let now = Instant::now();
    let outcome = fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![error(0, ErrorCode::OffsetOutOfRange)])],
    );
    assert_eq!(outcome.errors, 0);
    assert_eq!(f.position(&tp("t", 0)), None);
    assert!(f.needs_committed().is_empty());
    answer_reset(&mut f, now, &md, -2, 3);
    assert_eq!(f.positions()[&tp("t", 0)], (3, Some(7)));
    assert_eq!(
        fetches(&f.poll_requests(now, &md))[0].1,
        [("t".into(), 0, 3)]
    );
}

#[test]
fn out_of_range_resets_to_the_latest_offset() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(
        FetchConfig {
            auto_offset_reset: OffsetReset::Latest,
            ..config()
        },
        &[(tp("t", 0), 50)],
    );
    let now = Instant::now();
    fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![error(0, ErrorCode::OffsetOutOfRange)])],
    );
    answer_reset(&mut f, now, &md, -1, 40);
    assert_eq!(f.position(&tp("t", 0)), Some(40));
}

#[test]
fn out_of_range_without_a_policy_is_an_error_until_a_seek() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(
        FetchConfig {
            auto_offset_reset: OffsetReset::None,
            ..config()
        },
        &[(tp("t", 0), 50)],
    );
    let now = Instant::now();
    let outcome = fetch_once(
        &mut f,
        now,
        &md,
        vec![("t", vec![error(0, ErrorCode::OffsetOutOfRange)])],
    );
    assert_eq!(outcome.errors, 1);
    assert_eq!(
        f.take_errors(),
        [FetchError::OffsetOutOfRange {
            partition: tp("t", 0),
            offset: 50
        }]
    );
    assert_eq!(f.position(&tp("t", 0)), Some(50));
    assert!(f.poll_requests(now, &md).is_empty());
    f.seek_to_beginning([&tp("t", 0)]).unwrap();
    answer_reset(&mut f, now, &md, -2, 0);
    assert_eq!(
        fetches(&f.poll_requests(now, &md))[0].1,
        [("t".into(), 0, 0)]
    );
}

#[test]
fn no_committed_offset_applies_the_policy() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = Fetcher::new(config());
    f.assign([tp("t", 0)]);
    assert!(f.set_committed(&tp("t", 0), None));
    answer_reset(&mut f, Instant::now(), &md, -2, 12);
    assert_eq!(f.position(&tp("t", 0)), Some(12));

    // A negative committed offset means none.
    let mut f = Fetcher::new(FetchConfig::default());
    f.assign([tp("t", 0)]);
    assert!(f.set_committed(&tp("t", 0), Some((-1, None))));
    answer_reset(&mut f, Instant::now(), &md, -1, 30);
    assert_eq!(f.position(&tp("t", 0)), Some(30));
}

#[test]
fn no_committed_offset_without_a_policy_names_every_partition() {
    let mut f = Fetcher::new(FetchConfig {
        auto_offset_reset: OffsetReset::None,
        ..FetchConfig::default()
    });
    f.assign([tp("t", 0), tp("t", 1), tp("u", 0)]);
    f.set_committed(&tp("t", 0), None);
    f.set_committed(&tp("u", 0), None);
    assert!(f.has_errors());
    let errors = f.take_errors();
    assert_eq!(
        errors,
        [FetchError::NoOffset {
            partitions: vec![tp("t", 0), tp("u", 0)]
        }]
    );
    assert_eq!(
        errors[0].to_string(),
        "no committed offset and auto.offset.reset is none for t-0, u-0"
    );
    assert!(!f.has_errors());
    assert!(f.take_errors().is_empty());
    f.set_committed(&tp("t", 1), None);
    assert_eq!(
        f.take_errors(),
        [FetchError::NoOffset {
            partitions: vec![tp("t", 0), tp("t", 1), tp("u", 0)]
        }]
    );
    assert!(f.needs_committed().is_empty());
    f.seek(&tp("t", 1), 4).unwrap();
    assert_eq!(f.position(&tp("t", 1)), Some(4));
}

#[test]
fn seek_to_end_and_beginning_drop_buffered_records() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    fetch_once(&mut f, now, &md, vec![("t", vec![data(0, batch(0, 3))])]);
    f.seek_to_end([&tp("t", 0)]).unwrap();
    assert!(f.take_records(10).is_empty());
    assert_eq!(f.position(&tp("t", 0)), None);
    answer_reset(&mut f, now, &md, -1, 80);
    assert_eq!(f.position(&tp("t", 0)), Some(80));
    f.seek_to_beginning([&tp("t", 0)]).unwrap();
    answer_reset(&mut f, now, &md, -2, 0);
    assert_eq!(f.position(&tp("t", 0)), Some(0));
}

#[test]
fn a_reset_refused_with_a_leader_error_for_a_second_is_reported_once() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = Fetcher::new(config());
    f.assign([tp("t", 0)]);
    f.set_committed(&tp("t", 0), None);
    let start = Instant::now();
    let mut now = start;
    let mut said = Vec::new();
    while now < start + Duration::from_secs(30) {
        let planned = f.poll_requests(now, &md);
        assert_eq!(planned.len(), 1, "one ListOffsets");
        let outcome = f.handle_response(
            now,
            planned[0].2,
            &list_offsets_response(vec![("t", 0, ErrorCode::NotLeaderOrFollower, -1)]),
        );
        assert!(outcome.refresh_metadata);
        said.extend(f.take_errors().into_iter().map(|e| (now - start, e)));
        now = f.next_deadline().expect("a retry is due");
    }
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].0 >= LEADER_ERRORS_REPORTED_AFTER, "{said:?}");
    assert_eq!(
        said[0].1,
        FetchError::Broker {
            broker: 1,
            partition: Some(tp("t", 0)),
            code: ErrorCode::NotLeaderOrFollower,
        }
    );
}

#[test]
fn reset_errors_retry_after_backoff() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
    let mut f = Fetcher::new(config());
    f.assign([tp("t", 0), tp("t", 1)]);
    f.set_committed(&tp("t", 0), None);
    f.set_committed(&tp("t", 1), None);
    let now = Instant::now();
    let planned = f.poll_requests(now, &md);
    assert_eq!(planned.len(), 1);
    // Not asked twice while the first is out.
    assert!(f.poll_requests(now, &md).is_empty());
    let outcome = f.handle_response(
        now,
        planned[0].2,
        &list_offsets_response(vec![
            ("t", 0, ErrorCode::NotLeaderOrFollower, -1),
            ("t", 1, ErrorCode::None, 9),
        ]),
    );
    assert!(outcome.refresh_metadata);
    assert_eq!(f.position(&tp("t", 1)), Some(9));
    assert_eq!(f.position(&tp("t", 0)), None);
    let planned = f.poll_requests(now, &md);
    assert!(planned.iter().all(|(_, b, _)| b.api_key() == ApiKey::Fetch));
    let later = f.next_deadline().unwrap();
    f.handle_response(now, planned[0].2, &fetch_response(12, vec![]));
    // A failure backs off as well.
    let planned = f.poll_requests(later, &md);
    let reset = planned
        .iter()
        .find(|(_, b, _)| b.api_key() == ApiKey::ListOffsets)
        .unwrap();
    f.handle_failure(later, reset.2, &lost());
    let again = f.next_deadline().unwrap();
    assert!(again > later);
    answer_reset(&mut f, again, &md, -2, 1);
    assert_eq!(f.position(&tp("t", 0)), Some(1));
}

#[test]
fn a_seek_overrides_a_reset_in_flight() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = Fetcher::new(config());
    f.assign([tp("t", 0)]);
    f.set_committed(&tp("t", 0), None);
    let now = Instant::now();
    let planned = f.poll_requests(now, &md);
    f.seek(&tp("t", 0), 500).unwrap();
    f.handle_response(
        now,
        planned[0].2,
        &list_offsets_response(vec![("t", 0, ErrorCode::None, 3)]),
    );
    assert_eq!(f.position(&tp("t", 0)), Some(500));
}

// ===== topic ids (Fetch v13+) =====

#[test]
fn topics_are_named_by_id_from_version_13() {
    let md = metadata(&[("orders", 0, 1), ("audit", 3, 1)]);
    let mut f = fetcher(config(), &[(tp("orders", 0), 4), (tp("audit", 3), 8)]);
    let now = Instant::now();
    let planned = f.poll_requests(now, &md);
    let body = planned[0].1.as_ref();

    let v12 = decode_fetch(body, 12);
    assert_eq!(
        v12.topics
            .iter()
            .map(|t| (t.topic.as_str(), t.topic_id))
            .collect::<Vec<_>>(),
        [("audit", [0; 16]), ("orders", [0; 16])]
    );
    let v13 = decode_fetch(body, 13);
    assert_eq!(
        v13.topics
            .iter()
            .map(|t| (t.topic.as_str(), t.topic_id))
            .collect::<Vec<_>>(),
        [("", topic_id("audit")), ("", topic_id("orders"))]
    );
    assert_eq!(v13.topics[1].partitions[0].fetch_offset, 4);
    for v in 4..=17 {
        write_body(body, v).unwrap_or_else(|e| panic!("v{v}: {e}"));
    }

    // The answer names topics by id only; each maps back to its name.
    let response = fetch_response(
        17,
        vec![
            ("orders", vec![data(0, batch(4, 1))]),
            ("audit", vec![data(3, batch(8, 2))]),
        ],
    );
    let outcome = f.handle_response(now, planned[0].2, &response);
    assert_eq!(outcome.records_buffered, 3);
    let mut got = offsets(&f.take_records(10));
    got.sort();
    assert_eq!(
        got,
        [
            ("audit".into(), 3, 8),
            ("audit".into(), 3, 9),
            ("orders".into(), 0, 4)
        ]
    );
}

#[test]
fn an_unknown_topic_id_refuses_version_13_and_names_the_topic() {
    let mut md = metadata(&[("t", 0, 1)]);
    md.topics.get_mut("t").unwrap().topic_id = [0; 16];
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let planned = f.poll_requests(Instant::now(), &md);
    let body = planned[0].1.as_ref();
    assert!(write_body(body, 12).is_ok());
    assert_eq!(
        write_body(body, 13),
        Err(EncodeError::UnknownTopicId {
            topic: "t".into(),
            version: 13
        })
    );
}

#[test]
fn a_v13_answer_for_an_id_not_asked_is_ignored() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    let token = fetches(&f.poll_requests(now, &md))[0].2;
    let outcome = f.handle_response(
        now,
        token,
        &fetch_response(13, vec![("other", vec![data(0, batch(0, 2))])]),
    );
    assert_eq!(outcome.records_buffered, 0);
    // The partition is fetchable again.
    assert_eq!(fetches(&f.poll_requests(now, &md)).len(), 1);
}

// ===== offsets for times =====

#[test]
fn offsets_for_times_asks_each_leader_once() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 2), ("u", 0, 1), ("v", 0, -1)]);
    let f = Fetcher::new(FetchConfig {
        isolation: IsolationLevel::ReadCommitted,
        ..FetchConfig::default()
    });
    let query = BTreeMap::from([
        (tp("t", 0), OffsetSpec::Timestamp(1_700_000_000_000)),
        (tp("t", 1), OffsetSpec::Earliest),
        (tp("u", 0), OffsetSpec::Latest),
        (tp("v", 0), OffsetSpec::Latest),
    ]);
    let plan = f.list_offsets_requests(&query, &md);
    assert_eq!(plan.leader_unknown, BTreeSet::from([tp("v", 0)]));
    assert_eq!(plan.requests.len(), 2);
    assert_eq!(plan.requests[0].0, 1);
    let request = decode_list_offsets(plan.requests[0].1.as_ref(), 10);
    assert_eq!(request.isolation_level, 1);
    assert_eq!(request.timeout_ms, 30_000);
    let asked: Vec<(&str, i32, i64)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.as_str(), p.partition_index, p.timestamp))
        })
        .collect();
    assert_eq!(asked, [("t", 0, 1_700_000_000_000), ("u", 0, -1)]);
    let request = decode_list_offsets(plan.requests[1].1.as_ref(), 10);
    assert_eq!(request.topics[0].partitions[0].timestamp, -2);

    let mut response = list_offsets_response(vec![
        ("t", 0, ErrorCode::None, 17),
        ("u", 0, ErrorCode::None, -1),
        ("u", 1, ErrorCode::NotLeaderOrFollower, -1),
    ]);
    let read = read_list_offsets(&response).unwrap();
    assert_eq!(
        read[&tp("t", 0)],
        Ok(Some(OffsetAndTimestamp {
            offset: 17,
            timestamp: -1,
            leader_epoch: Some(7)
        }))
    );
    assert_eq!(read[&tp("u", 0)], Ok(None));
    assert_eq!(read[&tp("u", 1)], Err(ErrorCode::NotLeaderOrFollower));
    response.api = ApiKey::Fetch;
    assert!(read_list_offsets(&response).is_err());
}

#[test]
fn topic_partitions_print_as_kafka_does() {
    assert_eq!(tp("orders", 3).to_string(), "orders-3");
    assert!(tp("a", 1) < tp("a", 2) && tp("a", 9) < tp("b", 0));
}

// ===== properties =====

/// One partition's log as a broker holds it: batches in offset order,
/// and the offsets of the records a consumer must see.
#[derive(Debug, Clone)]
struct Log {
    /// (first offset, last offset, bytes).
    batches: Vec<(i64, i64, Bytes)>,
    records: Vec<i64>,
}

impl Log {
    /// From `(gap before, kind, size)`: kind 0 a batch of `size` records
    /// with every other offset compacted away when `size` is even, 1 a
    /// commit marker, 2 a batch compaction emptied.
    fn build(spec: &[(u8, u8, u8)]) -> Log {
        let mut next = 0i64;
        let mut batches = Vec::new();
        let mut records = Vec::new();
        for &(gap, kind, size) in spec {
            next += i64::from(gap);
            let size = i64::from(size % 4 + 1);
            let (bytes, last) = match kind % 3 {
                0 => {
                    let step = if size % 2 == 0 { 2 } else { 1 };
                    let mut b = RecordBatchBuilder::new(next);
                    for i in 0..size {
                        let offset = next + i * step;
                        b.append_at(offset, offset, None, Some(b"v"), &[]).unwrap();
                        records.push(offset);
                    }
                    (b.build().unwrap(), next + (size - 1) * step)
                }
                1 => (
                    RecordBatchBuilder::control_batch(next, 5, 0, ControlRecordType::Commit, 0, 0)
                        .unwrap(),
                    next,
                ),
                _ => (
                    RecordBatchBuilder::new(next)
                        .last_offset_delta(size as i32)
                        .build()
                        .unwrap(),
                    next + size,
                ),
            };
            batches.push((next, last, bytes));
            next = last + 1;
        }
        Log { batches, records }
    }

    /// What a broker returns for a fetch at `offset`: whole batches from
    /// the one holding it (or the next), the last one possibly cut after
    /// `cut` bytes of the response.
    fn serve(&self, offset: i64, cut: Option<usize>) -> Bytes {
        let mut out = Vec::new();
        for (_, last, bytes) in &self.batches {
            if *last >= offset {
                out.extend_from_slice(bytes);
            }
        }
        if let Some(cut) = cut {
            out.truncate(cut);
        }
        Bytes::from(out)
    }
}

/// How [`Sim::answer`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    Data,
    NotLeader,
    Redirect,
    ReplicaOutOfRange,
}

#[derive(Debug, Clone)]
enum Step {
    Plan,
    /// Answer the request at this index (modulo those out) with data, cut
    /// after this many bytes when given.
    Answer(usize, Option<u16>),
    /// Answer it with NOT_LEADER_OR_FOLLOWER for every partition.
    NotLeader(usize),
    /// Answer it with data, and from a leader name broker 3 as the
    /// preferred read replica (KIP-392).
    Redirect(usize, Option<u16>),
    /// From the read replica, OFFSET_OUT_OF_RANGE (a lagging follower);
    /// from a leader, data.
    ReplicaOutOfRange(usize),
    /// The request fails (connection lost).
    Fail(usize),
    Take(usize),
    Pause(i32),
    Resume(i32),
    Wait(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Plan),
        4 => (any::<usize>(), proptest::option::of(0u16..400)).prop_map(|(i, c)| Step::Answer(i, c)),
        1 => any::<usize>().prop_map(Step::NotLeader),
        2 => (any::<usize>(), proptest::option::of(0u16..400)).prop_map(|(i, c)| Step::Redirect(i, c)),
        1 => any::<usize>().prop_map(Step::ReplicaOutOfRange),
        1 => any::<usize>().prop_map(Step::Fail),
        3 => (1usize..6).prop_map(Step::Take),
        1 => (0i32..2).prop_map(Step::Pause),
        1 => (0i32..2).prop_map(Step::Resume),
        1 => (0u16..1500).prop_map(Step::Wait),
    ]
}

fn log_spec() -> impl Strategy<Value = Vec<(u8, u8, u8)>> {
    proptest::collection::vec((0u8..3, any::<u8>(), any::<u8>()), 1..8)
}

/// A cluster of two partitions of "t", led by brokers 1 and 2, holding
/// these logs, and replicated to broker 3, which leaders may name as the
/// preferred read replica (KIP-392; a lease of 1 s); it answers what the
/// fetcher asks.
struct Sim {
    f: Fetcher,
    md: Metadata,
    now: Instant,
    logs: [Log; 2],
    out: Vec<(Target, Box<dyn RequestBody>, FetchToken)>,
    delivered: [Vec<i64>; 2],
}

impl Sim {
    fn new(logs: [Log; 2], committed: [i64; 2]) -> Sim {
        let f = fetcher(
            FetchConfig {
                seed: 3,
                rack_id: Some("r3".into()),
                replica_lease: Duration::from_secs(1),
                ..config()
            },
            &[(tp("t", 0), committed[0]), (tp("t", 1), committed[1])],
        );
        Sim {
            f,
            md: with_brokers(&[("t", 0, 1), ("t", 1, 2)]),
            now: Instant::now(),
            logs,
            out: Vec::new(),
            delivered: [Vec::new(), Vec::new()],
        }
    }

    fn run(&mut self, step: &Step) {
        match *step {
            Step::Plan => {
                let planned = self.f.poll_requests(self.now, &self.md);
                self.out.extend(planned);
            }
            Step::Answer(i, cut) => self.answer(i, cut.map(usize::from), Reply::Data),
            Step::NotLeader(i) => self.answer(i, None, Reply::NotLeader),
            Step::Redirect(i, cut) => self.answer(i, cut.map(usize::from), Reply::Redirect),
            Step::ReplicaOutOfRange(i) => self.answer(i, None, Reply::ReplicaOutOfRange),
            Step::Fail(i) => {
                if !self.out.is_empty() {
                    let (_, _, token) = self.out.remove(i % self.out.len());
                    self.f.handle_failure(self.now, token, &lost());
                }
            }
            Step::Take(max) => {
                let records = self.f.take_records(max);
                assert!(records.len() <= max);
                for r in records {
                    self.delivered[r.partition() as usize].push(r.offset());
                }
            }
            Step::Pause(p) => self.f.pause([&tp("t", p)]),
            Step::Resume(p) => self.f.resume([&tp("t", p)]),
            Step::Wait(ms) => self.now += Duration::from_millis(u64::from(ms)),
        }
    }

    fn answer(&mut self, i: usize, cut: Option<usize>, reply: Reply) {
        if self.out.is_empty() {
            return;
        }
        let (target, body, token) = self.out.remove(i % self.out.len());
        let from_replica = target == Target::Replica(3);
        let request = decode_fetch(body.as_ref(), 12);
        let partitions = request.topics[0]
            .partitions
            .iter()
            .map(|p| match reply {
                Reply::NotLeader => error(p.partition, ErrorCode::NotLeaderOrFollower),
                Reply::ReplicaOutOfRange if from_replica => {
                    error(p.partition, ErrorCode::OffsetOutOfRange)
                }
                _ => {
                    let mut d = data(
                        p.partition,
                        self.logs[p.partition as usize].serve(p.fetch_offset, cut),
                    );
                    if reply == Reply::Redirect && !from_replica {
                        d.preferred_read_replica = 3;
                    }
                    d
                }
            })
            .collect();
        self.f.handle_response(
            self.now,
            token,
            &fetch_response(12, vec![("t", partitions)]),
        );
    }

    /// Resumes everything and fetches until nothing more comes.
    fn drain(&mut self) {
        self.f.resume([&tp("t", 0), &tp("t", 1)]);
        for _ in 0..200 {
            self.now += Duration::from_secs(2);
            self.run(&Step::Plan);
            while !self.out.is_empty() {
                self.answer(0, None, Reply::Data);
            }
            self.run(&Step::Take(1000));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the order of answers, cuts, leader errors, failures,
    /// pauses and takes: every record at or after the committed offset
    /// is delivered exactly once, in order, and nothing below it.
    #[test]
    fn every_record_from_the_committed_offset_is_delivered_once_in_order(
        spec0 in log_spec(),
        spec1 in log_spec(),
        c0 in 0i64..30,
        c1 in 0i64..30,
        steps in proptest::collection::vec(step(), 0..60),
    ) {
        let logs = [Log::build(&spec0), Log::build(&spec1)];
        let mut sim = Sim::new(logs.clone(), [c0, c1]);
        for s in &steps {
            sim.run(s);
            for (p, got) in sim.delivered.iter().enumerate() {
                let c = [c0, c1][p];
                prop_assert!(got.windows(2).all(|w| w[0] < w[1]), "p{p}: {got:?}");
                prop_assert!(got.iter().all(|&o| o >= c), "p{p} below {c}: {got:?}");
            }
        }
        sim.drain();
        for p in 0..2 {
            let c = [c0, c1][p];
            let want: Vec<i64> = logs[p].records.iter().copied().filter(|&o| o >= c).collect();
            prop_assert_eq!(&sim.delivered[p], &want, "partition {}", p);
        }
        // Only NOT_LEADER_OR_FOLLOWER answers that lasted are said.
        let errors = sim.f.take_errors();
        prop_assert!(
            errors.iter().all(|e| matches!(
                e,
                FetchError::Broker { code: ErrorCode::NotLeaderOrFollower, .. }
            )),
            "{:?}",
            errors
        );
    }

    /// Whatever bytes and errors come back, for whichever offsets: the
    /// offsets handed out per partition only increase and never go below
    /// the committed position, and nothing panics.
    #[test]
    fn offsets_handed_out_only_increase_whatever_the_answers(
        c in 0i64..50,
        answers in proptest::collection::vec(
            (
                0usize..4,
                any::<i16>(),
                proptest::collection::vec((0i64..80, 1usize..4), 0..4),
                proptest::option::of(any::<usize>()),
                any::<bool>(),
                1usize..10,
            ),
            1..30,
        ),
    ) {
        let md = metadata(&[("t", 0, 1), ("t", 1, 1)]);
        let mut f = fetcher(config(), &[(tp("t", 0), c), (tp("t", 1), c)]);
        let mut now = Instant::now();
        let mut tokens: Vec<FetchToken> = Vec::new();
        let mut last: [Option<i64>; 2] = [None, None];
        for (which, code, batches, corrupt, both, take) in answers {
            for (_, body, token) in f.poll_requests(now, &md) {
                // A record's leader epoch that differs from the metadata's
                // makes the position validated first (KIP-320); that
                // request stays unanswered here, which only holds the
                // partition back.
                let api = body.api_key();
                prop_assert!(
                    api == ApiKey::Fetch || api == ApiKey::OffsetForLeaderEpoch,
                    "{:?}",
                    api
                );
                if api == ApiKey::Fetch {
                    tokens.push(token);
                }
            }
            let mut bytes = Vec::new();
            for (base, n) in &batches {
                bytes.extend_from_slice(&batch(*base, *n));
            }
            if let Some(at) = corrupt {
                if !bytes.is_empty() {
                    let i = at % bytes.len();
                    bytes[i] ^= 0x5a;
                }
            }
            // Only errors that do not move the position backwards: the
            // property is about what the fetch flow does by itself.
            let code = match code % 120 {
                1 => 0,
                other => other,
            };
            let mut parts = vec![PartitionData {
                error_code: code,
                ..data(0, Bytes::from(bytes.clone()))
            }];
            if both {
                parts.push(data(1, Bytes::from(bytes)));
            }
            // Answer any token, current, stale or already answered.
            let token = if tokens.is_empty() {
                FetchToken(which as u64)
            } else {
                tokens[which % tokens.len()]
            };
            let _ = f.handle_response(now, token, &fetch_response(12, vec![("t", parts)]));
            for r in f.take_records(take) {
                let p = r.partition() as usize;
                prop_assert!(r.offset() >= c);
                prop_assert!(last[p].is_none_or(|l| r.offset() > l), "{:?} then {}", last[p], r.offset());
                last[p] = Some(r.offset());
            }
            let _ = f.take_errors();
            now += Duration::from_millis(1500);
        }
    }
}

// ===== log truncation (KIP-320) =====

/// Metadata for `t-0` led by `leader` at `epoch`.
fn led(leader: i32, epoch: i32) -> Metadata {
    let mut md = metadata(&[("t", 0, leader)]);
    md.topics
        .get_mut("t")
        .unwrap()
        .partitions
        .get_mut(&0)
        .unwrap()
        .leader_epoch = epoch;
    md
}

/// `(topic, partition, current_leader_epoch, leader_epoch)`.
type Asked = Vec<(String, i32, i32, i32)>;

/// The only OffsetForLeaderEpoch planned: `(broker, partitions, token)`.
fn validation(planned: &Planned) -> (i32, Asked, FetchToken) {
    let list: Vec<_> = planned
        .iter()
        .filter(|(_, body, _)| body.api_key() == ApiKey::OffsetForLeaderEpoch)
        .collect();
    assert_eq!(list.len(), 1, "one OffsetForLeaderEpoch expected");
    let (target, body, token) = list[0];
    let Target::Broker(broker) = *target else {
        panic!("OffsetForLeaderEpoch to {target:?}, not to a leader");
    };
    let request = OffsetForLeaderEpochRequest::decode(
        &mut Reader::new(write_body(body.as_ref(), 4).unwrap()),
        4,
    )
    .unwrap();
    assert_eq!(request.replica_id, -1, "a consumer");
    let parts = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.topic.clone(),
                    p.partition,
                    p.current_leader_epoch,
                    p.leader_epoch,
                )
            })
        })
        .collect();
    (broker, parts, *token)
}

/// An OffsetForLeaderEpoch answer for `t-0`.
fn epoch_end(code: ErrorCode, epoch: i32, end_offset: i64) -> Response {
    let body = OffsetForLeaderEpochResponse {
        topics: vec![OffsetForLeaderTopicResult {
            topic: "t".into(),
            partitions: vec![WireEpochEnd {
                error_code: code.code(),
                partition: 0,
                leader_epoch: epoch,
                end_offset,
                ..WireEpochEnd::default()
            }],
            ..OffsetForLeaderTopicResult::default()
        }],
        ..OffsetForLeaderEpochResponse::default()
    };
    Response {
        api: ApiKey::OffsetForLeaderEpoch,
        version: 4,
        broker: Some(2),
        body: encode(&body, 4),
    }
}

/// A fetcher on `t-0` that fetched and took offsets 0..10 (batch epoch 3)
/// from broker 1 at leader epoch 7.
fn consumed_ten(policy: OffsetReset) -> (Fetcher, Instant) {
    let mut f = fetcher(
        FetchConfig {
            auto_offset_reset: policy,
            ..config()
        },
        &[(tp("t", 0), 0)],
    );
    let now = Instant::now();
    fetch_once(
        &mut f,
        now,
        &led(1, 7),
        vec![("t", vec![data(0, batch(0, 10))])],
    );
    assert_eq!(f.take_records(100).len(), 10);
    assert_eq!(f.positions()[&tp("t", 0)], (10, Some(3)));
    (f, now)
}

#[test]
fn a_leader_change_validates_the_position_before_fetching_on() {
    let (mut f, now) = consumed_ten(OffsetReset::Earliest);
    // Same epoch: no validation, the next Fetch carries the last epoch.
    let planned = f.poll_requests(now, &led(1, 7));
    let request = decode_fetch(planned[0].1.as_ref(), 12);
    assert_eq!(request.topics[0].partitions[0].last_fetched_epoch, 3);
    assert_eq!(request.topics[0].partitions[0].current_leader_epoch, 7);
    f.handle_response(now, planned[0].2, &fetch_response(12, vec![]));

    // The leader moves to broker 2 at epoch 8 (new metadata): nothing is
    // fetched until broker 2 says where epoch 3 ends.
    f.set_metadata_generation(2);
    let planned = f.poll_requests(now, &led(2, 8));
    assert!(fetches(&planned).is_empty());
    let (broker, parts, token) = validation(&planned);
    assert_eq!(broker, 2);
    assert_eq!(parts, [("t".into(), 0, 8, 3)]);
    assert_eq!(f.position(&tp("t", 0)), Some(10), "kept while validating");
    assert!(f.poll_requests(now, &led(2, 8)).is_empty(), "asked once");
    let outcome = f.handle_response(now, token, &epoch_end(ErrorCode::None, 3, 10));
    assert_eq!(outcome, FetchOutcome::default());
    let planned = f.poll_requests(now, &led(2, 8));
    assert_eq!(
        fetches(&planned),
        [(2, vec![("t".into(), 0, 10)], planned[0].2)]
    );
    assert!(f.take_errors().is_empty());
}

#[test]
fn a_committed_position_with_an_epoch_is_validated_first() {
    let mut f = Fetcher::new(config());
    f.assign([tp("t", 0)]);
    assert!(f.set_committed(&tp("t", 0), Some((42, Some(3)))));
    assert_eq!(f.positions(), BTreeMap::from([(tp("t", 0), (42, Some(3)))]));
    let now = Instant::now();
    let planned = f.poll_requests(now, &led(1, 7));
    let (broker, parts, token) = validation(&planned);
    assert_eq!((broker, parts), (1, vec![("t".into(), 0, 7, 3)]));
    f.handle_response(now, token, &epoch_end(ErrorCode::None, 3, 50));
    let planned = f.poll_requests(now, &led(1, 7));
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 0, 42)]);
    // A plain seek carries no epoch: nothing to validate (as Java).
    f.handle_response(now, planned[0].2, &fetch_response(12, vec![]));
    f.seek(&tp("t", 0), 5).unwrap();
    let planned = f.poll_requests(now, &led(1, 9));
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 0, 5)]);
}

#[test]
fn truncation_below_the_position_moves_it_back_to_where_the_log_diverges() {
    let (mut f, now) = consumed_ten(OffsetReset::Latest);
    let (_, _, token) = validation(&f.poll_requests(now, &led(2, 8)));
    // Broker 2's log holds epoch 3 only up to offset 6: 6..10 were lost.
    f.handle_response(now, token, &epoch_end(ErrorCode::None, 3, 6));
    assert_eq!(f.positions()[&tp("t", 0)], (6, Some(3)));
    assert!(f.take_errors().is_empty());
    let planned = f.poll_requests(now, &led(2, 8));
    assert_eq!(fetches(&planned)[0].1, [("t".into(), 0, 6)]);
    // What the new log holds from 6 on is delivered, once.
    f.handle_response(
        now,
        planned[0].2,
        &fetch_response(12, vec![("t", vec![data(0, batch(6, 3))])]),
    );
    assert_eq!(t0_offsets(&f.take_records(100)), [6, 7, 8]);
}

#[test]
fn truncation_without_a_reset_policy_is_a_typed_error_until_a_seek() {
    let (mut f, now) = consumed_ten(OffsetReset::None);
    let (_, _, token) = validation(&f.poll_requests(now, &led(2, 8)));
    let outcome = f.handle_response(now, token, &epoch_end(ErrorCode::None, 3, 6));
    assert_eq!(outcome.errors, 1);
    let errors = f.take_errors();
    assert_eq!(
        errors,
        [FetchError::LogTruncation {
            partition: tp("t", 0),
            offset: 10,
            divergent_offset: Some(6),
        }]
    );
    assert!(!errors[0].is_retriable());
    assert!(errors[0].to_string().contains("t-0"), "{}", errors[0]);
    assert!(errors[0].to_string().contains("offset 6"), "{}", errors[0]);
    assert_eq!(f.position(&tp("t", 0)), Some(10), "nothing skipped");
    assert!(f.poll_requests(now, &led(2, 8)).is_empty(), "halted");
    f.seek(&tp("t", 0), 6).unwrap();
    assert_eq!(
        fetches(&f.poll_requests(now, &led(2, 8)))[0].1,
        [("t".into(), 0, 6)]
    );
}

#[test]
fn an_epoch_the_leader_does_not_know_resets_per_policy() {
    let (mut f, now) = consumed_ten(OffsetReset::Earliest);
    let (_, _, token) = validation(&f.poll_requests(now, &led(2, 8)));
    f.handle_response(now, token, &epoch_end(ErrorCode::None, -1, -1));
    assert_eq!(f.position(&tp("t", 0)), None);
    let planned = f.poll_requests(now, &led(2, 8));
    let request = decode_list_offsets(planned[0].1.as_ref(), 7);
    assert_eq!(request.topics[0].partitions[0].timestamp, -2);

    let (mut f, now) = consumed_ten(OffsetReset::None);
    let (_, _, token) = validation(&f.poll_requests(now, &led(2, 8)));
    f.handle_response(now, token, &epoch_end(ErrorCode::None, -1, -1));
    assert_eq!(
        f.take_errors(),
        [FetchError::LogTruncation {
            partition: tp("t", 0),
            offset: 10,
            divergent_offset: None,
        }]
    );
}

/// A new leader that has not yet learned its own epoch (it answers
/// UNKNOWN_LEADER_EPOCH to the epoch a KIP-951 hint gave us) is asked
/// again after the backoff; the metadata only if it stays behind.
#[test]
fn a_leader_behind_our_epoch_is_asked_again_before_the_metadata() {
    let (mut f, now) = consumed_ten(OffsetReset::Earliest);
    let (_, _, token) = validation(&f.poll_requests(now, &led(2, 8)));
    let behind = epoch_end(ErrorCode::UnknownLeaderEpoch, -1, -1);
    let outcome = f.handle_response(now, token, &behind);
    assert!(!outcome.refresh_metadata && outcome.errors == 0);
    let due = f.next_deadline().expect("backing off");
    assert!(f.poll_requests(now, &led(2, 8)).is_empty());
    let (_, parts, token) = validation(&f.poll_requests(due, &led(2, 8)));
    assert_eq!(parts, [("t".into(), 0, 8, 3)]);
    let outcome = f.handle_response(due, token, &behind);
    assert!(outcome.refresh_metadata, "the broker stays behind");
    let due = f.next_deadline().expect("backing off");
    let (_, _, token) = validation(&f.poll_requests(due, &led(2, 8)));
    f.handle_response(due, token, &epoch_end(ErrorCode::None, 3, 10));
    assert_eq!(
        fetches(&f.poll_requests(due, &led(2, 8)))[0].1,
        [("t".into(), 0, 10)]
    );
}

#[test]
fn validation_errors_refresh_metadata_and_retry_after_backoff() {
    let (mut f, now) = consumed_ten(OffsetReset::Earliest);
    let (_, _, token) = validation(&f.poll_requests(now, &led(2, 8)));
    let outcome = f.handle_response(now, token, &epoch_end(ErrorCode::FencedLeaderEpoch, -1, -1));
    assert!(outcome.refresh_metadata);
    assert_eq!(outcome.errors, 0);
    let due = f.next_deadline().expect("backing off");
    assert!(f.poll_requests(now, &led(2, 8)).is_empty());
    let (_, parts, token) = validation(&f.poll_requests(due, &led(2, 9)));
    assert_eq!(parts, [("t".into(), 0, 9, 3)]);
    // A lost connection: asked again after backoff.
    let outcome = f.handle_failure(due, token, &lost());
    assert!(outcome.refresh_metadata);
    let due = f.next_deadline().expect("backing off");
    let (_, _, token) = validation(&f.poll_requests(due, &led(2, 9)));
    f.handle_response(due, token, &epoch_end(ErrorCode::None, 3, 10));
    assert_eq!(
        fetches(&f.poll_requests(due, &led(2, 9)))[0].1,
        [("t".into(), 0, 10)]
    );
}

#[test]
fn a_broker_without_offset_for_leader_epoch_is_fetched_from_unvalidated() {
    let (mut f, now) = consumed_ten(OffsetReset::None);
    let (_, _, token) = validation(&f.poll_requests(now, &led(2, 8)));
    let outcome = f.handle_failure(
        now,
        token,
        &RequestError::NoCommonVersion(crate::protocol::NoCommonVersion {
            api: ApiKey::OffsetForLeaderEpoch,
            client: ApiKey::OffsetForLeaderEpoch.client_versions(),
            broker: None,
        }),
    );
    assert_eq!(outcome.errors, 0);
    assert!(f.take_errors().is_empty());
    assert_eq!(
        fetches(&f.poll_requests(now, &led(2, 8)))[0].1,
        [("t".into(), 0, 10)]
    );
}

#[test]
fn a_seek_while_validating_wins_over_the_answer() {
    let (mut f, now) = consumed_ten(OffsetReset::None);
    let (_, _, token) = validation(&f.poll_requests(now, &led(2, 8)));
    f.seek(&tp("t", 0), 3).unwrap();
    f.handle_response(now, token, &epoch_end(ErrorCode::None, 3, 1));
    assert!(f.take_errors().is_empty());
    assert_eq!(
        fetches(&f.poll_requests(now, &led(2, 8)))[0].1,
        [("t".into(), 0, 3)]
    );
}

#[test]
fn fenced_or_unknown_leader_epoch_in_a_fetch_validates_the_position() {
    for code in [ErrorCode::FencedLeaderEpoch, ErrorCode::UnknownLeaderEpoch] {
        let (mut f, now) = consumed_ten(OffsetReset::Earliest);
        let outcome = fetch_once(&mut f, now, &led(1, 7), vec![("t", vec![error(0, code)])]);
        // A broker behind our epoch is asked again before the metadata.
        assert_eq!(
            outcome.refresh_metadata,
            code == ErrorCode::FencedLeaderEpoch,
            "{code}"
        );
        let due = f.next_deadline().unwrap();
        // Even if the metadata still says epoch 7.
        let (broker, parts, _) = validation(&f.poll_requests(due, &led(1, 7)));
        assert_eq!((broker, parts), (1, vec![("t".into(), 0, 7, 3)]), "{code}");
    }
}

#[test]
fn a_diverging_epoch_in_a_fetch_response_is_a_truncation() {
    let diverged = |epoch: i32, end_offset: i64| PartitionData {
        diverging_epoch: crate::protocol::messages::fetch::EpochEndOffset {
            epoch,
            end_offset,
            ..Default::default()
        },
        ..data(0, Bytes::new())
    };
    let (mut f, now) = consumed_ten(OffsetReset::Earliest);
    fetch_once(&mut f, now, &led(1, 7), vec![("t", vec![diverged(3, 4)])]);
    assert_eq!(f.positions()[&tp("t", 0)], (4, Some(3)));
    assert_eq!(
        fetches(&f.poll_requests(now, &led(1, 7)))[0].1,
        [("t".into(), 0, 4)]
    );

    let (mut f, now) = consumed_ten(OffsetReset::None);
    let outcome = fetch_once(&mut f, now, &led(1, 7), vec![("t", vec![diverged(2, 4)])]);
    assert_eq!(outcome.errors, 1);
    assert_eq!(
        f.take_errors(),
        [FetchError::LogTruncation {
            partition: tp("t", 0),
            offset: 10,
            divergent_offset: Some(4),
        }]
    );
}

#[test]
fn last_fetched_epoch_is_left_out_below_fetch_v12() {
    let (mut f, now) = consumed_ten(OffsetReset::Earliest);
    let planned = f.poll_requests(now, &led(1, 7));
    for (version, expected) in [(11, -1), (12, 3), (17, 3)] {
        let request = decode_fetch(planned[0].1.as_ref(), version);
        assert_eq!(request.topics[0].partitions[0].last_fetched_epoch, expected);
    }
}

// ===== fetch sessions (KIP-227) =====

/// A Fetch response at v12 that opens (or continues) session `id`.
fn session_response(id: i32, code: ErrorCode, topics: Vec<(&str, Vec<PartitionData>)>) -> Response {
    let mut r = fetch_response(12, topics);
    let mut body: FetchResponse = r.decode().unwrap();
    body.session_id = id;
    body.error_code = code.code();
    r.body = encode(&body, 12);
    r
}

/// The session fields, listed partitions and forgotten partitions of a
/// Fetch request (at v12).
fn session_request(body: &dyn RequestBody) -> ((i32, i32), Parts, Vec<(String, i32)>) {
    let request = decode_fetch(body, 12);
    let forgotten = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.clone(), *p)))
        .collect();
    (
        (request.session_id, request.session_epoch),
        fetched(body),
        forgotten,
    )
}

#[test]
fn a_session_lists_only_what_changed_and_forgets_what_is_not_fetched() {
    let md = metadata(&[("t", 0, 1), ("t", 1, 1), ("t", 2, 1)]);
    let mut f = fetcher(
        config(),
        &[(tp("t", 0), 0), (tp("t", 1), 0), (tp("t", 2), 0)],
    );
    let now = Instant::now();
    let planned = f.poll_requests(now, &md);
    let (ids, parts, forgotten) = session_request(planned[0].1.as_ref());
    assert_eq!(ids, (0, 0), "full, asking for a session");
    assert_eq!(parts.len(), 3);
    assert!(forgotten.is_empty());
    f.handle_response(
        now,
        planned[0].2,
        &session_response(
            77,
            ErrorCode::None,
            vec![("t", vec![caught_up(1, batch(0, 2))])],
        ),
    );
    assert_eq!(f.fetch_session(1), Some((77, 1)));
    // t-1 has records buffered: not fetched, so forgotten; t-0 and t-2 did
    // not change: not listed.
    let planned = f.poll_requests(now, &md);
    let (ids, parts, forgotten) = session_request(planned[0].1.as_ref());
    assert_eq!(ids, (77, 1));
    assert!(parts.is_empty(), "{parts:?}");
    assert_eq!(forgotten, [("t".into(), 1)]);
    // The broker answers for session partitions not listed.
    f.handle_response(
        now,
        planned[0].2,
        &session_response(77, ErrorCode::None, vec![("t", vec![data(2, batch(0, 1))])]),
    );
    assert_eq!(f.fetch_session(1), Some((77, 2)));
    assert_eq!(offsets(&f.take_records(100)).len(), 3);
    // Both moved on: listed again at their new offsets, t-0 still not.
    let planned = f.poll_requests(now, &md);
    let (ids, parts, forgotten) = session_request(planned[0].1.as_ref());
    assert_eq!(ids, (77, 2));
    assert_eq!(parts, [("t".into(), 1, 2), ("t".into(), 2, 1)]);
    assert!(forgotten.is_empty());
}

#[test]
fn session_errors_fall_back_to_a_full_fetch_at_once() {
    for code in [
        ErrorCode::FetchSessionIdNotFound,
        ErrorCode::InvalidFetchSessionEpoch,
    ] {
        let md = metadata(&[("t", 0, 1)]);
        let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
        let now = Instant::now();
        let planned = f.poll_requests(now, &md);
        f.handle_response(
            now,
            planned[0].2,
            &session_response(5, ErrorCode::None, vec![]),
        );
        let planned = f.poll_requests(now, &md);
        assert_eq!(session_request(planned[0].1.as_ref()).0, (5, 1));
        let outcome = f.handle_response(now, planned[0].2, &session_response(0, code, vec![]));
        assert_eq!(outcome, FetchOutcome::default(), "{code}: not reported");
        assert_eq!(f.fetch_session(1), None);
        let planned = f.poll_requests(now, &md);
        let (ids, parts, _) = session_request(planned[0].1.as_ref());
        assert_eq!((ids, parts), ((0, 0), vec![("t".into(), 0, 0)]), "{code}");
    }
}

#[test]
fn a_session_ends_with_its_connection_or_a_failed_request() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    f.set_leader_generations(&BTreeMap::from([(1, 3)]));
    let planned = f.poll_requests(now, &md);
    f.handle_response(
        now,
        planned[0].2,
        &session_response(9, ErrorCode::None, vec![]),
    );
    f.set_leader_generations(&BTreeMap::from([(1, 3), (2, 1)]));
    assert_eq!(f.fetch_session(1), Some((9, 1)), "same connection");
    // The leader connection closed (reaped, or the broker closed it).
    f.set_leader_generations(&BTreeMap::from([(1, 4)]));
    assert_eq!(f.fetch_session(1), None);
    let planned = f.poll_requests(now, &md);
    assert_eq!(session_request(planned[0].1.as_ref()).0, (0, 0));
    f.handle_response(
        now,
        planned[0].2,
        &session_response(10, ErrorCode::None, vec![]),
    );
    assert_eq!(f.fetch_session(1), Some((10, 1)));
    let planned = f.poll_requests(now, &md);
    f.handle_failure(now, planned[0].2, &lost());
    assert_eq!(f.fetch_session(1), None);
}

#[test]
fn without_sessions_every_fetch_is_full_and_sessionless() {
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(
        FetchConfig {
            sessions: false,
            ..config()
        },
        &[(tp("t", 0), 0)],
    );
    let now = Instant::now();
    for _ in 0..2 {
        let planned = f.poll_requests(now, &md);
        let (ids, parts, _) = session_request(planned[0].1.as_ref());
        assert_eq!((ids, parts), ((0, -1), vec![("t".into(), 0, 0)]));
        f.handle_response(
            now,
            planned[0].2,
            &session_response(0, ErrorCode::None, vec![]),
        );
        assert_eq!(f.fetch_session(1), None);
    }
}

#[test]
fn a_broker_that_keeps_no_session_gets_full_fetches() {
    // Session id 0 back (librdkafka's mock echoes the id asked for).
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    for _ in 0..2 {
        let planned = f.poll_requests(now, &md);
        let (ids, parts, _) = session_request(planned[0].1.as_ref());
        assert_eq!((ids, parts), ((0, 0), vec![("t".into(), 0, 0)]));
        f.handle_response(
            now,
            planned[0].2,
            &session_response(0, ErrorCode::None, vec![]),
        );
    }
}

#[test]
fn a_session_the_broker_closes_is_dropped_and_the_answer_kept() {
    // KIP-227: an incremental answer with session id 0 means the broker
    // closed the session; the records in it are still good.
    let md = metadata(&[("t", 0, 1)]);
    let mut f = fetcher(config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    let planned = f.poll_requests(now, &md);
    f.handle_response(
        now,
        planned[0].2,
        &session_response(5, ErrorCode::None, vec![]),
    );
    let planned = f.poll_requests(now, &md);
    assert_eq!(session_request(planned[0].1.as_ref()).0, (5, 1));
    let outcome = f.handle_response(
        now,
        planned[0].2,
        &session_response(0, ErrorCode::None, vec![("t", vec![data(0, batch(0, 2))])]),
    );
    assert_eq!(outcome.records_buffered, 2);
    assert_eq!(f.fetch_session(1), None);
    assert_eq!(f.take_records(10).len(), 2);
    let planned = f.poll_requests(now, &md);
    let (ids, parts, _) = session_request(planned[0].1.as_ref());
    assert_eq!((ids, parts), ((0, 0), vec![("t".into(), 0, 2)]));
}

// ===== fetching from the nearest replica (KIP-392) =====

/// Metadata with these `(topic, partition, leader)` and brokers 1..=3 (a
/// read replica must be a broker the metadata knows).
fn with_brokers(parts: &[(&str, i32, i32)]) -> Metadata {
    let mut md = metadata(parts);
    for id in 1..=3 {
        md.brokers.insert(
            id,
            crate::cluster::BrokerAddress {
                id,
                host: format!("b{id}"),
                port: 9092,
                rack: Some(format!("r{id}")),
            },
        );
    }
    md
}

fn rack_config() -> FetchConfig {
    FetchConfig {
        rack_id: Some("r2".into()),
        replica_lease: Duration::from_secs(10),
        ..config()
    }
}

/// A leader's answer for partition `p`: no records, `replica` preferred.
fn redirect(partition: i32, replica: i32) -> PartitionData {
    PartitionData {
        partition_index: partition,
        high_watermark: 1000,
        preferred_read_replica: replica,
        records: Some(Bytes::new()),
        ..PartitionData::default()
    }
}

/// Plans at `now` and answers the only Fetch, which must go to `target`,
/// with `topics` at v12.
fn fetch_from(
    f: &mut Fetcher,
    now: Instant,
    md: &Metadata,
    target: Target,
    topics: Vec<(&str, Vec<PartitionData>)>,
) -> FetchOutcome {
    let planned = f.poll_requests(now, md);
    let list = routed(&planned);
    assert_eq!(list.len(), 1, "one Fetch expected: {list:?}");
    assert_eq!(list[0].0, target, "{list:?}");
    f.handle_response(now, list[0].2, &fetch_response(12, topics))
}

#[test]
fn a_partition_is_fetched_from_the_replica_its_leader_names() {
    let md = with_brokers(&[("t", 0, 1)]);
    let mut f = fetcher(rack_config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    // The first Fetch goes to the leader, with the client's rack (v11+).
    let planned = f.poll_requests(now, &md);
    assert_eq!(planned[0].0, Target::Broker(1));
    assert_eq!(decode_fetch(planned[0].1.as_ref(), 11).rack_id, "r2");
    let outcome = f.handle_response(
        now,
        planned[0].2,
        &fetch_response(12, vec![("t", vec![redirect(0, 2)])]),
    );
    assert_eq!(outcome, FetchOutcome::default());
    assert_eq!(f.read_replica(&tp("t", 0)), Some(2));
    // Then from the replica, at once, at the same offset, with the
    // leader's epoch; what it sends is delivered.
    let planned = f.poll_requests(now, &md);
    assert_eq!(routed(&planned)[0].0, Target::Replica(2));
    assert_eq!(routed(&planned)[0].1, [("t".into(), 0, 0)]);
    let request = decode_fetch(planned[0].1.as_ref(), 12);
    assert_eq!(request.topics[0].partitions[0].current_leader_epoch, 7);
    assert_eq!(request.rack_id, "r2");
    f.handle_response(
        now,
        planned[0].2,
        &fetch_response(12, vec![("t", vec![data(0, batch(0, 5))])]),
    );
    assert_eq!(t0_offsets(&f.take_records(100)), [0, 1, 2, 3, 4]);
    fetch_from(
        &mut f,
        now,
        &md,
        Target::Replica(2),
        vec![("t", vec![data(0, batch(5, 5))])],
    );
    assert_eq!(t0_offsets(&f.take_records(100)), [5, 6, 7, 8, 9]);
    // Offsets are looked up at the leader, whatever the partition reads
    // from.
    f.seek_to_end([&tp("t", 0)]).unwrap();
    let planned = f.poll_requests(now, &md);
    assert_eq!(planned.len(), 1);
    assert_eq!(planned[0].0, Target::Broker(1));
    assert_eq!(planned[0].1.api_key(), ApiKey::ListOffsets);
}

#[test]
fn the_leader_is_asked_again_when_the_lease_ends() {
    let md = with_brokers(&[("t", 0, 1)]);
    let mut f = fetcher(rack_config(), &[(tp("t", 0), 0)]);
    let start = Instant::now();
    fetch_from(
        &mut f,
        start,
        &md,
        Target::Broker(1),
        vec![("t", vec![redirect(0, 2)])],
    );
    let lease_end = start + Duration::from_secs(10);
    // Fetching from the replica until the lease ends; its answers do not
    // renew it.
    for at in [start, lease_end - Duration::from_millis(1)] {
        fetch_from(
            &mut f,
            at,
            &md,
            Target::Replica(2),
            vec![("t", vec![data(0, Bytes::new())])],
        );
    }
    // Then the leader, which names the replica again for another lease.
    fetch_from(
        &mut f,
        lease_end,
        &md,
        Target::Broker(1),
        vec![("t", vec![redirect(0, 2)])],
    );
    assert_eq!(f.read_replica(&tp("t", 0)), Some(2));
    fetch_from(
        &mut f,
        lease_end + Duration::from_secs(10) - Duration::from_millis(1),
        &md,
        Target::Replica(2),
        vec![("t", vec![data(0, Bytes::new())])],
    );
    // A leader that names no replica (or itself) keeps the partition.
    let later = lease_end + Duration::from_secs(10);
    fetch_from(
        &mut f,
        later,
        &md,
        Target::Broker(1),
        vec![("t", vec![redirect(0, 1)])],
    );
    assert_eq!(f.read_replica(&tp("t", 0)), None);
    fetch_from(
        &mut f,
        later,
        &md,
        Target::Broker(1),
        vec![("t", vec![redirect(0, -1)])],
    );
    assert_eq!(f.read_replica(&tp("t", 0)), None);
}

#[test]
fn replica_errors_send_the_partition_back_to_its_leader_without_a_reset() {
    for code in [
        ErrorCode::OffsetOutOfRange,
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::ReplicaNotAvailable,
        ErrorCode::FencedLeaderEpoch,
        ErrorCode::KafkaStorageError,
        ErrorCode::OffsetNotAvailable,
        ErrorCode::UnknownTopicOrPartition,
    ] {
        let md = with_brokers(&[("t", 0, 1)]);
        let mut f = fetcher(rack_config(), &[(tp("t", 0), 40)]);
        let now = Instant::now();
        fetch_from(
            &mut f,
            now,
            &md,
            Target::Broker(1),
            vec![("t", vec![redirect(0, 2)])],
        );
        let outcome = fetch_from(
            &mut f,
            now,
            &md,
            Target::Replica(2),
            vec![("t", vec![error(0, code)])],
        );
        assert_eq!(
            outcome.refresh_metadata,
            code != ErrorCode::OffsetOutOfRange,
            "{code}"
        );
        assert_eq!(outcome.errors, 0, "{code}");
        assert!(f.take_errors().is_empty(), "{code}: nothing to report");
        assert_eq!(f.read_replica(&tp("t", 0)), None, "{code}");
        // Not reset (the replica may lag behind the leader), not fetched
        // again before the backoff: then from the leader, at the same
        // position.
        assert_eq!(f.position(&tp("t", 0)), Some(40), "{code}");
        assert!(f.poll_requests(now, &md).is_empty(), "{code}");
        let due = f.next_deadline().unwrap();
        assert!(due > now && due <= now + Duration::from_millis(120));
        let planned = f.poll_requests(due, &md);
        assert_eq!(
            routed(&planned)
                .iter()
                .map(|(t, parts, _)| (*t, parts.clone()))
                .collect::<Vec<_>>(),
            [(Target::Broker(1), vec![("t".into(), 0, 40)])],
            "{code}"
        );
    }
}

#[test]
fn an_unknown_leader_epoch_at_the_replica_keeps_it() {
    // The follower has not heard of the leader epoch yet: the Java
    // consumer keeps fetching from it (after a backoff and a validation
    // at the leader), and so does this one.
    let md = with_brokers(&[("t", 0, 1)]);
    let mut f = fetcher(rack_config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    fetch_from(
        &mut f,
        now,
        &md,
        Target::Broker(1),
        vec![("t", vec![redirect(0, 2)])],
    );
    let outcome = fetch_from(
        &mut f,
        now,
        &md,
        Target::Replica(2),
        vec![("t", vec![error(0, ErrorCode::UnknownLeaderEpoch)])],
    );
    // The replica is behind the epoch we know: asked again, no metadata.
    assert!(!outcome.refresh_metadata);
    assert_eq!(f.read_replica(&tp("t", 0)), Some(2));
}

#[test]
fn a_replica_that_cannot_be_reached_sends_all_its_partitions_back() {
    for error in [
        RequestError::ReplicaUnavailable {
            broker: 2,
            reason: "b2:9092 is in reconnect backoff".into(),
        },
        lost(),
    ] {
        // t-0 led by 1 and t-1 led by 3, both read from 2: one Fetch for
        // both on the replica connection.
        let md = with_brokers(&[("t", 0, 1), ("t", 1, 3)]);
        let mut f = fetcher(rack_config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
        let now = Instant::now();
        let planned = f.poll_requests(now, &md);
        for (target, _, token) in routed(&planned) {
            let p = if target == Target::Broker(1) { 0 } else { 1 };
            f.handle_response(
                now,
                token,
                &fetch_response(12, vec![("t", vec![redirect(p, 2)])]),
            );
        }
        let planned = f.poll_requests(now, &md);
        let list = routed(&planned);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].0, Target::Replica(2));
        assert_eq!(list[0].1, [("t".into(), 0, 0), ("t".into(), 1, 0)]);
        let outcome = f.handle_failure(now, list[0].2, &error);
        assert!(outcome.refresh_metadata, "{error}");
        assert_eq!(outcome.errors, 0, "retriable: not reported");
        assert_eq!(f.read_replica(&tp("t", 0)), None);
        assert_eq!(f.read_replica(&tp("t", 1)), None);
        // Each after its own backoff (jittered).
        let due = now + Duration::from_secs(1);
        let planned = f.poll_requests(due, &md);
        let mut targets: Vec<Target> = routed(&planned).iter().map(|(t, _, _)| *t).collect();
        targets.sort();
        assert_eq!(targets, [Target::Broker(1), Target::Broker(3)], "{error}");
    }
}

#[test]
fn a_replica_missing_from_the_metadata_is_not_fetched_from() {
    let md = with_brokers(&[("t", 0, 1)]);
    let mut f = fetcher(rack_config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    fetch_from(
        &mut f,
        now,
        &md,
        Target::Broker(1),
        vec![("t", vec![redirect(0, 9)])],
    );
    assert!(!f.take_metadata_wanted());
    // Broker 9 is unknown: the metadata is asked for, and the leader again
    // after a backoff (not in a loop).
    assert!(f.poll_requests(now, &md).is_empty());
    assert!(f.take_metadata_wanted());
    assert!(!f.take_metadata_wanted(), "reading clears it");
    let due = f.next_deadline().unwrap();
    assert!(due > now);
    fetch_from(
        &mut f,
        due,
        &md,
        Target::Broker(1),
        vec![("t", vec![data(0, batch(0, 1))])],
    );
    assert_eq!(t0_offsets(&f.take_records(10)), [0]);
}

#[test]
fn a_replica_that_becomes_the_leader_is_fetched_over_the_leader_connection() {
    let md = with_brokers(&[("t", 0, 1)]);
    let mut f = fetcher(rack_config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    fetch_from(
        &mut f,
        now,
        &md,
        Target::Broker(1),
        vec![("t", vec![redirect(0, 2)])],
    );
    let moved = with_brokers(&[("t", 0, 2)]);
    let planned = f.poll_requests(now, &moved);
    assert_eq!(routed(&planned)[0].0, Target::Broker(2));
    assert_eq!(f.read_replica(&tp("t", 0)), None);
}

#[test]
fn a_broker_leading_one_partition_and_serving_another_gets_two_fetches() {
    // Broker 2 leads t-1 and is t-0's read replica: a Fetch on each
    // connection, each with its own fetch session (KIP-227 sessions are
    // per connection).
    let md = with_brokers(&[("t", 0, 1), ("t", 1, 2)]);
    let mut f = fetcher(rack_config(), &[(tp("t", 0), 0), (tp("t", 1), 0)]);
    let now = Instant::now();
    let planned = f.poll_requests(now, &md);
    for (target, _, token) in routed(&planned) {
        let (p, id) = if target == Target::Broker(1) {
            (redirect(0, 2), 11)
        } else {
            (data(1, Bytes::new()), 21)
        };
        f.handle_response(
            now,
            token,
            &session_response(id, ErrorCode::None, vec![("t", vec![p])]),
        );
    }
    assert_eq!(f.fetch_session(1), Some((11, 1)));
    assert_eq!(f.fetch_session(2), Some((21, 1)));
    let planned = f.poll_requests(now, &md);
    let list = routed(&planned);
    assert_eq!(list.len(), 2, "{list:?}");
    let to_replica = planned
        .iter()
        .find(|(t, _, _)| *t == Target::Replica(2))
        .unwrap();
    let (ids, parts, _) = session_request(to_replica.1.as_ref());
    assert_eq!(ids, (0, 0), "a full Fetch opens the replica's session");
    assert_eq!(parts, [("t".into(), 0, 0)]);
    let to_leader = planned
        .iter()
        .find(|(t, _, _)| *t == Target::Broker(2))
        .unwrap();
    let (ids, parts, _) = session_request(to_leader.1.as_ref());
    assert_eq!(ids, (21, 1), "the leader connection's session goes on");
    assert!(parts.is_empty());
    f.handle_response(
        now,
        to_replica.2,
        &session_response(
            31,
            ErrorCode::None,
            vec![("t", vec![data(0, Bytes::new())])],
        ),
    );
    assert_eq!(f.replica_fetch_session(2), Some((31, 1)));
    assert_eq!(f.fetch_session(2), Some((21, 1)));
    // The replica connection closes: its session ends, the leader
    // connection's to the same broker does not.
    f.set_replica_generations(&BTreeMap::from([(2, 1)]));
    assert_eq!(f.replica_fetch_session(2), None);
    assert_eq!(f.fetch_session(2), Some((21, 1)));
    f.set_leader_generations(&BTreeMap::from([(2, 1)]));
    assert_eq!(f.fetch_session(2), None);
    assert_eq!(f.fetch_session(1), Some((11, 1)));
}

#[test]
fn a_top_level_error_from_a_replica_sends_its_partitions_back() {
    let md = with_brokers(&[("t", 0, 1)]);
    let mut f = fetcher(rack_config(), &[(tp("t", 0), 0)]);
    let now = Instant::now();
    fetch_from(
        &mut f,
        now,
        &md,
        Target::Broker(1),
        vec![("t", vec![redirect(0, 2)])],
    );
    let planned = f.poll_requests(now, &md);
    let outcome = f.handle_response(
        now,
        planned[0].2,
        &session_response(0, ErrorCode::NotLeaderOrFollower, vec![]),
    );
    assert!(outcome.refresh_metadata);
    assert_eq!(outcome.errors, 0);
    assert_eq!(f.read_replica(&tp("t", 0)), None);
}
