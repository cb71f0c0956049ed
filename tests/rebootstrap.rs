//! Rebootstrap (KIP-899, `metadata.recovery.strategy`): when the brokers a
//! client knows are gone and its bootstrap addresses now reach another
//! cluster (a load balancer or DNS name moved, a cluster replaced), the
//! client asks the bootstrap addresses again and goes on there: the
//! producer's records are written to the new cluster, the consumer reads
//! them. With `metadata.recovery.strategy=none` it keeps asking the old
//! cluster's brokers. On both mock clusters, through a forwarder that
//! stands for the moving address; tests/kafka_faults.rs does the same
//! between two Apache Kafka clusters. Every wait has a deadline.

// Drives a `Consumer` and a `Producer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::{standard, TestCluster};
use common::rebootstrap::{consume_all, consumer, producer, send_all, values, Forwarder, WAIT};
use lazykafka::events::Purpose;
use lazykafka::ProducerRecord;
use std::collections::BTreeSet;

/// The ports of `cluster`'s brokers and the forwarder's: every connection
/// of a client on the new cluster goes to one of them.
fn ports_of<C: TestCluster>(cluster: &C, fwd: &Forwarder) -> BTreeSet<String> {
    let mut addrs: BTreeSet<String> = cluster.bootstraps().into_iter().collect();
    addrs.insert(fwd.addr().to_owned());
    addrs
}

/// Cluster A's brokers all go down and the bootstrap address now reaches
/// cluster B: the producer writes to B and the consumer reads there, with
/// no error the README's loop would stop on; each client then holds
/// connections to B's brokers only, the bootstrap connection retired.
async fn the_clients_follow_the_bootstrap_address_to_another_cluster<C: TestCluster>() {
    let a: C = standard();
    let b: C = standard();
    let fwd = Forwarder::start(&a.bootstraps()[1]);
    let producer = producer(fwd.addr(), "rebootstrap");
    let consumer = consumer(fwd.addr(), "rebootstrap", "t", "g");
    let on_a = values("a");
    send_all(&producer, "t", &on_a).await;
    consume_all(&consumer, &on_a.iter().cloned().collect()).await;

    for id in 1..=3 {
        a.broker_down(id);
    }
    fwd.retarget(&b.bootstraps()[1]);

    let on_b = values("b");
    send_all(&producer, "t", &on_b).await;
    consume_all(&consumer, &on_b.iter().cloned().collect()).await;
    assert!(
        fwd.accepted().iter().any(|t| *t == b.bootstraps()[1]),
        "the clients asked the bootstrap address again: {:?}",
        fwd.accepted()
    );
    let b_addrs = ports_of(&b, &fwd);
    let settled = common::wait_for(WAIT, || {
        let conns: Vec<_> = producer
            .connections()
            .into_iter()
            .chain(consumer.connections())
            .collect();
        conns
            .iter()
            .all(|c| b_addrs.contains(&c.addr) && c.purpose != Purpose::Bootstrap)
    });
    assert!(
        settled,
        "connections left off cluster B's brokers, or a bootstrap connection kept: producer {:?}, consumer {:?}",
        producer.connections(),
        consumer.connections()
    );
    drop(a);
}

/// `metadata.recovery.strategy=none`: once cluster A is known, its
/// brokers are the only ones asked; with all of them down, the bootstrap
/// address (now reaching B) is not dialled again.
async fn with_strategy_none_the_bootstrap_address_is_not_dialled_again<C: TestCluster>() {
    let a: C = standard();
    let b: C = standard();
    let fwd = Forwarder::start(&a.bootstraps()[1]);
    let producer = producer(fwd.addr(), "none");
    send_all(&producer, "t", &values("a")).await;
    let dialled = fwd.accepted().len();
    for id in 1..=3 {
        a.broker_down(id);
    }
    fwd.retarget(&b.bootstraps()[1]);
    // A send waits for a broker of A (and fails after its timeout); the
    // client meanwhile asks A's brokers for metadata, again and again.
    let record = ProducerRecord::new("t")
        .key(b"x".to_vec())
        .value(b"x".to_vec());
    let _pending = common::timeout(WAIT, producer.send(record)).await;
    let connects_to_a = || -> u64 {
        let brokers = producer.metrics().brokers;
        a.bootstraps()
            .iter()
            .filter_map(|addr| brokers.get(addr))
            .map(|m| m.connects)
            .sum()
    };
    let before = connects_to_a();
    let asked_a = common::wait_for(WAIT, || connects_to_a() >= before + 6);
    assert!(
        asked_a,
        "the producer kept trying cluster A's brokers: {:?}",
        producer.metrics().brokers
    );
    assert_eq!(
        fwd.accepted().len(),
        dialled,
        "the bootstrap address was dialled again: {:?}",
        fwd.accepted()
    );
    drop(b);
}

on_both_mocks!(
    the_clients_follow_the_bootstrap_address_to_another_cluster,
    with_strategy_none_the_bootstrap_address_is_not_dialled_again
);
