//! The connection lifecycle against real peers: librdkafka's mock cluster
//! (3 brokers, group coordinator on broker 2, partition leaders on brokers 1
//! and 3) with request tracking, and the tansu broker. At each step the test
//! takes a census of this process's own sockets from /proc.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::clusters::{self, TestCluster};
use common::{client_sockets, wait_for, CLOSE_WAIT, ESTABLISHED};
use lazykafka::cluster::{Cluster, ClusterConfig, Target};
use lazykafka::events::{CloseReason, EventKind, Purpose};
use lazykafka::protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use lazykafka::protocol::messages::list_offsets::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic,
};
use lazykafka::protocol::ApiKey;
use lazykafka::runtime::{ClusterDriver, SocketOptions};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(15);

fn heartbeat(group: &str) -> Box<HeartbeatRequest> {
    Box::new(HeartbeatRequest {
        group_id: group.into(),
        generation_id: -1,
        member_id: "nobody".into(),
        ..HeartbeatRequest::default()
    })
}

fn list_earliest(topic: &str, partition: i32) -> Box<ListOffsetsRequest> {
    Box::new(ListOffsetsRequest {
        replica_id: -1,
        topics: vec![ListOffsetsTopic {
            name: topic.into(),
            partitions: vec![ListOffsetsPartition {
                partition_index: partition,
                current_leader_epoch: -1,
                timestamp: -2,
                ..ListOffsetsPartition::default()
            }],
            ..ListOffsetsTopic::default()
        }],
        ..ListOffsetsRequest::default()
    })
}

fn purposes(driver: &ClusterDriver) -> BTreeSet<(String, Option<i32>)> {
    driver
        .connections()
        .into_iter()
        .map(|c| (c.purpose.to_string(), c.broker))
        .collect()
}

fn set(items: &[(&str, i32)]) -> BTreeSet<(String, Option<i32>)> {
    items
        .iter()
        .map(|(p, b)| (p.to_string(), Some(*b)))
        .collect()
}

#[test]
fn librdkafka_mock_group_lifecycle() {
    crate::common::block_on(async {
        group_lifecycle(&clusters::librdkafka()).await;
    })
}

#[test]
fn lazykafka_mock_group_lifecycle() {
    crate::common::block_on(async {
        group_lifecycle(&clusters::ours()).await;
    })
}

