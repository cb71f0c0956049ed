//! Watch a consumer's connections live: which sockets exist, when, and why.
//!
//! ```text
//! cargo run --example lifecycle                                   # a 3-broker cluster in-process
//! cargo run --example lifecycle -- --group-protocol consumer      # the same walk, KIP-848
//! cargo run --example lifecycle -- --bootstrap HOST:PORT --topic T [--group G] [--group-protocol P]
//! ```
//!
//! With no arguments it starts `lazykafka::mock::MockCluster` in this
//! process (3 brokers; the group coordinator on broker 2; the two
//! partitions of topic `invoices` led by brokers 1 and 3), fills the topic,
//! and walks a group consumer through its life, printing each connection
//! event as it happens (time, event, broker, purpose, address, reason):
//!
//! 1. `Consumer::new` and `subscribe`: no socket;
//! 2. the first `poll`: a bootstrap connection (FindCoordinator, Metadata),
//!    the coordinator's own connection, one connection per partition leader,
//!    then the bootstrap connection retired (or promoted to a leader
//!    connection when it reached one);
//! 3. all partitions paused: the leader connections fall idle and are closed
//!    after `connections.max.idle.ms` (shortened here to 4 s);
//! 4. resumed: the leaders are connected again;
//! 5. `close`: commit, leave the group, close every socket.
//!
//! It ends with a census of open sockets per phase and, on the mock, what
//! each broker saw (connections and requests). With `--bootstrap` it runs
//! the same walk against your cluster (no records are produced; `--group`
//! defaults to `lazykafka-lifecycle`).
//!
//! `--group-protocol consumer` walks the same way with the consumer group
//! protocol of KIP-848 (Kafka 4.0+ brokers; the in-process mock serves it
//! too, with heartbeats every second): ConsumerGroupHeartbeat instead of
//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup, on the same single
//! coordinator connection; the sockets are the same in every phase.

use futures::{FutureExt, Stream, StreamExt};
use lazykafka::config::GroupProtocol;
use lazykafka::error::ApiKey;
use lazykafka::events::{ConnectionEvent, EventKind, Purpose};
use lazykafka::mock::{MockCluster, MockError, MockEventKind, MockRecord};
use lazykafka::{Consumer, ConsumerConfig, OffsetReset};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

