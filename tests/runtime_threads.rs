//! Built with both runtime features, each consumer runs on the runtime it
//! is created in (`client.runtime=auto`): inside a tokio runtime on tokio,
//! with nothing of async-std beside it (no executor, reactor or blocking
//! thread of async-std's, no `lazykafka-task`, no `lazykafka-timer`);
//! outside one on async-std, whose consumer threads then appear; and
//! `client.runtime=async-std` inside a tokio runtime on async-std. The
//! process's threads are told apart by name (`/proc/self/task`); records
//! come from `lazykafka::mock` (literal `127.0.0.1` addresses, so no name
//! is resolved). A producer created inside the tokio runtime runs on it
//! likewise.
//!
//! One test function: async-std's threads, once started, stay for the
//! process, so the tokio part must run first, and the test harness would
//! run other tests beside it.
#![cfg(all(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::peers::{config, consume};
use common::threads::{self, async_std_threads};
use lazykafka::config::ClientRuntime;
use lazykafka::mock::MockCluster;
use lazykafka::Consumer;

const TASK: &str = "lazykafka-task";

/// A consumer of [`threads::parts`] on `mock`, `client.runtime` as given.
fn consumer(mock: &MockCluster, runtime: ClientRuntime) -> Consumer {
    let config = config(&mock.bootstrap_servers(), None)
        .client_runtime(runtime)
        .build()
        .unwrap();
    let consumer = Consumer::new(config).unwrap();
    consumer.assign(threads::parts()).unwrap();
    consumer
}

#[test]
fn each_consumer_runs_on_the_runtime_it_is_created_in() {
    let mock = threads::mock_with_records();
    assert!(
        mock.bootstrap_servers().starts_with("127.0.0.1:"),
        "the mock's addresses are literal: {}",
        mock.bootstrap_servers()
    );
    assert_eq!(
        async_std_threads(),
        Vec::<String>::new(),
        "before any consumer"
    );

    // Inside a tokio runtime (what `#[tokio::main]` builds): tokio only.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let mut consumer = consumer(&mock, ClientRuntime::Auto);
        assert_eq!(
            consume(&mut consumer, 20).await.len(),
            20,
            "records on tokio"
        );
        assert!(
            !consumer.connections().is_empty(),
            "connected while the threads are looked at"
        );
        assert_eq!(
            async_std_threads(),
            Vec::<String>::new(),
            "async-std's threads beside a consumer on tokio (all threads: {:?})",
            threads::names()
        );
        consumer.close().await.unwrap();
        // A producer created there runs on tokio too.
        let producer = lazykafka::Producer::new(
            lazykafka::ProducerConfig::builder()
                .bootstrap_servers(mock.bootstrap_servers())
                .build()
                .unwrap(),
        )
        .unwrap();
        // To a topic of its own: the consumers below read `t`.
        mock.create_topic("produced", 2).unwrap();
        for p in 0..2 {
            let record = lazykafka::ProducerRecord::new("produced")
                .partition(p)
                .value("on tokio");
            producer.send(record).await.unwrap().await.unwrap();
        }
        assert!(!producer.connections().is_empty());
        assert_eq!(
            async_std_threads(),
            Vec::<String>::new(),
            "async-std's threads beside a producer on tokio (all threads: {:?})",
            threads::names()
        );
        producer
            .close_timeout(std::time::Duration::from_secs(10))
            .await
            .unwrap();
    });
    assert_eq!(
        async_std_threads(),
        Vec::<String>::new(),
        "after the consumer and the producer on tokio"
    );

    // Outside any tokio runtime: async-std, whose background task has a
    // thread of its own.
    let mut outside = consumer(&mock, ClientRuntime::Auto);
    async_std::task::block_on(async {
        assert_eq!(
            consume(&mut outside, 20).await.len(),
            20,
            "records on async-std"
        );
        assert!(
            threads::settles_at(TASK, 1),
            "a consumer created outside tokio: {} {TASK} threads (all threads: {:?})",
            threads::named(TASK),
            threads::names()
        );
        outside.close().await.unwrap();
    });
    assert!(threads::settles_at(TASK, 0), "after its close");

    // `client.runtime=async-std` inside a tokio runtime: async-std.
    runtime.block_on(async {
        let mut forced = consumer(&mock, ClientRuntime::AsyncStd);
        assert_eq!(consume(&mut forced, 20).await.len(), 20, "records");
        assert!(
            threads::settles_at(TASK, 1),
            "client.runtime=async-std in a tokio runtime: {} {TASK} threads",
            threads::named(TASK)
        );
        forced.close().await.unwrap();
    });
    assert!(threads::settles_at(TASK, 0), "after its close");

    // `client.runtime=tokio` inside it: tokio again, no task thread.
    runtime.block_on(async {
        let mut forced = consumer(&mock, ClientRuntime::Tokio);
        assert_eq!(consume(&mut forced, 20).await.len(), 20, "records");
        assert_eq!(threads::named(TASK), 0, "client.runtime=tokio");
        forced.close().await.unwrap();
    });
}
