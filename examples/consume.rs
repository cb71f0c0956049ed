//! A small kcat-like consumer: prints records as JSON lines.
//!
//! ```text
//! cargo run --example consume -- --bootstrap HOST:PORT[,..] --topic T [flags]
//! ```
//!
//! Flags:
//!
//! - `--bootstrap HOST:PORT[,..]` (required): the `bootstrap.servers`.
//! - `--topic T` (required, repeatable): a topic to read.
//! - `--group G`: join group `G` and subscribe to the topics. Without it,
//!   every partition of each topic is assigned manually (looked up with
//!   [`Consumer::partitions_for`]) and nothing is committed.
//! - `--from-beginning`: `auto.offset.reset=earliest` (default `latest`):
//!   where a partition with no committed offset starts.
//! - `--count N`: stop after `N` records: commit them (with a group), close
//!   and exit 0.
//! - `--events`: connection events as JSON lines on stderr.
//! - `--property KEY=VALUE` (repeatable): any consumer property, as
//!   `ConsumerConfigBuilder::set` takes it. Properties are applied before
//!   the flags above, so a flag wins over a property.
//! - `--help`: this list.
//!
//! Each flag taking a value accepts `--flag VALUE` and `--flag=VALUE`.
//!
//! Standard output carries one JSON object per record, in the order
//! received:
//!
//! ```text
//! {"topic":"t","partition":0,"offset":42,"timestamp":1718000000000,"key":"k","value":"v"}
//! ```
//!
//! `key` and `value` are UTF-8 (invalid sequences replaced by U+FFFD), or
//! `null` when the record has none. With `--events`, standard error carries
//! one JSON object per connection event:
//!
//! ```text
//! {"t_ms":12,"event":"ready","broker":null,"addr":"127.0.0.1:9092","purpose":"bootstrap","reason":null}
//! ```
//!
//! `t_ms` counts from the consumer's creation; `event` is `connecting`,
//! `opened`, `connect_failed`, `ready`, `promoted`, `retired` or `closed`;
//! `broker` is `null` while the broker behind a bootstrap address is
//! unknown; `purpose` is `bootstrap`, `coordinator` or `leader`; `reason` is
//! `idle`, `peer`, `error`, `retired` or `shutdown` for `closed`, `null`
//! otherwise.
//!
//! SIGINT or SIGTERM stops it cleanly: it commits what it printed (with a
//! group), leaves the group, closes every connection and exits 0. A signal
//! that comes while it closes (after `--count`, or a second one) gives up
//! at once (exit 1).
//!
//! Exit codes: 0 when done (`--count` reached, or a signal) or for `--help`;
//! 1 when consuming fails; 2 for bad flags or properties. Every error is
//! one line on stderr, starting with `error: `. An error the consumer goes
//! on after by itself (`Error::is_retriable`: a broker unreachable, a topic
//! not there yet) is printed and consuming goes on; any other (a fatal one,
//! such as a group authorization failure) ends the run with exit 1.
//!
//! See `docs/consume-example.md`.

use futures::future::{select, Either};
use futures::StreamExt;
use lazykafka::events::{ConnectionEvent, EventKind};
use lazykafka::{Consumer, ConsumerConfig, ConsumerRecord, OffsetReset, TopicPartition};
use serde::Serialize;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook_async_std::Signals;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "\
usage: consume --bootstrap HOST:PORT[,..] --topic T [--topic T ..] [flags]

  --bootstrap HOST:PORT[,..]  brokers to start from (required)
  --topic T                   topic to read (required, repeatable)
  --group G                   join group G and subscribe; without it, assign
                              every partition of the topics (no commits)
  --from-beginning            start where no offset is committed at the
                              earliest record (default: the latest)
  --count N                   stop after N records: commit, close, exit 0
  --events                    connection events as JSON lines on stderr
  --property KEY=VALUE        any consumer property (repeatable)
  --help                      this text

Records go to stdout, one JSON object a line: topic, partition, offset,
timestamp, key, value. SIGINT/SIGTERM commit (with a group), close and exit 0.
Exit codes: 0 done, 1 consuming failed, 2 bad flags or properties.
";

/// How long one `poll` waits before the loop looks around again.
const POLL: Duration = Duration::from_millis(500);

#[derive(Debug, Default)]
struct Args {
    bootstrap: String,
    topics: Vec<String>,
    group: Option<String>,
    from_beginning: bool,
    count: Option<u64>,
    events: bool,
    properties: Vec<(String, String)>,
}

