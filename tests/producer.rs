//! The producer against real peers: librdkafka's mock cluster (which checks
//! idempotent sequences as Kafka's brokers do) and `lazykafka::mock`; what
//! it wrote is read back by librdkafka's consumer. Every wait has a
//! deadline.

// Drives a `Producer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::{standard, TestCluster};
use common::peers::WAIT;
use common::timeout;
use futures::StreamExt;
use lazykafka::error::{ApiKey, ErrorCode};
use lazykafka::events::{EventKind, Purpose};
use lazykafka::{Error, Producer, ProducerConfig, ProducerRecord};
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::{Headers as _, Message as _};
use rdkafka::ClientConfig;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A record as librdkafka's consumer read it: partition, offset, key,
/// value, headers.
type Read = (
    i32,
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Vec<u8>)>,
);

/// Every record of `topic`'s `partitions`, from the beginning to the high
/// watermark each has now, read by librdkafka's consumer (with a deadline:
/// fewer come back when they cannot all be read in time). `count` is
/// what the caller expects in all; fewer or more fail it later.
fn read_back(bootstrap: &str, topic: &str, partitions: i32, count: usize) -> Vec<Read> {
    read_back_to(bootstrap, topic, partitions, count, true)
}

/// [`read_back`]; without `watermarks`, reads until `count` records came
/// instead of checking that the partitions hold `count` first.
fn read_back_to(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    count: usize,
    watermarks: bool,
) -> Vec<Read> {
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "reader")
        .set("enable.auto.commit", "false")
        .create()
        .expect("librdkafka consumer");
    let mut tpl = rdkafka::TopicPartitionList::new();
    let mut left = 0i64;
    for p in 0..partitions {
        if watermarks {
            let (_, high) = reader.fetch_watermarks(topic, p, WAIT).unwrap();
            left += high;
        }
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .unwrap();
    }
    if watermarks {
        assert_eq!(left as usize, count, "records written to {topic}");
    } else {
        left = count as i64;
    }
    reader.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + WAIT;
    while (out.len() as i64) < left && Instant::now() < deadline {
        let Some(message) = reader.poll(Duration::from_millis(100)) else {
            continue;
        };
        let m = message.expect("librdkafka reads what was produced");
        let headers = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec()))
                    .collect()
            })
            .unwrap_or_default();
        out.push((
            m.partition(),
            m.offset(),
            m.key().map(<[u8]>::to_vec),
            m.payload().map(<[u8]>::to_vec),
            headers,
        ));
    }
    out
}

fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> Producer {
    let mut builder = ProducerConfig::builder().bootstrap_servers(bootstrap);
    for (k, v) in extra {
        builder = builder.set(k, v).unwrap();
    }
    Producer::new(builder.build().unwrap()).unwrap()
}

/// Keyed records with headers, idempotent and acks=all (the defaults):
/// each delivery names its partition and offset, each key goes where
/// Kafka's murmur2 puts it, and librdkafka's consumer reads them all back,
/// in order per partition, with their keys, values and headers.
async fn keyed_records_arrive_in_order_where_murmur2_puts_them<C: TestCluster>() {
    const RECORDS: usize = 600;
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    let producer = producer(&bootstrap, &[("linger.ms", "2")]);
    assert!(producer.connections().is_empty(), "new opens nothing");
    let mut deliveries = Vec::new();
    for i in 0..RECORDS {
        let record = ProducerRecord::new("t")
            .key(format!("k{}", i % 17))
            .value(format!("v{i}"))
            .header("i", Some(i.to_string()));
        deliveries.push(timeout(WAIT, producer.send(record)).await.unwrap().unwrap());
    }
    let mut written: BTreeMap<i32, Vec<(i64, usize)>> = BTreeMap::new();
    for (i, delivery) in deliveries.into_iter().enumerate() {
        let meta = timeout(WAIT, delivery)
            .await
            .expect("delivered in time")
            .unwrap();
        assert_eq!(&*meta.topic, "t");
        let key = format!("k{}", i % 17);
        let expected = lazykafka::producer::partition_for_key(key.as_bytes(), 2).unwrap();
        assert_eq!(meta.partition, expected, "{key} ({})", mock.name());
        written
            .entry(meta.partition)
            .or_default()
            .push((meta.offset, i));
    }
    // Offsets per partition: 0, 1, 2... in the order the records were sent.
    for (p, list) in &written {
        let offsets: Vec<i64> = list.iter().map(|(o, _)| *o).collect();
        assert_eq!(
            offsets,
            (0..list.len() as i64).collect::<Vec<_>>(),
            "partition {p}"
        );
    }
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    let read = read_back(&bootstrap, "t", 2, RECORDS);
    assert_eq!(read.len(), RECORDS, "{}", mock.name());
    for (p, offset, key, value, headers) in read {
        let i = written[&p][offset as usize].1;
        assert_eq!(key, Some(format!("k{}", i % 17).into_bytes()));
        assert_eq!(value, Some(format!("v{i}").into_bytes()));
        assert_eq!(headers, vec![("i".to_owned(), i.to_string().into_bytes())]);
    }
}

/// The connections a producer opens: one bootstrap connection for the
/// first Metadata (and InitProducerId), one per leader with records, and
/// the bootstrap connection retired once leader connections carry
/// metadata. Nothing before the first `send`.
async fn a_producer_connects_to_the_leaders_it_writes_to<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    let producer = producer(&bootstrap, &[]);
    let events = producer.connection_events();
    assert!(producer.connections().is_empty());
    // Partition 0 is led by broker 1, partition 1 by broker 3.
    for p in 0..2 {
        let d = producer
            .send(ProducerRecord::new("t").partition(p).value("x"))
            .await
            .unwrap();
        timeout(WAIT, d).await.unwrap().unwrap();
    }
    let purposes: Vec<(Option<i32>, Purpose)> = producer
        .connections()
        .iter()
        .map(|c| (c.broker, c.purpose))
        .collect();
    let leaders: Vec<i32> = purposes
        .iter()
        .filter(|(_, p)| *p == Purpose::Leader)
        .filter_map(|(b, _)| *b)
        .collect();
    assert_eq!(leaders, [1, 3], "{purposes:?} ({})", mock.name());
    assert!(
        purposes.len() <= 3,
        "a bootstrap connection at most besides the leaders: {purposes:?}"
    );
    // Broker 2 leads nothing: no InitProducerId or Produce went there
    // unless it was the bootstrap broker.
    let produce_brokers: Vec<i32> = mock
        .requests()
        .into_iter()
        .filter(|(_, key)| *key == ApiKey::Produce.code())
        .map(|(b, _)| b)
        .collect();
    assert!(produce_brokers.iter().all(|b| *b == 1 || *b == 3));
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    drop(events);
}

