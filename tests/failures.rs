//! Failures reach the application: each is an error from `poll` (or from
//! the call that failed) naming its subject, said once when it starts, and
//! the consumer goes on by itself where it can, without hammering a broker.
//! Closed ports and names that do not resolve are the operating system's;
//! unknown topics and group refusals are served by librdkafka's mock and by
//! `lazykafka::mock` alike; a broker that drops every JoinGroup is a raw
//! server of the test's own.

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::clusters::{standard, TestCluster};
use common::peers::{config, produce_range};
use common::raw::broker_dropping_joins;
use lazykafka::events::{ConnectionError, Purpose};
use lazykafka::protocol::ApiKey;
use lazykafka::{Consumer, Error, ErrorCode, TopicPartition};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a test waits for the error it expects: the issue is seconds.
const WAIT: Duration = Duration::from_secs(20);

/// Polls until `poll` returns an error, within [`WAIT`]; records are
/// ignored. Returns the error and when it came.
async fn first_error(consumer: &mut Consumer) -> (Error, Duration) {
    let start = Instant::now();
    while start.elapsed() < WAIT {
        if let Err(e) = consumer.poll(Duration::from_millis(100)).await {
            return (e, start.elapsed());
        }
    }
    panic!("no error from poll within {WAIT:?}");
}

/// Every error `poll` returns within `span`.
async fn errors_within(consumer: &mut Consumer, span: Duration) -> Vec<Error> {
    let start = Instant::now();
    let mut out = Vec::new();
    while start.elapsed() < span {
        if let Err(e) = consumer.poll(Duration::from_millis(100)).await {
            out.push(e);
        }
    }
    out
}

/// Polls until `n` records came, within [`WAIT`]; returns each record's
/// partition and offset, and the errors `poll` returned meanwhile with
/// when (from the start).
async fn records_and_errors(
    consumer: &mut Consumer,
    n: usize,
    peer: &str,
) -> (Vec<(i32, i64)>, Vec<(Error, Duration)>) {
    let start = Instant::now();
    let mut offsets = Vec::new();
    let mut errors = Vec::new();
    while offsets.len() < n {
        assert!(
            start.elapsed() < WAIT,
            "{peer}: records {offsets:?}, errors {errors:?}"
        );
        match consumer.poll(Duration::from_millis(100)).await {
            Ok(records) => offsets.extend(records.iter().map(|r| (r.partition(), r.offset()))),
            Err(e) => errors.push((e, start.elapsed())),
        }
    }
    (offsets, errors)
}