/// 3 brokers, group coordinator on broker 2, partition leaders on brokers
/// 1 and 3: the same steps and assertions on either mock.
async fn group_lifecycle(mock: &impl TestCluster) {
    let ports = mock.ports();
    let port_of = |broker: i32| ports[broker as usize - 1];

    let mut config = ClusterConfig::new(mock.bootstraps());
    config.group_id = Some("g".into());
    let mut driver = ClusterDriver::new(
        Cluster::new(config, Instant::now(), 7),
        SocketOptions::default(),
    );
    // Before anything is asked: no socket at all.
    assert!(client_sockets(&ports).is_empty());
    assert!(driver.connections().is_empty());

    // A group request: FindCoordinator and Metadata over one bootstrap
    // connection, then the coordinator's own connection.
    driver.cluster().set_topics(["t".to_owned()]);
    let id = driver.request(Target::Coordinator, heartbeat("g"));
    let response = driver
        .wait_response(id, WAIT)
        .await
        .expect("answered")
        .unwrap();
    assert_eq!(response.broker, Some(2));
    response.decode::<HeartbeatResponse>().unwrap();
    let after_coordinator = purposes(&driver);
    assert!(after_coordinator.contains(&("coordinator".into(), Some(2))));
    assert_eq!(after_coordinator.len(), 2, "{after_coordinator:?}");
    let established: Vec<u16> = client_sockets(&ports)
        .iter()
        .filter(|s| s.state == ESTABLISHED)
        .map(|s| s.remote_port)
        .collect();
    assert_eq!(
        established.len(),
        2,
        "{:?} {:?} {:#?}",
        client_sockets(&ports),
        driver.connections(),
        driver.take_events()
    );
    assert!(established.contains(&port_of(2)));

    // Requests to both partition leaders: a connection each, and the
    // bootstrap connection is retired (or promoted, if it reached one).
    let l1 = driver.request(Target::Broker(1), list_earliest("t", 0));
    let l3 = driver.request(Target::Broker(3), list_earliest("t", 1));
    for id in [l1, l3] {
        let r = driver
            .wait_response(id, WAIT)
            .await
            .expect("answered")
            .unwrap();
        r.decode::<ListOffsetsResponse>().unwrap();
    }
    assert_eq!(
        purposes(&driver),
        set(&[("coordinator", 2), ("leader", 1), ("leader", 3)])
    );
    assert!(wait_for(WAIT, || {
        let s = client_sockets(&ports);
        s.len() == 3 && s.iter().all(|s| s.state == ESTABLISHED)
    }));
    let mut remote: Vec<u16> = client_sockets(&ports)
        .iter()
        .map(|s| s.remote_port)
        .collect();
    remote.sort();
    let mut expected = vec![port_of(1), port_of(2), port_of(3)];
    expected.sort();
    assert_eq!(remote, expected);
    let events = driver.take_events();
    let bootstrap = events
        .iter()
        .find(|e| e.purpose == Purpose::Bootstrap)
        .expect("a bootstrap connection")
        .connection;
    assert!(
        events.iter().any(|e| e.connection == bootstrap
            && matches!(e.kind, EventKind::Promoted | EventKind::Retired)),
        "{events:#?}"
    );

    // Which broker got which request.
    let requests = mock.requests();
    let brokers_of = |api: ApiKey| -> BTreeSet<i32> {
        requests
            .iter()
            .filter(|(_, k)| *k == api.code())
            .map(|(b, _)| *b)
            .collect()
    };
    assert_eq!(brokers_of(ApiKey::Heartbeat), BTreeSet::from([2]));
    assert_eq!(brokers_of(ApiKey::ListOffsets), BTreeSet::from([1, 3]));
    // FindCoordinator and Metadata went to the single bootstrap broker.
    let lookup: BTreeSet<i32> = brokers_of(ApiKey::FindCoordinator)
        .union(&brokers_of(ApiKey::Metadata))
        .copied()
        .collect();
    assert_eq!(lookup.len(), 1, "{requests:?}");
    // Every connection started with ApiVersions: one per socket opened
    // (3 or 4, depending on whether the bootstrap was promoted), plus the
    // retries after the mock refused v4.
    assert!(brokers_of(ApiKey::ApiVersions).len() >= 3);

    // Broker 3 goes down: its connection sees EOF and is closed on our side
    // at once, so no socket is left in CLOSE_WAIT.
    mock.broker_down(3);
    let closed = driver
        .run_until(WAIT, |d| {
            d.take_events().iter().any(|e| {
                e.broker == Some(3)
                    && matches!(
                        e.kind,
                        EventKind::Closed {
                            reason: CloseReason::Peer | CloseReason::Error,
                            ..
                        }
                    )
            })
        })
        .await;
    assert!(
        closed,
        "{}: the close of broker 3 was not seen",
        mock.name()
    );
    assert!(wait_for(WAIT, || client_sockets(&[port_of(3)]).is_empty()));
    assert!(!client_sockets(&ports).iter().any(|s| s.state == CLOSE_WAIT));

    driver.shutdown();
    assert!(driver.connections().is_empty());
    assert!(wait_for(WAIT, || client_sockets(&ports).is_empty()));
}

