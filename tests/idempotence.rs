//! `lazykafka::mock` as the broker of an idempotent producer written by
//! others: librdkafka's producer with `enable.idempotence=true` gets its
//! producer id from the mock (InitProducerId) and writes to it through
//! injected faults: answers lost with their connection after the batch was
//! appended, answers never sent (the request times out), retriable errors.
//! librdkafka's consumer then reads every record exactly once, in order, on
//! every partition, and every delivery report is a success. The mock's
//! duplicate detection is what keeps the retries from being written twice:
//! without it (the same faults on a producer without idempotence) records
//! are written twice, which the last test shows.
//!
//! No lazykafka runtime is involved: the mock runs on its own threads.

use lazykafka::mock::{BrokerClose, ClosedBy, LostAnswer, MockCluster, MockEventKind};
use lazykafka::protocol::ApiKey;
use lazykafka::ErrorCode;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer as _, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);
const TOPIC: &str = "idempotent";
const PARTITIONS: i32 = 3;

/// A delivery report: the partition, value and offset of a record
/// delivered, or the error.
type Report = Result<(i32, String, i64), String>;

/// Every delivery report.
#[derive(Default)]
struct Reports(Mutex<Vec<Report>>);

impl ClientContext for Reports {}

impl ProducerContext for Reports {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let report = match result {
            Ok(m) => Ok((
                m.partition(),
                String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
                m.offset(),
            )),
            Err((e, m)) => Err(format!("partition {}: {e}", m.partition())),
        };
        self.0.lock().unwrap().push(report);
    }
}

/// A librdkafka producer to `mock`: small batches (10 records, 5 ms
/// linger) so that several are in flight per partition at once; a request
/// unanswered for 2 s times out (`socket.timeout.ms`, which caps
/// librdkafka's Produce timeout) and takes its connection down
/// (`socket.max.fails` is 1).
fn producer(mock: &MockCluster, idempotent: bool) -> BaseProducer<Reports> {
    ClientConfig::new()
        .set("bootstrap.servers", mock.bootstrap_servers())
        .set("enable.idempotence", idempotent.to_string())
        .set("linger.ms", "5")
        .set("batch.num.messages", "10")
        .set("socket.timeout.ms", "2000")
        .set("message.timeout.ms", "60000")
        .set("retry.backoff.ms", "50")
        .create_with_context(Reports::default())
        .expect("librdkafka producer")
}

/// Produces `per_partition` records to every partition, values
/// `p{partition}-{i}` in order, and waits for every delivery report.
fn produce_all(producer: &BaseProducer<Reports>, per_partition: usize) {
    for i in 0..per_partition {
        for p in 0..PARTITIONS {
            let value = format!("p{p}-{i}");
            producer
                .send(BaseRecord::<(), _>::to(TOPIC).partition(p).payload(&value))
                .map_err(|(e, _)| e)
                .expect("send");
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(WAIT).expect("flush");
}

/// Every record of every partition, as librdkafka's consumer reads them:
/// the values per partition, in offset order.
fn read_all(mock: &MockCluster) -> BTreeMap<i32, Vec<String>> {
    let ends: Vec<i64> = (0..PARTITIONS)
        .map(|p| mock.high_watermark(TOPIC, p).unwrap())
        .collect();
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", mock.bootstrap_servers())
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .create()
        .expect("librdkafka consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut read: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    let done = |read: &BTreeMap<i32, Vec<(i64, String)>>| {
        (0..PARTITIONS).all(|p| {
            let n = read.get(&p).map_or(0, Vec::len) as i64;
            n >= ends[p as usize]
        })
    };
    while !done(&read) && Instant::now() < deadline {
        let Some(m) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = m.expect("librdkafka consumer error");
        let value = String::from_utf8_lossy(m.payload().unwrap()).into_owned();
        read.entry(m.partition())
            .or_default()
            .push((m.offset(), value));
    }
    assert!(done(&read), "read {read:?} of {ends:?}");
    read.into_iter()
        .map(|(p, records)| {
            let offsets: Vec<i64> = records.iter().map(|(o, _)| *o).collect();
            let expected: Vec<i64> = (0..ends[p as usize]).collect();
            assert_eq!(offsets, expected, "partition {p}: every offset once");
            (p, records.into_iter().map(|(_, v)| v).collect())
        })
        .collect()
}

/// Every partition holds its `per_partition` values exactly once, in the
/// order produced, and every delivery report is a success at the offset
/// the record is read at.
fn assert_exactly_once_in_order(
    mock: &MockCluster,
    producer: &BaseProducer<Reports>,
    per_partition: usize,
) {
    let read = read_all(mock);
    for p in 0..PARTITIONS {
        let expected: Vec<String> = (0..per_partition).map(|i| format!("p{p}-{i}")).collect();
        assert_eq!(read[&p], expected, "partition {p}");
    }
    let reports = producer.context().0.lock().unwrap();
    assert_eq!(reports.len(), per_partition * PARTITIONS as usize);
    for report in reports.iter() {
        let (p, value, offset) = report.as_ref().expect("every record delivered");
        assert_eq!(
            &read[p][*offset as usize], value,
            "reported offset of {value}"
        );
    }
}

fn mock() -> MockCluster {
    let mock = MockCluster::new(3).unwrap();
    mock.create_topic(TOPIC, PARTITIONS).unwrap();
    mock
}

/// The mock's Produce requests so far.
fn produce_requests(mock: &MockCluster) -> usize {
    mock.requests()
        .iter()
        .filter(|r| r.api == Some(ApiKey::Produce))
        .count()
}

/// Connections the mock closed because an answer was lost.
fn lost_with_connection(mock: &MockCluster) -> usize {
    mock.events()
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                MockEventKind::Closed {
                    by: ClosedBy::Broker(BrokerClose::AnswerLost),
                    ..
                }
            )
        })
        .count()
}