#[test]
fn a_closed_bootstrap_port_is_reported_by_poll_and_named_by_timeouts() {
    crate::common::block_on(async {
        let closed = common::closed_port();
        let addr = closed.addr.clone();
        let mut consumer = Consumer::new(
            config(&addr, Some("g"))
                .default_api_timeout(Duration::from_secs(2))
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer.subscribe(["t"]).unwrap();
        let (e, after) = first_error(&mut consumer).await;
        match &e {
            Error::BrokersUnreachable { attempts } => {
                assert_eq!(attempts.len(), 1, "{e}");
                assert_eq!(attempts[0].0, addr);
                assert!(
                    matches!(attempts[0].1, ConnectionError::Refused { .. }),
                    "{e}"
                );
            }
            other => panic!("expected BrokersUnreachable, got {other:?}"),
        }
        assert!(e.to_string().contains(&addr), "{e}");
        assert!(e.to_string().contains("refused"), "{e}");
        assert!(e.is_retriable() && !e.is_fatal(), "{e}");
        assert!(after < Duration::from_secs(5), "reported after {after:?}");
        // Said once: the consumer keeps trying, with backoff, in silence.
        let again = errors_within(&mut consumer, Duration::from_secs(2)).await;
        assert!(again.is_empty(), "{again:?}");
        // A call that waits on the network names the refusal at once.
        let e = consumer.partitions_for("t").await.unwrap_err();
        assert!(
            matches!(e, Error::BrokersUnreachable { .. }) && e.to_string().contains(&addr),
            "{e}"
        );
        assert!(e.to_string().contains("refused"), "{e}");
        // A commit with a position to commit but no coordinator fails with a
        // cause; with nothing to commit it is no error.
        consumer.commit().await.expect("nothing to commit is fine");
        let e = consumer
            .commit_offsets([(TopicPartition::new("t", 0), 5)])
            .await
            .unwrap_err();
        assert!(e.to_string().contains(&addr), "{e}");
    })
}

/// Each call that waits on the network, made first (no `poll` before it),
/// against a closed port and a name that does not resolve: each returns
/// the cause within seconds, not after `default.api.timeout.ms` (60 s).
#[test]
fn every_waiting_call_names_an_unreachable_cluster_within_seconds() {
    crate::common::block_on(async {
        let closed = common::closed_port();
        for (addr, cause) in [
            (closed.addr.as_str(), "refused"),
            ("no-such-broker.invalid:9092", "no-such-broker.invalid"),
        ] {
            let p0 = TopicPartition::new("t", 0);
            type Call = fn(
                &mut Consumer,
                TopicPartition,
            ) -> std::pin::Pin<
                Box<dyn std::future::Future<Output = Result<(), Error>> + '_>,
            >;
            let calls: [(&str, Call); 6] = [
                ("partitions_for", |c, _| {
                    Box::pin(async move { c.partitions_for("t").await.map(drop) })
                }),
                ("committed", |c, p| {
                    Box::pin(async move { c.committed([p]).await.map(drop) })
                }),
                ("end_offsets", |c, p| {
                    Box::pin(async move { c.end_offsets([p]).await.map(drop) })
                }),
                ("offsets_for_times", |c, p| {
                    Box::pin(async move { c.offsets_for_times([(p, 0)]).await.map(drop) })
                }),
                ("commit_offsets", |c, p| {
                    Box::pin(async move { c.commit_offsets([(p, 5)]).await })
                }),
                ("close", |c, _| Box::pin(async move { c.close().await })),
            ];
            for (name, call) in calls {
                let mut consumer = Consumer::new(config(addr, Some("g")).build().unwrap()).unwrap();
                consumer.assign([p0.clone()]).unwrap();
                let started = Instant::now();
                let result = call(&mut consumer, p0.clone()).await;
                let took = started.elapsed();
                if name == "close" {
                    // Nothing to commit, so nothing to say; but no 60 s wait.
                    assert!(result.is_ok(), "{name}: {result:?}");
                } else {
                    let e = result.unwrap_err();
                    assert!(
                        matches!(e, Error::BrokersUnreachable { .. }),
                        "{name} at {addr}: {e:?}"
                    );
                    assert!(e.to_string().contains(cause), "{name}: {e}");
                    assert!(e.is_retriable(), "{name}: {e}");
                }
                assert!(
                    took < Duration::from_secs(10),
                    "{name} at {addr} took {took:?}"
                );
            }
        }
    })
}

#[test]
fn a_bootstrap_name_that_does_not_resolve_is_reported_by_poll() {
    crate::common::block_on(async {
        // `.invalid` never resolves (RFC 2606).
        let addr = "no-such-broker.invalid:9092";
        let mut consumer = Consumer::new(config(addr, None).build().unwrap()).unwrap();
        consumer.assign([TopicPartition::new("t", 0)]).unwrap();
        let (e, _) = first_error(&mut consumer).await;
        match &e {
            Error::BrokersUnreachable { attempts } => {
                assert_eq!(attempts[0].0, addr);
                assert!(
                    matches!(attempts[0].1, ConnectionError::Resolve { .. }),
                    "{e}"
                );
            }
            other => panic!("expected BrokersUnreachable, got {other:?}"),
        }
        assert!(e.to_string().contains(addr), "{e}");
    })
}

async fn unknown_topic_subscribed<C: TestCluster>() {
    let mock: C = standard();
    let mut consumer = Consumer::new(
        config(&mock.bootstrap(), Some("g"))
            .allow_auto_create_topics(false)
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.subscribe(["nope"]).unwrap();
    let (e, after) = first_error(&mut consumer).await;
    assert!(
        matches!(&e, Error::Topic { topic, code: ErrorCode::UnknownTopicOrPartition } if topic == "nope"),
        "{}: {e:?}",
        mock.name()
    );
    assert!(e.to_string().contains("nope"), "{e}");
    assert!(e.is_retriable() && !e.is_fatal());
    assert!(after < Duration::from_secs(10), "reported after {after:?}");
    // Not repeated on every poll.
    let again = errors_within(&mut consumer, Duration::from_secs(2)).await;
    assert!(again.is_empty(), "{again:?}");
    let e = consumer.partitions_for("nope").await.unwrap_err();
    assert!(
        matches!(&e, Error::Topic { topic, .. } if topic == "nope"),
        "{e:?}"
    );
    consumer.close().await.unwrap();
}

async fn unknown_topic_and_partition_assigned<C: TestCluster>() {
    let mock: C = standard();
    let consumer = Consumer::new(
        config(&mock.bootstrap(), None)
            .allow_auto_create_topics(false)
            .build()
            .unwrap(),
    )
    .unwrap();
    // Topic t has partitions 0 and 1.
    consumer
        .assign([TopicPartition::new("nope", 0), TopicPartition::new("t", 7)])
        .unwrap();
    let start = Instant::now();
    let mut errors = Vec::new();
    while errors.len() < 2 && start.elapsed() < WAIT {
        if let Err(e) = consumer.poll(Duration::from_millis(100)).await {
            errors.push(e);
        }
    }
    let topic = errors
        .iter()
        .any(|e| matches!(e, Error::Topic { topic, .. } if topic == "nope"));
    let partition = errors.iter().any(|e| {
        matches!(e, Error::UnknownPartition { topic, partition: 7, partitions: 2 } if topic == "t")
    });
    assert!(topic && partition, "{}: {errors:?}", mock.name());
    consumer.close().await.unwrap();
}

/// A consumer without a group, assigned partition 1 of t from its
/// earliest offset.
fn reader_of_t1<C: TestCluster>(mock: &C) -> Consumer {
    let consumer = Consumer::new(
        config(&mock.bootstrap(), None)
            .auto_offset_reset(lazykafka::OffsetReset::Earliest)
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.assign([TopicPartition::new("t", 1)]).unwrap();
    consumer
}

async fn partition_without_leader<C: TestCluster>() {
    let mock: C = standard();
    mock.prepare_leaderless();
    // Partition 1 of t is led by broker 3.
    let mut consumer = reader_of_t1(&mock);
    // Fetching from the leader first (nothing to read yet).
    let start = Instant::now();
    while !mock.requests().contains(&(3, ApiKey::Fetch.code())) {
        assert!(
            start.elapsed() < WAIT,
            "{}: no Fetch to broker 3",
            mock.name()
        );
        let _ = consumer.poll(Duration::from_millis(100)).await;
    }
    mock.remove_leader("t", 1, 3);
    let start = Instant::now();
    let mut errors = Vec::new();
    let reported = loop {
        assert!(
            start.elapsed() < WAIT,
            "{}: no NoLeader within {WAIT:?}: {errors:?}",
            mock.name()
        );
        match consumer.poll(Duration::from_millis(100)).await {
            Err(e @ Error::NoLeader { .. }) => break e,
            Err(e) => errors.push(e),
            Ok(_) => {}
        }
    };
    match &reported {
        Error::NoLeader {
            topic,
            partition: 1,
            code: ErrorCode::LeaderNotAvailable,
        } if topic == "t" => {}
        other => panic!("{}: {other:?}", mock.name()),
    }
    assert!(reported.is_retriable() && !reported.is_fatal());
    // Said once, not on every metadata refresh.
    let again = errors_within(&mut consumer, Duration::from_secs(2)).await;
    assert!(
        !again.iter().any(|e| matches!(e, Error::NoLeader { .. })),
        "{}: {again:?}",
        mock.name()
    );
    // A leader again: the records written to it meanwhile are fetched.
    mock.restore_leader("t", 1, 3);
    // Records 1, 3 and 5 go to partition 1.
    produce_range(&mock.bootstrap(), "t", 2, 0..6, "none");
    let (offsets, _) = records_and_errors(&mut consumer, 3, mock.name()).await;
    assert_eq!(offsets, [(1, 0), (1, 1), (1, 2)], "{}", mock.name());
    consumer.close().await.unwrap();
}

async fn partition_refused_by_its_leader<C: TestCluster>() {
    let mock: C = standard();
    // Records 1, 3 and 5 go to partition 1 of t, led by broker 3.
    produce_range(&mock.bootstrap(), "t", 2, 0..6, "none");
    // Its leader refuses the next 8 Fetch requests (a failed log
    // directory): they span about 4 s of backoff.
    mock.push_errors(ApiKey::Fetch, ErrorCode::KafkaStorageError, 8);
    let mut consumer = reader_of_t1(&mock);
    let (offsets, errors) = records_and_errors(&mut consumer, 3, mock.name()).await;
    // Said once, within seconds, naming the broker, partition and code.
    assert_eq!(errors.len(), 1, "{}: {errors:?}", mock.name());
    let (e, after) = &errors[0];
    // librdkafka's mock answers with the pushed error for the whole
    // response, `lazykafka::mock` for each partition.
    match e {
        Error::Fetch(lazykafka::fetch::FetchError::Broker {
            broker: 3,
            partition,
            code: ErrorCode::KafkaStorageError,
        }) if partition
            .as_ref()
            .is_none_or(|tp| *tp == TopicPartition::new("t", 1)) => {}
        other => panic!("{}: {other:?}", mock.name()),
    }
    assert!(e.is_retriable(), "{e}");
    assert!(
        *after < Duration::from_secs(5),
        "{}: after {after:?}",
        mock.name()
    );
    // Then fetched as the refusals ran out, nothing skipped.
    assert_eq!(offsets, [(1, 0), (1, 1), (1, 2)], "{}", mock.name());
    consumer.close().await.unwrap();
}

async fn join_refused_for_group_authorization<C: TestCluster>() {
    let mock: C = standard();
    mock.push_errors(ApiKey::JoinGroup, ErrorCode::GroupAuthorizationFailed, 1);
    let mut consumer =
        Consumer::new(config(&mock.bootstrap(), Some("g")).build().unwrap()).unwrap();
    consumer.subscribe(["t"]).unwrap();
    let (e, _) = first_error(&mut consumer).await;
    match &e {
        Error::Group {
            group,
            api: ApiKey::JoinGroup,
            code: Some(ErrorCode::GroupAuthorizationFailed),
            stopped: true,
            ..
        } if group == "g" => {}
        other => panic!("{}: expected a stopped member, got {other:?}", mock.name()),
    }
    assert!(e.is_fatal() && !e.is_retriable(), "{e}");
    assert!(e.to_string().contains("GROUP_AUTHORIZATION_FAILED"), "{e}");
    // Stopped for good: no second report, no fetching.
    let again = errors_within(&mut consumer, Duration::from_secs(1)).await;
    assert!(again.is_empty(), "{again:?}");
    assert!(consumer.assignment().is_empty());
    consumer.close().await.unwrap();
}

async fn commit_refused_for_group_authorization<C: TestCluster>() {
    let mock: C = standard();
    let consumer = Consumer::new(config(&mock.bootstrap(), Some("g2")).build().unwrap()).unwrap();
    consumer.assign([TopicPartition::new("t", 0)]).unwrap();
    consumer.poll(Duration::from_millis(100)).await.unwrap();
    mock.push_errors(ApiKey::OffsetCommit, ErrorCode::GroupAuthorizationFailed, 1);
    let e = consumer
        .commit_offsets([(TopicPartition::new("t", 0), 0)])
        .await
        .unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Group { group, api: ApiKey::OffsetCommit, code: Some(ErrorCode::GroupAuthorizationFailed), stopped: false, .. } if group == "g2"
        ),
        "{}: {e:?}",
        mock.name()
    );
    assert!(!e.is_fatal() && !e.is_retriable(), "{e}");
    consumer.close().await.unwrap();
}

/// The principal may not describe the group: FindCoordinator or
/// OffsetFetch refused with GROUP_AUTHORIZATION_FAILED (every answer, from
/// now on). `poll` names it within seconds (not retriable: it lasts until
/// an ACL changes), once within a minute; the lookup goes on under the
/// retry policy (about one request a second at most, not thousands).
async fn group_refused_by_its_coordinator(api: ApiKey, mock: &impl TestCluster) {
    mock.push_errors(api, ErrorCode::GroupAuthorizationFailed, 1000);
    let mut consumer =
        Consumer::new(config(&mock.bootstrap(), Some("g")).build().unwrap()).unwrap();
    consumer.subscribe(["t"]).unwrap();
    let (e, after) = first_error(&mut consumer).await;
    match &e {
        Error::Group {
            group,
            api: a,
            code: Some(ErrorCode::GroupAuthorizationFailed),
            stopped: false,
            ..
        } if group == "g" && *a == api => {}
        other => panic!("{} {api:?}: {other:?}", mock.name()),
    }
    assert!(!e.is_retriable() && !e.is_fatal(), "{e}");
    assert!(
        after < Duration::from_secs(5),
        "{}: after {after:?}",
        mock.name()
    );
    let asked = |mock: &dyn Fn() -> Vec<(i32, i16)>| {
        mock().iter().filter(|(_, k)| *k == api.code()).count()
    };
    let before = asked(&|| mock.requests());
    let again = errors_within(&mut consumer, Duration::from_secs(5)).await;
    assert!(again.is_empty(), "{}: said again: {again:?}", mock.name());
    let during = asked(&|| mock.requests()) - before;
    // The window may open while the policy still ramps up (the refusal is
    // named after the first answers): its shortest waits from the start
    // are 0.08, 0.16, 0.32, 0.64 s, then 0.8 s (100 ms doubling to 1 s,
    // jitter -20%), so 5 s hold at most 8 attempts, 9 with one on the
    // window's edge; a retry without backoff makes thousands.
    assert!(
        during <= 9,
        "{} {api:?}: {during} requests in 5 s",
        mock.name()
    );
    assert!(
        during >= 2,
        "{} {api:?}: still asked: {during}",
        mock.name()
    );
    consumer.close().await.unwrap();
}

async fn find_coordinator_refused_for_group_authorization<C: TestCluster>() {
    // librdkafka's mock writes a null host beside the error code, which the
    // schema does not allow: the error code before it is acted on.
    group_refused_by_its_coordinator(ApiKey::FindCoordinator, &standard::<C>()).await
}

async fn offset_fetch_refused_for_group_authorization<C: TestCluster>() {
    group_refused_by_its_coordinator(ApiKey::OffsetFetch, &standard::<C>()).await
}

/// A rebalance refusing commits (REBALANCE_IN_PROGRESS on OffsetCommit):
/// the application's commit fails with a retriable error that says so,
/// an automatic one never reaches `poll`, and the member goes on.
async fn commit_refused_for_a_rebalance<C: TestCluster>() {
    let mock: C = standard();
    produce_range(&mock.bootstrap(), "t", 2, 0..6, "none");
    let mut consumer = Consumer::new(
        config(&mock.bootstrap(), Some("g"))
            .enable_auto_commit(true)
            .auto_commit_interval(Duration::from_millis(300))
            .build()
            .unwrap(),
    )
    .unwrap();
    consumer.subscribe(["t"]).unwrap();
    let (offsets, errors) = records_and_errors(&mut consumer, 6, mock.name()).await;
    assert_eq!(offsets.len(), 6);
    assert!(errors.is_empty(), "{}: {errors:?}", mock.name());
    // Automatic commits refused: nothing reaches poll.
    mock.push_errors(ApiKey::OffsetCommit, ErrorCode::RebalanceInProgress, 2);
    let errors = errors_within(&mut consumer, Duration::from_secs(3)).await;
    assert!(errors.is_empty(), "{}: {errors:?}", mock.name());
    consumer.close().await.unwrap();
    // The application's own, from a member without automatic commits.
    let mut consumer =
        Consumer::new(config(&mock.bootstrap(), Some("g")).build().unwrap()).unwrap();
    consumer.subscribe(["t"]).unwrap();
    produce_range(&mock.bootstrap(), "t", 2, 6..8, "none");
    // At least the two new ones (the closing member's last commit may have
    // met the second refusal: at least once, so some come again).
    let (offsets, errors) = records_and_errors(&mut consumer, 2, mock.name()).await;
    assert!(offsets.len() >= 2, "{}: {offsets:?}", mock.name());
    assert!(errors.is_empty(), "{}: {errors:?}", mock.name());
    mock.push_errors(ApiKey::OffsetCommit, ErrorCode::RebalanceInProgress, 1);
    let e = consumer.commit().await.unwrap_err();
    assert!(e.is_retriable() && !e.is_fatal(), "{}: {e}", mock.name());
    assert!(e.to_string().contains("rebalancing"), "{e}");
    // The member rejoins by itself; polling goes on without an error, and
    // the next commit lands.
    let errors = errors_within(&mut consumer, Duration::from_secs(2)).await;
    assert!(errors.is_empty(), "{}: {errors:?}", mock.name());
    consumer.commit().await.unwrap();
    consumer.close().await.unwrap();
}

on_both_mocks!(
    find_coordinator_refused_for_group_authorization,
    offset_fetch_refused_for_group_authorization,
    commit_refused_for_a_rebalance,
    join_refused_for_group_authorization,
    unknown_topic_subscribed,
    unknown_topic_and_partition_assigned,
    partition_without_leader,
    partition_refused_by_its_leader,
    commit_refused_for_group_authorization,
);

#[test]
fn a_broker_that_drops_every_join_is_backed_off_and_reported() {
    crate::common::block_on(async {
        let (addr, accepted) = broker_dropping_joins();
        let mut consumer = Consumer::new(config(&addr, Some("g")).build().unwrap()).unwrap();
        consumer.subscribe(["t"]).unwrap();
        let start = Instant::now();
        let errors = errors_within(&mut consumer, Duration::from_secs(10)).await;
        let connects = accepted.load(Ordering::SeqCst);
        let elapsed = start.elapsed();
        // The fake hangs up gracefully (FIN), but a request the client
        // wrote as the FIN crossed it is answered by the kernel with a
        // reset: both say the broker dropped the connection.
        let reported = errors.iter().find(|e| match e {
            Error::Connection {
                purpose: Purpose::Coordinator,
                cause,
                ..
            } => match cause {
                ConnectionError::ClosedByBroker => true,
                ConnectionError::Io { kind, .. } => *kind == std::io::ErrorKind::ConnectionReset,
                _ => false,
            },
            _ => false,
        });
        assert!(reported.is_some(), "{errors:?}");
        assert!(reported.unwrap().to_string().contains(&addr));
        // Reconnects back off to reconnect.backoff.max.ms (1 s): about 15
        // connections in 10 s. Without backoff it was one every ~100 ms.
        assert!(connects <= 25, "{connects} connections in {elapsed:?}");
        // Reported once, not on every reconnect.
        assert!(errors.len() <= 2, "{errors:?}");
    })
}
