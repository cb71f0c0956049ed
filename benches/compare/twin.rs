//! `--consume-librdkafka`: the `consume` example's command line on
//! librdkafka, for the `process` case. It takes the flags that case uses
//! (`--bootstrap`, `--topic`, `--offset beginning|end`, `--count N`) and
//! does what the example does with them: looks up the topic's partitions,
//! assigns every one, and prints each record as the same JSON line through
//! a buffer flushed after each batch (the records librdkafka hands over
//! without waiting, up to 500), until `N` records; then closes.

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};
use std::io::{BufWriter, Write};
use std::time::Duration;

use super::record_line::RecordLine;

/// The command line.
struct Options {
    bootstrap: String,
    topic: String,
    /// Records to print; all there will be when `None`.
    count: Option<usize>,
    offset: Offset,
}

/// Returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let options = match options(args) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let consumer = match assigned(&options) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let code = print_records(&consumer, options.count);
    drop(consumer);
    code
}

/// The flags, or the exit code of a usage error (said on standard error).
fn options(args: &[String]) -> Result<Options, i32> {
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let (Some(bootstrap), Some(topic)) = (flag("--bootstrap"), flag("--topic")) else {
        eprintln!("error: --bootstrap and --topic are required");
        return Err(2);
    };
    let count: Option<usize> = flag("--count").and_then(|n| n.parse().ok());
    let offset = match flag("--offset").as_deref() {
        Some("beginning") => Offset::Beginning,
        Some("end") | None => Offset::End,
        Some(other) => {
            eprintln!("error: --offset {other} is not supported here");
            return Err(2);
        }
    };
    Ok(Options {
        bootstrap,
        topic,
        count,
        offset,
    })
}

/// A consumer with every partition of the topic assigned at the offset
/// asked for.
fn assigned(options: &Options) -> Result<BaseConsumer, rdkafka::error::KafkaError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &options.bootstrap)
        // librdkafka's consumer needs a group for assign(); nothing is
        // committed.
        .set("group.id", "consume-librdkafka")
        .set("enable.auto.commit", "false")
        .create()?;
    let metadata = consumer.fetch_metadata(Some(&options.topic), Duration::from_secs(10))?;
    let mut tpl = TopicPartitionList::new();
    for t in metadata.topics() {
        for p in t.partitions() {
            let _ = tpl.add_partition_offset(t.name(), p.id(), options.offset);
        }
    }
    consumer.assign(&tpl)?;
    Ok(consumer)
}

/// Prints each record as a JSON line, a batch at a time, until `count`
/// records (or for ever); returns the exit code.
fn print_records(consumer: &BaseConsumer, count: Option<usize>) -> i32 {
    let stdout = std::io::stdout();
    let mut printed = 0usize;
    while count.is_none_or(|n| printed < n) {
        let mut wait = Duration::from_millis(500);
        let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
        for _ in 0..500 {
            if count.is_some_and(|n| printed >= n) {
                break;
            }
            match consumer.poll(wait) {
                Some(Ok(m)) => {
                    let line = RecordLine {
                        topic: m.topic(),
                        partition: m.partition(),
                        offset: m.offset(),
                        timestamp: m.timestamp().to_millis().unwrap_or(-1),
                        key: m.key().map(String::from_utf8_lossy),
                        value: m.payload().map(String::from_utf8_lossy),
                    };
                    if serde_json::to_writer(&mut out, &line).is_err()
                        || out.write_all(b"\n").is_err()
                    {
                        return 1;
                    }
                    printed += 1;
                    // The rest of the batch: what is there already.
                    wait = Duration::ZERO;
                }
                Some(Err(e)) => eprintln!("error: {e}"),
                None => break,
            }
        }
        if out.flush().is_err() {
            return 1;
        }
    }
    0
}
