//! Log truncation on Apache Kafka itself (the cluster of `scripts/kafka.sh`)
//! after an unclean leader election, as our consumer finds it (KIP-320,
//! docs/fetching.md, "Log truncation"), side by side with the Java
//! consumer in the same run.
//!
//! The scenario, on two topics of one partition each (one per
//! `auto.offset.reset` policy, so that each warn line belongs to one
//! consumer), replicas [1, 2], `unclean.leader.election.enable=true`,
//! `min.insync.replicas=1`: `old-0..old-49` written with acks=all (both
//! replicas have them); broker 2 shut down (the ISR shrinks to [1]);
//! `lost-50..lost-79` written with acks=1 to broker 1 alone; every consumer
//! reads all 80. Then broker 1 is killed, broker 2 started again and
//! elected uncleanly (asked for with `admin elect-leaders --type unclean`
//! until it leads; the topic allowing it, the controller does it by itself
//! once broker 1 is fenced, and the request is then not needed): its log
//! ends at 50, a new leader epoch begins there, and `new-50..new-109` take
//! the offsets of the lost records, and more.
//!
//! What must hold:
//! - under `auto.offset.reset=earliest`, the position goes back to 50, the
//!   end offset of its epoch on the new leader, said in a `warn` line that
//!   names the partition, 50 and 80 before any record is delivered again;
//!   then `new-50..new-109` each once, in order: nothing skipped, nothing
//!   of the old log read again, no reset to the log start. The Java
//!   consumer with `earliest` delivers exactly the same in the same run
//!   (it logs "Truncation detected ... resetting offset to the first
//!   offset known to diverge", at info, and seeks there);
//! - under `none`, `FetchError::LogTruncation` naming the partition, the
//!   position 80 and the divergent offset 50, once, not retriable; the
//!   partition waits; the loop seeks to the divergent offset (what the
//!   docs leave to the application) and reads `new-50..new-109`. The Java
//!   consumer with `none` throws `LogTruncationException` naming offset 50;
//! - no other non-retriable error reaches either loop (the README's);
//! - broker 1 started again truncates its log to follow broker 2 and gets
//!   its leadership back (a new epoch again, which our consumers validate
//!   and find no truncation in): `after-110..after-119` reach each
//!   consumer once, and the log read back from the start is `old`, `new`,
//!   `after`.
//!
//! These tests stop brokers, so they are `#[ignore]`d: the test command
//! runs them after everything else, one at a time
//! (`--run-ignored only --test-threads 1`). By hand, against a cluster of
//! their own: `LAZYKAFKA_KAFKA_RUN_DIR=$PWD/.kafka/run-trunc
//! scripts/kafka.sh start`, then `eval "$(LAZYKAFKA_KAFKA_RUN_DIR=...
//! scripts/kafka.sh env)"` and `cargo test --all-features --test
//! kafka_truncation -- --ignored --test-threads 1`.

// Drives a `Consumer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::kafka::{Kafka, PartitionInfo, Peer};
use common::peers::logs;
use common::{sleep, spawn};
use lazykafka::fetch::FetchError;
use lazykafka::{Consumer, ConsumerConfig, Error, OffsetReset, TopicPartition};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest any step may take: a killed broker is fenced by the
/// controller after `broker.session.timeout.ms` (9 s), and a broker
/// started again catches up on the metadata first.
const WAIT: Duration = Duration::from_secs(90);

/// `old-0..old-49`: on both replicas.
const OLD: i64 = 50;
/// `lost-50..lost-79`: on broker 1 alone, lost in the unclean election.
const LOST: i64 = 30;
/// `new-50..new-109`: the new leader's, at the lost records' offsets and
/// past them.
const NEW: i64 = 60;
/// `after-110..after-119`: once broker 1 is back.
const AFTER: i64 = 10;

/// What a consumer's loop saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// A record: offset, value.
    Record(i64, String),
    /// `FetchError::LogTruncation`, which the loop answered with a seek to
    /// its divergent offset.
    Truncation {
        offset: i64,
        divergent_offset: Option<i64>,
    },
}