/// A leader that refuses Produce a few times with an error a retry cures
/// (NOT_LEADER_OR_FOLLOWER) costs nothing: every record arrives once, in
/// order, since retries keep their sequence numbers.
async fn retried_batches_arrive_once_in_order<C: TestCluster>() {
    const RECORDS: usize = 200;
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    let producer = producer(
        &bootstrap,
        &[("linger.ms", "1"), ("retry.backoff.ms", "10")],
    );
    // Prime the connections and the producer id.
    let first = producer
        .send(ProducerRecord::new("t").partition(0).value("v0"))
        .await
        .unwrap();
    timeout(WAIT, first).await.unwrap().unwrap();
    mock.push_errors(ApiKey::Produce, ErrorCode::NotLeaderOrFollower, 3);
    let mut deliveries = Vec::new();
    for i in 1..RECORDS {
        let record = ProducerRecord::new("t").partition(0).value(format!("v{i}"));
        deliveries.push(producer.send(record).await.unwrap());
    }
    for d in deliveries {
        timeout(WAIT, d).await.expect("delivered in time").unwrap();
    }
    // What the producer says it did: every record delivered, the refused
    // attempts counted as errors and their batches as retries.
    let metrics = producer.metrics();
    let p0 = metrics
        .partitions
        .iter()
        .find(|p| p.topic == "t" && p.partition == 0)
        .expect("partition 0 in the metrics");
    assert_eq!((p0.records, p0.records_failed), (RECORDS as u64, 0));
    assert_eq!(metrics.records_delivered, RECORDS as u64);
    assert!(
        p0.errors >= 3 && p0.retries >= 3,
        "{p0:?} ({})",
        mock.name()
    );
    assert!(p0.batches > p0.retries && p0.bytes > 0);
    assert!(p0.request_latency_ms.is_some() && p0.queue_time_ms.is_some());
    let json = serde_json::to_value(&metrics).unwrap();
    assert_eq!(json["records_delivered"], RECORDS as u64);
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    // The refusals were met: the first Produce, three refused, the retries.
    let produces = mock
        .requests()
        .into_iter()
        .filter(|(_, key)| *key == ApiKey::Produce.code())
        .count();
    assert!(
        produces >= 5,
        "{produces} Produce requests ({})",
        mock.name()
    );
    let read = read_back(&bootstrap, "t", 2, RECORDS);
    let values: Vec<Vec<u8>> = read.into_iter().filter_map(|r| r.3).collect();
    let expected: Vec<Vec<u8>> = (0..RECORDS).map(|i| format!("v{i}").into_bytes()).collect();
    assert_eq!(values, expected, "{}", mock.name());
}

/// A topic the cluster refuses (here: not authorised) is named by `send`
/// at once, with its error code, not after `max.block.ms`.
async fn a_refused_topic_is_named_by_send<C: TestCluster>() {
    let mock: C = standard();
    mock.set_metadata_error("t", Some(ErrorCode::TopicAuthorizationFailed));
    let producer = producer(&mock.bootstrap(), &[("max.block.ms", "20000")]);
    let outcome = timeout(WAIT, producer.send(ProducerRecord::new("t").value("x")))
        .await
        .expect("send returns before max.block.ms");
    match outcome {
        Err(Error::Topic { topic, code }) => {
            assert_eq!(
                (topic.as_str(), code),
                ("t", ErrorCode::TopicAuthorizationFailed)
            );
        }
        other => panic!("{other:?} ({})", mock.name()),
    }
}

/// A topic that does not exist, with auto-creation off (the producer's
/// `allow.auto.create.topics=false`: librdkafka's mock, like Kafka, creates
/// a topic a Metadata request allows it to): `send` gives up well before
/// `max.block.ms` (60 s), once the Metadata answers said so for
/// `topic.metadata.propagation.max.ms` (5 s, not before), with an error
/// naming the topic and UNKNOWN_TOPIC_OR_PARTITION that is not retriable
/// (the record is not kept); a `warn` line names the topic; `flush` has
/// nothing of it to wait for; `partitions_for` gives up on it too. Once
/// the topic is created, a later `send` is delivered.
async fn an_unknown_topic_is_named_by_send_within_seconds<C: TestCluster>() {
    common::peers::logs::capture();
    let mock: C = standard();
    // One name per cluster: the two run side by side and share the log.
    let topic = format!("absent-{}", mock.name().split(' ').next().unwrap());
    let producer = producer(
        &mock.bootstrap(),
        &[("allow.auto.create.topics", "false"), ("linger.ms", "0")],
    );
    common::producing::unknown_topic_named_by_send(&producer, &topic).await;
    let named = common::peers::logs::find(log::Level::Warn, &format!("topic {topic:?}"));
    assert!(!named.is_empty(), "a warn line names {topic}");
    timeout(WAIT, producer.flush(WAIT)).await.unwrap().unwrap();
    // partitions_for gives up under the same rule.
    match timeout(WAIT, producer.partitions_for(&topic))
        .await
        .unwrap()
    {
        Err(Error::Topic { topic: t, code }) => {
            assert_eq!(
                (t, code),
                (topic.clone(), ErrorCode::UnknownTopicOrPartition)
            )
        }
        other => panic!("{other:?} ({})", mock.name()),
    }

    // Created now: a later send goes through.
    mock.create_topic(&topic, &[1]);
    let written = common::producing::send_once_created(&producer, &topic).await;
    assert_eq!((&*written.topic, written.partition), (topic.as_str(), 0));
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
}

/// A step that undoes a disruption.
type Restore<'a, C> = Box<dyn FnOnce(&C) + 'a>;

