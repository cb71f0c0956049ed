//! A small kcat-like producer (`kcat -P`): sends the lines of stdin, or
//! generated records, to a topic, and can report where each one went.
//!
//! ```text
//! cargo run --example produce -- --bootstrap HOST:PORT[,..] --topic T [flags]
//! ```
//!
//! Flags:
//!
//! - `--bootstrap HOST:PORT[,..]` (required): the `bootstrap.servers`.
//! - `--topic T` (required, once): the topic to write to.
//! - `--partition N`: every record to partition `N`. Without it, a record
//!   with a key goes to the partition its key hashes to
//!   ([`lazykafka::producer::partition_for_key`], as the Java client puts
//!   it), one without a key where the sticky partitioner puts it.
//! - `--key-separator S`: each input line is `KEY`, `S`, `VALUE`, split at
//!   the first `S`; a line without `S` is a value without a key. Without
//!   it, the whole line is the value and no record has a key.
//! - `--generate N`: send `N` generated records instead of reading stdin
//!   (needs `--size`; at most 10000000000).
//! - `--size B`: the generated values' length in bytes (10 or more).
//! - `--keys K`: generated record `i` gets the key `k<i mod K>` (`k0`,
//!   `k1`, ...); without it, generated records have no key.
//! - `--report`: one JSON line per delivered record on stdout (below).
//! - `--events`: connection events as JSON lines on stderr, as
//!   `consume --events` prints them.
//! - `--property KEY=VALUE` (repeatable): any producer property, as
//!   `ProducerConfigBuilder::set` takes it (its Java name). Properties are
//!   applied before the flags above, so `--bootstrap` wins over
//!   `bootstrap.servers`.
//! - `--help`: this list.
//!
//! Each flag taking a value accepts `--flag VALUE` and `--flag=VALUE`.
//!
//! Input: a line is the bytes up to a newline (`\n`, which is not part of
//! the record; a `\r` before it is); the last line needs no newline; an
//! empty line is a record with an empty value. Lines need not be UTF-8.
//! Generated record `i` (from 0) has as value `i` in decimal, zero-padded
//! to 10 digits, then `.` bytes up to `B`: with `--size 16`, record 42 is
//! `0000000042......`.
//!
//! Records are sent in input order without waiting for each delivery: up
//! to 10000 records are in flight at once (the next record then waits for
//! one to be reported), and the producer batches them (`linger.ms`,
//! `batch.size`). Each record is sent with `Producer::send_reported` and
//! its outcome read from `Producer::delivery_reports` (no future per
//! record: the way the producer's docs recommend at high volume). At
//! the end of the input the producer is closed: what is in flight is
//! delivered, within `delivery.timeout.ms` plus 5 s.
//!
//! With `--report`, stdout carries one JSON object per delivered record,
//! written out as the deliveries complete (one write per run of them),
//! in the order the deliveries complete (within a partition, offset
//! order), with exactly these keys:
//!
//! ```text
//! {"topic":"t","partition":0,"offset":42,"key":"k0","value":"0000000042......"}
//! ```
//!
//! `key` and `value` are UTF-8 (invalid sequences replaced by U+FFFD), or
//! `null` when the record has none. With `--events`, stderr carries one
//! JSON object per connection event:
//!
//! ```text
//! {"t_ms":12,"event":"ready","broker":null,"addr":"127.0.0.1:9092","purpose":"bootstrap","reason":null}
//! ```
//!
//! `t_ms` counts from the producer's creation; `event` is `connecting`,
//! `opened`, `connect_failed`, `ready`, `promoted`, `retired` or `closed`;
//! `broker` is `null` while the broker behind a bootstrap address is
//! unknown; `purpose` is `bootstrap` or `leader`; `reason` is `idle`,
//! `peer`, `error`, `retired` or `shutdown` for `closed`, `null` otherwise.
//!
//! Errors are lines on stderr starting with `error: `. Each record that
//! is not delivered gets one, `error: record I: T-P: WHY` (`I` counts
//! records from 0 in input order: the line number minus one, or the
//! generated sequence number; `T-P` the topic and partition, `P` being -1
//! when none was chosen), e.g.
//! `error: record 3: t-0: Produce refused with TOPIC_AUTHORIZATION_FAILED (29)`.
//! A record `send` refuses is named as `error: record I: T: WHY` (`T-P`
//! with `--partition`); unless the refusal is the record's own (larger
//! than `max.request.size`), it ends the input: a cluster unreachable or
//! refusing us (named within seconds), the topic's metadata not had within
//! `max.block.ms`, the topic refused,
//! a partition the topic does not have. What was sent before is still
//! delivered, or named.
//!
//! SIGINT or SIGTERM ends the input the same way (the records sent are
//! delivered, then it exits); a second signal while closing gives up at
//! once (exit 1). A reader of `--report` that goes away (`produce ... |
//! head -1`) ends the input too.
//!
//! Exit codes: 0 when every record sent was delivered (or for `--help`); 1
//! when a record was not delivered, `send` refused one, stdin could not be
//! read or closing failed; 2 for bad flags or properties (one `error:`
//! line, nothing sent).
//!
//! The library's own log lines at `warn` and `error` go to stderr too, as
//! `warn: lazykafka: ...` (`RUST_LOG=debug`, `RUST_LOG=lazykafka=info`, ...
//! pick another level).

