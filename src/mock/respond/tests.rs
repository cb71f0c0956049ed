//! Unit tests of `respond.rs`: whole request frames answered through the
//! dispatch, the Fetch answer's deferred encoding, and idempotent
//! producers through Produce and InitProducerId frames.

use super::*;
use crate::mock::group::GroupSettings;
use crate::protocol::frame::{decode_response, encode_request};
use crate::protocol::messages::fetch::FetchResponse;
use crate::protocol::messages::metadata::{MetadataRequest, MetadataResponse};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// librdkafka's Metadata request for every topic at v9+: a compact
/// null topic array written in a four-byte placeholder, so three zero
/// bytes come before the request's own fields, which are left over.
#[test]
fn a_metadata_request_with_bytes_after_its_body_is_answered() {
    let now = Instant::now();
    let addrs = BTreeMap::from([(1, SocketAddr::from(([127, 0, 0, 1], 9092)))]);
    let settings = GroupSettings {
        initial_rebalance_delay: Duration::ZERO,
        min_session_timeout: Duration::from_millis(100),
        max_session_timeout: Duration::from_secs(60),
    };
    let mut st = State::new(now, addrs, settings);
    st.create_topic("t", 1, None).unwrap();
    let request = MetadataRequest {
        topics: None,
        ..MetadataRequest::default()
    };
    let framed = encode_request(&request, 12, 7, Some("rdkafka")).unwrap();
    let mut frame = framed.slice(4..).to_vec();
    frame.extend_from_slice(&[0, 0, 0]);
    let frame = Bytes::from(frame);
    let header = RequestHeader::decode(&mut Reader::new(frame.clone())).unwrap();
    let mut auth = ConnAuth::new(false);
    let Reply::Now(Answer::Reply(bytes)) = respond(&mut st, 1, 1, &header, frame, &mut auth, now)
    else {
        panic!("not answered");
    };
    let (_, md) = decode_response::<MetadataResponse>(bytes.slice(4..), 12).unwrap();
    assert_eq!(md.topics.len(), 1);
    assert_eq!(md.topics[0].name.as_deref(), Some("t"));
}