/// Sends 400 records to partition 0 of topic "t", applying `disrupt` to
/// the cluster once the first `at` were delivered; then, once a
/// connection of the producer failed or closed (when `restore` is given),
/// applies `restore`; and waits for every delivery. librdkafka's consumer
/// must then read exactly those values, in order: nothing lost, nothing
/// written twice.
async fn exactly_once_in_order_through<C: TestCluster>(
    mock: &C,
    at: usize,
    disrupt: impl FnOnce(&C),
    restore: Option<Restore<'_, C>>,
) {
    const RECORDS: usize = 400;
    let bootstrap = mock.bootstrap();
    let producer = producer(
        &bootstrap,
        &[
            ("linger.ms", "1"),
            ("batch.size", "2000"),
            ("retry.backoff.ms", "20"),
            ("retry.backoff.max.ms", "200"),
            ("request.timeout.ms", "2000"),
        ],
    );
    let mut events = producer.connection_events();
    let mut deliveries = Vec::new();
    for i in 0..at {
        let record = ProducerRecord::new("t").partition(0).value(format!("v{i}"));
        deliveries.push(timeout(WAIT, producer.send(record)).await.unwrap().unwrap());
    }
    for d in deliveries.drain(..) {
        timeout(WAIT, d).await.expect("delivered in time").unwrap();
    }
    disrupt(mock);
    for i in at..RECORDS {
        let record = ProducerRecord::new("t").partition(0).value(format!("v{i}"));
        deliveries.push(timeout(WAIT, producer.send(record)).await.unwrap().unwrap());
    }
    if let Some(restore) = restore {
        let met = timeout(WAIT, async {
            while let Some(e) = events.next().await {
                if matches!(
                    e.kind,
                    EventKind::ConnectFailed { .. } | EventKind::Closed { .. }
                ) {
                    return;
                }
            }
        })
        .await;
        assert!(
            met.is_some(),
            "the producer met the disruption ({})",
            mock.name()
        );
        restore(mock);
    }
    for (n, d) in deliveries.into_iter().enumerate() {
        let outcome = timeout(WAIT, d).await.expect("delivered in time");
        assert!(
            outcome.is_ok(),
            "record {}: {outcome:?} ({})",
            at + n,
            mock.name()
        );
    }
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    let read = read_back(&bootstrap, "t", 2, RECORDS);
    let values: Vec<String> = read
        .into_iter()
        .map(|r| String::from_utf8(r.3.unwrap()).unwrap())
        .collect();
    let expected: Vec<String> = (0..RECORDS).map(|i| format!("v{i}")).collect();
    assert_eq!(values, expected, "{}", mock.name());
}

/// The leader of the partition moves to another broker while records are
/// in flight: the old leader refuses them (NOT_LEADER_OR_FOLLOWER), the
/// metadata is refreshed and they go to the new leader, in order, once.
async fn records_follow_a_leader_that_moves<C: TestCluster>() {
    let mock: C = standard();
    exactly_once_in_order_through(&mock, 100, |m| m.set_leader("t", 0, 2), None).await;
}

/// The leader's broker goes down while records are sent, and comes back
/// once the producer has lost its connection: the records wait (retrying
/// with backoff) and arrive once, in order.
async fn records_wait_out_a_broker_restart<C: TestCluster>() {
    let mock: C = standard();
    exactly_once_in_order_through(
        &mock,
        100,
        |m| m.broker_down(1),
        Some(Box::new(|m: &C| m.broker_up(1))),
    )
    .await;
}

/// Answers lost with their connection (the broker wrote the records, the
/// client never heard): the producer sends the same batches again with the
/// same sequence numbers, and the broker keeps one copy of each.
#[test]
fn lost_answers_write_nothing_twice() {
    crate::common::block_on(async {
        use lazykafka::mock::{LostAnswer, MockCluster};
        let mock: MockCluster = standard();
        exactly_once_in_order_through(
            &mock,
            50,
            |m| {
                m.push_lost_answers(
                    ApiKey::Produce,
                    &[LostAnswer::Close, LostAnswer::Unanswered, LostAnswer::Close],
                )
            },
            None,
        )
        .await;
        assert_eq!(
            mock.pending_lost_answers(ApiKey::Produce),
            0,
            "every loss was met"
        );
    })
}

on_both_mocks!(
    keyed_records_arrive_in_order_where_murmur2_puts_them,
    a_producer_connects_to_the_leaders_it_writes_to,
    retried_batches_arrive_once_in_order,
    a_refused_topic_is_named_by_send,
    an_unknown_topic_is_named_by_send_within_seconds,
    records_follow_a_leader_that_moves,
    records_wait_out_a_broker_restart,
    keys_land_where_librdkafka_puts_them,
    keys_land_where_librdkafkas_default_puts_them,
    records_fail_after_the_delivery_timeout,
    clones_share_one_producer,
    a_batch_refused_for_good_leaves_no_gap,
    a_batch_too_large_is_split_and_sent_again,
    retries_bound_the_sends_of_a_batch,
    a_closed_producer_still_reports,
    close_delivers_what_is_queued,
    statistics_come_every_interval_and_end_with_the_producer,
    an_idle_producer_asks_nothing_and_holds_no_socket,
    every_codec_is_read_back_by_librdkafka,
    delivery_reports_name_each_reported_record_once_in_order,
    a_failed_delivery_is_reported
);

// librdkafka 2.16's mock cluster (the newest), which checks idempotent
// sequences too.
on_mock216!(
    keyed_records_arrive_in_order_where_murmur2_puts_them,
    a_producer_connects_to_the_leaders_it_writes_to,
    retried_batches_arrive_once_in_order,
    records_follow_a_leader_that_moves,
    a_batch_refused_for_good_leaves_no_gap,
    a_batch_too_large_is_split_and_sent_again,
    every_codec_is_read_back_by_librdkafka
);

/// A bootstrap list of 1,000 addresses (992 closed loopback ports and the
/// 8 brokers of a mock, shuffled): the producer opens one bootstrap
/// connection, then one to each of the two leaders of the partitions it
/// writes to, and none to the 6 brokers that lead nothing.
#[test]
fn a_thousand_bootstrap_addresses_open_one_bootstrap_connection() {
    crate::common::block_on(async {
        use lazykafka::mock::MockCluster;
        let mock = MockCluster::new(8).unwrap();
        mock.create_topic_with_leaders("t", &[2, 7]).unwrap();
        let closed: Vec<common::ClosedPort> = (0..992).map(|_| common::closed_port()).collect();
        let mut addrs: Vec<String> = closed.iter().map(|c| c.addr.clone()).collect();
        addrs.extend(mock.bootstrap_servers().split(',').map(str::to_owned));
        // A fixed shuffle (xorshift), so that the mock's brokers are spread.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for i in (1..addrs.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            addrs.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let producer = producer(&addrs.join(","), &[]);
        let mut events = producer.connection_events();
        let mut deliveries = Vec::new();
        for i in 0..1000 {
            let record = ProducerRecord::new("t").key(format!("k{i}")).value("x");
            deliveries.push(timeout(WAIT, producer.send(record)).await.unwrap().unwrap());
        }
        for d in deliveries {
            timeout(WAIT, d).await.unwrap().unwrap();
        }
        timeout(WAIT, producer.close_timeout(WAIT))
            .await
            .unwrap()
            .unwrap();
        let mut opened = BTreeMap::new();
        while let Some(e) = events.next().await {
            if e.kind == EventKind::Opened {
                *opened.entry(e.addr.clone()).or_insert(0) += 1;
            }
        }
        let brokers: Vec<i32> = opened
            .keys()
            .filter_map(|a| mock.broker_at(a.parse().unwrap()))
            .collect();
        assert_eq!(
            opened.len(),
            brokers.len(),
            "a closed port opened? {opened:?}"
        );
        assert!(
            brokers.len() <= 3 && brokers.contains(&2) && brokers.contains(&7),
            "brokers connected: {brokers:?}"
        );
        // Mock-side: no broker besides the bootstrap one and the two leaders
        // saw a connection.
        let seen: std::collections::BTreeSet<i32> =
            mock.requests().iter().map(|r| r.broker).collect();
        assert!(seen.len() <= 3, "brokers asked anything: {seen:?}");
    })
}

