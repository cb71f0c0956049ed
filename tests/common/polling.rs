//! The tests' one polling loop: [`poll_until`] polls a consumer until a
//! condition holds, with a deadline; each test says only what it keeps of
//! a `poll`'s outcome (its `take`), which errors it goes on after, and
//! whether it commits after records.

use lazykafka::{Consumer, ConsumerRecord, Error};
use std::time::{Duration, Instant};

pub use super::peers::WAIT;

/// A `poll`'s outcome, as [`poll_until`] hands it to its `take`.
pub type Polled = Result<Vec<ConsumerRecord>, Error>;

/// What [`poll_until`] does after a `poll` that returned records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Nothing.
    No,
    /// `commit()`, failing the test on any error.
    Strictly,
    /// `commit()`, printing an error the consumer goes on after by itself
    /// (a commit refused in a rebalance: the records are read again, at
    /// least once), failing the test on any other.
    ThroughFaults,
}

/// The pace of [`poll_until`]: each `poll`'s timeout, and its commits.
#[derive(Debug, Clone, Copy)]
pub struct Polling {
    pub step: Duration,
    pub commit: Commit,
}

impl Polling {
    /// Polls of at most `step_ms`, no commit.
    pub const fn every(step_ms: u64) -> Polling {
        Polling {
            step: Duration::from_millis(step_ms),
            commit: Commit::No,
        }
    }

    /// The same, committing after each `poll` that returned records.
    pub const fn committing(self, commit: Commit) -> Polling {
        Polling { commit, ..self }
    }
}

/// Polls `consumer` until `done` holds of it and of `seen` (true), or
/// [`WAIT`] passes (false). Each `poll`'s outcome goes to `take`, which
/// keeps what the test needs in `seen` and decides which errors fail it
/// ([`records_through_faults`] and [`records_strictly`] are the usual
/// ones).
pub async fn poll_until<S: ?Sized>(
    consumer: &Consumer,
    seen: &mut S,
    how: Polling,
    mut take: impl FnMut(&mut S, Polled),
    mut done: impl FnMut(&Consumer, &S) -> bool,
) -> bool {
    let deadline = Instant::now() + WAIT;
    loop {
        if done(consumer, seen) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        let polled = consumer.poll(how.step).await;
        let records = matches!(&polled, Ok(r) if !r.is_empty());
        take(seen, polled);
        if records {
            match how.commit {
                Commit::No => {}
                Commit::Strictly => consumer
                    .commit()
                    .await
                    .unwrap_or_else(|e| panic!("commit: {e}")),
                Commit::ThroughFaults => super::peers::commit_through_faults(consumer).await,
            }
        }
    }
}

/// A `poll`'s records; an error the consumer goes on after by itself is
/// printed (as the README's loop does) and gives none; any other fails
/// the test.
pub fn records_through_faults(polled: Polled) -> Vec<ConsumerRecord> {
    match polled {
        Ok(records) => records,
        Err(e) if e.is_retriable() => {
            eprintln!("poll: {e}");
            Vec::new()
        }
        Err(e) => panic!("poll: {e}"),
    }
}

/// A `poll`'s records; any error fails the test.
pub fn records_strictly(polled: Polled) -> Vec<ConsumerRecord> {
    polled.unwrap_or_else(|e| panic!("poll: {e}"))
}