use bytes::Bytes;
use futures::future::poll_fn;
use futures::stream::BoxStream;
use futures::{SinkExt, Stream, StreamExt};
use lazykafka::events::{ConnectionEvent, EventKind};
use lazykafka::producer::{DeliveryReport, DeliveryReports};
use lazykafka::{Error, Producer, ProducerConfig, ProducerRecord};
use serde::Serialize;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook_async_std::Signals;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::future::Future;
use std::io::{BufRead, BufWriter, Write};
use std::pin::pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

#[path = "support/logger.rs"]
mod logger;

const USAGE: &str = "\
usage: produce --bootstrap HOST:PORT[,..] --topic T [flags]

  --bootstrap HOST:PORT[,..]  brokers to start from (required)
  --topic T                   topic to write to (required)
  --partition N               every record to partition N (default: by key,
                              sticky without one)
  --key-separator S           input lines are KEY S VALUE (split at the first
                              S); without it a line is a value, no key
  --generate N                send N generated records instead of stdin
  --size B                    generated values' length in bytes (>= 10): the
                              sequence number in 10 digits, then '.'
  --keys K                    generated record i gets key k<i mod K>
  --report                    a JSON line per delivered record on stdout
  --events                    connection events as JSON lines on stderr
  --property KEY=VALUE        any producer property (repeatable)
  --help                      this text

Reads stdin, one record per line, unless --generate. With --report, stdout
has one JSON object a line: topic, partition, offset, key, value.
Each record not delivered: one 'error: record I: ...' line on stderr.
SIGINT/SIGTERM stop the input; what was sent is delivered.
Exit codes: 0 all delivered, 1 a record failed, 2 bad flags or properties.
";

/// The most records in flight (sent, not yet reported) at once.
const IN_FLIGHT: usize = 10_000;

/// How many records the loop sends between two looks at its deliveries
/// and its signals' channel (a signal is seen at once all the same).
const LOOK_EVERY: u64 = 64;

/// Lines read ahead of the producer.
const LINES_AHEAD: usize = 1024;
/// How much longer than `delivery.timeout.ms` closing may take.
const CLOSE_SLACK: Duration = Duration::from_secs(5);
/// How long the deliveries still unresolved after `close` may take to say
/// so (they resolve as the background task stops).
const AFTER_CLOSE: Duration = Duration::from_secs(5);
/// The width of the generated sequence number.
const SEQ_WIDTH: usize = 10;
/// The most records `--generate` sends (numbers of 10 digits).
const MAX_GENERATE: u64 = 10_000_000_000;

#[derive(Debug, Default)]
struct Args {
    bootstrap: String,
    topic: String,
    partition: Option<i32>,
    key_separator: Option<Vec<u8>>,
    generate: Option<u64>,
    size: Option<usize>,
    keys: Option<u64>,
    report: bool,
    events: bool,
    properties: Vec<(String, String)>,
}