/// What one of our consumers' loops saw.
#[derive(Default)]
struct Ledger {
    seen: Mutex<Vec<Seen>>,
    /// The leader epoch of each record, by value.
    epochs: Mutex<Vec<(String, Option<i32>)>>,
    /// Each record delivered at or below an offset delivered before it:
    /// its offset, and how many `warn` lines had named a truncation of the
    /// partition by then.
    rewinds: Mutex<Vec<(i64, usize)>>,
    retriable: Mutex<Vec<String>>,
    fatal: Mutex<Vec<String>>,
}

impl Ledger {
    fn records(&self) -> Vec<(i64, String)> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter_map(|s| match s {
                Seen::Record(o, v) => Some((*o, v.clone())),
                Seen::Truncation { .. } => None,
            })
            .collect()
    }

    fn has(&self, value: &str) -> bool {
        self.records().iter().any(|(_, v)| v == value)
    }

    fn epoch_of(&self, value: &str) -> Option<i32> {
        self.epochs
            .lock()
            .unwrap()
            .iter()
            .find(|(v, _)| v == value)
            .and_then(|(_, e)| *e)
    }

    fn assert_no_fatal(&self, what: &str) {
        let fatal = self.fatal.lock().unwrap();
        assert!(
            fatal.is_empty(),
            "{what}: non-retriable errors reached the loop: {fatal:?}"
        );
    }
}

/// The `warn` lines so far that name `tp` and a truncation (others may
/// name it too: a leader gone, say).
fn warn_lines(tp: &TopicPartition) -> Vec<String> {
    logs::find(log::Level::Warn, &tp.to_string())
        .into_iter()
        .filter(|line| line.to_lowercase().contains("truncat"))
        .collect()
}

/// The README's loop, until `stop`: poll; a retriable error is noted and
/// polled past; `FetchError::LogTruncation` with a divergent offset (under
/// `none`: docs/fetching.md leaves it to the application) is noted and
/// answered with a seek there, to read what the log holds now; any other
/// error ends the loop (noted as fatal).
async fn consume_loop(
    consumer: Consumer,
    tp: TopicPartition,
    ledger: Arc<Ledger>,
    stop: Arc<AtomicBool>,
) {
    let mut highest = -1;
    while !stop.load(Ordering::Relaxed) {
        let records = match consumer.poll(Duration::from_millis(200)).await {
            Ok(records) => records,
            Err(e) if e.is_retriable() => {
                ledger.retriable.lock().unwrap().push(e.to_string());
                continue;
            }
            Err(Error::Fetch(FetchError::LogTruncation {
                partition,
                offset,
                divergent_offset: Some(at),
            })) if partition == tp => {
                ledger.seen.lock().unwrap().push(Seen::Truncation {
                    offset,
                    divergent_offset: Some(at),
                });
                if let Err(e) = consumer.seek(&partition, at) {
                    ledger.fatal.lock().unwrap().push(format!("seek: {e}"));
                    return;
                }
                continue;
            }
            Err(e) => {
                ledger.fatal.lock().unwrap().push(format!("poll: {e}"));
                return;
            }
        };
        for r in &records {
            let value = String::from_utf8_lossy(r.value().unwrap_or_default()).into_owned();
            if r.offset() <= highest {
                let said = warn_lines(&tp).len();
                ledger.rewinds.lock().unwrap().push((r.offset(), said));
            }
            highest = highest.max(r.offset());
            ledger
                .epochs
                .lock()
                .unwrap()
                .push((value.clone(), r.leader_epoch()));
            ledger
                .seen
                .lock()
                .unwrap()
                .push(Seen::Record(r.offset(), value));
        }
    }
    let _ = consumer.close().await;
}

/// Our consumer on `tp` (manual assignment, no group) under `policy`,
/// its loop running as a task of its own.
struct Ours {
    tp: TopicPartition,
    consumer: Consumer,
    ledger: Arc<Ledger>,
    stop: Arc<AtomicBool>,
    task: Option<Box<dyn std::future::Future<Output = ()> + Send + Unpin>>,
}