/// The tansu broker (a Kafka implementation nobody here wrote): records
/// produced (idempotent, acks=all) are read back by librdkafka's consumer.
#[test]
fn tansu_keeps_what_the_producer_writes() {
    crate::common::block_on(async {
        let Some(addr) = common::tansu_addr("tansu_keeps_what_the_producer_writes") else {
            return;
        };
        let topic = format!(
            "lazykafka-producer-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
        );
        let producer = producer(&addr, &[]);
        let mut deliveries = Vec::new();
        for i in 0..100 {
            let record = ProducerRecord::new(topic.clone())
                .partition(0)
                .key(format!("k{i}"))
                .value(format!("v{i}"));
            deliveries.push(timeout(WAIT, producer.send(record)).await.unwrap().unwrap());
        }
        for (i, d) in deliveries.into_iter().enumerate() {
            let meta = timeout(WAIT, d).await.unwrap().unwrap();
            assert_eq!(meta.offset, i as i64);
        }
        timeout(WAIT, producer.close_timeout(WAIT))
            .await
            .unwrap()
            .unwrap();
        let partitions = {
            let reader: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &addr)
                .create()
                .unwrap();
            let md = reader.fetch_metadata(Some(&topic), WAIT).unwrap();
            md.topics()[0].partitions().len() as i32
        };
        // tansu 0.6.0 answers ListOffsets (latest) with the number of batches
        // in the partition, not the offset after the last record (librdkafka's
        // producer meets the same): the records are read by count instead.
        let read = read_back_to(&addr, &topic, partitions, 100, false);
        let offsets: Vec<i64> = read.iter().map(|r| r.1).collect();
        assert_eq!(offsets, (0..100).collect::<Vec<i64>>());
        let values: Vec<Vec<u8>> = read.into_iter().filter_map(|r| r.3).collect();
        let expected: Vec<Vec<u8>> = (0..100).map(|i| format!("v{i}").into_bytes()).collect();
        assert_eq!(values, expected);
    })
}

/// librdkafka's producer (`partitioner=murmur2_random`, the Java client's
/// placement) and this one write the same keys to one topic: each key's
/// records are all on one partition, the same for both.
async fn keys_land_where_librdkafka_puts_them<C: TestCluster>() {
    same_keys_same_partitions::<C>(Some("murmur2_random"), &[]).await;
}

/// A producer moving from librdkafka keeps its keys' partitions: librdkafka
/// with its default partitioner (`consistent_random`, nothing set) and
/// ours with `partitioner=consistent_random` put each key on the same
/// partition.
async fn keys_land_where_librdkafkas_default_puts_them<C: TestCluster>() {
    same_keys_same_partitions::<C>(None, &[("partitioner", "consistent_random")]).await;
}

/// librdkafka's producer (with `rd_partitioner` when given) and ours (with
/// `properties`) write the same 200 keys to one topic: each key's records
/// are all on one partition, the same for both.
async fn same_keys_same_partitions<C: TestCluster>(
    rd_partitioner: Option<&str>,
    properties: &[(&str, &str)],
) {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    let mut rd_config = ClientConfig::new();
    rd_config.set("bootstrap.servers", &bootstrap);
    if let Some(partitioner) = rd_partitioner {
        rd_config.set("partitioner", partitioner);
    }
    let rd: BaseProducer = rd_config.create().unwrap();
    for i in 0..200 {
        let key = format!("key-{i}");
        common::peers::send(&rd, BaseRecord::to("t").key(&key).payload("rd"));
    }
    rd.flush(WAIT).unwrap();
    let ours = producer(&bootstrap, properties);
    let mut deliveries = Vec::new();
    for i in 0..200 {
        let record = ProducerRecord::new("t")
            .key(format!("key-{i}"))
            .value("ours");
        deliveries.push(timeout(WAIT, ours.send(record)).await.unwrap().unwrap());
    }
    for d in deliveries {
        timeout(WAIT, d).await.unwrap().unwrap();
    }
    timeout(WAIT, ours.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    let mut placed: BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, i32>> = BTreeMap::new();
    for (p, _, key, value, _) in read_back(&bootstrap, "t", 2, 400) {
        placed
            .entry(key.unwrap())
            .or_default()
            .insert(value.unwrap(), p);
    }
    assert_eq!(placed.len(), 200);
    for (key, by) in placed {
        assert_eq!(by.len(), 2, "{key:?}: {by:?}");
        assert_eq!(
            by[&b"rd"[..]],
            by[&b"ours"[..]],
            "{key:?} ({})",
            mock.name()
        );
    }
}

/// A producer whose records give up after 3 s (`delivery.timeout.ms`),
/// each sent at once.
fn short_lived_producer(bootstrap: &str) -> Producer {
    producer(
        bootstrap,
        &[
            ("delivery.timeout.ms", "3000"),
            ("request.timeout.ms", "1000"),
            ("linger.ms", "0"),
        ],
    )
}

/// Records for a partition whose leader stays down fail after
/// `delivery.timeout.ms`, each naming its topic, partition and the last
/// failure; nothing waits forever.
async fn records_fail_after_the_delivery_timeout<C: TestCluster>() {
    let mock: C = standard();
    let producer = short_lived_producer(&mock.bootstrap());
    // Connections and the producer id first.
    let first = producer
        .send(ProducerRecord::new("t").partition(0).value("first"))
        .await
        .unwrap();
    timeout(WAIT, first).await.unwrap().unwrap();
    mock.broker_down(1);
    let started = Instant::now();
    let delivery = producer
        .send(ProducerRecord::new("t").partition(0).value("lost"))
        .await
        .unwrap();
    let outcome = timeout(WAIT, delivery).await.expect("an outcome in time");
    match outcome {
        Err(Error::Delivery(lazykafka::producer::DeliveryError::TimedOut {
            topic,
            partition,
            last,
            ..
        })) => {
            assert_eq!((topic.as_str(), partition), ("t", 0));
            // What held it back is named (a refused connection, a leader
            // the metadata no longer lists).
            assert!(last.is_some(), "{}", mock.name());
            assert!(
                started.elapsed() >= Duration::from_secs(2),
                "{:?}",
                started.elapsed()
            );
        }
        other => panic!("{other:?} ({})", mock.name()),
    }
    mock.broker_up(1);
}

/// One producer cloned into four tasks, each sending its own records: all
/// arrive, each task's in its order.
async fn clones_share_one_producer<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    let producer = producer(&bootstrap, &[]);
    let tasks: Vec<_> = (0..4)
        .map(|t| {
            let producer = producer.clone();
            common::spawn(async move {
                let mut deliveries = Vec::new();
                for i in 0..50 {
                    let record = ProducerRecord::new("t")
                        .partition(t % 2)
                        .key(format!("task-{t}"))
                        .value(format!("{i}"));
                    deliveries.push(producer.send(record).await.unwrap());
                }
                let mut offsets = Vec::new();
                for d in deliveries {
                    offsets.push(d.await.unwrap().offset);
                }
                offsets
            })
        })
        .collect();
    for task in tasks {
        let offsets = timeout(WAIT, task).await.expect("in time");
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
    }
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    let read = read_back(&bootstrap, "t", 2, 200);
    for t in 0..4 {
        let key = format!("task-{t}").into_bytes();
        let values: Vec<Vec<u8>> = read
            .iter()
            .filter(|r| r.2.as_ref() == Some(&key))
            .filter_map(|r| r.3.clone())
            .collect();
        let expected: Vec<Vec<u8>> = (0..50).map(|i| format!("{i}").into_bytes()).collect();
        assert_eq!(values, expected, "task {t} ({})", mock.name());
    }
}

