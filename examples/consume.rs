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
//! - `--format F`: how records are printed: `json` (default, below),
//!   `value` (the value's bytes and a newline, as `kcat -f '%s\n'`) or
//!   `key-value` (key, a tab, value, newline; a missing key or value
//!   prints as nothing).
//! - `--offset O` (without `--group`): where every assigned partition
//!   starts: `beginning`, `end`, `N` (offset N), `-N` (N records before
//!   the end, at most from the beginning) or `@T` (the first record at or
//!   after T ms since the Unix epoch; the end when there is none).
//! - `--exit-at-end`: stop once every assigned partition has reached the
//!   end of its log (`enable.partition.eof=true`; as `kcat -e`): commit
//!   what was printed (with a group), close and exit 0. With a group, it
//!   waits for an assignment first.
//! - `--stats N`: the consumer's metrics as one JSON line on stderr every
//!   `N` ms (lag per partition, broker counters, group state), from
//!   `Consumer::statistics` with `statistics.interval.ms=N`.
//! - `--events`: connection events as JSON lines on stderr.
//! - `--property KEY=VALUE` (repeatable): any consumer property, as
//!   `ConsumerConfigBuilder::set` takes it. Properties are applied before
//!   the flags above, so a flag wins over a property.
//! - `--help`: this list.
//!
//! Each flag taking a value accepts `--flag VALUE` and `--flag=VALUE`.
//!
//! Standard output is written through a buffer flushed after each polled
//! batch (not per record). With `--format json` it carries one JSON object
//! per record, in the order received:
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
//! Exit codes: 0 when done (`--count` reached, every partition at its end
//! with `--exit-at-end`, or a signal; a closing
//! commit refused for a rebalance is printed and is no failure) or for
//! `--help`; 1 when consuming fails; 2 for bad flags or properties. Every error is
//! one line on stderr, starting with `error: `. An error the consumer goes
//! on after by itself (`Error::is_retriable`: a broker unreachable, a topic
//! not there yet, a rebalance) is printed and consuming goes on (a failed
//! partition lookup is tried again a second later); any other (a fatal one,
//! such as a group authorization failure) ends the run with exit 1.
//!
//! The library's own log lines at `warn` and `error` go to stderr too, as
//! `warn: lazykafka: ...` (`RUST_LOG=debug`, `RUST_LOG=lazykafka=info`, ...
//! pick another level).
//!
//! See `docs/consume-example.md`.

use futures::future::{select, Either};
use futures::StreamExt;
use lazykafka::events::{ConnectionEvent, EventKind};
use lazykafka::{Consumer, ConsumerConfig, ConsumerRecord, OffsetReset, TopicPartition};
use serde::Serialize;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook_async_std::Signals;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufWriter, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[path = "support/logger.rs"]
mod logger;
#[path = "support/record_line.rs"]
mod record_line;
use record_line::RecordLine;

/// How long the example waits before asking again for the partitions of a
/// topic whose lookup failed with a retriable error.
const LOOKUP_AGAIN_AFTER: Duration = Duration::from_secs(1);

const USAGE: &str = "\
usage: consume --bootstrap HOST:PORT[,..] --topic T [--topic T ..] [flags]

  --bootstrap HOST:PORT[,..]  brokers to start from (required)
  --topic T                   topic to read (required, repeatable)
  --group G                   join group G and subscribe; without it, assign
                              every partition of the topics (no commits)
  --from-beginning            start where no offset is committed at the
                              earliest record (default: the latest)
  --count N                   stop after N records: commit, close, exit 0
  --exit-at-end               stop once every assigned partition is read to
                              its end: commit, close, exit 0
  --format json|value|key-value
                              record format on stdout (default json)
  --offset beginning|end|N|-N|@T
                              where each partition starts (without --group)
  --stats N                   metrics as a JSON line on stderr every N ms
  --events                    connection events as JSON lines on stderr
  --property KEY=VALUE        any consumer property (repeatable)
  --help                      this text

Records go to stdout, by default one JSON object a line: topic, partition,
offset, timestamp, key, value. SIGINT/SIGTERM commit (with a group), close
and exit 0.
Exit codes: 0 done, 1 consuming failed, 2 bad flags or properties.
";

