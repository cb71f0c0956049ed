//! The connection contract (docs/connections.md), each promise checked so
//! that breaking it fails every run, on librdkafka's mock and on
//! `lazykafka::mock`:
//!
//! - the census comes from `/proc` (this process's TCP sockets to the
//!   brokers' ports), not from the library's own report;
//! - waits are conditions with deadlines: "no socket appears within
//!   300 ms" gives a wrongly started task time to connect;
//! - the topology leaves nothing to chance: one bootstrap address, broker
//!   4, which leads nothing and coordinates nothing; leaders 1 and 3;
//!   coordinator 2 — so retirement is retirement, not a lucky promotion;
//! - where each request went is read from the brokers' own request logs.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]
// See `CPU_ALONE`.
#![allow(clippy::await_holding_lock)]

mod common;

use common::clusters::TestCluster;
use common::peers::{config, poll_through_faults, produce_range, WAIT};
use common::{client_sockets, wait_for, CLOSE_WAIT, ESTABLISHED};
use lazykafka::group::GroupProtocol;
use lazykafka::mock::MockCluster;
use lazykafka::protocol::ApiKey;
use lazykafka::{Consumer, TopicPartition};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The heartbeat test measures the whole process's CPU: it runs alone
/// (holding this for writing), every other test of this file holds it for
/// reading, so that their consumers and mocks are not counted. The guards
/// are held across `.await`s on purpose (hence the file's
/// `clippy::await_holding_lock` allowance): each test runs its own
/// `block_on` on its own thread, and what waits on the lock is another
/// test, as intended.
static CPU_ALONE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn beside_others() -> std::sync::RwLockReadGuard<'static, ()> {
    CPU_ALONE
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    CPU_ALONE
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long a wrongly started task gets to open a socket.
const QUIET: Duration = Duration::from_millis(300);

const BOOTSTRAP: i32 = 4;
const COORDINATOR: i32 = 2;
const LEADERS: [i32; 2] = [1, 3];

/// Four brokers: `t`-0 led by 1, `t`-1 by 3, group `g` coordinated by 2;
/// broker 4 has no part and is the only bootstrap address.
fn topology<C: TestCluster>() -> C {
    let mock = C::start(4);
    mock.create_topic("t", &LEADERS);
    mock.set_coordinator("g", COORDINATOR);
    mock
}

fn bootstrap<C: TestCluster>(mock: &C) -> String {
    mock.bootstraps()[(BOOTSTRAP - 1) as usize].clone()
}

/// The brokers this process holds established client sockets to, from
/// `/proc` (broker ids from the ports).
fn census<C: TestCluster>(mock: &C) -> BTreeSet<i32> {
    let ports = mock.ports();
    client_sockets(&ports)
        .iter()
        .filter(|s| s.state == ESTABLISHED)
        .map(|s| ports.iter().position(|p| *p == s.remote_port).unwrap() as i32 + 1)
        .collect()
}

/// The brokers that received requests of `api`.
fn receivers<C: TestCluster>(mock: &C, api: ApiKey) -> BTreeSet<i32> {
    mock.requests()
        .into_iter()
        .filter(|(_, k)| *k == api.code())
        .map(|(b, _)| b)
        .collect()
}

async fn consume_all(consumer: &mut Consumer, n: usize) {
    assert_eq!(common::cpu::consume(consumer, n).await, n, "records");
}

