//! What the rebootstrap tests on the mocks (tests/rebootstrap.rs) and on
//! Apache Kafka (tests/kafka_faults.rs) share: a TCP forwarder for
//! bootstrap addresses that move, and the clients they run through it.
//!
//! The forwarder listens on a loopback port and pipes each connection to
//! its current target; pointed at another target, it cuts the connections
//! it pipes (as a load balancer or a DNS name moved to another cluster
//! would leave them). Plain threads, so it serves both runtimes' tests
//! alike.

use super::timeout;
use lazykafka::{Consumer, ConsumerConfig, OffsetReset, Producer, ProducerConfig, ProducerRecord};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A forwarder; stops accepting when dropped (its pipes end with their
/// sockets).
pub struct Forwarder {
    addr: String,
    shared: Arc<Mutex<Shared>>,
}

struct Shared {
    target: String,
    /// Both ends of every pipe opened so far, to cut them on a retarget.
    pipes: Vec<(TcpStream, TcpStream)>,
    /// Connections accepted, by the target they went to.
    accepted: Vec<String>,
    stopped: bool,
}

impl Forwarder {
    /// Listens on a free loopback port, piping to `target`.
    pub fn start(target: &str) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the forwarder");
        let addr = listener.local_addr().unwrap().to_string();
        let shared = Arc::new(Mutex::new(Shared {
            target: target.to_owned(),
            pipes: Vec::new(),
            accepted: Vec::new(),
            stopped: false,
        }));
        let s = shared.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let mut st = s.lock().unwrap();
                if st.stopped {
                    break;
                }
                let target = st.target.clone();
                st.accepted.push(target.clone());
                // A target that refuses: the client's connection is cut at
                // once, as a connect to it would fail.
                let Ok(server) = TcpStream::connect(&target) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                st.pipes
                    .push((client.try_clone().unwrap(), server.try_clone().unwrap()));
                drop(st);
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Forwarder { addr, shared }
    }

    /// `host:port` to give as `bootstrap.servers`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Pipes new connections to `target`, and cuts the ones piped so far.
    pub fn retarget(&self, target: &str) {
        let mut st = self.shared.lock().unwrap();
        st.target = target.to_owned();
        for (a, b) in st.pipes.drain(..) {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
    }

    /// The targets of the connections accepted so far, in order.
    pub fn accepted(&self) -> Vec<String> {
        self.shared.lock().unwrap().accepted.clone()
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        let mut st = self.shared.lock().unwrap();
        st.stopped = true;
        for (a, b) in st.pipes.drain(..) {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
        drop(st);
        // Wakes the accepting thread so it sees `stopped`.
        let _ = TcpStream::connect(&self.addr);
    }
}

/// Copies `from` to `to` on a thread of its own until either ends.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    thread::spawn(move || {
        let mut buf = [0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
        let _ = from.shutdown(Shutdown::Read);
    });
}

/// How long each step may take.
pub const WAIT: Duration = Duration::from_secs(60);

/// A producer on `bootstrap` with `metadata.recovery.strategy`.
pub fn producer(bootstrap: &str, strategy: &str) -> Producer {
    let config = ProducerConfig::builder()
        .bootstrap_servers(bootstrap)
        .set("metadata.recovery.strategy", strategy)
        .unwrap()
        .set("linger.ms", "0")
        .unwrap()
        .build()
        .unwrap();
    Producer::new(config).unwrap()
}

/// A consumer of `topic` in `group` on `bootstrap` (from the earliest
/// offset, committing by hand) with `metadata.recovery.strategy`.
pub fn consumer(bootstrap: &str, strategy: &str, topic: &str, group: &str) -> Consumer {
    let config = ConsumerConfig::builder()
        .bootstrap_servers(bootstrap)
        .group_id(group)
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .set("metadata.recovery.strategy", strategy)
        .unwrap()
        .build()
        .unwrap();
    let consumer = Consumer::new(config).unwrap();
    consumer.subscribe([topic]).unwrap();
    consumer
}

/// Sends `values` to `topic` (keyed by the value, so every partition gets
/// some) and waits for each delivery.
pub async fn send_all(producer: &Producer, topic: &str, values: &[String]) {
    for v in values {
        let record = ProducerRecord::new(topic)
            .key(v.clone().into_bytes())
            .value(v.clone().into_bytes());
        let delivery = timeout(WAIT, producer.send(record))
            .await
            .unwrap_or_else(|| panic!("send {v}: no room within {WAIT:?}"))
            .unwrap_or_else(|e| panic!("send {v}: {e}"));
        timeout(WAIT, delivery)
            .await
            .unwrap_or_else(|| {
                panic!(
                    "{v}: no delivery report within {WAIT:?}; connections {:?}; brokers {:?}",
                    producer.connections(),
                    producer.metrics().brokers
                )
            })
            .unwrap_or_else(|e| panic!("{v}: {e}"));
    }
}

/// Polls until every value of `wanted` came (others may come too: none
/// is expected twice), as the README's loop does: retriable errors are
/// said and polled past, any other fails the test.
pub async fn consume_all(consumer: &Consumer, wanted: &BTreeSet<String>) {
    let deadline = Instant::now() + WAIT;
    let mut got = BTreeSet::new();
    let mut errors = Vec::new();
    while !wanted.is_subset(&got) {
        assert!(
            Instant::now() < deadline,
            "within {WAIT:?} the consumer read {got:?} of {wanted:?}; its errors: {errors:?}"
        );
        match consumer.poll(Duration::from_millis(200)).await {
            Ok(records) => {
                for r in &records {
                    let v = String::from_utf8(r.value().unwrap().to_vec()).unwrap();
                    assert!(got.insert(v.clone()), "{v} read twice");
                }
                if !records.is_empty() {
                    let _ = consumer.commit().await;
                }
            }
            Err(e) if e.is_retriable() => errors.push(e.to_string()),
            Err(e) => panic!("poll: a non-retriable error: {e} (after {errors:?})"),
        }
    }
}

/// Ten values: `prefix-0` to `prefix-9`.
pub fn values(prefix: &str) -> Vec<String> {
    (0..10).map(|i| format!("{prefix}-{i}")).collect()
}
