//! The async runtime a lazykafka child runs its client on: async-std by
//! default; built with `--no-default-features --features
//! runtime-tokio,...`, a current-thread tokio runtime, or a multi-thread
//! one (what `#[tokio::main]` builds: one worker per core) with
//! `LAZYKAFKA_BENCH_TOKIO=multi`.

use std::future::Future;

/// Whether a child built with `runtime-tokio` runs its client on a
/// multi-thread runtime (`LAZYKAFKA_BENCH_TOKIO=multi`) rather than a
/// current-thread one.
#[cfg_attr(not(feature = "runtime-tokio"), allow(dead_code))]
fn tokio_multi_thread() -> bool {
    std::env::var("LAZYKAFKA_BENCH_TOKIO").as_deref() == Ok("multi")
}

/// The runtime futures are run on. With a current-thread tokio runtime
/// the client's task runs on the thread that blocks on it, so every
/// `block_on` of one client must go through the same `Runtime`.
pub(crate) struct Runtime {
    #[cfg(feature = "runtime-tokio")]
    tokio: tokio::runtime::Runtime,
}

impl Runtime {
    pub(crate) fn new() -> Runtime {
        Runtime {
            #[cfg(feature = "runtime-tokio")]
            tokio: if tokio_multi_thread() {
                tokio::runtime::Builder::new_multi_thread()
            } else {
                tokio::runtime::Builder::new_current_thread()
            }
            .enable_all()
            .build()
            .expect("tokio runtime"),
        }
    }

    /// Runs `future` to its end on this thread.
    pub(crate) fn block_on<F: Future>(&self, future: F) -> F::Output {
        #[cfg(feature = "runtime-tokio")]
        let output = self.tokio.block_on(future);
        #[cfg(not(feature = "runtime-tokio"))]
        let output = async_std::task::block_on(future);
        output
    }

    /// The runtime's name in the child's report (`runtime`).
    pub(crate) fn name() -> &'static str {
        if !cfg!(feature = "runtime-tokio") {
            "async-std"
        } else if tokio_multi_thread() {
            "tokio (multi-thread)"
        } else {
            "tokio (current thread)"
        }
    }
}