/// A Fetch answer leaves the lock unencoded; encoded, it is the frame
/// `encode_response` writes, at the flexible and the older versions.
#[test]
fn a_fetch_answer_is_encoded_after_the_lock_as_encode_response_would() {
    use crate::protocol::frame::encode_response;
    use crate::protocol::messages::fetch::{FetchableTopicResponse, PartitionData};
    let resp = FetchResponse {
        responses: vec![FetchableTopicResponse {
            topic: "t".into(),
            partitions: (0..3)
                .map(|p| PartitionData {
                    partition_index: p,
                    high_watermark: 10,
                    records: Some(Bytes::from(vec![p as u8; 70_000])),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    for version in [11, 12, 16] {
        let Answer::Reply(bytes) = Answer::Fetch(Box::new(resp.clone()), version, 9).encoded()
        else {
            panic!("a Fetch answer encodes to a reply");
        };
        assert_eq!(
            bytes,
            encode_response(&resp, version, 9).unwrap(),
            "v{version}"
        );
    }
    assert!(matches!(Answer::Silent.encoded(), Answer::Silent));
}

/// Idempotent producers through whole request frames, at the oldest and
/// newest Produce and InitProducerId versions.
mod idempotence {
    use super::*;
    use crate::mock::group::GroupSettings;
    use crate::protocol::frame::{decode_response, encode_request};
    use crate::protocol::messages::init_producer_id::{
        InitProducerIdRequest, InitProducerIdResponse,
    };
    use crate::protocol::messages::produce::{
        PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
    };
    use crate::protocol::messages::Request;
    use crate::records::RecordBatchBuilder;
    use std::collections::BTreeMap;
    use std::net::SocketAddr;

    fn cluster(brokers: i32) -> (State, Instant) {
        let now = Instant::now();
        let addrs = (1..=brokers)
            .map(|id| (id, SocketAddr::from(([127, 0, 0, 1], 9000 + id as u16))))
            .collect::<BTreeMap<_, _>>();
        let settings = GroupSettings {
            initial_rebalance_delay: Duration::ZERO,
            min_session_timeout: Duration::from_millis(100),
            max_session_timeout: Duration::from_secs(60),
        };
        let mut st = State::new(now, addrs, settings);
        st.create_topic("t", 1, Some(&[1])).unwrap();
        (st, now)
    }

    /// Sends `req` at `version` to broker `broker`: the answer as it
    /// reaches the client, decoded when there is one.
    fn send<R: Request>(
        st: &mut State,
        broker: i32,
        req: &R,
        version: i16,
    ) -> Result<R::Response, Answer> {
        let framed = encode_request(req, version, 3, Some("test")).unwrap();
        let frame = framed.slice(4..);
        let header = RequestHeader::decode(&mut Reader::new(frame.clone())).unwrap();
        let mut auth = ConnAuth::new(false);
        match respond(st, broker, 1, &header, frame, &mut auth, Instant::now()) {
            Reply::Now(Answer::Reply(bytes)) => {
                Ok(decode_response::<R::Response>(bytes.slice(4..), version)
                    .unwrap()
                    .1)
            }
            Reply::Now(other) => Err(other),
            Reply::Later(_) => panic!("held"),
        }
    }

    fn batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
        let mut b = RecordBatchBuilder::new(0).producer(pid, epoch, seq);
        for i in 0..n {
            b.append(5000 + i as i64, None, Some(b"v"), &[]).unwrap();
        }
        b.build().unwrap()
    }

    fn produce_request(records: Bytes) -> ProduceRequest {
        ProduceRequest {
            acks: -1,
            timeout_ms: 1000,
            topic_data: vec![TopicProduceData {
                name: "t".into(),
                partition_data: vec![PartitionProduceData {
                    index: 0,
                    records: Some(records),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// (error, base offset, log append time) of partition 0.
    fn produce(st: &mut State, version: i16, records: Bytes) -> (ErrorCode, i64, i64) {
        let resp: ProduceResponse = send(st, 1, &produce_request(records), version).unwrap();
        let p = &resp.responses[0].partition_responses[0];
        (
            ErrorCode::from_code(p.error_code),
            p.base_offset,
            p.log_append_time_ms,
        )
    }

    fn high_watermark(st: &State) -> i64 {
        st.topics["t"].partitions[0].log.high_watermark()
    }

    fn init(
        st: &mut State,
        broker: i32,
        version: i16,
        txn: Option<&str>,
    ) -> InitProducerIdResponse {
        let req = InitProducerIdRequest {
            transactional_id: txn.map(str::to_owned),
            transaction_timeout_ms: 60_000,
            ..Default::default()
        };
        send(st, broker, &req, version).unwrap()
    }

    #[test]
    fn a_producer_id_then_its_batches_in_order_once_each() {
        for (init_version, produce_version) in [(0, 3), (5, 11)] {
            let (mut st, _) = cluster(1);
            let id = init(&mut st, 1, init_version, None);
            assert_eq!((id.error_code, id.producer_epoch), (0, 0));
            let pid = id.producer_id;
            let v = produce_version;
            assert_eq!(
                produce(&mut st, v, batch(pid, 0, 0, 3)),
                (ErrorCode::None, 0, -1)
            );
            // The same batch again (a retry whose answer was lost): its
            // offsets, and its max timestamp as the append time, as
            // Kafka answers a duplicate; nothing written.
            assert_eq!(
                produce(&mut st, v, batch(pid, 0, 0, 3)),
                (ErrorCode::None, 0, 5002)
            );
            assert_eq!(high_watermark(&st), 3);
            assert_eq!(
                produce(&mut st, v, batch(pid, 0, 3, 2)),
                (ErrorCode::None, 3, -1)
            );
            // A gap, and a partial repeat: out of order.
            let out_of_order = ErrorCode::OutOfOrderSequenceNumber;
            assert_eq!(produce(&mut st, v, batch(pid, 0, 6, 1)).0, out_of_order);
            assert_eq!(produce(&mut st, v, batch(pid, 0, 4, 1)).0, out_of_order);
            // A new epoch from sequence 0 fences the old one.
            assert_eq!(
                produce(&mut st, v, batch(pid, 1, 0, 1)),
                (ErrorCode::None, 5, -1)
            );
            assert_eq!(
                produce(&mut st, v, batch(pid, 0, 5, 1)).0,
                ErrorCode::InvalidProducerEpoch
            );
            // A producer id with no sequence: refused as Kafka's
            // LogValidator does.
            assert_eq!(
                produce(&mut st, v, batch(pid, 1, -1, 1)).0,
                ErrorCode::InvalidRecord
            );
            assert_eq!(high_watermark(&st), 6);
            // Refusals carry the log start offset (from Produce v5), as
            // Kafka's do.
            let resp: ProduceResponse =
                send(&mut st, 1, &produce_request(batch(pid, 1, 9, 1)), v).unwrap();
            let p = &resp.responses[0].partition_responses[0];
            let log_start = if v >= 5 { 0 } else { -1 };
            assert_eq!(
                (p.error_code, p.base_offset, p.log_start_offset),
                (45, -1, log_start)
            );
        }
    }

    #[test]
    fn a_producer_the_partition_does_not_know_is_not_refused() {
        // No UNKNOWN_PRODUCER_ID since KIP-360: any sequence is taken.
        let (mut st, _) = cluster(1);
        assert_eq!(
            produce(&mut st, 11, batch(77, 4, 1000, 2)),
            (ErrorCode::None, 0, -1)
        );
        assert_eq!(
            produce(&mut st, 11, batch(77, 4, 1002, 1)),
            (ErrorCode::None, 2, -1)
        );
    }

    #[test]
    fn a_lost_answer_takes_effect_and_the_retry_is_a_duplicate() {
        let (mut st, _) = cluster(1);
        let pid = init(&mut st, 1, 4, None).producer_id;
        st.lost_answers
            .entry(ApiKey::Produce.code())
            .or_default()
            .extend([LostAnswer::Close, LostAnswer::Unanswered]);
        let req = produce_request(batch(pid, 0, 0, 2));
        let lost = send(&mut st, 1, &req, 11).unwrap_err();
        assert!(
            matches!(lost, Answer::Close(BrokerClose::AnswerLost)),
            "{lost:?}"
        );
        assert_eq!(high_watermark(&st), 2, "appended all the same");
        let lost = send(&mut st, 1, &req, 11).unwrap_err();
        assert!(matches!(lost, Answer::Silent), "{lost:?}");
        assert_eq!(high_watermark(&st), 2, "a duplicate, not appended");
        // Nothing more to lose: the third try is answered, with the
        // first one's offsets.
        assert_eq!(
            produce(&mut st, 11, batch(pid, 0, 0, 2)),
            (ErrorCode::None, 0, 5001)
        );
        assert_eq!(high_watermark(&st), 2);
    }

    #[test]
    fn a_lost_answer_waits_for_a_request_that_is_served() {
        let (mut st, _) = cluster(1);
        st.lost_answers
            .entry(ApiKey::InitProducerId.code())
            .or_default()
            .push_back(LostAnswer::Close);
        // A version the broker does not serve closes the connection
        // without effect: the loss is still to come.
        st.versions.insert(
            ApiKey::InitProducerId.code(),
            crate::protocol::VersionRange::new(0, 3),
        );
        let req = InitProducerIdRequest {
            transaction_timeout_ms: 1,
            ..Default::default()
        };
        let refused = send(&mut st, 1, &req, 4).unwrap_err();
        assert!(
            matches!(refused, Answer::Close(BrokerClose::BadRequest)),
            "{refused:?}"
        );
        assert_eq!(st.lost_answers[&ApiKey::InitProducerId.code()].len(), 1);
        let lost = send(&mut st, 1, &req, 3).unwrap_err();
        assert!(
            matches!(lost, Answer::Close(BrokerClose::AnswerLost)),
            "{lost:?}"
        );
        // The id was given all the same: the next one is another.
        assert_eq!(init(&mut st, 1, 3, None).producer_id, 1);
    }

    #[test]
    fn transactional_ids_go_to_their_coordinator_and_bump_the_epoch() {
        let (mut st, _) = cluster(3);
        st.coordinators.insert("tx".into(), 2);
        let other = init(&mut st, 1, 4, Some("tx"));
        assert_eq!(other.error_code, ErrorCode::NotCoordinator.code());
        let first = init(&mut st, 2, 4, Some("tx"));
        assert_eq!((first.error_code, first.producer_epoch), (0, 0));
        let second = init(&mut st, 2, 0, Some("tx"));
        assert_eq!(
            (second.producer_id, second.producer_epoch),
            (first.producer_id, 1)
        );
        // Its batches at epoch 0 are fenced once epoch 1 wrote.
        let pid = first.producer_id;
        assert_eq!(produce(&mut st, 11, batch(pid, 0, 0, 1)).0, ErrorCode::None);
        assert_eq!(produce(&mut st, 11, batch(pid, 1, 0, 1)).0, ErrorCode::None);
        assert_eq!(
            produce(&mut st, 11, batch(pid, 0, 1, 1)).0,
            ErrorCode::InvalidProducerEpoch
        );
    }

    #[test]
    fn an_injected_error_answers_init_producer_id_with_no_id() {
        let (mut st, _) = cluster(1);
        st.errors
            .entry(ApiKey::InitProducerId.code())
            .or_default()
            .push_back(ErrorCode::CoordinatorLoadInProgress);
        let resp = init(&mut st, 1, 4, None);
        assert_eq!(
            (resp.error_code, resp.producer_id, resp.producer_epoch),
            (ErrorCode::CoordinatorLoadInProgress.code(), -1, -1)
        );
        assert_eq!(init(&mut st, 1, 4, None).producer_id, 0, "no id was used");
    }

    #[test]
    fn a_truncated_log_forgets_the_producer_state_of_what_it_lost() {
        let (mut st, _) = cluster(1);
        let pid = init(&mut st, 1, 4, None).producer_id;
        assert_eq!(produce(&mut st, 11, batch(pid, 0, 0, 2)).1, 0);
        assert_eq!(produce(&mut st, 11, batch(pid, 0, 2, 2)).1, 2);
        // An unclean election loses the second batch: sent again, it
        // is written again (at its old offsets), not a duplicate.
        st.topics.get_mut("t").unwrap().partitions[0].truncate_to(2);
        assert_eq!(
            produce(&mut st, 11, batch(pid, 0, 2, 2)),
            (ErrorCode::None, 2, -1)
        );
        assert_eq!(high_watermark(&st), 4);
        // And what was kept is still known: its repeat is a duplicate.
        assert_eq!(
            produce(&mut st, 11, batch(pid, 0, 0, 2)),
            (ErrorCode::None, 0, 5001)
        );
    }
}