/// How long one `poll` waits before the loop looks around again.
const POLL: Duration = Duration::from_millis(500);

/// `--format`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Format {
    #[default]
    Json,
    Value,
    KeyValue,
}

/// `--offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StartAt {
    Beginning,
    End,
    Offset(i64),
    FromEnd(i64),
    Timestamp(i64),
}

fn parse_offset(v: &str) -> Result<StartAt, String> {
    let bad = || format!("--offset: expected beginning, end, N, -N or @TIMESTAMP, got {v:?}");
    match v {
        "beginning" => Ok(StartAt::Beginning),
        "end" => Ok(StartAt::End),
        _ => {
            if let Some(t) = v.strip_prefix('@') {
                t.parse().map(StartAt::Timestamp).map_err(|_| bad())
            } else if let Some(n) = v.strip_prefix('-') {
                n.parse::<i64>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .map(StartAt::FromEnd)
                    .ok_or_else(bad)
            } else {
                v.parse::<i64>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .map(StartAt::Offset)
                    .ok_or_else(bad)
            }
        }
    }
}

#[derive(Debug, Default)]
struct Args {
    bootstrap: String,
    topics: Vec<String>,
    group: Option<String>,
    from_beginning: bool,
    count: Option<u64>,
    exit_at_end: bool,
    format: Format,
    offset: Option<StartAt>,
    stats: Option<Duration>,
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
            "--bootstrap"
                | "--topic"
                | "--group"
                | "--count"
                | "--property"
                | "--format"
                | "--offset"
                | "--stats"
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
            "--exit-at-end" => out.exit_at_end = true,
            "--count" => {
                let n = value
                    .parse()
                    .map_err(|_| format!("--count: not a count: {value:?}"))?;
                out.count = Some(n);
            }
            "--format" => {
                out.format = match value.as_str() {
                    "json" => Format::Json,
                    "value" => Format::Value,
                    "key-value" => Format::KeyValue,
                    other => {
                        return Err(format!(
                            "--format: expected json, value or key-value, got {other:?}"
                        ))
                    }
                }
            }
            "--offset" => out.offset = Some(parse_offset(&value)?),
            "--stats" => {
                let ms: u64 =
                    value.parse().ok().filter(|ms| *ms > 0).ok_or_else(|| {
                        format!("--stats: not a positive number of ms: {value:?}")
                    })?;
                out.stats = Some(Duration::from_millis(ms));
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
    let grouped = out.group.is_some() || out.properties.iter().any(|(k, _)| k == "group.id");
    if out.offset.is_some() && grouped {
        return Err(
            "--offset is for manual assignment: a group starts at its committed offsets".into(),
        );
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
    // The library's warn and error lines on stderr (RUST_LOG picks the level).
    logger::init();
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
    if args.exit_at_end {
        builder = builder.enable_partition_eof(true);
    }
    if let Some(every) = args.stats {
        builder = builder.statistics_interval(every);
    }
    builder.build().map_err(usage_error)
}

/// Writes one record to `out` in `format`.
fn write_record(out: &mut impl Write, format: Format, r: &ConsumerRecord) -> std::io::Result<()> {
    match format {
        Format::Json => {
            // Serialised straight into the buffer: no string per record.
            serde_json::to_writer(&mut *out, &record_line(r)).map_err(std::io::Error::from)?;
            out.write_all(b"\n")
        }
        Format::Value => {
            out.write_all(r.value().unwrap_or_default())?;
            out.write_all(b"\n")
        }
        Format::KeyValue => {
            out.write_all(r.key().unwrap_or_default())?;
            out.write_all(b"\t")?;
            out.write_all(r.value().unwrap_or_default())?;
            out.write_all(b"\n")
        }
    }
}

/// A record's JSON line; key and value borrow the record's bytes when they
/// are valid UTF-8.
fn record_line(r: &ConsumerRecord) -> RecordLine<'_> {
    RecordLine {
        topic: r.topic(),
        partition: r.partition(),
        offset: r.offset(),
        timestamp: r.timestamp().millis().unwrap_or(-1),
        key: r.key().map(String::from_utf8_lossy),
        value: r.value().map(String::from_utf8_lossy),
    }
}

/// One connection event on stderr: exactly these keys.
#[derive(Serialize)]
struct EventLine<'a> {
    t_ms: u64,
    event: String,
    broker: Option<i32>,
    addr: &'a str,
    purpose: String,
    reason: Option<String>,
}