#[test]
fn tansu_single_broker_lifecycle() {
    crate::common::block_on(async {
        let Some(addr) = common::tansu_addr("tansu_single_broker_lifecycle") else {
            return;
        };
        let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
        let mut config = ClusterConfig::new([addr.clone()]);
        config.group_id = Some("lifecycle".into());
        config.allow_auto_create_topics = true;
        let mut driver = ClusterDriver::new(
            Cluster::new(config, Instant::now(), 1),
            SocketOptions::default(),
        );
        let before = client_sockets(&[port]).len();
        let topic = "lazykafka-lifecycle";
        driver.cluster().set_topics([topic.to_owned()]);
        let hb = driver.request(Target::Coordinator, heartbeat("lifecycle"));
        driver
            .wait_response(hb, WAIT)
            .await
            .expect("answered")
            .unwrap();
        let coordinator = driver
            .cluster()
            .coordinator()
            .cloned()
            .expect("coordinator");
        // The coordinator has its own socket, besides the bootstrap one.
        assert_eq!(
            purposes(&driver),
            BTreeSet::from([
                ("bootstrap".to_owned(), Some(coordinator.id)),
                ("coordinator".to_owned(), Some(coordinator.id))
            ])
        );
        // Wait for the auto-created topic to have a leader, then ask it.
        let known = driver
            .run_until(WAIT, |d| d.cluster().metadata().leader(topic, 0).is_some())
            .await;
        assert!(known, "{:?}", driver.cluster().metadata());
        let leader = driver.cluster().metadata().leader(topic, 0).unwrap();
        let lo = driver.request(Target::Broker(leader), list_earliest(topic, 0));
        driver
            .wait_response(lo, WAIT)
            .await
            .expect("answered")
            .unwrap();
        // The bootstrap connection reached the leader: it was promoted, so one
        // broker means two sockets (coordinator and leader), not three.
        assert_eq!(
            purposes(&driver),
            BTreeSet::from([
                ("coordinator".to_owned(), Some(coordinator.id)),
                ("leader".to_owned(), Some(leader))
            ])
        );
        assert!(driver
            .take_events()
            .iter()
            .any(|e| e.kind == EventKind::Promoted));
        assert!(wait_for(WAIT, || client_sockets(&[port]).len() == before + 2));
        driver.shutdown();
        assert!(wait_for(WAIT, || client_sockets(&[port]).len() == before));
    })
}

#[test]
fn a_broker_closing_its_sockets_leaves_nothing_in_close_wait() {
    crate::common::block_on(async {
        let Some(mut tansu) = common::Tansu::start("no_close_wait_after_broker_close") else {
            return;
        };
        let mut driver = ClusterDriver::new(
            Cluster::new(ClusterConfig::new([tansu.addr.clone()]), Instant::now(), 3),
            SocketOptions::default(),
        );
        driver.cluster().set_topics(["close-wait".to_owned()]);
        let ready = driver
            .run_until(WAIT, |d| d.cluster().metadata_generation() > 0)
            .await;
        assert!(ready, "no metadata from tansu");
        // One socket to the broker (a connect attempt made while tansu was
        // still starting may take a moment to be gone).
        assert!(
            wait_for(WAIT, || client_sockets(&[tansu.port]).len() == 1),
            "{:?}",
            client_sockets(&[tansu.port])
        );

        tansu.kill();
        let seen = driver
            .run_until(WAIT, |d| {
                d.take_events().iter().any(|e| {
                    matches!(
                        e.kind,
                        EventKind::Closed {
                            reason: CloseReason::Peer | CloseReason::Error,
                            ..
                        }
                    )
                })
            })
            .await;
        assert!(seen, "the broker's close was not seen");
        // Our side is closed too: within a second the socket is gone, and at no
        // point is it left in CLOSE_WAIT.
        assert!(wait_for(Duration::from_secs(1), || client_sockets(&[
            tansu.port
        ])
        .iter()
        .all(|s| s.state != CLOSE_WAIT)));
        assert!(wait_for(Duration::from_secs(1), || client_sockets(&[
            tansu.port
        ])
        .is_empty()));
    })
}
