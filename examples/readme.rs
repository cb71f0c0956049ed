//! The README's group consumer — subscribe, poll, process, commit — as a
//! program: the same configuration with the bootstrap servers, the group
//! and the topic from the command line instead of literals, and the same
//! `loop` (`tests/user_path.rs` checks that it stays the README's, line for
//! line).
//!
//! ```text
//! cargo run --features runtime-tokio --example readme -- --bootstrap HOST:PORT[,..] --group G --topic T
//!     [--session-timeout-ms MS] [--heartbeat-interval-ms MS]
//! ```
//!
//! Each of the first three flags defaults to the README's literal
//! (`kafka-1:9092,kafka-2:9092`, `billing`, `invoices`); the last two
//! default to the README's configuration, which leaves `session.timeout.ms`
//! (45 s) and `heartbeat.interval.ms` (3 s) at their defaults. (They exist
//! for brokers whose rebalances last as long as the group's session, such
//! as librdkafka's mock cluster, which the tests run it against.) Standard output has one line per record,
//! `TOPIC-PARTITION@OFFSET: VALUE`; standard error the errors the consumer
//! goes on after (`lazykafka: ...`) and the library's warn lines
//! (`warn: lazykafka: ...`; `RUST_LOG` picks the level). It runs until it
//! is killed, or until an error the consumer does not go on after, which
//! `main` returns (exit 1). It has no signal handling, as in the README: a
//! SIGTERM ends it at once, without a commit or leaving the group, and the
//! group hands its partitions on when its session times out.

use lazykafka::{Consumer, ConsumerConfig, OffsetReset};
use std::time::Duration;

#[path = "support/logger.rs"]
mod logger;

/// The README's three literals, or what the command line says instead.
struct Args {
    bootstrap: String,
    group: String,
    topic: String,
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
        bootstrap: "kafka-1:9092,kafka-2:9092".to_owned(),
        group: "billing".to_owned(),
        topic: "invoices".to_owned(),
        session_timeout: None,
        heartbeat_interval: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--bootstrap" => args.bootstrap = value()?,
            "--group" => args.group = value()?,
            "--topic" => args.topic = value()?,
            "--session-timeout-ms" => args.session_timeout = Some(millis(&flag, &value()?)?),
            "--heartbeat-interval-ms" => args.heartbeat_interval = Some(millis(&flag, &value()?)?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<(), lazykafka::Error> {
    // The library's warn and error lines on stderr (RUST_LOG picks the level).
    logger::init();
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!(
                "error: {e}\nusage: readme [--bootstrap HOST:PORT] [--group G] [--topic T] \
                 [--session-timeout-ms MS] [--heartbeat-interval-ms MS]"
            );
            std::process::exit(2);
        }
    };
    let mut builder = ConsumerConfig::builder()
        .bootstrap_servers(&args.bootstrap)
        .group_id(&args.group)
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false); // commit after processing, below
    if let Some(session) = args.session_timeout {
        builder = builder.session_timeout(session);
    }
    if let Some(heartbeat) = args.heartbeat_interval {
        builder = builder.heartbeat_interval(heartbeat);
    }
    let config = builder.build()?;
    let consumer = Consumer::new(config)?; // no socket, no DNS, no task yet
    consumer.subscribe([args.topic.as_str()])?;
    loop {
        // Sockets begin here. An error the consumer goes on after by itself
        // (a broker unreachable, a topic not there yet, a rebalance) is
        // said once; poll on. Any other (a refusal) ends the loop.
        let records = match consumer.poll(Duration::from_millis(500)).await {
            Ok(records) => records,
            Err(e) if e.is_retriable() => {
                eprintln!("lazykafka: {e}");
                continue;
            }
            Err(e) => return Err(e),
        };
        for record in &records {
            let value = String::from_utf8_lossy(record.value().unwrap_or_default());
            println!(
                "{}-{}@{}: {value}",
                record.topic(),
                record.partition(),
                record.offset()
            );
        }
        if !records.is_empty() {
            match consumer.commit().await {
                Ok(()) => {}
                // A rebalance took the partitions meanwhile: their next owner
                // starts after the last commit. Poll on.
                Err(e) if e.is_retriable() => eprintln!("lazykafka: {e}"),
                Err(e) => return Err(e),
            }
        }
    }
}
