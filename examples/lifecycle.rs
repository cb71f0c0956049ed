//! Watch a consumer's (or a producer's) connections live: which sockets
//! exist, when, and why.
//!
//! ```text
//! cargo run --example lifecycle                                   # a 3-broker cluster in-process
//! cargo run --example lifecycle -- --group-protocol consumer      # the same walk, KIP-848
//! cargo run --example lifecycle -- --bootstrap HOST:PORT --topic T [--group G] [--group-protocol P]
//! cargo run --example lifecycle -- --producer                     # a producer's walk
//! cargo run --example lifecycle -- --producer --bootstrap HOST:PORT --topic T
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
//!
//! `--producer` walks a `Producer` instead, on the same cluster (the topic
//! left empty), printing its connection events the same way:
//!
//! 1. `Producer::new`: no socket;
//! 2. the first `send`s (200 keyed records, spread over both partitions):
//!    one bootstrap connection (Metadata for the topic produced to only,
//!    then InitProducerId over that connection), one connection per
//!    partition leader for the Produce requests, and the bootstrap
//!    connection retired (or promoted to a leader connection when it
//!    reached one) once the records are delivered;
//! 3. no sends: the leader connections fall idle and are closed after
//!    `connections.max.idle.ms` (4 s here);
//! 4. sending again: the leaders are connected again, and nothing else (the
//!    topic's metadata is known already);
//! 5. `close`: what is queued is delivered, every socket closed.
//!
//! With `--bootstrap` it produces those records to your topic `--topic`.

use futures::{FutureExt, Stream, StreamExt};
use lazykafka::config::GroupProtocol;
use lazykafka::error::ApiKey;
use lazykafka::events::{
    ConnectionEvent, ConnectionId, ConnectionInfo, ConnectionState, EventKind, Purpose,
};
use lazykafka::mock::{MockCluster, MockError, MockEventKind, MockRecord};
use lazykafka::{Consumer, ConsumerConfig, OffsetReset, Producer, ProducerConfig, ProducerRecord};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