/// Promise 1: `new`, `subscribe`, `assign`, `pause`, `seek` and the getters
/// open nothing, and neither does dropping a consumer that never polled.
async fn nothing_before_the_first_poll<C: TestCluster>() {
    let _others = beside_others();
    let mock: C = topology();
    let name = mock.name();
    let grouped = Consumer::new(config(&bootstrap(&mock), Some("g")).build().unwrap()).unwrap();
    grouped.subscribe(["t"]).unwrap();
    let _ = (
        grouped.subscription(),
        grouped.assignment(),
        grouped.connections(),
    );
    let manual = Consumer::new(config(&bootstrap(&mock), None).build().unwrap()).unwrap();
    let tp = TopicPartition::new("t", 0);
    manual.assign([tp.clone()]).unwrap();
    manual.seek(&tp, 3).unwrap();
    manual.pause([&tp]);
    manual.resume([&tp]);
    let _ = (
        manual.position(&tp),
        manual.paused(),
        manual.broker_counters(),
    );
    let appeared = wait_for(QUIET, || !census(&mock).is_empty());
    assert!(
        !appeared,
        "{name}: a socket before the first poll: {:?}",
        census(&mock)
    );
    assert!(mock.requests().is_empty(), "{name}: {:?}", mock.requests());
    drop(grouped);
    drop(manual);
    assert!(!wait_for(QUIET, || !census(&mock).is_empty()), "{name}");
    assert!(mock.requests().is_empty(), "{name}: {:?}", mock.requests());
}

/// Promises 2-5 for a group consumer: the bootstrap connection carries the
/// first Metadata and FindCoordinator and is then retired; group requests
/// go to the coordinator only, Fetch to the leaders only; once leaders are
/// known Metadata goes over a leader connection; the census ends at the
/// coordinator and the two leaders.
async fn a_group_consumer_routes_every_request<C: TestCluster>() {
    let _others = beside_others();
    let mock: C = topology();
    let name = mock.name();
    produce_range(&mock.bootstrap(), "t", 2, 0..20, "none");
    mock.clear_requests();
    let mut consumer = Consumer::new(
        config(&bootstrap(&mock), Some("g"))
            .metadata_max_age(Duration::from_millis(300))
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.subscribe(["t"]).unwrap();
    consume_all(&mut consumer, 20).await;

    let first_find = mock
        .requests()
        .into_iter()
        .find(|(_, k)| *k == ApiKey::FindCoordinator.code());
    assert_eq!(
        first_find.map(|(b, _)| b),
        Some(BOOTSTRAP),
        "{name}: FindCoordinator goes to the bootstrap broker first"
    );
    for api in [ApiKey::JoinGroup, ApiKey::SyncGroup, ApiKey::OffsetFetch] {
        assert_eq!(
            receivers(&mock, api),
            BTreeSet::from([COORDINATOR]),
            "{name}: {api} only to the coordinator"
        );
    }
    assert_eq!(
        receivers(&mock, ApiKey::Fetch),
        BTreeSet::from(LEADERS),
        "{name}: Fetch only to the leaders"
    );
    let expected = BTreeSet::from([1, COORDINATOR, 3]);
    assert!(
        wait_for(WAIT, || census(&mock) == expected),
        "{name}: sockets {:?}, expected coordinator and leaders, bootstrap retired",
        census(&mock)
    );

    // From now on Metadata (refreshed every 300 ms) goes over a leader
    // connection: not to the coordinator, never to the retired bootstrap.
    mock.clear_requests();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        poll_through_faults(&mut consumer, Duration::from_millis(100)).await;
    }
    let metadata = receivers(&mock, ApiKey::Metadata);
    assert!(!metadata.is_empty(), "{name}: no Metadata refresh in 2 s");
    assert!(
        metadata.is_subset(&BTreeSet::from(LEADERS)),
        "{name}: Metadata went to {metadata:?}"
    );
    assert!(
        mock.requests().iter().all(|(b, _)| *b != BOOTSTRAP),
        "{name}: requests to the retired bootstrap broker: {:?}",
        mock.requests()
    );
    assert_eq!(
        receivers(&mock, ApiKey::Heartbeat),
        BTreeSet::from([COORDINATOR]),
        "{name}: heartbeats only to the coordinator"
    );
    assert_eq!(census(&mock), expected, "{name}");
    consumer.close().await.unwrap();
    assert!(
        wait_for(WAIT, || census(&mock).is_empty()),
        "{name}: sockets after close: {:?}",
        census(&mock)
    );
}