#[test]
fn an_idempotent_producer_gets_its_id_and_writes_each_partition_in_order() {
    let mock = mock();
    let producer = producer(&mock, true);
    produce_all(&producer, 200);
    assert_exactly_once_in_order(&mock, &producer, 200);
    let inits: Vec<i16> = mock
        .requests()
        .iter()
        .filter(|r| r.api == Some(ApiKey::InitProducerId))
        .map(|r| r.version)
        .collect();
    // librdkafka 2.12 asks once, at its highest version (4).
    assert_eq!(inits, [4]);
    // Every partition knows the producer (id 0, the mock's first) at epoch
    // 0, its last batch ending at sequence 199.
    for p in 0..PARTITIONS {
        let state = mock
            .producer_state(TOPIC, p, 0)
            .expect("the producer is known");
        assert_eq!(state.epoch, 0);
        let last = state.batches.last().unwrap();
        assert_eq!((last.last_sequence, last.last_offset), (199, 199));
        assert!(!state.batches.is_empty() && state.batches.len() <= 5);
    }
}

#[test]
fn answers_lost_with_their_connection_after_the_append_write_nothing_twice() {
    let mock = mock();
    mock.push_lost_answers(ApiKey::Produce, &[LostAnswer::Close; 6]);
    let producer = producer(&mock, true);
    produce_all(&producer, 300);
    assert_eq!(mock.pending_lost_answers(ApiKey::Produce), 0);
    assert_eq!(lost_with_connection(&mock), 6);
    assert_exactly_once_in_order(&mock, &producer, 300);
}

#[test]
fn answers_never_sent_time_out_and_their_retries_are_duplicates() {
    let mock = mock();
    mock.push_lost_answers(ApiKey::Produce, &[LostAnswer::Unanswered; 3]);
    let producer = producer(&mock, true);
    produce_all(&producer, 200);
    assert_eq!(mock.pending_lost_answers(ApiKey::Produce), 0);
    assert_exactly_once_in_order(&mock, &producer, 200);
}

#[test]
fn lost_answers_mixed_with_retriable_errors() {
    let mock = mock();
    mock.push_lost_answers(
        ApiKey::Produce,
        &[
            LostAnswer::Close,
            LostAnswer::Unanswered,
            LostAnswer::Close,
            LostAnswer::Close,
        ],
    );
    mock.push_errors(
        ApiKey::Produce,
        &[
            ErrorCode::NotLeaderOrFollower,
            ErrorCode::RequestTimedOut,
            ErrorCode::NotEnoughReplicas,
        ],
    );
    // The producer id's answer lost too: librdkafka asks again and uses
    // the second id.
    mock.push_lost_answers(ApiKey::InitProducerId, &[LostAnswer::Close]);
    let producer = producer(&mock, true);
    produce_all(&producer, 300);
    assert_eq!(mock.pending_lost_answers(ApiKey::Produce), 0);
    assert_eq!(mock.pending_lost_answers(ApiKey::InitProducerId), 0);
    assert_eq!(mock.pending_errors(ApiKey::Produce), 0);
    assert_exactly_once_in_order(&mock, &producer, 300);
    for p in 0..PARTITIONS {
        assert!(mock.producer_state(TOPIC, p, 0).is_none(), "id 0 was lost");
        assert!(mock.producer_state(TOPIC, p, 1).is_some());
    }
}

/// The same lost answers without idempotence: librdkafka retries the batch
/// whose answer was lost, and the mock, seeing no producer id, writes it
/// again. This is what the duplicate detection above prevents; it also
/// shows the faults do reach the producer.
#[test]
fn without_idempotence_the_same_faults_write_records_twice() {
    let mock = mock();
    mock.push_lost_answers(ApiKey::Produce, &[LostAnswer::Close; 3]);
    let producer = producer(&mock, false);
    produce_all(&producer, 100);
    assert_eq!(mock.pending_lost_answers(ApiKey::Produce), 0);
    let written: i64 = (0..PARTITIONS)
        .map(|p| mock.high_watermark(TOPIC, p).unwrap())
        .sum();
    assert!(
        written > 100 * i64::from(PARTITIONS),
        "{written} records written for 300 produced"
    );
    assert!(produce_requests(&mock) > 3);
}