/// Reads the flags; `Ok(None)` for `--help`.
fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Option<Args>, String> {
    let mut out = Args::default();
    let mut bootstrap = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let takes_value = matches!(
            flag.as_str(),
            "--bootstrap" | "--topic" | "--group" | "--count" | "--property"
        );
        let value = if takes_value {
            match inline {
                Some(v) => v,
                None => args.next().ok_or_else(|| format!("{flag} needs a value"))?,
            }
        } else {
            if inline.is_some() {
                return Err(format!("{flag} takes no value"));
            }
            String::new()
        };
        let non_empty = |v: String| {
            if v.trim().is_empty() {
                Err(format!("{flag} needs a non-empty value"))
            } else {
                Ok(v)
            }
        };
        match flag.as_str() {
            "--help" | "-h" => return Ok(None),
            "--bootstrap" => bootstrap = Some(non_empty(value)?),
            "--topic" => out.topics.push(non_empty(value)?),
            "--group" => out.group = Some(non_empty(value)?),
            "--from-beginning" => out.from_beginning = true,
            "--count" => {
                let n = value
                    .parse()
                    .map_err(|_| format!("--count: not a count: {value:?}"))?;
                out.count = Some(n);
            }
            "--events" => out.events = true,
            "--property" => {
                let (k, v) = value
                    .split_once('=')
                    .ok_or_else(|| format!("--property: expected KEY=VALUE, got {value:?}"))?;
                if k.trim().is_empty() {
                    return Err(format!("--property: empty key in {value:?}"));
                }
                out.properties.push((k.trim().to_owned(), v.to_owned()));
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    out.bootstrap = bootstrap.ok_or("--bootstrap is required")?;
    if out.topics.is_empty() {
        return Err("at least one --topic is required".into());
    }
    Ok(Some(out))
}

/// A failure, with the exit code it leads to.
struct Failure {
    code: u8,
    message: String,
}

fn usage_error(message: impl ToString) -> Failure {
    Failure {
        code: 2,
        message: message.to_string(),
    }
}

fn failure(message: impl ToString) -> Failure {
    Failure {
        code: 1,
        message: message.to_string(),
    }
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            let _ = std::io::stdout().write_all(USAGE.as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(e) => return fail(&usage_error(format!("{e} (see --help)"))),
    };
    match async_std::task::block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => fail(&f),
    }
}

fn fail(f: &Failure) -> ExitCode {
    // One line, whatever the message holds.
    let line = f.message.replace(['\n', '\r'], " ");
    let _ = writeln!(std::io::stderr(), "error: {line}");
    ExitCode::from(f.code)
}

fn config(args: &Args) -> Result<ConsumerConfig, Failure> {
    let mut builder = ConsumerConfig::builder().auto_offset_reset(OffsetReset::Latest);
    for (k, v) in &args.properties {
        builder = builder.set(k, v).map_err(usage_error)?;
    }
    builder = builder.bootstrap_servers(&args.bootstrap);
    if let Some(group) = &args.group {
        builder = builder.group_id(group);
    }
    if args.from_beginning {
        builder = builder.auto_offset_reset(OffsetReset::Earliest);
    }
    builder.build().map_err(usage_error)
}

/// One record on stdout.
#[derive(Serialize)]
struct RecordLine<'a> {
    topic: &'a str,
    partition: i32,
    offset: i64,
    timestamp: i64,
    key: Option<String>,
    value: Option<String>,
}

fn record_line(r: &ConsumerRecord) -> String {
    let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
    let line = RecordLine {
        topic: r.topic(),
        partition: r.partition(),
        offset: r.offset(),
        timestamp: r.timestamp(),
        key: text(r.key()),
        value: text(r.value()),
    };
    serde_json::to_string(&line).unwrap_or_default()
}

/// One connection event on stderr: exactly these keys.
#[derive(Serialize)]
struct EventLine<'a> {
    t_ms: u64,
    event: &'static str,
    broker: Option<i32>,
    addr: &'a str,
    purpose: String,
    reason: Option<String>,
}

fn event_line(e: &ConnectionEvent) -> String {
    let (event, reason) = match &e.kind {
        EventKind::Connecting => ("connecting", None),
        EventKind::Opened => ("opened", None),
        EventKind::ConnectFailed { .. } => ("connect_failed", None),
        EventKind::Ready => ("ready", None),
        EventKind::Authenticated { .. } => ("authenticated", None),
        EventKind::Promoted => ("promoted", None),
        EventKind::Retired => ("retired", None),
        EventKind::Closed { reason, .. } => ("closed", Some(reason.to_string())),
    };
    let line = EventLine {
        t_ms: u64::try_from(e.at.as_millis()).unwrap_or(u64::MAX),
        event,
        broker: e.broker,
        addr: &e.addr,
        purpose: e.purpose.to_string(),
        reason,
    };
    serde_json::to_string(&line).unwrap_or_default()
}

/// Why the loop stopped.
enum Stop {
    /// `--count` records printed.
    Count,
    /// SIGINT or SIGTERM.
    Signal,
    /// Stdout is gone (a closed pipe): nothing more can be printed.
    StdoutClosed,
}

