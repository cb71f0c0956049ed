//! `client.runtime` and the runtime a consumer binds to, in every feature
//! set: a forced runtime whose feature is not built, or `tokio` outside a
//! tokio runtime, is a configuration error of `Consumer::new`; built with
//! `runtime-tokio` alone, a consumer created outside a tokio runtime binds
//! to the one its first `poll` runs in, and a first `poll` outside any is
//! an error, not a panic; a consumer created in a tokio runtime works when
//! polled from a thread outside it. (Which threads run beside which
//! runtime, with both features built: `tests/runtime_threads.rs`.)
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::peers::config;
use lazykafka::config::ClientRuntime;
use lazykafka::{Consumer, ConsumerConfig, Error};

/// A configuration for an address nothing listens on, with `runtime`.
fn with_runtime(runtime: ClientRuntime) -> ConsumerConfig {
    config("127.0.0.1:9", None)
        .client_runtime(runtime)
        .build()
        .unwrap()
}

/// The reason of `result`'s configuration error about `client.runtime`.
#[track_caller]
fn client_runtime_error<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
    match result {
        Err(Error::Config { property, reason }) if property == "client.runtime" => reason,
        other => panic!("expected a client.runtime configuration error, got {other:?}"),
    }
}

#[test]
fn the_property_parses_from_its_name() {
    let config = ConsumerConfig::from_properties([
        ("bootstrap.servers", "127.0.0.1:9"),
        ("client.runtime", "async-std"),
    ])
    .unwrap();
    assert_eq!(config.client_runtime(), ClientRuntime::AsyncStd);
    let reason = client_runtime_error(ConsumerConfig::from_properties([
        ("bootstrap.servers", "127.0.0.1:9"),
        ("client.runtime", "smol"),
    ]));
    assert!(reason.contains("auto, tokio or async-std"), "{reason}");
}

#[cfg(not(feature = "runtime-tokio"))]
#[test]
fn tokio_without_its_feature_names_the_feature() {
    let reason = client_runtime_error(Consumer::new(with_runtime(ClientRuntime::Tokio)));
    assert!(reason.contains("`runtime-tokio`"), "{reason}");
}

#[cfg(not(feature = "runtime-async-std"))]
#[test]
fn async_std_without_its_feature_names_the_feature() {
    let reason = client_runtime_error(Consumer::new(with_runtime(ClientRuntime::AsyncStd)));
    assert!(reason.contains("`runtime-async-std`"), "{reason}");
}

#[cfg(feature = "runtime-async-std")]
#[test]
fn async_std_and_auto_need_no_runtime_when_async_std_is_built() {
    Consumer::new(with_runtime(ClientRuntime::AsyncStd)).unwrap();
    Consumer::new(with_runtime(ClientRuntime::Auto)).unwrap();
}

#[cfg(feature = "runtime-tokio")]
mod tokio_built {
    use super::*;
    use crate::common::peers::consume;
    use crate::common::threads::{mock_with_records, parts};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime")
    }

    #[test]
    fn tokio_outside_a_tokio_runtime_is_refused_by_new() {
        let reason = client_runtime_error(Consumer::new(with_runtime(ClientRuntime::Tokio)));
        assert!(reason.contains("no tokio runtime"), "{reason}");
        // Inside one it is accepted.
        runtime().block_on(async {
            Consumer::new(with_runtime(ClientRuntime::Tokio)).unwrap();
        });
    }

    /// The runtime is kept by its handle: the consumer's tasks run on it
    /// whatever thread polls.
    #[test]
    fn a_consumer_created_in_a_tokio_runtime_can_be_polled_outside_it() {
        let mock = mock_with_records();
        let runtime = runtime();
        let mut consumer = runtime.block_on(async {
            let config = config(&mock.bootstrap_servers(), None)
                .client_runtime(ClientRuntime::Tokio)
                .build()
                .unwrap();
            Consumer::new(config).unwrap()
        });
        consumer.assign(parts()).unwrap();
        // A thread of no runtime at all.
        let seen = std::thread::spawn(move || {
            futures::executor::block_on(async {
                let seen = consume(&mut consumer, 20).await.len();
                consumer.close().await.unwrap();
                seen
            })
        })
        .join()
        .expect("the polling thread");
        assert_eq!(seen, 20, "records");
        drop(runtime);
    }

    /// Built with `runtime-tokio` alone, a consumer created outside a
    /// tokio runtime binds to the runtime of its first `poll`; where there
    /// is none, the calls that would start it say so.
    #[cfg(not(feature = "runtime-async-std"))]
    #[test]
    fn without_async_std_a_consumer_starts_in_the_runtime_of_its_first_poll() {
        let mock = mock_with_records();
        let mut consumer =
            Consumer::new(config(&mock.bootstrap_servers(), None).build().unwrap()).unwrap();
        consumer.assign(parts()).unwrap();

        let poll = futures::executor::block_on(consumer.poll(std::time::Duration::ZERO));
        let reason = client_runtime_error(poll);
        assert!(reason.contains("no tokio runtime"), "{reason}");
        let (tx, rx) = std::sync::mpsc::channel();
        consumer.commit_async(move |result| tx.send(result).unwrap());
        client_runtime_error(rx.try_recv().expect("commit_async's callback ran at once"));
        assert!(consumer.connections().is_empty(), "nothing started");

        let seen = runtime().block_on(async {
            let seen = consume(&mut consumer, 20).await.len();
            consumer.close().await.unwrap();
            seen
        });
        assert_eq!(seen, 20, "records once polled inside a tokio runtime");
    }
}
