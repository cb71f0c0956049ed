//! What the producer tests on the mocks and on Apache Kafka check alike:
//! `send` to a topic that does not exist, and to the same topic once it
//! was created.

use lazykafka::error::ErrorCode;
use lazykafka::producer::{DeliveryError, RecordMetadata};
use lazykafka::{Error, Producer, ProducerRecord};
use std::time::{Duration, Instant};

/// How long a step may take (the producer's `max.block.ms` is 60 s: a
/// `send` that gives up within this did not wait it out).
const STEP: Duration = Duration::from_secs(20);

/// Sends a record to `topic`, which does not exist and is not created,
/// and returns the error: `send` gives up well before `max.block.ms`, not
/// before `topic.metadata.propagation.max.ms` (5 s, the default), with
/// `DeliveryError::UnknownTopic` naming the topic and
/// UNKNOWN_TOPIC_OR_PARTITION (in its text too), not retriable.
pub async fn unknown_topic_named_by_send(producer: &Producer, topic: &str) -> Error {
    assert_eq!(producer.config().max_block(), Duration::from_secs(60));
    let grace = producer.config().topic_metadata_propagation_max();
    let asked = Instant::now();
    let outcome = super::timeout(
        STEP,
        producer.send(ProducerRecord::new(topic).value("early")),
    )
    .await
    .expect("send gives up well before max.block.ms");
    let e = outcome.expect_err("the topic does not exist");
    match &e {
        Error::Delivery(DeliveryError::UnknownTopic {
            topic: named,
            code,
            after,
        }) => {
            assert_eq!(
                (named.as_str(), *code),
                (topic, ErrorCode::UnknownTopicOrPartition)
            );
            assert!(*after >= grace, "{after:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(asked.elapsed() >= grace, "before the propagation time");
    assert!(!e.is_retriable(), "{e}");
    let text = e.to_string();
    assert!(
        text.contains(topic) && text.contains("UNKNOWN_TOPIC_OR_PARTITION"),
        "{text}"
    );
    e
}

/// The delivery of a record sent to `topic` once it was created: the
/// first `send`s may still find the Metadata answers that said it does
/// not exist (until an answer shows it), and are made again, up to a
/// deadline.
pub async fn send_once_created(producer: &Producer, topic: &str) -> RecordMetadata {
    let deadline = Instant::now() + STEP;
    loop {
        let sent = super::timeout(
            STEP,
            producer.send(ProducerRecord::new(topic).value("late")),
        )
        .await
        .expect("send within the deadline");
        match sent {
            Ok(delivery) => return super::timeout(STEP, delivery).await.unwrap().unwrap(),
            Err(Error::Delivery(DeliveryError::UnknownTopic { .. }))
                if Instant::now() < deadline =>
            {
                super::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{topic}: {e:?}"),
        }
    }
}