/// Reads the flags; `Ok(None)` for `--help`.
fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Option<Args>, String> {
    let mut out = Args::default();
    let mut bootstrap = None;
    let mut topic = None;
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
                | "--partition"
                | "--key-separator"
                | "--generate"
                | "--size"
                | "--keys"
                | "--property"
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
            "--topic" => {
                if topic.is_some() {
                    return Err("--topic is given once: one topic per run".into());
                }
                topic = Some(non_empty(value)?);
            }
            "--partition" => {
                let p = value
                    .parse::<i32>()
                    .ok()
                    .filter(|p| *p >= 0)
                    .ok_or_else(|| format!("--partition: not a partition number: {value:?}"))?;
                out.partition = Some(p);
            }
            "--key-separator" => {
                if value.is_empty() {
                    return Err("--key-separator needs a non-empty value".into());
                }
                out.key_separator = Some(value.into_bytes());
            }
            "--generate" => {
                let n = value
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n <= MAX_GENERATE)
                    .ok_or_else(|| {
                        format!("--generate: not a count up to {MAX_GENERATE}: {value:?}")
                    })?;
                out.generate = Some(n);
            }
            "--size" => {
                let b = value
                    .parse::<usize>()
                    .ok()
                    .filter(|b| *b >= SEQ_WIDTH)
                    .ok_or_else(|| {
                        format!("--size: not a size of {SEQ_WIDTH} bytes or more: {value:?}")
                    })?;
                out.size = Some(b);
            }
            "--keys" => {
                let k = value
                    .parse::<u64>()
                    .ok()
                    .filter(|k| *k > 0)
                    .ok_or_else(|| format!("--keys: not a positive count: {value:?}"))?;
                out.keys = Some(k);
            }
            "--report" => out.report = true,
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
    out.topic = topic.ok_or("--topic is required")?;
    match (out.generate, out.size) {
        (Some(_), None) => return Err("--generate needs --size".into()),
        (None, Some(_)) => return Err("--size is for --generate".into()),
        _ => {}
    }
    if out.keys.is_some() && out.generate.is_none() {
        return Err("--keys is for --generate (stdin keys: --key-separator)".into());
    }
    if out.key_separator.is_some() && out.generate.is_some() {
        return Err("--key-separator is for stdin, not --generate".into());
    }
    Ok(Some(out))
}

/// A failure before anything was sent, with the exit code it leads to.
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
        Ok(code) => code,
        Err(f) => fail(&f),
    }
}

/// One `error: ` line on stderr, whatever the message holds.
fn say(message: &str) {
    let line = format!("error: {}\n", message.replace(['\n', '\r'], " "));
    let _ = std::io::stderr().write_all(line.as_bytes());
}

fn fail(f: &Failure) -> ExitCode {
    say(&f.message);
    ExitCode::from(f.code)
}

fn config(args: &Args) -> Result<ProducerConfig, Failure> {
    let mut builder = ProducerConfig::builder();
    for (k, v) in &args.properties {
        builder = builder.set(k, v).map_err(usage_error)?;
    }
    builder
        .bootstrap_servers(&args.bootstrap)
        .build()
        .map_err(usage_error)
}

/// One record of the input: its key (if any) and value.
struct Input {
    key: Option<Bytes>,
    value: Bytes,
}

/// The records of stdin, read by a thread of its own (a blocking read must
/// not hold an executor thread), at most [`LINES_AHEAD`] ahead.
fn stdin_records(separator: Option<Vec<u8>>) -> BoxStream<'static, std::io::Result<Input>> {
    let (mut tx, rx) = futures::channel::mpsc::channel(LINES_AHEAD);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        loop {
            let mut line = Vec::new();
            let read = match stdin.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(_) => {
                    if line.last() == Some(&b'\n') {
                        line.pop();
                    }
                    Ok(split_line(line, separator.as_deref()))
                }
                Err(e) => Err(e),
            };
            let last = read.is_err();
            // The receiver is gone when the input was ended: stop reading.
            if futures::executor::block_on(tx.send(read)).is_err() || last {
                break;
            }
        }
    });
    rx.boxed()
}