impl Ours {
    fn start(kafka: &Kafka, topic: &str, policy: OffsetReset) -> Ours {
        let consumer = Consumer::new(
            ConsumerConfig::builder()
                .bootstrap_servers(&kafka.bootstrap)
                .auto_offset_reset(policy)
                .enable_auto_commit(false)
                .fetch_max_wait(Duration::from_millis(100))
                .build()
                .unwrap(),
        )
        .unwrap();
        let tp = TopicPartition::new(topic, 0);
        consumer.assign([tp.clone()]).unwrap();
        // No committed offset: under `none` the application says where to
        // start. (A plain seek carries no leader epoch; the records taken
        // give the position theirs.)
        consumer.seek(&tp, 0).unwrap();
        let ledger = Arc::new(Ledger::default());
        let stop = Arc::new(AtomicBool::new(false));
        let task = spawn(consume_loop(
            consumer.clone(),
            tp.clone(),
            ledger.clone(),
            stop.clone(),
        ));
        Ours {
            tp,
            consumer,
            ledger,
            stop,
            task: Some(Box::new(Box::pin(task))),
        }
    }

    async fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(task) = self.task.take() {
            task.await;
        }
    }
}

/// The Java consumer on `topic` (assigned, from the beginning) under
/// `auto.offset.reset=policy`.
fn java_consumer(kafka: &Kafka, topic: &str, policy: &str) -> Peer {
    let reset = format!("auto.offset.reset={policy}");
    kafka.spawn_peer(&[
        "consume",
        "--topic",
        topic,
        "--from-beginning",
        "--timeout-ms",
        "600000",
        "--property",
        &reset,
    ])
}

fn java_records(peer: &Peer) -> Vec<(i64, String)> {
    peer.records()
        .into_iter()
        .map(|(_, _, offset, _, value)| (offset, value))
        .collect()
}

/// Writes `<prefix><i>` for i in `from..from + count` with the Java
/// producer and checks each landed at offset i.
fn produce(kafka: &Kafka, topic: &str, prefix: &str, from: i64, count: i64, acks: &[&str]) {
    let start = from.to_string();
    let count = count.to_string();
    let mut args = vec![
        "produce",
        "--topic",
        topic,
        "--partition",
        "0",
        "--start",
        &start,
        "--count",
        &count,
        "--value-prefix",
        prefix,
    ];
    args.extend_from_slice(acks);
    let out = kafka.peer(&args);
    for e in out.iter().filter(|e| e["event"] == "delivered") {
        let value = e["value"].as_str().unwrap();
        let i: i64 = value[prefix.len()..].parse().unwrap();
        assert_eq!(e["offset"].as_i64(), Some(i), "{topic}: {value}");
    }
}

/// `<prefix><i>` at offset i, for i in `range`.
fn expected(prefix: &str, range: std::ops::Range<i64>) -> Vec<(i64, String)> {
    range.map(|i| (i, format!("{prefix}{i}"))).collect()
}

/// The numbers in `line` once `tp`'s name is taken out of it.
fn numbers(line: &str, tp: &TopicPartition) -> Vec<i64> {
    line.replace(&tp.to_string(), "")
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Waits until `done` says `Ok`; its `Err` says what is missing, for the
/// failure message.
async fn wait_for(what: &str, mut done: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + WAIT;
    loop {
        let state = match done() {
            Ok(()) => return,
            Err(state) => state,
        };
        assert!(Instant::now() < deadline, "{what}: {state}");
        sleep(Duration::from_millis(100)).await;
    }
}

fn partition(kafka: &Kafka, topic: &str) -> Option<PartitionInfo> {
    kafka.try_describe(topic).ok()?.into_iter().next()
}

/// Starts broker `id` again without waiting for anything
/// (`Kafka::restart` waits for three brokers, and broker 1 stays down
/// meanwhile here).
fn start_broker(id: i32) -> std::io::Result<std::process::ExitStatus> {
    let script = std::env::var("LAZYKAFKA_KAFKA_SCRIPT").unwrap_or_default();
    Command::new(script)
        .args(["restart", &id.to_string()])
        .stdin(Stdio::null())
        .status()
}

/// Starts brokers 1 and 2 again when the scenario ends early (a failed
/// assertion), so that whatever runs next finds the cluster whole.
struct WholeAgain;

impl Drop for WholeAgain {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for id in [1, 2] {
                let _ = start_broker(id);
            }
        }
    }
}