async fn run(args: Args) -> Result<(), Failure> {
    let config = config(&args)?;
    let grouped = config.group_id().is_some();
    // Signals are caught from here on: the default action (exit without
    // closing) no longer applies.
    let signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|e| failure(format!("cannot catch signals: {e}")))?;
    let mut signals = signals.fuse();
    let mut consumer = Consumer::new(config).map_err(usage_error)?;
    // Events are printed from a thread of their own: a write to stderr
    // blocks while nobody reads the pipe, and must not hold an executor
    // thread the consumer's sockets need.
    let printer = args.events.then(|| {
        let mut events = consumer.connection_events();
        std::thread::spawn(move || {
            while let Some(event) = futures::executor::block_on(events.next()) {
                let _ = writeln!(std::io::stderr().lock(), "{}", event_line(&event));
            }
        })
    });

    let outcome = consume(&mut consumer, &args, grouped, &mut signals).await;
    // Close whatever happened (commit first when a group is set and the
    // loop ended normally); a signal now gives up on closing.
    let closing = async {
        let mut result = Ok(());
        if grouped && outcome.is_ok() {
            result = consumer.commit().await.map_err(|e| format!("commit: {e}"));
        }
        let closed = consumer.close().await.map_err(|e| format!("close: {e}"));
        result.and(closed)
    };
    let closed = match select(Box::pin(closing), signals.next()).await {
        Either::Left((result, _)) => result.map_err(failure),
        Either::Right(_) => Err(failure("interrupted while closing")),
    };
    drop(consumer);
    if let Some(printer) = printer {
        // The stream ends once the consumer is gone: the thread prints what
        // is left and stops (unless stderr is stuck; then it is left).
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while !printer.is_finished() && std::time::Instant::now() < deadline {
            async_std::task::sleep(Duration::from_millis(10)).await;
        }
    }
    outcome?;
    closed
}

/// Assigns or subscribes, then prints records until `--count`, a signal,
/// or a failure. On a normal stop, the positions are those of the records
/// printed (so a commit covers exactly them).
async fn consume(
    consumer: &mut Consumer,
    args: &Args,
    grouped: bool,
    signals: &mut futures::stream::Fuse<Signals>,
) -> Result<Stop, Failure> {
    if grouped {
        consumer
            .subscribe(args.topics.iter().cloned())
            .map_err(failure)?;
    } else {
        let mut all: Vec<TopicPartition> = Vec::new();
        for topic in &args.topics {
            let lookup = Box::pin(consumer.partitions_for(topic));
            match select(lookup, signals.next()).await {
                Either::Left((found, _)) => {
                    all.extend(found.map_err(|e| failure(format!("topic {topic}: {e}")))?)
                }
                Either::Right(_) => return Ok(Stop::Signal),
            }
        }
        consumer.assign(all).map_err(failure)?;
    }

    let mut printed: u64 = 0;
    let stdout = std::io::stdout();
    loop {
        if args.count.is_some_and(|n| printed >= n) {
            return Ok(Stop::Count);
        }
        let records = match select(Box::pin(consumer.poll(POLL)), signals.next()).await {
            Either::Left((Ok(records), _)) => records,
            // The consumer goes on by itself after a retriable error (a
            // broker unreachable, a topic not there yet): say it and poll
            // on. Any other ends the run.
            Either::Left((Err(e), _)) if e.is_retriable() && !e.is_fatal() => {
                let line = e.to_string().replace(['\n', '\r'], " ");
                let _ = writeln!(std::io::stderr(), "error: {line}");
                continue;
            }
            Either::Left((Err(e), _)) => return Err(failure(e)),
            Either::Right(_) => return Ok(Stop::Signal),
        };
        let mut out = stdout.lock();
        let mut unprinted: BTreeMap<TopicPartition, i64> = BTreeMap::new();
        let mut stop = None;
        for r in &records {
            if stop.is_some() || args.count.is_some_and(|n| printed >= n) {
                stop.get_or_insert(Stop::Count);
                // Records past the count: where each partition goes on.
                unprinted
                    .entry(TopicPartition::new(r.topic(), r.partition()))
                    .or_insert(r.offset());
                continue;
            }
            match writeln!(out, "{}", record_line(r)) {
                Ok(()) => printed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    stop = Some(Stop::StdoutClosed);
                    unprinted
                        .entry(TopicPartition::new(r.topic(), r.partition()))
                        .or_insert(r.offset());
                }
                Err(e) => return Err(failure(format!("stdout: {e}"))),
            }
        }
        match out.flush() {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                stop.get_or_insert(Stop::StdoutClosed);
            }
            Err(e) => return Err(failure(format!("stdout: {e}"))),
        }
        drop(out);
        // Rewind past what was fetched but not printed, so the commit on
        // closing covers the printed records only.
        for (tp, offset) in &unprinted {
            let _ = consumer.seek(tp, *offset);
        }
        if let Some(stop) = stop {
            return Ok(stop);
        }
    }
}
