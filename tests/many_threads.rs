//! The scenarios of `tests/one_thread.rs` (a coordinator outage on
//! librdkafka's mock and on `lazykafka::mock`; idle, a dead broker, a
//! broker dropping every JoinGroup) on a multi-threaded executor: four
//! async-std threads (`ASYNC_STD_THREAD_COUNT=4`), or a multi-thread tokio
//! runtime with four workers (what `#[tokio::main]` builds on a
//! four-core machine). A task that spins here does not starve the others,
//! so the consumer would still make progress: only the CPU bounds in
//! `common/cpu.rs` (from `/proc/self/stat`) catch it.
//!
//! One test function: async-std's executor reads its thread count once,
//! when the first task is spawned in this process.

// Drives a `Consumer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::cpu::{coordinator_outage, waiting_states};
use lazykafka::mock::MockCluster;

#[test]
fn a_coordinator_outage_on_four_executor_threads() {
    let scenario = async {
        coordinator_outage::<common::mock::RawMock>().await;
        coordinator_outage::<MockCluster>().await;
        waiting_states().await;
    };
    #[cfg(feature = "runtime-async-std")]
    {
        // SAFETY: set before any thread of this test binary reads the
        // environment (nothing was spawned yet).
        std::env::set_var("ASYNC_STD_THREAD_COUNT", "4");
        async_std::task::block_on(scenario);
    }
    #[cfg(not(feature = "runtime-async-std"))]
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(scenario);
}