/// The scenario of the module doc.
async fn an_unclean_election_truncates_the_log_under_the_consumers() {
    logs::capture();
    let Some(kafka) = Kafka::get("an_unclean_election_truncates_the_log_under_the_consumers")
    else {
        return;
    };
    let _whole = WholeAgain;
    // `Kafka::restart` waits until the broker leads a partition of
    // `__consumer_offsets`: have it made, on a cluster where no group ran.
    kafka.group_on("truncation", 1);

    let reset_topic = kafka.unique("truncation-earliest");
    let none_topic = kafka.unique("truncation-none");
    let topics = [reset_topic.as_str(), none_topic.as_str()];
    for topic in topics {
        kafka.create_topic_on(topic, &[&[1, 2]]);
        kafka.peer(&[
            "admin",
            "alter-config",
            "--topic",
            topic,
            "--set",
            "unclean.leader.election.enable=true",
            "--set",
            "min.insync.replicas=1",
        ]);
        assert_eq!(kafka.describe(topic)[0].isr, vec![1, 2], "{topic}");
        produce(&kafka, topic, "old-", 0, OLD, &["--acks", "all"]);
    }

    let mut ours_reset = Ours::start(&kafka, &reset_topic, OffsetReset::Earliest);
    let mut ours_none = Ours::start(&kafka, &none_topic, OffsetReset::None);
    let mut java_reset = java_consumer(&kafka, &reset_topic, "earliest");
    let mut java_none = java_consumer(&kafka, &none_topic, "none");
    let all_have = |value: String| {
        let ours = [&ours_reset, &ours_none];
        let java = [&java_reset, &java_none];
        move || {
            for o in ours {
                o.ledger.assert_no_fatal(&o.tp.to_string());
            }
            let missing: Vec<String> = ours
                .iter()
                .filter(|o| !o.ledger.has(&value))
                .map(|o| format!("ours on {}", o.tp))
                .chain(
                    java.iter()
                        .filter(|j| !java_records(j).iter().any(|(_, v)| *v == value))
                        .map(|j| j.report()),
                )
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("{value} not consumed by {missing:?}"))
            }
        }
    };
    wait_for("old records", all_have(format!("old-{}", OLD - 1))).await;

    // Broker 2 goes: broker 1 alone is in the ISR, and takes records
    // broker 2 will never have.
    kafka.shutdown(2);
    for topic in topics {
        wait_for("ISR [1]", || match partition(&kafka, topic) {
            Some(p) if p.isr == [1] && p.leader == 1 => Ok(()),
            p => Err(format!("{topic}: {p:?}")),
        })
        .await;
        produce(
            &kafka,
            topic,
            "lost-",
            OLD,
            LOST,
            &["--acks", "1", "--idempotent", "false"],
        );
    }
    let last_lost = format!("lost-{}", OLD + LOST - 1);
    wait_for("lost records", all_have(last_lost.clone())).await;
    for o in [&ours_reset, &ours_none] {
        assert_eq!(o.consumer.position(&o.tp), Some(OLD + LOST), "{}", o.tp);
    }
    let epoch_before = ours_reset.ledger.epoch_of(&last_lost);
    assert!(epoch_before.is_some(), "no leader epoch on {last_lost}");

    // Broker 1 goes too; broker 2 comes back without the lost records and
    // is elected uncleanly.
    kafka.kill(1);
    let started = start_broker(2).expect("run scripts/kafka.sh");
    assert!(started.success(), "scripts/kafka.sh restart 2: {started}");
    let mut elections = Vec::new();
    for topic in topics {
        wait_for("broker 2 elected uncleanly", || {
            let p = partition(&kafka, topic);
            if let Some(p) = &p {
                if p.leader == 2 {
                    return Ok(());
                }
            }
            let out = kafka
                .peer_command(&[
                    "admin",
                    "elect-leaders",
                    "--type",
                    "unclean",
                    "--topic",
                    topic,
                    "--partition",
                    "0",
                ])
                .stdin(Stdio::null())
                .output()
                .expect("run the Java peer");
            // What the peer said of the election: its error (when broker
            // 1 still counts as the leader, not fenced yet, or 2 was
            // elected meanwhile: ELECTION_NOT_NEEDED), or `elected`.
            let said: String = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .map(|e| match e["error"].as_str() {
                    Some(error) => error.to_owned(),
                    None if e["event"] == "elected" => "elected".to_owned(),
                    None => e.to_string(),
                })
                .collect::<Vec<_>>()
                .join("; ");
            elections.push(said.clone());
            Err(format!("{topic}: {p:?}; last election: {said}"))
        })
        .await;
        assert_eq!(partition(&kafka, topic).unwrap().isr, vec![2], "{topic}");
        produce(&kafka, topic, "new-", OLD, NEW, &["--acks", "all"]);
    }
    eprintln!("unclean elections asked for: {elections:?}");

    let last_new = format!("new-{}", OLD + NEW - 1);
    wait_for("new records", || {
        for o in [&ours_reset, &ours_none] {
            o.ledger.assert_no_fatal(&o.tp.to_string());
            if !o.ledger.has(&last_new) {
                return Err(format!(
                    "ours on {}: position {:?}, last seen {:?}; retriable errors {:?}",
                    o.tp,
                    o.consumer.position(&o.tp),
                    o.ledger.seen.lock().unwrap().last(),
                    o.ledger.retriable.lock().unwrap()
                ));
            }
        }
        if !java_records(&java_reset)
            .iter()
            .any(|(_, v)| *v == last_new)
        {
            return Err(java_reset.report());
        }
        if java_none.events_of("error").is_empty() {
            return Err(java_none.report());
        }
        Ok(())
    })
    .await;

    let before: Vec<(i64, String)> = expected("old-", 0..OLD)
        .into_iter()
        .chain(expected("lost-", OLD..OLD + LOST))
        .collect();
    let new = expected("new-", OLD..OLD + NEW);

    // `earliest`: back to where the log diverges, said first; the new
    // log's records from there each once; as the Java consumer.
    let tp = &ours_reset.tp;
    let lines = warn_lines(tp);
    assert_eq!(lines.len(), 1, "{tp}: one warn line: {lines:?}");
    let said = numbers(&lines[0], tp);
    assert!(
        said.contains(&OLD) && said.contains(&(OLD + LOST)),
        "{tp}: the warn line names the divergent offset {OLD} and the position {}: {}",
        OLD + LOST,
        lines[0]
    );
    let rewinds = ours_reset.ledger.rewinds.lock().unwrap().clone();
    assert!(
        !rewinds.is_empty() && rewinds.iter().all(|(_, said)| *said >= 1),
        "{tp}: records delivered again before the warn line: {rewinds:?}"
    );
    let mut want = before.clone();
    want.extend(new.iter().cloned());
    assert_eq!(ours_reset.ledger.records(), want, "{tp}");
    assert_eq!(java_records(&java_reset), want, "{tp}: the Java consumer");
    let epoch_after = ours_reset.ledger.epoch_of(&last_new);
    assert!(
        epoch_after > epoch_before,
        "{tp}: the new leader's epoch {epoch_after:?} after {epoch_before:?}"
    );

    // `none`: the error names the partition and both offsets, once; the
    // partition waited for the seek; as the Java consumer.
    let tp = &ours_none.tp;
    let mut want: Vec<Seen> = before
        .iter()
        .map(|(o, v)| Seen::Record(*o, v.clone()))
        .collect();
    want.push(Seen::Truncation {
        offset: OLD + LOST,
        divergent_offset: Some(OLD),
    });
    want.extend(new.iter().map(|(o, v)| Seen::Record(*o, v.clone())));
    assert_eq!(*ours_none.ledger.seen.lock().unwrap(), want, "{tp}");
    assert_eq!(java_records(&java_none), before, "{tp}: the Java consumer");
    let error = java_none.events_of("error").remove(0)["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains("LogTruncationException") && error.contains(&format!("offset={OLD}")),
        "{tp}: the Java consumer's error: {error}"
    );
    assert!(!java_none.wait_exit(Duration::from_secs(30)));

    // Broker 1 comes back: it truncates its log to follow broker 2, and
    // leads again (`Kafka::restart` elects the preferred leaders).
    kafka.restart(1);
    for topic in topics {
        wait_for("broker 1 leads again", || match partition(&kafka, topic) {
            Some(p) if p.leader == 1 && p.isr.len() == 2 => Ok(()),
            p => {
                let _ = kafka
                    .peer_command(&[
                        "admin",
                        "elect-leaders",
                        "--type",
                        "preferred",
                        "--topic",
                        topic,
                        "--partition",
                        "0",
                    ])
                    .stdin(Stdio::null())
                    .output();
                Err(format!("{topic}: {p:?}"))
            }
        })
        .await;
        produce(
            &kafka,
            topic,
            "after-",
            OLD + NEW,
            AFTER,
            &["--acks", "all"],
        );
    }
    let end = OLD + NEW + AFTER;
    let last_after = format!("after-{}", end - 1);
    wait_for("records after broker 1 came back", || {
        for o in [&ours_reset, &ours_none] {
            o.ledger.assert_no_fatal(&o.tp.to_string());
            if !o.ledger.has(&last_after) {
                return Err(format!(
                    "ours on {}: position {:?}; retriable errors {:?}",
                    o.tp,
                    o.consumer.position(&o.tp),
                    o.ledger.retriable.lock().unwrap()
                ));
            }
        }
        if !java_records(&java_reset)
            .iter()
            .any(|(_, v)| *v == last_after)
        {
            return Err(java_reset.report());
        }
        Ok(())
    })
    .await;
    ours_reset.stop().await;
    ours_none.stop().await;
    assert!(
        java_reset.stop(Duration::from_secs(30)),
        "{}",
        java_reset.report()
    );

    // Nothing more was found truncated, nothing delivered again.
    let after = expected("after-", OLD + NEW..end);
    for o in [&ours_reset, &ours_none] {
        o.ledger.assert_no_fatal(&o.tp.to_string());
        let records = o.ledger.records();
        assert_eq!(
            records[records.len() - AFTER as usize..],
            after[..],
            "{}",
            o.tp
        );
        assert_eq!(
            records.len() as i64,
            OLD + LOST + NEW + AFTER,
            "{}: delivered more than once",
            o.tp
        );
        assert_eq!(o.consumer.position(&o.tp), Some(end), "{}", o.tp);
    }
    assert_eq!(warn_lines(&ours_reset.tp).len(), 1, "{}", ours_reset.tp);
    assert_eq!(
        java_records(&java_reset)[(OLD + LOST + NEW) as usize..],
        after[..],
        "{}: the Java consumer",
        ours_reset.tp
    );
    eprintln!(
        "retriable errors said: earliest {:?}, none {:?}",
        ours_reset.ledger.retriable.lock().unwrap(),
        ours_none.ledger.retriable.lock().unwrap()
    );

    // The log now, read back from the start: the lost records are gone
    // from broker 1 too.
    let mut log = expected("old-", 0..OLD);
    log.extend(new);
    log.extend(after);
    for topic in topics {
        let read = kafka.peer(&[
            "consume",
            "--topic",
            topic,
            "--from-beginning",
            "--count",
            &end.to_string(),
            "--idle-ms",
            "5000",
            "--timeout-ms",
            "120000",
        ]);
        let read: Vec<(i64, String)> = read
            .iter()
            .filter(|e| e["event"] == "record")
            .map(|e| {
                (
                    e["offset"].as_i64().unwrap(),
                    e["value"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(read, log, "{topic}: the log read back");
    }
}

on_apache_kafka_alone!(an_unclean_election_truncates_the_log_under_the_consumers);