/// A line as a record: split at the first `separator` when there is one.
fn split_line(line: Vec<u8>, separator: Option<&[u8]>) -> Input {
    let line = Bytes::from(line);
    let at = separator.and_then(|s| line.windows(s.len()).position(|w| w == s).map(|i| (i, s)));
    match at {
        Some((i, s)) => Input {
            key: Some(line.slice(..i)),
            value: line.slice(i + s.len()..),
        },
        None => Input {
            key: None,
            value: line,
        },
    }
}

/// Generated record `i`: see the module documentation.
fn generated(i: u64, size: usize, keys: Option<u64>) -> Input {
    // One allocation of the final size: the digits, then the padding.
    let mut value = Vec::with_capacity(size);
    let _ = write!(value, "{i:0SEQ_WIDTH$}");
    value.resize(size, b'.');
    Input {
        key: keys.map(|k| Bytes::from(format!("k{}", i % k))),
        value: value.into(),
    }
}

/// The records to send, from stdin or generated.
fn records(args: &Args) -> BoxStream<'static, std::io::Result<Input>> {
    match (args.generate, args.size) {
        (Some(n), Some(size)) => {
            let keys = args.keys;
            futures::stream::iter((0..n).map(move |i| Ok(generated(i, size, keys)))).boxed()
        }
        _ => stdin_records(args.key_separator.clone()),
    }
}

/// What a record's report line needs, kept from its `send` to its report
/// (with `--report` only).
struct Sent {
    key: Option<Bytes>,
    value: Bytes,
}

/// One delivered record on stdout: exactly these keys.
#[derive(Serialize)]
struct ReportLine<'a> {
    topic: &'a str,
    partition: i32,
    offset: i64,
    key: Option<Cow<'a, str>>,
    value: Option<Cow<'a, str>>,
}

/// What the run has seen of its deliveries.
struct Deliveries {
    reports: DeliveryReports,
    /// Records sent and not yet reported.
    in_flight: usize,
    /// `--report`: the records from index `base` on, `None` once reported
    /// (or refused by `send`).
    sent: VecDeque<Option<Sent>>,
    base: u64,
    /// `--report`: stdout, through a buffer flushed after each run of
    /// deliveries.
    report: Option<BufWriter<std::io::Stdout>>,
    /// The reader of stdout went away.
    stdout_gone: bool,
    /// Records not delivered (each said on stderr).
    failed: u64,
}

impl Deliveries {
    fn new(report: bool, reports: DeliveryReports) -> Self {
        Deliveries {
            reports,
            in_flight: 0,
            sent: VecDeque::new(),
            base: 0,
            report: report.then(|| BufWriter::with_capacity(64 * 1024, std::io::stdout())),
            stdout_gone: false,
            failed: 0,
        }
    }

    /// Record `index` was queued (with `--report`, `record` keeps its
    /// key and value for its report line), or refused.
    fn sent(&mut self, index: u64, queued: bool, record: Option<Sent>) {
        self.in_flight += usize::from(queued);
        if self.report.is_some() {
            debug_assert_eq!(index, self.base + self.sent.len() as u64);
            self.sent.push_back(record);
            self.trim();
        }
    }

    /// Drops the records reported or refused at the front.
    fn trim(&mut self) {
        while matches!(self.sent.front(), Some(None)) {
            self.sent.pop_front();
            self.base += 1;
        }
    }

    /// Reports every delivery reported so far (the report lines written
    /// out together); registers for the next one.
    fn poll_done(&mut self, cx: &mut std::task::Context<'_>) {
        let mut any = false;
        while let Poll::Ready(Some(done)) = self.reports.poll_next_unpin(cx) {
            self.done(done);
            any = true;
        }
        if any {
            self.trim();
            self.flush();
        }
    }