/// The same for manual assignment: no coordinator connection at all, the
/// bootstrap connection retired once a leader connection is ready.
async fn a_manual_consumer_holds_leader_connections_only<C: TestCluster>() {
    let _others = beside_others();
    let mock: C = topology();
    let name = mock.name();
    produce_range(&mock.bootstrap(), "t", 2, 0..20, "none");
    mock.clear_requests();
    let mut consumer = Consumer::new(config(&bootstrap(&mock), None).build().unwrap()).unwrap();
    consumer
        .assign([TopicPartition::new("t", 0), TopicPartition::new("t", 1)])
        .unwrap();
    consume_all(&mut consumer, 20).await;
    let expected = BTreeSet::from(LEADERS);
    assert!(
        wait_for(WAIT, || census(&mock) == expected),
        "{name}: sockets {:?}, expected the leaders only",
        census(&mock)
    );
    assert!(
        mock.requests().iter().all(|(b, _)| *b != COORDINATOR),
        "{name}: requests to broker 2, which leads nothing: {:?}",
        mock.requests()
    );
    consumer.close().await.unwrap();
}

/// Promises 2-5 for a pattern subscription, under either group protocol:
/// the classic consumer asks for metadata of every topic (refreshed every
/// 300 ms here), the KIP-848 one looks a new topic's id up by id; either
/// way, once leaders are known, Metadata goes over leader connections
/// only, group traffic to the coordinator only, nothing to the retired
/// bootstrap broker, and a topic created later adds no socket beyond its
/// leaders' (the same brokers here).
async fn a_pattern_consumer_routes_every_request<C: TestCluster>(protocol: GroupProtocol) {
    let _others = beside_others();
    let mock: C = topology();
    let name = mock.name();
    mock.set_consumer_group_timing(300, 6_000);
    mock.set_regex_refresh(300);
    produce_range(&mock.bootstrap(), "t", 2, 0..20, "none");
    mock.clear_requests();
    let builder = match protocol {
        GroupProtocol::Classic => config(&bootstrap(&mock), Some("g")),
        _ => lazykafka::ConsumerConfig::builder()
            .bootstrap_servers(bootstrap(&mock))
            .group_id("g")
            .group_protocol(protocol)
            .auto_offset_reset(lazykafka::OffsetReset::Earliest)
            .fetch_max_wait(Duration::from_millis(100)),
    };
    let mut consumer = Consumer::new(
        builder
            .metadata_max_age(Duration::from_millis(300))
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.subscribe_pattern("t.*").unwrap();
    consume_all(&mut consumer, 20).await;
    // Committed, so that a rejoin (classic, eager) goes on from here.
    consumer.commit().await.unwrap();
    let first_find = mock
        .requests()
        .into_iter()
        .find(|(_, k)| *k == ApiKey::FindCoordinator.code());
    assert_eq!(first_find.map(|(b, _)| b), Some(BOOTSTRAP), "{name}");
    let group_apis: &[ApiKey] = match protocol {
        GroupProtocol::Classic => &[ApiKey::JoinGroup, ApiKey::SyncGroup, ApiKey::OffsetFetch],
        _ => &[ApiKey::ConsumerGroupHeartbeat, ApiKey::OffsetFetch],
    };
    for api in group_apis {
        assert_eq!(
            receivers(&mock, *api),
            BTreeSet::from([COORDINATOR]),
            "{name} ({protocol}): {api} only to the coordinator"
        );
    }
    let expected = BTreeSet::from([1, COORDINATOR, 3]);
    assert!(
        wait_for(WAIT, || census(&mock) == expected),
        "{name} ({protocol}): sockets {:?}",
        census(&mock)
    );

    // A matching topic appears: found (every-topic Metadata, or by id)
    // and assigned, with Metadata over leader connections only. (Looked at
    // before anything is produced to it: the producer's own requests would
    // be in the brokers' logs.)
    mock.clear_requests();
    mock.create_topic("t-new", &[3, 1]);
    let deadline = Instant::now() + WAIT;
    while !consumer.assignment().iter().any(|tp| tp.topic == "t-new") {
        assert!(
            Instant::now() < deadline,
            "{name} ({protocol}): t-new never assigned"
        );
        poll_through_faults(&mut consumer, Duration::from_millis(100)).await;
    }
    let metadata = receivers(&mock, ApiKey::Metadata);
    assert!(!metadata.is_empty(), "{name} ({protocol}): no Metadata");
    assert!(
        metadata.is_subset(&BTreeSet::from(LEADERS)),
        "{name} ({protocol}): Metadata went to {metadata:?}"
    );
    assert!(
        mock.requests().iter().all(|(b, _)| *b != BOOTSTRAP),
        "{name} ({protocol}): requests to the retired bootstrap broker: {:?}",
        mock.requests()
    );
    for api in group_apis {
        assert!(
            receivers(&mock, *api).is_subset(&BTreeSet::from([COORDINATOR])),
            "{name} ({protocol}): {api} off the coordinator"
        );
    }
    produce_range(&mock.bootstrap(), "t-new", 2, 0..4, "none");
    consume_all(&mut consumer, 4).await;
    assert_eq!(census(&mock), expected, "{name} ({protocol})");
    consumer.close().await.unwrap();
    assert!(
        wait_for(WAIT, || census(&mock).is_empty()),
        "{name} ({protocol}): sockets after close: {:?}",
        census(&mock)
    );
}

/// One consumer's life: created, polled until it has every record, closed
/// (or not), dropped.
async fn round<C: TestCluster>(mock: &C, close: bool) {
    let mut consumer = Consumer::new(config(&bootstrap(mock), None).build().unwrap()).unwrap();
    consumer
        .assign([TopicPartition::new("t", 0), TopicPartition::new("t", 1)])
        .unwrap();
    consume_all(&mut consumer, 4).await;
    if close {
        consumer.close().await.unwrap();
    }
    drop(consumer);
}

/// Sockets and descriptors: consumers created, polled, closed and
/// dropped (and dropped without `close`) many times leave nothing behind.
async fn consumers_leave_no_socket_or_descriptor_behind<C: TestCluster>() {
    let _others = beside_others();
    let mock: C = topology();
    let name = mock.name();
    produce_range(&mock.bootstrap(), "t", 2, 0..4, "none");
    let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    // One round first, so lazily made process-wide resources (runtime
    // threads, resolver) are in the baseline.
    round(&mock, true).await;
    assert!(wait_for(WAIT, || census(&mock).is_empty()), "{name}");
    let baseline = fds();
    for i in 0..20 {
        round(&mock, i % 2 == 0).await;
    }
    assert!(
        wait_for(WAIT, || census(&mock).is_empty() && fds() <= baseline),
        "{name}: {} descriptors (baseline {baseline}), sockets {:?}",
        fds(),
        census(&mock)
    );
    let ports = mock.ports();
    assert!(
        client_sockets(&ports).iter().all(|s| s.state != CLOSE_WAIT),
        "{name}: {:?}",
        client_sockets(&ports)
    );
}

/// The background task keeps the membership alive on its own: with every
/// partition paused (no Fetch to wake it) and the application not polling
/// for 2 s, it still heartbeats every `heartbeat.interval.ms` (500 ms), on
/// its timers alone, and spends little CPU doing so.
async fn heartbeats_go_on_while_the_application_does_not_poll<C: TestCluster>() {
    let _alone = alone();
    let mock: C = topology();
    let name = mock.name();
    produce_range(&mock.bootstrap(), "t", 2, 0..4, "none");
    let mut consumer =
        Consumer::new(config(&bootstrap(&mock), Some("g")).build().unwrap()).unwrap();
    consumer.subscribe(["t"]).unwrap();
    consume_all(&mut consumer, 4).await;
    let assigned = consumer.assignment();
    consumer.pause(&assigned);
    // A Fetch still in flight is answered within fetch.max.wait.ms (100 ms):
    // every request sent is answered before the measure starts.
    assert!(
        common::wait_for_async(WAIT, || consumer
            .broker_counters()
            .values()
            .all(|c| c.requests == c.responses))
        .await,
        "{name}: requests unanswered: {:?}",
        consumer.broker_counters()
    );
    mock.clear_requests();
    let cpu0 = common::cpu::cpu_seconds();
    common::sleep(Duration::from_secs(2)).await;
    let cpu = common::cpu::cpu_seconds() - cpu0;
    let heartbeats = mock
        .requests()
        .into_iter()
        .filter(|(b, k)| *k == ApiKey::Heartbeat.code() && *b == COORDINATOR)
        .count();
    assert!(
        heartbeats >= 2,
        "{name}: {heartbeats} heartbeats in 2 s without a poll"
    );
    assert!(cpu < 0.6, "{name}: {cpu:.3} s of CPU in 2 s without a poll");
    consumer.close().await.expect("close");
}

/// An offsets lookup for a topic the consumer neither reads nor has
/// metadata for: its leader is looked up first (Metadata naming it), then
/// ListOffsets goes to that leader.
async fn an_offsets_lookup_finds_the_leader_of_a_topic_not_read<C: TestCluster>() {
    let _others = beside_others();
    let mock: C = topology();
    let name = mock.name();
    mock.create_topic("u", &[3]);
    produce_range(&mock.bootstrap(), "u", 1, 0..3, "none");
    produce_range(&mock.bootstrap(), "t", 2, 0..2, "none");
    let mut consumer = Consumer::new(config(&bootstrap(&mock), None).build().unwrap()).unwrap();
    consumer.assign([TopicPartition::new("t", 0)]).unwrap();
    consume_all(&mut consumer, 1).await;
    let u = TopicPartition::new("u", 0);
    let end = consumer
        .end_offsets([u.clone()])
        .await
        .unwrap_or_else(|e| panic!("{name}: end_offsets: {e}"));
    assert_eq!(end.get(&u), Some(&3), "{name}");
    consumer.close().await.expect("close");
}

mod librdkafka_mock {
    use super::*;
    use common::mock::RawMock;

    #[test]
    fn nothing_before_the_first_poll() {
        crate::common::block_on(async { super::nothing_before_the_first_poll::<RawMock>().await })
    }

    #[test]
    fn a_group_consumer_routes_every_request() {
        crate::common::block_on(async {
            super::a_group_consumer_routes_every_request::<RawMock>().await
        })
    }

    #[test]
    fn a_manual_consumer_holds_leader_connections_only() {
        crate::common::block_on(async {
            super::a_manual_consumer_holds_leader_connections_only::<RawMock>().await
        })
    }

    #[test]
    fn consumers_leave_no_socket_or_descriptor_behind() {
        crate::common::block_on(async {
            super::consumers_leave_no_socket_or_descriptor_behind::<RawMock>().await
        })
    }

    #[test]
    fn a_classic_pattern_consumer_routes_every_request() {
        crate::common::block_on(async {
            super::a_pattern_consumer_routes_every_request::<RawMock>(GroupProtocol::Classic).await
        })
    }

    #[test]
    fn a_kip848_pattern_consumer_routes_every_request() {
        crate::common::block_on(async {
            super::a_pattern_consumer_routes_every_request::<RawMock>(GroupProtocol::Consumer).await
        })
    }

    #[test]
    fn heartbeats_go_on_while_the_application_does_not_poll() {
        crate::common::block_on(async {
            super::heartbeats_go_on_while_the_application_does_not_poll::<RawMock>().await
        })
    }

    #[test]
    fn an_offsets_lookup_finds_the_leader_of_a_topic_not_read() {
        crate::common::block_on(async {
            super::an_offsets_lookup_finds_the_leader_of_a_topic_not_read::<RawMock>().await
        })
    }
}

mod lazykafka_mock {
    use super::*;

    #[test]
    fn nothing_before_the_first_poll() {
        crate::common::block_on(async {
            super::nothing_before_the_first_poll::<MockCluster>().await
        })
    }

    #[test]
    fn a_group_consumer_routes_every_request() {
        crate::common::block_on(async {
            super::a_group_consumer_routes_every_request::<MockCluster>().await
        })
    }

    #[test]
    fn a_manual_consumer_holds_leader_connections_only() {
        crate::common::block_on(async {
            super::a_manual_consumer_holds_leader_connections_only::<MockCluster>().await
        })
    }

    #[test]
    fn consumers_leave_no_socket_or_descriptor_behind() {
        crate::common::block_on(async {
            super::consumers_leave_no_socket_or_descriptor_behind::<MockCluster>().await
        })
    }

    #[test]
    fn a_classic_pattern_consumer_routes_every_request() {
        crate::common::block_on(async {
            super::a_pattern_consumer_routes_every_request::<MockCluster>(GroupProtocol::Classic)
                .await
        })
    }

    #[test]
    fn a_kip848_pattern_consumer_routes_every_request() {
        crate::common::block_on(async {
            super::a_pattern_consumer_routes_every_request::<MockCluster>(GroupProtocol::Consumer)
                .await
        })
    }

    #[test]
    fn heartbeats_go_on_while_the_application_does_not_poll() {
        crate::common::block_on(async {
            super::heartbeats_go_on_while_the_application_does_not_poll::<MockCluster>().await
        })
    }

    #[test]
    fn an_offsets_lookup_finds_the_leader_of_a_topic_not_read() {
        crate::common::block_on(async {
            super::an_offsets_lookup_finds_the_leader_of_a_topic_not_read::<MockCluster>().await
        })
    }
}

/// Rule 10: every client socket sets TCP_NODELAY, and SO_KEEPALIVE unless
/// `socket.keepalive.enable=false`, read back from the sockets themselves
/// (`getsockopt` on this process's descriptors connected to the brokers).
fn socket_options<C: TestCluster>(mock: &C) -> Vec<(bool, bool)> {
    let ports = mock.ports();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: `addr` is large enough for any address; `fd` may not be a
        // socket, in which case the call fails and it is skipped.
        let peer = unsafe { libc::getpeername(fd, std::ptr::addr_of_mut!(addr).cast(), &mut len) };
        if peer != 0 || i32::from(addr.ss_family) != libc::AF_INET {
            continue;
        }
        // SAFETY: the family says it is a sockaddr_in.
        let sin: libc::sockaddr_in = unsafe { std::ptr::read(std::ptr::addr_of!(addr).cast()) };
        if !ports.contains(&u16::from_be(sin.sin_port)) {
            continue;
        }
        let flag = |level: i32, name: i32| {
            let mut v: libc::c_int = 0;
            let mut l = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: `v` and `l` are valid for an int option.
            let r = unsafe {
                libc::getsockopt(fd, level, name, std::ptr::addr_of_mut!(v).cast(), &mut l)
            };
            r == 0 && v != 0
        };
        out.push((
            flag(libc::IPPROTO_TCP, libc::TCP_NODELAY),
            flag(libc::SOL_SOCKET, libc::SO_KEEPALIVE),
        ));
    }
    out
}