fn event_line(e: &ConnectionEvent) -> String {
    // The kind's name as the library serializes it (its `event` tag), so
    // that a kind added in a later release is named as well.
    let event = serde_json::to_value(&e.kind)
        .ok()
        .and_then(|v| v["event"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let reason = match &e.kind {
        EventKind::Closed { reason, .. } => Some(reason.to_string()),
        _ => None,
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
    /// `--exit-at-end`: every assigned partition read to its end.
    AtEnd,
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
    // `--stats`: the same, for the statistics the consumer gives every
    // `statistics.interval.ms`; the stream ends once the consumer is closed.
    let stats_printer = match args.stats {
        Some(_) => {
            let mut statistics = consumer.statistics().map_err(usage_error)?;
            Some(std::thread::spawn(move || {
                while let Some(metrics) = futures::executor::block_on(statistics.next()) {
                    let line = serde_json::to_string(&metrics).unwrap_or_default();
                    let _ = writeln!(std::io::stderr().lock(), "{line}");
                }
            }))
        }
        None => None,
    };

    let outcome = consume(&mut consumer, &args, grouped, &mut signals).await;
    // Close whatever happened (commit first when a group is set and the
    // loop ended normally); a signal now gives up on closing.
    let closing = async {
        let mut result = Ok(());
        if grouped && outcome.is_ok() {
            result = match consumer.commit().await {
                // A rebalance took the partitions meanwhile (or the
                // coordinator is moving): their next owner starts after the
                // last commit. Said, and no failure.
                Err(e) if e.is_retriable() => {
                    let line = e.to_string().replace(['\n', '\r'], " ");
                    let _ = writeln!(std::io::stderr(), "error: commit: {line}");
                    Ok(())
                }
                other => other.map_err(|e| format!("commit: {e}")),
            };
        }
        let closed = match consumer.close().await {
            Err(e) if e.is_retriable() => {
                let line = e.to_string().replace(['\n', '\r'], " ");
                let _ = writeln!(std::io::stderr(), "error: close: {line}");
                Ok(())
            }
            other => other.map_err(|e| format!("close: {e}")),
        };
        result.and(closed)
    };
    let closed = match select(Box::pin(closing), signals.next()).await {
        Either::Left((result, _)) => result.map_err(failure),
        Either::Right(_) => Err(failure("interrupted while closing")),
    };
    drop(consumer);
    // The streams end once the consumer is gone: the threads print what is
    // left and stop (unless stderr is stuck; then they are left).
    let deadline = Instant::now() + Duration::from_secs(2) + args.stats.unwrap_or_default();
    for printer in [printer, stats_printer].into_iter().flatten() {
        while !printer.is_finished() && Instant::now() < deadline {
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
            loop {
                let lookup = Box::pin(consumer.partitions_for(topic));
                match select(lookup, signals.next()).await {
                    Either::Left((Ok(found), _)) => {
                        all.extend(found);
                        break;
                    }
                    // A broker not there yet, a topic not created yet: the
                    // consumer goes on trying; say it, and ask again a
                    // second later.
                    Either::Left((Err(e), _)) if e.is_retriable() && !e.is_fatal() => {
                        let line = e.to_string().replace(['\n', '\r'], " ");
                        let _ = writeln!(std::io::stderr(), "error: topic {topic}: {line}");
                        let pause = Box::pin(async_std::task::sleep(LOOKUP_AGAIN_AFTER));
                        if let Either::Right(_) = select(pause, signals.next()).await {
                            return Ok(Stop::Signal);
                        }
                    }
                    Either::Left((Err(e), _)) => {
                        return Err(failure(format!("topic {topic}: {e}")))
                    }
                    Either::Right(_) => return Ok(Stop::Signal),
                }
            }
        }
        consumer.assign(all.clone()).map_err(failure)?;
        if let Some(start) = args.offset {
            let placed = Box::pin(start_at(consumer, &all, start));
            match select(placed, signals.next()).await {
                Either::Left((placed, _)) => placed.map_err(failure)?,
                Either::Right(_) => return Ok(Stop::Signal),
            }
        }
    }

    let mut printed: u64 = 0;
    let stdout = std::io::stdout();
    // `--exit-at-end`: the partitions read to their end, and not given a
    // record since.
    let mut at_end: BTreeSet<TopicPartition> = BTreeSet::new();
    loop {
        if args.count.is_some_and(|n| printed >= n) {
            return Ok(Stop::Count);
        }
        if args.exit_at_end {
            let assignment = consumer.assignment();
            if !assignment.is_empty() && assignment.is_subset(&at_end) {
                return Ok(Stop::AtEnd);
            }
        }
        let records = match select(Box::pin(consumer.poll(POLL)), signals.next()).await {
            Either::Left((Ok(records), _)) => records,
            // A partition read to its end (`enable.partition.eof`): no
            // error, nothing to say.
            Either::Left((Err(e), _)) if e.partition_eof().is_some() => {
                if let Some((tp, _)) = e.partition_eof() {
                    at_end.insert(tp.clone());
                }
                continue;
            }
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
        // One buffer for the batch, flushed once after it: a write per
        // record would be a system call per record.
        let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
        let mut unprinted: BTreeMap<TopicPartition, i64> = BTreeMap::new();
        let mut stop = None;
        for r in &records {
            if !at_end.is_empty() {
                at_end.remove(&TopicPartition::new(r.topic(), r.partition()));
            }
            if stop.is_some() || args.count.is_some_and(|n| printed >= n) {
                stop.get_or_insert(Stop::Count);
                // Records past the count: where each partition goes on.
                unprinted
                    .entry(TopicPartition::new(r.topic(), r.partition()))
                    .or_insert(r.offset());
                continue;
            }
            match write_record(&mut out, args.format, r) {
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
                // Which of the batch's records got out is unknown: none
                // counts as printed, so a commit covers none of them.
                stop.get_or_insert(Stop::StdoutClosed);
                for r in &records {
                    unprinted
                        .entry(TopicPartition::new(r.topic(), r.partition()))
                        .and_modify(|o| *o = (*o).min(r.offset()))
                        .or_insert(r.offset());
                }
            }
            Err(e) => return Err(failure(format!("stdout: {e}"))),
        }
        // The buffer is empty now (or its reader gone): drop it without a
        // second flush.
        let _ = out.into_parts();
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

/// Moves every partition of `all` to where `--offset` says.
async fn start_at(
    consumer: &mut Consumer,
    all: &[TopicPartition],
    start: StartAt,
) -> Result<(), lazykafka::Error> {
    match start {
        StartAt::Beginning => consumer.seek_to_beginning(all),
        StartAt::End => consumer.seek_to_end(all),
        StartAt::Offset(n) => all.iter().try_for_each(|tp| consumer.seek(tp, n)),
        StartAt::FromEnd(n) => {
            let ends = consumer.end_offsets(all.iter().cloned()).await?;
            let starts = consumer.beginning_offsets(all.iter().cloned()).await?;
            all.iter().try_for_each(|tp| {
                let end = ends.get(tp).copied().unwrap_or(0);
                let first = starts.get(tp).copied().unwrap_or(0);
                consumer.seek(tp, end.saturating_sub(n).max(first))
            })
        }
        StartAt::Timestamp(t) => {
            let found = consumer
                .offsets_for_times(all.iter().map(|tp| (tp.clone(), t)))
                .await?;
            for tp in all {
                match found.get(tp).copied().flatten() {
                    Some(hit) => consumer.seek(tp, hit.offset)?,
                    // No record at or after the time: only new ones.
                    None => consumer.seek_to_end([tp])?,
                }
            }
            Ok(())
        }
    }
}