    fn done(&mut self, d: DeliveryReport) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let sent = d
            .token
            .checked_sub(self.base)
            .and_then(|i| self.sent.get_mut(i as usize))
            .and_then(Option::take);
        match d.outcome {
            Ok(meta) => {
                let Some(out) = self.report.as_mut().filter(|_| !self.stdout_gone) else {
                    return;
                };
                let Some(sent) = sent else {
                    return;
                };
                let line = ReportLine {
                    topic: &meta.topic,
                    partition: meta.partition,
                    offset: meta.offset,
                    key: sent.key.as_deref().map(String::from_utf8_lossy),
                    value: Some(String::from_utf8_lossy(&sent.value)),
                };
                let written = serde_json::to_writer(&mut *out, &line)
                    .map_err(std::io::Error::from)
                    .and_then(|()| out.write_all(b"\n"));
                if written.is_err() {
                    self.stdout_gone = true;
                }
            }
            Err(e) => {
                self.failed += 1;
                say(&format!("record {}: {e}", d.token));
            }
        }
    }

    /// Writes out the report lines buffered so far.
    fn flush(&mut self) {
        if let Some(out) = self.report.as_mut().filter(|_| !self.stdout_gone) {
            if out.flush().is_err() {
                self.stdout_gone = true;
            }
        }
    }
}

/// One connection event on stderr: exactly these keys (as `consume`).
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

/// What the sending loop waits for next.
enum Step {
    Signal,
    StdoutGone,
    Input(Option<std::io::Result<Input>>),
}

/// Whether a signal came (a stream that ended counts as none).
fn signalled(signals: &mut (impl Stream + Unpin), cx: &mut std::task::Context<'_>) -> bool {
    matches!(signals.poll_next_unpin(cx), Poll::Ready(Some(_)))
}