struct Args {
    bootstrap: Option<String>,
    topic: String,
    group: String,
    protocol: GroupProtocol,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        bootstrap: None,
        topic: "invoices".into(),
        group: "lazykafka-lifecycle".into(),
        protocol: GroupProtocol::Classic,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--bootstrap" => args.bootstrap = Some(value()?),
            "--topic" => args.topic = value()?,
            "--group" => args.group = value()?,
            "--group-protocol" => {
                let v = value()?;
                args.protocol = v.parse().map_err(|()| {
                    format!("--group-protocol takes classic or consumer, not {v:?}")
                })?
            }
            "-h" | "--help" => {
                return Err(
                    "usage: lifecycle [--bootstrap HOST:PORT[,..] --topic T [--group G]] [--group-protocol classic|consumer]".into(),
                )
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

/// The in-process cluster: brokers 1..=3, coordinator 2, leaders 1 and 3,
/// `count` records in the topic.
fn start_mock(topic: &str, group: &str, count: usize) -> Result<MockCluster, MockError> {
    let mock = MockCluster::new(3)?;
    // KIP-848 groups: the coordinator sets the heartbeat interval (Kafka's
    // default is 5 s); every second, as the classic walk heartbeats.
    mock.set_consumer_group_timing(Duration::from_secs(1), Duration::from_secs(10));
    mock.create_topic_with_leaders(topic, &[1, 3])?;
    mock.set_coordinator(group, 2)?;
    for p in 0..2 {
        let values = (0..count)
            .filter(|i| i % 2 == p)
            .map(|i| MockRecord::new(format!("invoice {i}")));
        mock.produce(topic, p as i32, values)?;
    }
    Ok(mock)
}

/// What each broker of the mock saw: connections and requests by API.
fn broker_view(mock: &MockCluster) {
    println!("\nwhat the brokers saw:");
    let events = mock.events();
    for broker in mock.broker_ids() {
        let mut connections = 0;
        let mut requests: BTreeMap<String, usize> = BTreeMap::new();
        for e in events.iter().filter(|e| e.broker == broker) {
            match &e.kind {
                MockEventKind::Connected { .. } => connections += 1,
                MockEventKind::Request { api_key, .. } => {
                    let name = ApiKey::from_code(*api_key)
                        .map_or_else(|| format!("key {api_key}"), |a| a.name().to_owned());
                    *requests.entry(name).or_default() += 1;
                }
                _ => {}
            }
        }
        let requests: Vec<String> = requests.iter().map(|(k, n)| format!("{k} {n}")).collect();
        println!(
            "  broker {broker}: {connections} connection(s); {}",
            requests.join(", ")
        );
    }
}

fn print_event(e: &ConnectionEvent) {
    let broker = e.broker.map_or("?".to_owned(), |b| b.to_string());
    let (what, reason) = match &e.kind {
        EventKind::Closed { reason, error } => (
            "closed".to_owned(),
            match error {
                Some(err) => format!("{reason}: {err}"),
                None => reason.to_string(),
            },
        ),
        EventKind::ConnectFailed { error } => ("connect failed".to_owned(), error.to_string()),
        other => (format!("{other:?}").to_lowercase(), String::new()),
    };
    println!(
        "  {:>8.1} ms  {:<14} broker {:>3}  {:<12} {:<22} {}",
        e.at.as_secs_f64() * 1000.0,
        what,
        broker,
        e.purpose.to_string(),
        e.addr,
        reason
    );
}

fn drain(events: &mut (impl Stream<Item = ConnectionEvent> + Unpin)) {
    while let Some(Some(e)) = events.next().now_or_never() {
        print_event(&e);
    }
}

fn census(consumer: &Consumer) -> String {
    let mut parts: Vec<String> = consumer
        .connections()
        .iter()
        .map(|c| match c.broker {
            Some(b) => format!("{} (broker {b})", c.purpose),
            None => c.purpose.to_string(),
        })
        .collect();
    parts.sort();
    if parts.is_empty() {
        "no sockets".to_owned()
    } else {
        format!("{} socket(s): {}", parts.len(), parts.join(", "))
    }
}

async fn walk(
    bootstrap: &str,
    args: &Args,
    expected: Option<usize>,
) -> Result<Vec<(String, String)>, lazykafka::Error> {
    let mut phases = Vec::new();
    let builder = ConsumerConfig::builder()
        .bootstrap_servers(bootstrap)
        .group_id(args.group.clone())
        .group_protocol(args.protocol)
        .auto_offset_reset(OffsetReset::Earliest)
        .connections_max_idle(Some(Duration::from_millis(4000)))
        .fetch_max_wait(Duration::from_millis(200));
    let config = match args.protocol {
        // Under KIP-848 the coordinator sets both (and refuses ours).
        GroupProtocol::Consumer => builder.build()?,
        _ => builder
            .heartbeat_interval(Duration::from_millis(1000))
            .session_timeout(Duration::from_secs(10))
            .build()?,
    };
    println!("1. Consumer::new and subscribe");
    let consumer = Consumer::new(config)?;
    let mut events = Box::pin(consumer.connection_events());
    consumer.subscribe([args.topic.clone()])?;
    phases.push(("after new + subscribe".to_owned(), census(&consumer)));
    println!("   {}", census(&consumer));

    println!("2. poll until the records are in");
    println!(
        "  {:>11}  {:<14} {:<10}  {:<12} {:<22} reason",
        "time", "event", "broker", "purpose", "address"
    );
    let started = Instant::now();
    let mut seen = 0usize;
    let want = expected.unwrap_or(1);
    while seen < want && started.elapsed() < Duration::from_secs(30) {
        seen += consumer.poll(Duration::from_millis(200)).await?.len();
        drain(&mut events);
    }
    // Give the bootstrap connection its chance to be retired, then look.
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_millis(500) {
        seen += consumer.poll(Duration::from_millis(100)).await?.len();
        drain(&mut events);
    }
    println!("   {seen} records; {}", census(&consumer));
    phases.push(("while consuming".to_owned(), census(&consumer)));

    println!("3. pause every partition: the leader connections fall idle");
    let assigned: Vec<_> = consumer.assignment().into_iter().collect();
    consumer.pause(assigned.iter());
    let idle = Instant::now();
    while consumer
        .connections()
        .iter()
        .any(|c| c.purpose == Purpose::Leader)
        && idle.elapsed() < Duration::from_secs(15)
    {
        consumer.poll(Duration::from_millis(200)).await?;
        drain(&mut events);
    }
    println!("   {}", census(&consumer));
    phases.push((
        "paused, after connections.max.idle.ms".to_owned(),
        census(&consumer),
    ));

    println!("4. resume: the leaders are connected again");
    consumer.resume(assigned.iter());
    let back = Instant::now();
    while !consumer
        .connections()
        .iter()
        .any(|c| c.purpose == Purpose::Leader)
        && back.elapsed() < Duration::from_secs(15)
    {
        consumer.poll(Duration::from_millis(200)).await?;
        drain(&mut events);
    }
    println!("   {}", census(&consumer));
    phases.push(("resumed".to_owned(), census(&consumer)));

    match args.protocol {
        GroupProtocol::Consumer => println!(
            "5. close: commit, leave the group (ConsumerGroupHeartbeat, epoch -1), close every socket"
        ),
        _ => println!("5. close: commit, leave the group, close every socket"),
    }
    consumer.close().await?;
    // The last events arrive as the task stops.
    let closing = Instant::now();
    while closing.elapsed() < Duration::from_millis(200) {
        drain(&mut events);
        async_std::task::yield_now().await;
    }
    println!("   {}", census(&consumer));
    phases.push(("after close".to_owned(), census(&consumer)));
    Ok(phases)
}

#[path = "support/logger.rs"]
mod logger;

fn main() -> ExitCode {
    // The library's warn and error lines on stderr (RUST_LOG picks the level).
    logger::init();
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let mut mock = None;
    let (bootstrap, expected) = match &args.bootstrap {
        Some(b) => (b.clone(), None),
        None => {
            let m = match start_mock(&args.topic, &args.group, 1000) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("error: cannot start the mock cluster: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let bootstrap = m.bootstrap_servers();
            println!("lazykafka::mock cluster: brokers 1..3 at {bootstrap}");
            println!(
                "coordinator of {:?}: broker 2; leaders of {}: brokers 1 and 3; 1000 records\n",
                args.group, args.topic
            );
            mock = Some(m);
            (bootstrap, Some(1000))
        }
    };
    println!("group protocol: {}\n", args.protocol);
    let result = async_std::task::block_on(walk(&bootstrap, &args, expected));
    match result {
        Ok(phases) => {
            println!("\ncensus of open sockets:");
            for (phase, census) in phases {
                println!("  {phase:<40} {census}");
            }
            if let Some(mock) = &mock {
                broker_view(mock);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