struct Args {
    bootstrap: Option<String>,
    topic: String,
    group: String,
    protocol: GroupProtocol,
    producer: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        bootstrap: None,
        topic: "invoices".into(),
        group: "lazykafka-lifecycle".into(),
        protocol: GroupProtocol::Classic,
        producer: false,
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
            "--producer" => args.producer = true,
            "-h" | "--help" => {
                return Err(
                    "usage: lifecycle [--bootstrap HOST:PORT[,..] --topic T [--group G]] [--group-protocol classic|consumer] [--producer]".into(),
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

/// The in-process cluster for the producer's walk: brokers 1..=3, the
/// topic's two partitions led by brokers 1 and 3, no records.
fn start_producer_mock(topic: &str) -> Result<MockCluster, MockError> {
    let mock = MockCluster::new(3)?;
    mock.create_topic_with_leaders(topic, &[1, 3])?;
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

fn event_header() {
    println!(
        "  {:>11}  {:<14} {:<10}  {:<12} {:<22} reason",
        "time", "event", "broker", "purpose", "address"
    );
}

/// Prints the events that came; returns how many of them were leader
/// connections becoming ready.
fn drain(events: &mut (impl Stream<Item = ConnectionEvent> + Unpin)) -> usize {
    let mut ready_leaders = 0;
    while let Some(Some(e)) = events.next().now_or_never() {
        print_event(&e);
        if e.purpose == Purpose::Leader && matches!(e.kind, EventKind::Ready) {
            ready_leaders += 1;
        }
    }
    ready_leaders
}

fn census(connections: &[ConnectionInfo]) -> String {
    describe(connections.iter().map(|c| (c.purpose, c.broker)))
}

/// "no sockets", or how many and each one's purpose and broker.
fn describe(connections: impl Iterator<Item = (Purpose, Option<i32>)>) -> String {
    let mut parts: Vec<String> = connections
        .map(|(purpose, broker)| match broker {
            Some(b) => format!("{purpose} (broker {b})"),
            None => purpose.to_string(),
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
    phases.push((
        "after new + subscribe".to_owned(),
        census(&consumer.connections()),
    ));
    println!("   {}", census(&consumer.connections()));

    println!("2. poll until the records are in");
    event_header();
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
    println!("   {seen} records; {}", census(&consumer.connections()));
    phases.push((
        "while consuming".to_owned(),
        census(&consumer.connections()),
    ));

    let leaders_consuming = ready_leaders(&consumer.connections());

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
    println!("   {}", census(&consumer.connections()));
    phases.push((
        "paused, after connections.max.idle.ms".to_owned(),
        census(&consumer.connections()),
    ));

    println!("4. resume: the leaders are connected again");
    consumer.resume(assigned.iter());
    let back = Instant::now();
    // Until every leader connection of step 2 is ready again and its
    // `ready` event came, so that its events are printed under this step
    // (the snapshot of the connections can be ahead of the events).
    let mut ready_again = drain(&mut events);
    while (ready_again < leaders_consuming.max(1)
        || ready_leaders(&consumer.connections()) < leaders_consuming.max(1))
        && back.elapsed() < Duration::from_secs(15)
    {
        consumer.poll(Duration::from_millis(200)).await?;
        ready_again += drain(&mut events);
    }
    drain(&mut events);
    println!("   {}", census(&consumer.connections()));
    phases.push(("resumed".to_owned(), census(&consumer.connections())));

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
    println!("   {}", census(&consumer.connections()));
    phases.push(("after close".to_owned(), census(&consumer.connections())));
    Ok(phases)
}

/// How many leader connections are ready.
fn ready_leaders(connections: &[ConnectionInfo]) -> usize {
    connections
        .iter()
        .filter(|c| c.purpose == Purpose::Leader && c.state == ConnectionState::Ready)
        .count()
}

/// The connections the events left open: each from its `connecting` to
/// its `closed` (or `connect failed`), with its purpose and broker.
#[derive(Default)]
struct Open(BTreeMap<ConnectionId, (Purpose, Option<i32>)>);

impl Open {
    fn note(&mut self, e: &ConnectionEvent) {
        match e.kind {
            EventKind::Closed { .. } | EventKind::ConnectFailed { .. } => {
                self.0.remove(&e.connection);
            }
            _ => {
                self.0.insert(e.connection, (e.purpose, e.broker));
            }
        }
    }

    fn census(&self) -> String {
        describe(self.0.values().copied())
    }
}

/// A producer's connection events: printed as they come, and kept count of.
struct Watched<S> {
    events: S,
    open: Open,
}

impl<S: Stream<Item = ConnectionEvent> + Unpin> Watched<S> {
    fn drain(&mut self) {
        while let Some(Some(e)) = self.events.next().now_or_never() {
            print_event(&e);
            self.open.note(&e);
        }
    }

    /// Prints the events that come within `time`.
    async fn settle(&mut self, time: Duration) {
        let start = Instant::now();
        while start.elapsed() < time {
            self.drain();
            async_std::task::sleep(Duration::from_millis(20)).await;
        }
        self.drain();
    }
}

/// Records the producer's walk sends at each of its two sends.
const PRODUCED: usize = 200;

/// Sends `PRODUCED` keyed records (numbered from `from`) and waits for each
/// delivery, printing the connection events as they come; returns the
/// records delivered per partition.
async fn produce<S: Stream<Item = ConnectionEvent> + Unpin>(
    producer: &Producer,
    topic: &str,
    from: usize,
    watched: &mut Watched<S>,
) -> Result<BTreeMap<i32, usize>, lazykafka::Error> {
    let mut deliveries = Vec::with_capacity(PRODUCED);
    for i in from..from + PRODUCED {
        let record = ProducerRecord::new(topic)
            .key(format!("invoice-{i}"))
            .value(format!("invoice {i}"));
        deliveries.push(producer.send(record).await?);
        watched.drain();
    }
    let mut per_partition: BTreeMap<i32, usize> = BTreeMap::new();
    for delivery in deliveries {
        let written = delivery.await?;
        *per_partition.entry(written.partition).or_default() += 1;
        watched.drain();
    }
    // Give the bootstrap connection its chance to be retired, then look.
    watched.settle(Duration::from_millis(500)).await;
    Ok(per_partition)
}

fn delivered(per_partition: &BTreeMap<i32, usize>) -> String {
    let parts: Vec<String> = per_partition
        .iter()
        .map(|(p, n)| format!("{n} to partition {p}"))
        .collect();
    format!("delivered {}", parts.join(", "))
}

async fn producer_walk(
    bootstrap: &str,
    args: &Args,
) -> Result<Vec<(String, String)>, lazykafka::Error> {
    let mut phases = Vec::new();
    let config = ProducerConfig::builder()
        .bootstrap_servers(bootstrap)
        .connections_max_idle(Some(Duration::from_millis(4000)))
        .build()?;
    println!("1. Producer::new");
    let producer = Producer::new(config)?;
    let mut watched = Watched {
        events: Box::pin(producer.connection_events()),
        open: Open::default(),
    };
    println!("   {}", census(&producer.connections()));
    phases.push(("after new".to_owned(), census(&producer.connections())));

    println!("2. the first sends: bootstrap (Metadata, InitProducerId), then the leaders");
    event_header();
    let per_partition = produce(&producer, &args.topic, 0, &mut watched).await?;
    println!(
        "   {}; {}",
        delivered(&per_partition),
        census(&producer.connections())
    );
    phases.push((
        "after the first deliveries".to_owned(),
        census(&producer.connections()),
    ));

    println!("3. no sends: the leader connections fall idle");
    let idle = Instant::now();
    while producer
        .connections()
        .iter()
        .any(|c| c.purpose == Purpose::Leader)
        && idle.elapsed() < Duration::from_secs(15)
    {
        watched.settle(Duration::from_millis(200)).await;
    }
    println!("   {}", census(&producer.connections()));
    phases.push((
        "idle, after connections.max.idle.ms".to_owned(),
        census(&producer.connections()),
    ));

    println!("4. send again: the leaders are connected again (the metadata is known)");
    let per_partition = produce(&producer, &args.topic, PRODUCED, &mut watched).await?;
    println!(
        "   {}; {}",
        delivered(&per_partition),
        census(&producer.connections())
    );
    phases.push(("sending again".to_owned(), census(&producer.connections())));

    println!("5. close: deliver what is queued, close every socket");
    producer.close_timeout(Duration::from_secs(10)).await?;
    // The last events arrive as the task stops; what they leave open is
    // the census now.
    watched.settle(Duration::from_millis(200)).await;
    println!("   {}", watched.open.census());
    phases.push(("after close".to_owned(), watched.open.census()));
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
    if args.producer {
        return run_producer(&args);
    }
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

/// `--producer`: the producer's walk, on the mock or `--bootstrap`.
fn run_producer(args: &Args) -> ExitCode {
    let mut mock = None;
    let bootstrap = match &args.bootstrap {
        Some(b) => b.clone(),
        None => {
            let m = match start_producer_mock(&args.topic) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("error: cannot start the mock cluster: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let bootstrap = m.bootstrap_servers();
            println!("lazykafka::mock cluster: brokers 1..3 at {bootstrap}");
            println!(
                "leaders of {}: brokers 1 and 3; broker 2 leads nothing\n",
                args.topic
            );
            mock = Some(m);
            bootstrap
        }
    };
    println!("producer, to topic {}\n", args.topic);
    match async_std::task::block_on(producer_walk(&bootstrap, args)) {
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