/// Queues `v{i}` for partition 0 of "t".
async fn send_to_0(producer: &Producer, i: usize) -> lazykafka::DeliveryFuture {
    let record = ProducerRecord::new("t").partition(0).value(format!("v{i}"));
    producer.send(record).await.unwrap()
}

/// A batch refused for good (INVALID_RECORD) fails its records, named;
/// the records after it are not refused as out of sequence because of the
/// gap it left: the producer takes a new epoch (KIP-360) and they arrive,
/// once, in order.
async fn a_batch_refused_for_good_leaves_no_gap<C: TestCluster>() {
    common::peers::logs::capture();
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    let producer = producer(&bootstrap, &[("linger.ms", "1")]);
    let send = |i: usize| send_to_0(&producer, i);
    for i in 0..20 {
        timeout(WAIT, send(i).await).await.unwrap().unwrap();
    }
    mock.push_errors(ApiKey::Produce, ErrorCode::InvalidRecord, 1);
    let refused = timeout(WAIT, send(20).await).await.unwrap();
    match refused {
        Err(Error::Delivery(lazykafka::producer::DeliveryError::Broker {
            topic,
            partition,
            code,
            ..
        })) => assert_eq!(
            (topic.as_str(), partition, code),
            ("t", 0, ErrorCode::InvalidRecord)
        ),
        other => panic!("{other:?} ({})", mock.name()),
    }
    let mut later = Vec::new();
    for i in 21..60 {
        later.push(send(i).await);
    }
    for d in later {
        timeout(WAIT, d).await.expect("in time").unwrap();
    }
    // The broker lost the producer's state: UNKNOWN_PRODUCER_ID, a new
    // epoch, and the batch goes again.
    mock.push_errors(ApiKey::Produce, ErrorCode::UnknownProducerId, 1);
    let mut last = Vec::new();
    for i in 60..80 {
        last.push(send(i).await);
    }
    for d in last {
        timeout(WAIT, d).await.expect("in time").unwrap();
    }
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    let values: Vec<String> = read_back(&bootstrap, "t", 2, 79)
        .into_iter()
        .map(|r| String::from_utf8(r.3.unwrap()).unwrap())
        .collect();
    // A new epoch (or id) each time: the first InitProducerId, then at
    // least two more. librdkafka's mock refuses a bump sent to another
    // broker than the one that gave the id (INVALID_PRODUCER_ID_MAPPING);
    // the producer then asks for a new id, as Kafka gives an idempotent
    // producer anyway: two requests per bump there.
    let inits = mock
        .requests()
        .into_iter()
        .filter(|(_, key)| *key == ApiKey::InitProducerId.code())
        .count();
    assert!((3..=5).contains(&inits), "{inits} ({})", mock.name());
    let expected: Vec<String> = (0..80)
        .filter(|i| *i != 20)
        .map(|i| format!("v{i}"))
        .collect();
    assert_eq!(values, expected, "{}", mock.name());
}

/// A batch the broker finds too large (MESSAGE_TOO_LARGE, here injected
/// twice) is split in two and sent again, and a half refused again is split
/// again, as the Java client does: every record arrives once, in order,
/// each future with its own offset, under the same sequence numbers (which
/// librdkafka's mock checks). A single record refused as too large fails,
/// naming the code, and the records after it arrive.
async fn a_batch_too_large_is_split_and_sent_again<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    let producer = producer(&bootstrap, &[("linger.ms", "200")]);
    let send = |i: usize| send_to_0(&producer, i);
    timeout(WAIT, send(0).await).await.unwrap().unwrap();
    mock.push_errors(ApiKey::Produce, ErrorCode::MessageTooLarge, 2);
    let mut deliveries = Vec::new();
    for i in 1..=40 {
        deliveries.push(send(i).await);
    }
    for (i, d) in deliveries.into_iter().enumerate() {
        let written = timeout(WAIT, d).await.expect("in time");
        let written = written.unwrap_or_else(|e| panic!("record {}: {e} ({})", i + 1, mock.name()));
        assert_eq!(written.offset, i as i64 + 1, "{}", mock.name());
    }
    let metrics = producer.metrics();
    let p0 = metrics
        .partitions
        .iter()
        .find(|p| p.topic == "t" && p.partition == 0)
        .expect("partition 0 in the metrics");
    assert!(p0.splits >= 2, "{p0:?} ({})", mock.name());
    assert_eq!((p0.records, p0.records_failed), (41, 0));

    // One record alone cannot be split: it fails, named.
    mock.push_errors(ApiKey::Produce, ErrorCode::MessageTooLarge, 1);
    match timeout(WAIT, send(41).await).await.unwrap() {
        Err(Error::Delivery(lazykafka::producer::DeliveryError::Broker { code, .. })) => {
            assert_eq!(code, ErrorCode::MessageTooLarge)
        }
        other => panic!("{other:?} ({})", mock.name()),
    }
    let mut later = Vec::new();
    for i in 42..50 {
        later.push(send(i).await);
    }
    for d in later {
        timeout(WAIT, d).await.expect("in time").unwrap();
    }
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    let values: Vec<String> = read_back(&bootstrap, "t", 2, 49)
        .into_iter()
        .map(|r| String::from_utf8(r.3.unwrap()).unwrap())
        .collect();
    let expected: Vec<String> = (0..50)
        .filter(|i| *i != 41)
        .map(|i| format!("v{i}"))
        .collect();
    assert_eq!(values, expected, "{}", mock.name());
}