async fn sockets_set_nodelay_and_keepalive<C: TestCluster>() {
    let _others = beside_others();
    let mock: C = topology();
    let name = mock.name();
    produce_range(&mock.bootstrap(), "t", 2, 0..4, "none");
    for keepalive in [true, false] {
        let mut consumer = Consumer::new(
            config(&bootstrap(&mock), None)
                .socket_keepalive(keepalive)
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer
            .assign([TopicPartition::new("t", 0), TopicPartition::new("t", 1)])
            .unwrap();
        consume_all(&mut consumer, 4).await;
        let options = socket_options(&mock);
        assert!(!options.is_empty(), "{name}: no socket found");
        assert!(
            options
                .iter()
                .all(|&(nodelay, ka)| nodelay && ka == keepalive),
            "{name}: (TCP_NODELAY, SO_KEEPALIVE) {options:?}, keepalive {keepalive}"
        );
        consumer.close().await.unwrap();
        assert!(wait_for(WAIT, || census(&mock).is_empty()), "{name}");
    }
}

mod socket_options {
    use super::*;

    #[test]
    fn librdkafka_mock() {
        crate::common::block_on(async {
            sockets_set_nodelay_and_keepalive::<common::mock::RawMock>().await
        })
    }

    #[test]
    fn lazykafka_mock() {
        crate::common::block_on(async { sockets_set_nodelay_and_keepalive::<MockCluster>().await })
    }
}
