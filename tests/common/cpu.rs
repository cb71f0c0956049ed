//! CPU and memory while the consumer waits, from `/proc/self` (generous
//! bounds, not timings): a coordinator outage, idle, a dead broker and a
//! broker that drops every JoinGroup. Run on one executor thread by
//! `tests/one_thread.rs` and on several by `tests/many_threads.rs`.

// Drives a `Consumer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

use super::clusters::{standard, TestCluster};
use super::peers::{config, poll_through_faults, produce_range, WAIT};
use lazykafka::mock::MockCluster;
use lazykafka::Consumer;
use std::time::{Duration, Instant};

/// Seconds of CPU (user + system) this process used so far.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / hz
}

/// Resident memory of this process, in MiB.
pub fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kib / 1024.0
}

/// Polls until `n` records came, within [`WAIT`]; returns how many came.
pub async fn consume(consumer: &mut Consumer, n: usize) -> usize {
    let deadline = Instant::now() + WAIT;
    let mut seen = 0;
    while seen < n && Instant::now() < deadline {
        seen += poll_through_faults(consumer, Duration::from_millis(100))
            .await
            .len();
    }
    seen
}

pub async fn coordinator_outage<C: TestCluster>() {
    let mock: C = standard();
    let name = mock.name();
    produce_range(&mock.bootstrap(), "t", 2, 0..20, "none");
    let mut consumer =
        Consumer::new(config(&mock.bootstrap(), Some("g")).build().unwrap()).unwrap();
    // Never read: a slow reader must cost bounded memory.
    let _events = consumer.connection_events();
    consumer.subscribe(["t"]).unwrap();
    assert_eq!(
        consume(&mut consumer, 20).await,
        20,
        "{name}: first records"
    );

    // The coordinator (broker 2) goes down for a second while the
    // application keeps polling: the consumer's group requests wait for
    // it, reconnecting with backoff.
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    mock.broker_down(2);
    while t0.elapsed() < Duration::from_secs(1) {
        poll_through_faults(&mut consumer, Duration::from_millis(100)).await;
    }
    // Then the application stops polling for two seconds, the coordinator
    // still down: the background task goes on alone.
    let rss0 = rss_mib();
    let quiet = Instant::now();
    while quiet.elapsed() < Duration::from_secs(2) {
        super::sleep(Duration::from_millis(100)).await;
    }
    let rss_growth = rss_mib() - rss0;
    mock.broker_up(2);
    let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());

    // Back: new records arrive and a commit reaches the coordinator.
    produce_range(&mock.bootstrap(), "t", 2, 20..40, "none");
    assert_eq!(
        consume(&mut consumer, 20).await,
        20,
        "{name}: records after the outage"
    );
    let deadline = Instant::now() + WAIT;
    let committed = loop {
        match consumer.commit().await {
            Ok(()) => break true,
            Err(e) if e.is_retriable() && Instant::now() < deadline => {
                poll_through_faults(&mut consumer, Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{name}: commit after the outage: {e}"),
        }
    };
    assert!(committed);
    consumer.close().await.expect("close");

    eprintln!("{name}: {cpu:.3} s of CPU in {wall:.1} s of outage; RSS grew {rss_growth:.1} MiB");
    // A busy loop takes the whole thread (about one CPU second per
    // second); waiting on timers and sockets takes a few milliseconds.
    assert!(
        cpu < 0.3 * wall,
        "{name}: {cpu:.3} s of CPU in {wall:.1} s of outage"
    );
    // A queue growing on every loop pass grew by hundreds of MiB here.
    assert!(
        rss_growth < 32.0,
        "{name}: RSS grew {rss_growth:.1} MiB while nobody polled"
    );
}

/// CPU over `span` of polling `consumer` (errors the consumer goes on
/// after are fine): under 0.3 s per second, where a busy loop takes about
/// one.
pub async fn assert_quiet(consumer: &mut Consumer, span: Duration, what: &str) {
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    while t0.elapsed() < span {
        poll_through_faults(consumer, Duration::from_millis(100)).await;
    }
    let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    eprintln!("{what}: {cpu:.3} s of CPU in {wall:.1} s");
    assert!(cpu < 0.3 * wall, "{what}: {cpu:.3} s of CPU in {wall:.1} s");
}

/// Idle (caught up, nothing to fetch), waiting for a dead broker (nothing
/// listens), and waiting on a broker that drops every JoinGroup: each
/// waits on timers and sockets, not in a loop.
pub async fn waiting_states() {
    let mock: MockCluster = standard();
    produce_range(&mock.bootstrap(), "t", 2, 0..4, "none");
    let mut idle = Consumer::new(config(&mock.bootstrap(), None).build().unwrap()).unwrap();
    idle.assign([
        lazykafka::TopicPartition::new("t", 0),
        lazykafka::TopicPartition::new("t", 1),
    ])
    .unwrap();
    assert_eq!(consume(&mut idle, 4).await, 4);
    assert_quiet(&mut idle, Duration::from_secs(2), "idle").await;
    idle.close().await.expect("close");

    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let mut dead = Consumer::new(config(&closed, Some("g")).build().unwrap()).unwrap();
    dead.subscribe(["t"]).unwrap();
    assert_quiet(&mut dead, Duration::from_secs(2), "dead broker").await;
    drop(dead);

    let (dropping, _) = super::raw::broker_dropping_joins();
    let mut dropped = Consumer::new(config(&dropping, Some("g")).build().unwrap()).unwrap();
    dropped.subscribe(["t"]).unwrap();
    assert_quiet(
        &mut dropped,
        Duration::from_secs(2),
        "broker dropping joins",
    )
    .await;
    drop(dropped);
}
