//! No file descriptor leaks: across 100 connect/disconnect cycles against
//! librdkafka's mock cluster, the count of open descriptors returns to its
//! baseline. Alone in its test binary, so no other test opens descriptors
//! meanwhile.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::wait_for;
use lazykafka::cluster::{Cluster, ClusterConfig, Target};
use lazykafka::protocol::messages::api_versions::ApiVersionsRequest;
use lazykafka::runtime::{ClusterDriver, SocketOptions};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(15);

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn a_hundred_connect_disconnect_cycles_leak_no_descriptor() {
    crate::common::block_on(async {
        let mock = common::mock::RawMock::new(1);
        let addr = mock.bootstraps()[0].clone();
        // One cycle first, so lazily created runtime resources exist.
        let cycle = |addr: String| async move {
            let mut driver = ClusterDriver::new(
                Cluster::new(ClusterConfig::new([addr]), Instant::now(), 5),
                SocketOptions::default(),
            );
            let id = driver.request(
                Target::AnyBroker,
                Box::new(ApiVersionsRequest::from_this_client()),
            );
            driver
                .wait_response(id, WAIT)
                .await
                .expect("answered")
                .expect("ok");
            driver.shutdown();
        };
        cycle(addr.clone()).await;
        let baseline = open_fds();
        for _ in 0..100 {
            cycle(addr.clone()).await;
        }
        assert!(
            wait_for(WAIT, || open_fds() <= baseline),
            "descriptors: {} now, {baseline} before",
            open_fds()
        );
    })
}
