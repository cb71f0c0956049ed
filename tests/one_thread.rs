//! The consumer with a single executor thread, as in a one-CPU container:
//! `ASYNC_STD_THREAD_COUNT=1` on async-std, a current-thread runtime on
//! tokio. Its background task, connect tasks and socket readers share that
//! thread, so a task that never yields starves the others. Through a
//! one-second coordinator outage, on librdkafka's mock and on
//! `lazykafka::mock`, the consumer must reconnect and go on, spend little
//! CPU while it waits, and hold its memory while the application does not
//! poll and does not read its event stream; idle, waiting for a dead broker
//! and for one that drops every JoinGroup, it must spend little CPU (the
//! scenarios are in `common/cpu.rs`; `tests/many_threads.rs` runs them on
//! several threads).
//!
//! One test function: async-std's executor reads its thread count once,
//! when the first task is spawned in this process.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::cpu::{coordinator_outage, waiting_states};
use lazykafka::mock::MockCluster;

#[test]
fn a_coordinator_outage_on_one_executor_thread() {
    let scenario = async {
        coordinator_outage::<common::mock::RawMock>().await;
        coordinator_outage::<MockCluster>().await;
        waiting_states().await;
    };
    #[cfg(feature = "runtime-async-std")]
    {
        // SAFETY: set before any thread of this test binary reads the
        // environment (nothing was spawned yet).
        std::env::set_var("ASYNC_STD_THREAD_COUNT", "1");
        async_std::task::block_on(scenario);
    }
    #[cfg(not(feature = "runtime-async-std"))]
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(scenario);
}