/// `retries` bounds the sends of a batch as the Java client's does: sent
/// once and retried `retries` times. With `retries=1` and a leader that
/// refuses twice (NOT_ENOUGH_REPLICAS, which a retry could cure), the
/// record is sent twice and fails naming the refusal; with the third
/// refusal never met, the next record goes through.
async fn retries_bound_the_sends_of_a_batch<C: TestCluster>() {
    let mock: C = standard();
    let producer = producer(
        &mock.bootstrap(),
        &[
            ("retries", "1"),
            ("enable.idempotence", "false"),
            ("linger.ms", "0"),
            ("retry.backoff.ms", "10"),
        ],
    );
    timeout(WAIT, send_to_0(&producer, 0).await)
        .await
        .unwrap()
        .unwrap();
    let produces = || {
        mock.requests()
            .into_iter()
            .filter(|(_, key)| *key == ApiKey::Produce.code())
            .count()
    };
    let before = produces();
    mock.push_errors(ApiKey::Produce, ErrorCode::NotEnoughReplicas, 2);
    match timeout(WAIT, send_to_0(&producer, 1).await).await.unwrap() {
        Err(Error::Delivery(lazykafka::producer::DeliveryError::TimedOut {
            topic,
            partition,
            last,
            ..
        })) => {
            assert_eq!((topic.as_str(), partition), ("t", 0));
            let last = last.expect("the last failure is named");
            assert!(last.contains("NOT_ENOUGH_REPLICAS"), "{last}");
        }
        other => panic!("{other:?} ({})", mock.name()),
    }
    assert_eq!(
        produces() - before,
        2,
        "sent once, retried once ({})",
        mock.name()
    );
    timeout(WAIT, send_to_0(&producer, 2).await)
        .await
        .unwrap()
        .expect("the next record goes through");
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
}

/// `close()` (no timeout: it waits `delivery.timeout.ms`, as the Java
/// producer's `close()` waits) delivers the records still queued, held
/// back by a long `linger.ms`, before it closes: every delivery future
/// then says where its record was written, and librdkafka reads them all.
async fn close_delivers_what_is_queued<C: TestCluster>() {
    let mock: C = standard();
    let producer = producer(&mock.bootstrap(), &[("linger.ms", "60000")]);
    let mut deliveries = Vec::new();
    for i in 0..10 {
        deliveries.push(send_to_0(&producer, i).await);
    }
    timeout(WAIT, producer.close())
        .await
        .expect("close returns once the records are delivered")
        .unwrap();
    for (i, delivery) in deliveries.into_iter().enumerate() {
        let meta = timeout(WAIT, delivery).await.unwrap().unwrap();
        assert_eq!(
            (meta.partition, meta.offset),
            (0, i as i64),
            "{}",
            mock.name()
        );
    }
    assert!(producer.connections().is_empty());
    assert_eq!(read_back_to(&mock.bootstrap(), "t", 2, 10, false).len(), 10);
}

/// After `close`, the producer still answers what it did: its metrics (the
/// records delivered), no connection, and `send` refused as closed.
async fn a_closed_producer_still_reports<C: TestCluster>() {
    let mock: C = standard();
    let producer = producer(&mock.bootstrap(), &[("linger.ms", "0")]);
    for i in 0..3 {
        timeout(WAIT, send_to_0(&producer, i).await)
            .await
            .unwrap()
            .unwrap();
    }
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    assert!(producer.connections().is_empty());
    assert_eq!(producer.metrics().records_delivered, 3, "{}", mock.name());
    assert!(!producer.broker_counters().is_empty());
    let refused = producer.send(ProducerRecord::new("t").value("late")).await;
    assert!(matches!(refused, Err(Error::Closed)), "{refused:?}");
}

/// `send_reported`: each record reported once (and only those; the
/// records of `send` mixed in are not), with its token, in send order
/// within its partition; a record refused by `send_reported` itself is not
/// reported; the stream ends once the producer is closed and every
/// record is reported. Records are read back by librdkafka.
async fn delivery_reports_name_each_reported_record_once_in_order<C: TestCluster>() {
    const RECORDS: u64 = 3000;
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    let producer = producer(&bootstrap, &[("linger.ms", "5")]);
    let mut reports = producer.delivery_reports();
    let mut futures = Vec::new();
    for i in 0..RECORDS {
        let record = ProducerRecord::new("t")
            .partition((i % 2) as i32)
            .value(format!("{i}"));
        if i % 10 == 0 {
            futures.push(producer.send(record).await.unwrap());
        } else {
            producer.send_reported(record, i).await.unwrap();
        }
    }
    let refused = producer
        .send_reported(ProducerRecord::new("t").partition(99).value("x"), RECORDS)
        .await;
    assert!(matches!(refused, Err(Error::Partitioner(_))), "{refused:?}");
    // The first reports come before `close`.
    let first = timeout(WAIT, reports.next())
        .await
        .expect("a report in time")
        .expect("the stream goes on");
    assert!(first.outcome.is_ok(), "{first:?}");
    for f in futures {
        timeout(WAIT, f).await.unwrap().unwrap();
    }
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    let rest: Vec<_> = timeout(WAIT, reports.collect::<Vec<_>>())
        .await
        .expect("the stream ends after close");
    let mut by_partition: BTreeMap<i32, Vec<(u64, i64)>> = BTreeMap::new();
    for r in std::iter::once(first).chain(rest) {
        let md = r
            .outcome
            .unwrap_or_else(|e| panic!("token {}: {e}", r.token));
        assert_eq!((&*md.topic, md.partition), ("t", (r.token % 2) as i32));
        by_partition
            .entry(md.partition)
            .or_default()
            .push((r.token, md.offset));
    }
    let mut tokens: Vec<u64> = by_partition.values().flatten().map(|(t, _)| *t).collect();
    tokens.sort_unstable();
    let expected: Vec<u64> = (0..RECORDS).filter(|i| i % 10 != 0).collect();
    assert_eq!(
        tokens,
        expected,
        "each reported record once ({})",
        mock.name()
    );
    for (p, reported) in &by_partition {
        // In send order within the partition: tokens and offsets rise
        // together, and arrive in that order.
        assert!(
            reported
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1),
            "partition {p}: {reported:?}"
        );
    }
    let read = read_back(&bootstrap, "t", 2, RECORDS as usize);
    for (p, reported) in &by_partition {
        for (token, offset) in reported {
            let r = read
                .iter()
                .find(|r| r.0 == *p && r.1 == *offset)
                .unwrap_or_else(|| panic!("{p}@{offset} not read back"));
            assert_eq!(r.3.as_deref(), Some(token.to_string().as_bytes()));
        }
    }
}

