//! A lazykafka and a librdkafka consumer in one group on tansu, a real
//! broker: they split the partitions, read every record once between them
//! with commits, and hand over when one leaves. (tansu holds every JoinGroup
//! for half the session timeout; the test uses 6 s sessions.)

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::peers::{config, produce, RdConsumer, WAIT};
use lazykafka::group::AssignmentStrategy;
use lazykafka::Consumer;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

async fn create_topic(addr: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .create()
        .unwrap();
    let results = admin
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .expect("CreateTopics");
    for r in results {
        r.expect("topic created");
    }
}

#[test]
fn lazykafka_and_librdkafka_share_a_group_on_tansu() {
    crate::common::block_on(async {
        let Some(addr) = common::tansu_addr("lazykafka_and_librdkafka_share_a_group_on_tansu")
        else {
            return;
        };
        let topic = format!("lk-mixed-{}", std::process::id());
        let group = format!("lk-mixed-g-{}", std::process::id());
        create_topic(&addr, &topic, 2).await;

        let mut rd = RdConsumer::start(&addr, &group, &topic);
        let ours = Consumer::new(
            config(&addr, Some(&group))
                .partition_assignment_strategy([AssignmentStrategy::Range])
                .build()
                .unwrap(),
        )
        .unwrap();
        ours.subscribe([topic.clone()]).unwrap();
        let deadline = Instant::now() + WAIT * 2;
        while !(ours.assignment().len() == 1 && rd.assigned() == 1) && Instant::now() < deadline {
            ours.poll(Duration::from_millis(100)).await.unwrap();
        }
        assert_eq!(ours.assignment().len(), 1, "lazykafka's share");
        assert_eq!(rd.assigned(), 1, "librdkafka's share");

        produce(&addr, &topic, 2, 100, "lz4");
        let mut mine: Vec<(i32, i64)> = Vec::new();
        let deadline = Instant::now() + WAIT;
        while mine.len() + rd.seen().len() < 100 && Instant::now() < deadline {
            for r in ours.poll(Duration::from_millis(100)).await.unwrap() {
                mine.push((r.partition(), r.offset()));
            }
            ours.commit().await.unwrap();
        }
        let theirs = rd.seen();
        let all: BTreeSet<(i32, i64)> = mine.iter().chain(theirs.iter()).copied().collect();
        assert_eq!(all.len(), 100, "every record");
        assert_eq!(mine.len() + theirs.len(), 100, "none twice");

        // librdkafka leaves: lazykafka takes both partitions and goes on from
        // librdkafka's commits.
        rd.stop();
        let deadline = Instant::now() + WAIT * 2;
        while ours.assignment().len() < 2 && Instant::now() < deadline {
            ours.poll(Duration::from_millis(100)).await.unwrap();
        }
        assert_eq!(ours.assignment().len(), 2);
        produce(&addr, &topic, 2, 20, "none");
        let mut more = Vec::new();
        let deadline = Instant::now() + WAIT;
        while more.len() < 20 && Instant::now() < deadline {
            for r in ours.poll(Duration::from_millis(100)).await.unwrap() {
                more.push((r.partition(), r.offset()));
            }
        }
        assert_eq!(more.len(), 20, "only the new records: {more:?}");
        assert!(more.iter().all(|(_, o)| *o >= 50), "{more:?}");
        ours.close().await.unwrap();
    })
}
