//! The everyday group consumer: subscribe → poll → process → commit, with a
//! rebalance listener printing assignments, until SIGTERM or SIGINT, then
//! close (commit, leave the group, close every connection) and exit 0.
//!
//! ```text
//! cargo run --example group
//! cargo run --example group -- --bootstrap HOST:PORT --topic T [--group G]
//!     [--session-timeout-ms MS] [--heartbeat-interval-ms MS]
//! ```
//!
//! With no flags it starts a 3-broker Kafka cluster in this process
//! (`lazykafka::mock`), creates topic `orders` with 3 partitions and
//! produces 6 records, then consumes them in group `group-example`. With
//! `--bootstrap` it consumes `--topic` (required then) from your cluster.
//! `--session-timeout-ms` and `--heartbeat-interval-ms` set
//! `session.timeout.ms` and `heartbeat.interval.ms` (defaults 45 s and 3 s).
//!
//! Standard output, one line per step:
//!
//! ```text
//! assigned orders-0,orders-1,orders-2
//! record orders-1@0 key=order-1 value=widget x1
//! committed 6 records
//! revoked orders-0,orders-1,orders-2
//! closed
//! ```
//!
//! Signals come through `signal-hook` and `signal-hook-async-std` (any
//! signal crate of your runtime does); `poll` is cancel-safe, so racing it
//! against the signal stream in a `select` loses no record.

use futures::future::{select, Either};
use futures::StreamExt;
use lazykafka::mock::{MockCluster, MockRecord};
use lazykafka::{
    Consumer, ConsumerConfig, OffsetReset, RebalanceListener, Revocation, TopicPartition,
};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook_async_std::Signals;
use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::Duration;

/// Prints every assignment change (called from inside `poll`).
struct PrintAssignments;

fn list(partitions: &BTreeSet<TopicPartition>) -> String {
    let names: Vec<String> = partitions.iter().map(|tp| tp.to_string()).collect();
    names.join(",")
}

impl RebalanceListener for PrintAssignments {
    fn on_partitions_assigned(&mut self, partitions: &BTreeSet<TopicPartition>) {
        println!("assigned {}", list(partitions));
    }

    fn on_partitions_revoked(
        &mut self,
        partitions: &BTreeSet<TopicPartition>,
        _revocation: &mut Revocation<'_>,
    ) {
        // Each batch is committed after processing (below), so there is
        // nothing left to commit here; `revocation.commit(..)` would land
        // before the partitions move to another member.
        println!("revoked {}", list(partitions));
    }

    fn on_partitions_lost(&mut self, partitions: &BTreeSet<TopicPartition>) {
        println!("lost {}", list(partitions));
    }
}

struct Args {
    bootstrap: Option<String>,
    topic: Option<String>,
    group: String,
    session_timeout: Option<Duration>,
    heartbeat_interval: Option<Duration>,
}

fn millis(flag: &str, value: &str) -> Result<Duration, String> {
    match value.parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(format!("{flag}: not a positive number of ms: {value:?}")),
    }
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        bootstrap: None,
        topic: None,
        group: "group-example".to_owned(),
        session_timeout: None,
        heartbeat_interval: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--bootstrap" => args.bootstrap = Some(value()?),
            "--topic" => args.topic = Some(value()?),
            "--group" => args.group = value()?,
            "--session-timeout-ms" => args.session_timeout = Some(millis(&flag, &value()?)?),
            "--heartbeat-interval-ms" => args.heartbeat_interval = Some(millis(&flag, &value()?)?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.bootstrap.is_some() && args.topic.is_none() {
        return Err("--bootstrap needs --topic".into());
    }
    Ok(args)
}

#[path = "support/logger.rs"]
mod logger;

fn main() -> ExitCode {
    // The library's warn and error lines on stderr (RUST_LOG picks the level).
    logger::init();
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!(
                "error: {e}\nusage: group [--bootstrap HOST:PORT --topic T] [--group G] \
                 [--session-timeout-ms MS] [--heartbeat-interval-ms MS]"
            );
            return ExitCode::from(2);
        }
    };
    // The consumer needs an executor: here async-std's (the default
    // runtime feature); with `runtime-tokio`, inside `#[tokio::main]` the
    // consumer runs on tokio instead.
    match async_std::task::block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    // Caught from here on: the default action (exit at once, without
    // committing or leaving the group) no longer applies.
    let mut signals = Signals::new([SIGINT, SIGTERM])?.fuse();

    // Kept alive until the end: dropping it stops the brokers.
    let mut _mock = None;
    let (bootstrap, topic) = match (args.bootstrap, args.topic) {
        (Some(bootstrap), Some(topic)) => (bootstrap, topic),
        (_, topic) => {
            let topic = topic.unwrap_or_else(|| "orders".to_owned());
            let mock = MockCluster::new(3)?;
            mock.create_topic(&topic, 3)?;
            for i in 0..6 {
                let record = MockRecord::new(format!("widget x{i}")).key(format!("order-{i}"));
                mock.produce(&topic, i % 3, [record])?;
            }
            let bootstrap = mock.bootstrap_servers();
            _mock = Some(mock);
            (bootstrap, topic)
        }
    };

    let mut builder = ConsumerConfig::builder()
        .bootstrap_servers(&bootstrap)
        .group_id(&args.group)
        .auto_offset_reset(OffsetReset::Earliest)
        // Commit after processing, below, rather than on a timer.
        .enable_auto_commit(false);
    if let Some(session) = args.session_timeout {
        builder = builder.session_timeout(session);
    }
    if let Some(heartbeat) = args.heartbeat_interval {
        builder = builder.heartbeat_interval(heartbeat);
    }
    let config = builder.build()?;
    let consumer = Consumer::new(config)?; // no socket yet
    consumer.subscribe_with_listener([topic.as_str()], PrintAssignments)?;

    loop {
        let poll = Box::pin(consumer.poll(Duration::from_millis(500)));
        let records = match select(poll, signals.next()).await {
            Either::Left((Ok(records), _)) => records,
            // A broker unreachable, a topic not there yet, a rebalance: the
            // consumer retries by itself; keep polling.
            Either::Left((Err(e), _)) if e.is_retriable() => {
                eprintln!("warning: {e}");
                continue;
            }
            Either::Left((Err(e), _)) => return Err(e.into()),
            Either::Right(_) => break, // SIGTERM or SIGINT
        };
        if records.is_empty() {
            continue;
        }
        for record in &records {
            // Process the record: here, print it.
            let text =
                |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
            println!(
                "record {}-{}@{} key={} value={}",
                record.topic(),
                record.partition(),
                record.offset(),
                text(record.key()),
                text(record.value())
            );
        }
        // At least once: commit what was processed. A rebalance may have
        // taken the partitions meanwhile (the commit is then refused with a
        // retriable error): their next owner starts after the last commit.
        match consumer.commit().await {
            Ok(()) => println!("committed {} records", records.len()),
            Err(e) if e.is_retriable() => eprintln!("warning: {e}"),
            Err(e) => return Err(e.into()),
        }
    }

    // Revokes the partitions (the listener prints them), leaves the group,
    // closes every socket.
    consumer.close().await?;
    println!("closed");
    Ok(())
}