/// A record that cannot be delivered (its leader down past
/// `delivery.timeout.ms`) is reported with its error, naming the
/// partition; the stream then ends with the producer.
async fn a_failed_delivery_is_reported<C: TestCluster>() {
    let mock: C = standard();
    let producer = short_lived_producer(&mock.bootstrap());
    let mut reports = producer.delivery_reports();
    producer
        .send_reported(ProducerRecord::new("t").partition(0).value("first"), 1)
        .await
        .unwrap();
    let first = timeout(WAIT, reports.next()).await.unwrap().unwrap();
    assert_eq!(first.token, 1);
    assert!(first.outcome.is_ok(), "{first:?}");
    mock.broker_down(1);
    producer
        .send_reported(ProducerRecord::new("t").partition(0).value("lost"), 2)
        .await
        .unwrap();
    let lost = timeout(WAIT, reports.next()).await.unwrap().unwrap();
    assert_eq!(lost.token, 2);
    match lost.outcome {
        Err(lazykafka::producer::DeliveryError::TimedOut {
            topic, partition, ..
        }) => assert_eq!((topic.as_str(), partition), ("t", 0)),
        other => panic!("{other:?} ({})", mock.name()),
    }
    mock.broker_up(1);
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    assert!(timeout(WAIT, reports.next()).await.unwrap().is_none());
}

/// Statistics every interval (`statistics.interval.ms`), before the first
/// `send` too, with no connection opened for them: each item comes at its
/// beat of the interval (never before), a stream not polled for several
/// intervals yields one item and keeps the beat from there (no burst for
/// the intervals missed), an item shows what the producer did (as
/// serde's JSON), and the stream ends with the producer.
async fn statistics_come_every_interval_and_end_with_the_producer<C: TestCluster>() {
    const INTERVAL: Duration = Duration::from_millis(100);
    let mock: C = standard();
    let producer = producer(&mock.bootstrap(), &[("statistics.interval.ms", "100")]);
    let asked = Instant::now();
    let mut statistics = producer.statistics().unwrap();
    for beat in 1..=3 {
        let idle = timeout(WAIT, statistics.next())
            .await
            .expect("statistics within the deadline")
            .expect("the producer is open");
        assert!(
            asked.elapsed() >= INTERVAL * beat,
            "item {beat} before its beat"
        );
        assert_eq!(idle.records_delivered, 0);
        assert!(idle.connections.is_empty(), "{:?}", idle.connections);
    }
    assert!(producer.connections().is_empty(), "statistics open nothing");

    let delivery = timeout(WAIT, send_to_0(&producer, 0).await).await.unwrap();
    delivery.unwrap();
    // Not polled for five intervals: one item, then the next a whole
    // interval later, not one per interval missed.
    common::sleep(INTERVAL * 5).await;
    let resumed = Instant::now();
    let first = timeout(WAIT, statistics.next()).await.unwrap().unwrap();
    let second = timeout(WAIT, statistics.next()).await.unwrap().unwrap();
    assert!(
        resumed.elapsed() >= INTERVAL,
        "two items within one interval after a pause"
    );
    for m in [first, second] {
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["records_delivered"], 1, "{json}");
        assert_eq!(json["partitions"][0]["topic"], "t", "{json}");
    }

    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    let ended = timeout(WAIT, statistics.next()).await;
    assert!(
        matches!(ended, Some(None)),
        "the stream ends with the producer ({})",
        mock.name()
    );
}

/// `acks=0` to `topic` at `bootstrap`: 100 records, each delivered as soon
/// as its request is written (offset -1, no answer waited for), all read
/// back in order by librdkafka's consumer.
async fn acks_0_writes_without_answers(bootstrap: &str, topic: &str) {
    let producer = producer(bootstrap, &[("acks", "0"), ("linger.ms", "1")]);
    assert!(!producer.config().enable_idempotence());
    let mut deliveries = Vec::new();
    for i in 0..100 {
        let record = ProducerRecord::new(topic)
            .partition(0)
            .value(format!("v{i}"));
        deliveries.push(timeout(WAIT, producer.send(record)).await.unwrap().unwrap());
    }
    for d in deliveries {
        let meta = timeout(WAIT, d).await.expect("in time").unwrap();
        assert_eq!((meta.partition, meta.offset), (0, -1));
    }
    // Nothing waits for an answer, so nothing fails for a lack of one.
    assert_eq!(producer.metrics().records_failed, 0);
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
    let read = read_back_to(bootstrap, topic, 1, 100, false);
    let values: Vec<Vec<u8>> = read.into_iter().filter_map(|r| r.3).collect();
    let expected: Vec<Vec<u8>> = (0..100).map(|i| format!("v{i}").into_bytes()).collect();
    assert_eq!(values, expected);
}

/// `acks=0` on `lazykafka::mock`, which answers nothing to such a Produce
/// as Kafka does. (librdkafka's mock cluster answers it all the same,
/// unlike Kafka, so it is not a peer for this.)
#[test]
fn acks_0_on_lazykafka_mock() {
    crate::common::block_on(async {
        let mock: lazykafka::mock::MockCluster = standard();
        acks_0_writes_without_answers(&mock.bootstrap(), "t").await;
        assert!(TestCluster::requests(&mock)
            .iter()
            .any(|(_, k)| *k == ApiKey::Produce.code()));
    })
}