async fn run(args: Args) -> Result<ExitCode, Failure> {
    let config = config(&args)?;
    let close_within = config.delivery_timeout() + CLOSE_SLACK;
    // Signals are caught from here on: the default action (exit without
    // delivering) no longer applies.
    let caught = Signals::new([SIGINT, SIGTERM])
        .map_err(|e| failure(format!("cannot catch signals: {e}")))?;
    // Polling the signals' stream reads their pipe (a system call): the
    // loop below looks once per record, so a task of its own waits on the
    // pipe and passes each signal on through a channel, which costs the
    // loop no system call to look at.
    let (tell, mut signals) = futures::channel::mpsc::unbounded();
    // Raised with each signal: the loop looks at this flag for each
    // record, and at the channel (which registers for a wake-up) only
    // every `LOOK_EVERY` records or before it waits.
    let raised = Arc::new(AtomicBool::new(false));
    let raise = raised.clone();
    async_std::task::spawn(caught.for_each(move |signal| {
        raise.store(true, Ordering::Relaxed);
        let _ = tell.unbounded_send(signal);
        async {}
    }));
    let producer = Producer::new(config).map_err(usage_error)?;
    // Events are printed from a thread of their own: a write to stderr
    // blocks while nobody reads the pipe, and must not hold an executor
    // thread.
    let printer = args.events.then(|| {
        let mut events = producer.connection_events();
        std::thread::spawn(move || {
            while let Some(event) = futures::executor::block_on(events.next()) {
                let line = format!("{}\n", event_line(&event));
                let _ = std::io::stderr().write_all(line.as_bytes());
            }
        })
    });

    let mut input = records(&args);
    let mut deliveries = Deliveries::new(args.report, producer.delivery_reports());
    // Something other than a delivery went wrong (already said).
    let mut troubled = false;
    let mut index: u64 = 0;
    loop {
        let step = poll_fn(|cx| {
            // Most records: only the next input. Deliveries are taken
            // every `LOOK_EVERY` records, at the in-flight limit, and
            // whenever the input is not ready (before waiting).
            let look_around = index.is_multiple_of(LOOK_EVERY)
                || deliveries.in_flight >= IN_FLIGHT
                || raised.load(Ordering::Relaxed);
            if !look_around {
                if let Poll::Ready(next) = input.poll_next_unpin(cx) {
                    return Poll::Ready(Step::Input(next));
                }
            }
            if signalled(&mut signals, cx) {
                return Poll::Ready(Step::Signal);
            }
            deliveries.poll_done(cx);
            if deliveries.stdout_gone {
                return Poll::Ready(Step::StdoutGone);
            }
            if deliveries.in_flight >= IN_FLIGHT {
                return Poll::Pending;
            }
            input.poll_next_unpin(cx).map(Step::Input)
        })
        .await;
        let next = match step {
            Step::Signal | Step::StdoutGone | Step::Input(None) => break,
            Step::Input(Some(Err(e))) => {
                say(&format!("stdin: {e}"));
                troubled = true;
                break;
            }
            Step::Input(Some(Ok(next))) => next,
        };
        // The key and value are kept for the report line only with
        // `--report` (a clone of `Bytes` is a count, not a copy).
        let kept = deliveries.report.is_some().then(|| Sent {
            key: next.key.clone(),
            value: next.value.clone(),
        });
        let mut record = ProducerRecord::new(args.topic.as_str()).value(next.value);
        if let Some(key) = next.key {
            record = record.key(key);
        }
        if let Some(p) = args.partition {
            record = record.partition(p);
        }
        let this = index;
        index += 1;
        let mut sending = pin!(producer.send_reported(record, this));
        // `send` may wait (for the topic's metadata, for room in
        // buffer.memory): deliveries are reported meanwhile. It usually
        // queues the record at once, and then nothing else is looked at.
        let sent = poll_fn(|cx| {
            if let Poll::Ready(sent) = sending.as_mut().poll(cx) {
                return Poll::Ready(Some(sent));
            }
            if signalled(&mut signals, cx) {
                return Poll::Ready(None);
            }
            deliveries.poll_done(cx);
            Poll::Pending
        })
        .await;
        match sent {
            // A signal: this record is dropped, as the ones not read yet.
            None => break,
            Some(Ok(())) => deliveries.sent(this, true, kept),
            Some(Err(e)) => {
                deliveries.sent(this, false, None);
                let at = match args.partition {
                    Some(p) => format!("{}-{p}", args.topic),
                    None => args.topic.clone(),
                };
                say(&format!("record {this}: {at}: {e}"));
                deliveries.failed += 1;
                // Only a record too large is refused for itself; any other
                // refusal would meet every record after it.
                if !matches!(e, Error::Config { .. }) {
                    break;
                }
            }
        }
    }
    // Deliver what was sent, reporting it as it comes; a signal now gives
    // up at once.
    let closed = {
        let mut closing = pin!(producer.close_timeout(close_within));
        poll_fn(|cx| {
            if signalled(&mut signals, cx) {
                return Poll::Ready(None);
            }
            deliveries.poll_done(cx);
            closing.as_mut().poll(cx).map(Some)
        })
        .await
    };
    match closed {
        None => {
            say("interrupted while closing");
            return Ok(ExitCode::from(1));
        }
        Some(Err(e)) => {
            say(&format!("close: {e}"));
            troubled = true;
        }
        Some(Ok(())) => {}
    }
    // Every delivery resolves now: delivered, failed, or failed by close.
    let mut after_close = pin!(async_std::task::sleep(AFTER_CLOSE));
    let resolved = poll_fn(|cx| {
        if signalled(&mut signals, cx) {
            return Poll::Ready(None);
        }
        deliveries.poll_done(cx);
        if deliveries.in_flight == 0 {
            return Poll::Ready(Some(true));
        }
        after_close.as_mut().poll(cx).map(|()| Some(false))
    })
    .await;
    let Some(resolved) = resolved else {
        say("interrupted while closing");
        return Ok(ExitCode::from(1));
    };
    if !resolved {
        say(&format!(
            "{} records without an outcome after close",
            deliveries.in_flight
        ));
        troubled = true;
    }
    drop(producer);
    if let Some(printer) = printer {
        // The stream ends once the producer is gone: the thread prints what
        // is left and stops (unless stderr is stuck; then it is left).
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while !printer.is_finished() && std::time::Instant::now() < deadline {
            async_std::task::sleep(Duration::from_millis(10)).await;
        }
    }
    Ok(if troubled || deliveries.failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