/// `acks=0` on the tansu broker.
#[test]
fn acks_0_on_tansu() {
    crate::common::block_on(async {
        let Some(addr) = common::tansu_addr("acks_0_on_tansu") else {
            return;
        };
        let topic = format!(
            "lazykafka-acks0-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
        );
        acks_0_writes_without_answers(&addr, &topic).await;
    })
}

/// A producer that stops sending ends with nothing: the topic leaves the
/// metadata after `metadata.max.idle.ms` (no Metadata request after that,
/// though `metadata.max.age.ms` is short), the leader connections close
/// after `connections.max.idle.ms`; a later `send` asks for the topic's
/// metadata again and is delivered.
async fn an_idle_producer_asks_nothing_and_holds_no_socket<C: TestCluster>() {
    let mock: C = standard();
    let producer = producer(
        &mock.bootstrap(),
        &[
            ("metadata.max.idle.ms", "5000"),
            ("metadata.max.age.ms", "500"),
            ("connections.max.idle.ms", "2000"),
            ("linger.ms", "0"),
        ],
    );
    let metadata = || {
        TestCluster::requests(&mock)
            .into_iter()
            .filter(|(_, key)| *key == ApiKey::Metadata.code())
            .count()
    };
    timeout(WAIT, send_to_0(&producer, 0).await)
        .await
        .unwrap()
        .unwrap();
    let sent = Instant::now();
    // Quiet: no socket, and no Metadata request for 1.5 s (three times
    // metadata.max.age.ms).
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut count, mut since) = (metadata(), Instant::now());
    loop {
        let now = metadata();
        if now != count {
            (count, since) = (now, Instant::now());
        }
        if producer.connections().is_empty() && since.elapsed() >= Duration::from_millis(1500) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still asking or connected after 20 s: {} Metadata, {:?} ({})",
            now,
            producer.connections(),
            mock.name()
        );
        common::sleep(Duration::from_millis(50)).await;
    }
    // The metadata was refreshed while the topic was produced to, and
    // the asking stopped only once it had been idle for 5 s: refreshes
    // come every 500 ms from the last use, which is at or before `sent`
    // (taken once the delivery was awaited), so the last one comes at
    // least 4 s after `sent` (4.5 s after the last use, less the time
    // the delivery took to be awaited).
    assert!(count >= 3, "{count} Metadata requests ({})", mock.name());
    assert!(
        since.saturating_duration_since(sent) >= Duration::from_millis(4000),
        "the last Metadata {:?} after the send ({})",
        since.saturating_duration_since(sent),
        mock.name()
    );
    timeout(WAIT, send_to_0(&producer, 1).await)
        .await
        .unwrap()
        .expect("delivered after the idle spell");
    // The topic is asked for again, and kept fresh from then on.
    let asked_again = Instant::now() + WAIT;
    while metadata() <= count {
        assert!(
            Instant::now() < asked_again,
            "the topic's metadata asked again"
        );
        common::sleep(Duration::from_millis(20)).await;
    }
    timeout(WAIT, producer.close_timeout(WAIT))
        .await
        .unwrap()
        .unwrap();
}

/// A record's key, value and headers, as read back.
type KeyValueHeaders = (Vec<u8>, Vec<u8>, Vec<(String, Vec<u8>)>);

/// Batches compressed with every codec (gzip, snappy, lz4, zstd), keys
/// and headers included, are read back by librdkafka's consumer, in order.
async fn every_codec_is_read_back_by_librdkafka<C: TestCluster>() {
    let mock: C = standard();
    let bootstrap = mock.bootstrap();
    let codecs = ["gzip", "snappy", "lz4", "zstd"];
    for codec in codecs {
        let producer = producer(
            &bootstrap,
            &[("compression.type", codec), ("linger.ms", "5")],
        );
        let mut deliveries = Vec::new();
        for i in 0..50 {
            let record = ProducerRecord::new("t")
                .partition(0)
                .key(format!("{codec}-k{i}"))
                .value(format!("{codec}-v{i}").repeat(10))
                .header("codec", Some(codec));
            deliveries.push(producer.send(record).await.unwrap());
        }
        for d in deliveries {
            timeout(WAIT, d).await.expect("in time").unwrap();
        }
        // Several records per batch: each batch was compressed.
        let metrics = producer.metrics();
        let p0 = &metrics.partitions[0];
        assert!(p0.batches < 50, "{codec}: {p0:?}");
        assert!(
            p0.compression_ratio.is_some_and(|r| r > 1.0),
            "{codec}: {p0:?}"
        );
        timeout(WAIT, producer.close_timeout(WAIT))
            .await
            .unwrap()
            .unwrap();
    }
    let read = read_back(&bootstrap, "t", 2, 200);
    let expected: Vec<KeyValueHeaders> = codecs
        .iter()
        .flat_map(|codec| {
            (0..50).map(move |i| {
                (
                    format!("{codec}-k{i}").into_bytes(),
                    format!("{codec}-v{i}").repeat(10).into_bytes(),
                    vec![("codec".to_owned(), codec.as_bytes().to_vec())],
                )
            })
        })
        .collect();
    let got: Vec<KeyValueHeaders> = read
        .into_iter()
        .map(|r| (r.2.unwrap(), r.3.unwrap(), r.4))
        .collect();
    assert_eq!(got, expected, "{}", mock.name());
}

/// Without `statistics.interval.ms` (0, the default), asking a producer
/// for statistics is a configuration error naming the property.
#[test]
fn producer_statistics_need_an_interval() {
    let producer = producer("127.0.0.1:9", &[("statistics.interval.ms", "0")]);
    let e = producer.statistics().unwrap_err();
    assert!(
        matches!(&e, Error::Config { property, .. } if property == "statistics.interval.ms"),
        "{e:?}"
    );
    assert!(e.to_string().contains("statistics.interval.ms"), "{e}");
}

/// One property map for both clients (as rust-rdkafka users keep one
/// `ClientConfig`): a consumer property given to the producer is accepted,
/// changes nothing, and is named in one `warn` line; a misspelt one is
/// still refused, with a hint.
#[test]
fn a_consumer_property_is_ignored_with_a_warn_line() {
    common::peers::logs::capture();
    let base = || ProducerConfig::builder().bootstrap_servers("localhost:9092");
    let config = base()
        .set("session.timeout.ms", "10000")
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(config, base().build().unwrap());
    let lines = common::peers::logs::find(log::Level::Warn, "session.timeout.ms");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("a consumer property; the producer ignores it"),
        "{}",
        lines[0]
    );
    let err = base().set("session.timeout.m", "10000").unwrap_err();
    assert!(
        err.to_string()
            .contains("did you mean \"session.timeout.ms\""),
        "{err}"
    );
}
