//! SASL end to end: librdkafka's producer and consumer authenticate
//! against lazykafka::mock with each mechanism (a peer we did not write
//! judges the mock's server side); our consumer authenticates against the
//! mock with each mechanism, fails promptly and once with a wrong password
//! or an unknown mechanism, and renews a short session on the same
//! connection (KIP-368).

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::peers::{config, consume, WAIT};
use common::wait_for;
use lazykafka::config::{ClientRuntime, SecurityProtocol};
use lazykafka::events::{ConnectionError, ConnectionState};
use lazykafka::mock::{MockCluster, MockEventKind, MockRecord, MockSasl};
use lazykafka::protocol::ApiKey;
use lazykafka::sasl::{Mechanism, OAuthTokenProvider};
use lazykafka::{Consumer, Error, TopicPartition};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use rdkafka::{Message as _, Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";

fn sasl_mock(sasl: MockSasl) -> MockCluster {
    let mock = MockCluster::builder().sasl(sasl).build().unwrap();
    mock.create_topic("t", 1).unwrap();
    mock
}

/// librdkafka's settings for `mechanism` against the mock.
fn rd_config(bootstrap: &str, mechanism: Mechanism, password: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanisms", mechanism.name());
    if mechanism == Mechanism::OAuthBearer {
        c.set("enable.sasl.oauthbearer.unsecure.jwt", "true")
            .set("sasl.oauthbearer.config", "principal=rdkafka-admin");
    } else {
        c.set("sasl.username", USER).set("sasl.password", password);
    }
    c
}

/// The principals the mock authenticated, per mechanism.
fn authenticated(mock: &MockCluster) -> Vec<(u64, Mechanism, String)> {
    mock.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            MockEventKind::Authenticated {
                connection,
                mechanism,
                principal,
            } => Some((connection, mechanism, principal)),
            _ => None,
        })
        .collect()
}

#[test]
fn librdkafka_authenticates_against_the_mock_with_every_mechanism() {
    for mechanism in Mechanism::ALL {
        let mock = sasl_mock(MockSasl::new().user(USER, PASSWORD));
        let bootstrap = mock.bootstrap_servers();
        let producer: BaseProducer = rd_config(&bootstrap, mechanism, PASSWORD)
            .create()
            .expect("librdkafka producer");
        for i in 0..10 {
            let value = format!("value-{i}");
            producer
                .send(BaseRecord::<(), _>::to("t").payload(&value).partition(0))
                .expect("queued");
        }
        producer
            .flush(WAIT)
            .unwrap_or_else(|e| panic!("{mechanism}: produce: {e}"));
        assert_eq!(mock.high_watermark("t", 0), Some(10), "{mechanism}");

        let consumer: BaseConsumer = rd_config(&bootstrap, mechanism, PASSWORD)
            .set("group.id", "rd")
            .create()
            .expect("librdkafka consumer");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("t", 0, Offset::Beginning).unwrap();
        consumer.assign(&tpl).unwrap();
        let mut values = Vec::new();
        let deadline = Instant::now() + WAIT;
        while values.len() < 10 && Instant::now() < deadline {
            if let Some(m) = consumer.poll(Duration::from_millis(100)) {
                let m = m.unwrap_or_else(|e| panic!("{mechanism}: consume: {e}"));
                values.push(String::from_utf8_lossy(m.payload().unwrap()).into_owned());
            }
        }
        assert_eq!(values.len(), 10, "{mechanism}");
        let principals: BTreeSet<(Mechanism, String)> = authenticated(&mock)
            .into_iter()
            .map(|(_, m, p)| (m, p))
            .collect();
        let expected = if mechanism == Mechanism::OAuthBearer {
            "rdkafka-admin"
        } else {
            USER
        };
        assert_eq!(
            principals,
            BTreeSet::from([(mechanism, expected.to_owned())]),
            "{mechanism}"
        );
    }
}

#[test]
fn the_mock_refuses_librdkafka_with_a_wrong_password() {
    for mechanism in [Mechanism::Plain, Mechanism::ScramSha256] {
        let mock = sasl_mock(MockSasl::new().user(USER, PASSWORD));
        let producer: BaseProducer = rd_config(&mock.bootstrap_servers(), mechanism, "wrong")
            .set("message.timeout.ms", "2000")
            .create()
            .unwrap();
        producer
            .send(BaseRecord::<(), _>::to("t").payload("x").partition(0))
            .unwrap();
        // The record times out undelivered (flush returns once it has).
        let _ = producer.flush(Duration::from_secs(10));
        assert!(wait_for(WAIT, || mock.events().iter().any(|e| matches!(
            e.kind,
            MockEventKind::Closed {
                by: lazykafka::mock::ClosedBy::Broker(
                    lazykafka::mock::BrokerClose::AuthenticationFailed
                ),
                ..
            }
        ))));
        assert_eq!(mock.high_watermark("t", 0), Some(0), "{mechanism}");
        assert!(authenticated(&mock).is_empty());
    }
}

fn produce(mock: &MockCluster, count: usize) {
    mock.produce(
        "t",
        0,
        (0..count).map(|i| MockRecord::new(format!("value-{i}"))),
    )
    .unwrap();
}

/// The mock's requests on each of its connections, in order.
fn requests_by_connection(mock: &MockCluster) -> BTreeMap<u64, Vec<Option<ApiKey>>> {
    let mut by = BTreeMap::<u64, Vec<Option<ApiKey>>>::new();
    for r in mock.requests() {
        by.entry(r.connection).or_default().push(r.api);
    }
    by
}

/// Every connection authenticated before its first other request.
fn assert_nothing_before_authentication(mock: &MockCluster) {
    for (conn, apis) in requests_by_connection(mock) {
        let first_other = apis.iter().position(|a| {
            !matches!(
                a,
                Some(ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate)
            )
        });
        if let Some(i) = first_other {
            assert!(
                apis[..i].contains(&Some(ApiKey::SaslAuthenticate)),
                "connection {conn}: {apis:?}"
            );
            assert_eq!(apis[1], Some(ApiKey::SaslHandshake), "{conn}: {apis:?}");
        }
    }
}

#[test]
fn our_consumer_authenticates_with_every_mechanism() {
    crate::common::block_on(async {
        let provider_calls = Arc::new(AtomicUsize::new(0));
        let settings: Vec<(&str, MakeConfig)> = vec![
            (
                "PLAIN",
                Box::new(|b| with_password(b, Mechanism::Plain, PASSWORD)),
            ),
            (
                "SCRAM-SHA-256",
                Box::new(|b| with_password(b, Mechanism::ScramSha256, PASSWORD)),
            ),
            (
                "SCRAM-SHA-512",
                Box::new(|b| with_password(b, Mechanism::ScramSha512, PASSWORD)),
            ),
            (
                "OAUTHBEARER (unsecured JWS from the properties)",
                Box::new(|b| {
                    lazykafka::config::ConsumerConfigBuilder::set_all(
                        config(b, None),
                        [
                            ("security.protocol", "sasl_plaintext"),
                            ("sasl.mechanisms", "OAUTHBEARER"),
                            ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
                            ("sasl.oauthbearer.config", "principal=bob"),
                        ],
                    )
                    .unwrap()
                    .build()
                    .unwrap()
                }),
            ),
            ("OAUTHBEARER (the application's provider)", {
                let calls = provider_calls.clone();
                Box::new(move |b| {
                    let calls = calls.clone();
                    let unsecured =
                        OAuthTokenProvider::unsecured("carol", WAIT, None, BTreeMap::new());
                    config(b, None)
                        .security_protocol(SecurityProtocol::SaslPlaintext)
                        .sasl_mechanism(Mechanism::OAuthBearer)
                        .oauthbearer_token_provider(move || {
                            calls.fetch_add(1, Ordering::SeqCst);
                            unsecured.token()
                        })
                        .build()
                        .unwrap()
                })
            }),
        ];
        for (name, make) in settings {
            let mock = sasl_mock(MockSasl::new().user(USER, PASSWORD));
            produce(&mock, 20);
            let mut consumer = Consumer::new(make(&mock.bootstrap_servers())).unwrap();
            consumer.assign([TopicPartition::new("t", 0)]).unwrap();
            let records = consume(&mut consumer, 20).await;
            assert_eq!(records.len(), 20, "{name}");
            let principals: BTreeSet<String> = authenticated(&mock)
                .into_iter()
                .map(|(_, _, p)| p)
                .collect();
            let expected = match name {
                n if n.contains("provider") => "carol",
                n if n.contains("JWS") => "bob",
                _ => USER,
            };
            assert_eq!(principals, BTreeSet::from([expected.to_owned()]), "{name}");
            assert_nothing_before_authentication(&mock);
            assert!(consumer
                .connections()
                .iter()
                .all(|c| c.state == ConnectionState::Ready));
            consumer.close().await.unwrap();
        }
        // Called once per authentication at most: the token is reused while
        // it is fresh.
        assert!(provider_calls.load(Ordering::SeqCst) >= 1);
    })
}

/// Makes a consumer's configuration for a bootstrap address.
type MakeConfig = Box<dyn Fn(&str) -> lazykafka::ConsumerConfig>;

fn with_password(
    bootstrap: &str,
    mechanism: Mechanism,
    password: &str,
) -> lazykafka::ConsumerConfig {
    config(bootstrap, None)
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl_mechanism(mechanism)
        .sasl_username(USER)
        .sasl_password(password)
        .build()
        .unwrap()
}

/// Polls until an error comes (or `within` passes); returns it and when.
async fn first_error(consumer: &mut Consumer, within: Duration) -> Option<(Error, Duration)> {
    let start = Instant::now();
    while start.elapsed() < within {
        if let Err(e) = consumer.poll(Duration::from_millis(100)).await {
            return Some((e, start.elapsed()));
        }
    }
    None
}

#[test]
fn a_wrong_password_fails_poll_and_waiting_calls_at_once_and_is_backed_off_as_a_refusal() {
    crate::common::block_on(async {
        for mechanism in [Mechanism::Plain, Mechanism::ScramSha512] {
            let mock = sasl_mock(MockSasl::new().user(USER, PASSWORD));
            let bootstrap = mock.bootstrap_servers();
            let mut consumer =
                Consumer::new(with_password(&bootstrap, mechanism, "wrong")).unwrap();
            consumer.assign([TopicPartition::new("t", 0)]).unwrap();
            let (error, after) = first_error(&mut consumer, WAIT)
                .await
                .expect("an authentication error");
            // Seconds, not the API timeout: at the first failure.
            assert!(after < Duration::from_secs(5), "{after:?}");
            match &error {
                Error::Authentication {
                    addr,
                    mechanism: m,
                    message,
                    ..
                } => {
                    assert_eq!(addr, &bootstrap);
                    assert_eq!(m, mechanism.name());
                    assert!(
                        message.contains("Invalid username or password")
                            || message.contains("invalid credentials"),
                        "{message}"
                    );
                }
                other => panic!("{mechanism}: {other:?}"),
            }
            assert!(!error.is_retriable());
            assert!(!error.is_fatal());
            assert!(error.to_string().contains(&bootstrap), "{error}");
            assert!(!error.to_string().contains(PASSWORD) && !error.to_string().contains("wrong"));
            // Not reported again for a while, and not retried in a tight loop:
            // the refusal backoff (1 s doubling to 30 s, ±20%) allows attempts
            // at about 1 and 3 s.
            let connects_before = connects(&mock);
            let again = first_error(&mut consumer, Duration::from_secs(3)).await;
            assert!(again.is_none(), "{again:?}");
            let attempts = connects(&mock) - connects_before;
            assert!(attempts <= 2, "{attempts} attempts in 3 s");
            assert!(authenticated(&mock).is_empty());
            consumer.close().await.unwrap();
            // A call that waits on the network, made first, names the refusal
            // at once rather than after default.api.timeout.ms.
            let consumer = Consumer::new(with_password(&bootstrap, mechanism, "wrong")).unwrap();
            let started = Instant::now();
            let e = consumer.partitions_for("t").await.unwrap_err();
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{:?}",
                started.elapsed()
            );
            assert!(
                e.to_string().contains("authentication failed") && !e.is_retriable(),
                "{e}"
            );
        }
    })
}

fn connects(mock: &MockCluster) -> usize {
    mock.events()
        .iter()
        .filter(|e| matches!(e.kind, MockEventKind::Connected { .. }))
        .count()
}

#[test]
fn an_unknown_mechanism_fails_poll_naming_the_enabled_ones() {
    crate::common::block_on(async {
        let mock = sasl_mock(
            MockSasl::new()
                .user(USER, PASSWORD)
                .mechanisms([Mechanism::ScramSha512]),
        );
        let mut consumer = Consumer::new(with_password(
            &mock.bootstrap_servers(),
            Mechanism::Plain,
            PASSWORD,
        ))
        .unwrap();
        let mut events = consumer.connection_events();
        consumer.assign([TopicPartition::new("t", 0)]).unwrap();
        let (error, after) = first_error(&mut consumer, WAIT).await.expect("an error");
        assert!(after < Duration::from_secs(5), "{after:?}");
        match &error {
            Error::Authentication { message, .. } => {
                assert!(
                    message.contains("[SCRAM-SHA-512]")
                        && message.contains("UNSUPPORTED_SASL_MECHANISM"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        consumer.close().await.unwrap();
        // The connection events carry the typed cause too (the stream ends
        // once the consumer is closed).
        let mut cause = None;
        while let Some(e) = futures::StreamExt::next(&mut events).await {
            if let lazykafka::events::EventKind::Closed {
                error: Some(e @ ConnectionError::Authentication { .. }),
                ..
            } = e.kind
            {
                cause = Some(e);
            }
        }
        assert!(cause.is_some());
    })
}

/// KIP-368: a 1.5 s session is renewed on the same connection, again and
/// again, while records keep flowing.
#[test]
fn a_short_session_is_renewed_on_the_same_connection() {
    crate::common::block_on(async {
        let mock = sasl_mock(
            MockSasl::new()
                .user(USER, PASSWORD)
                .session_lifetime(Duration::from_millis(1500)),
        );
        produce(&mock, 10);
        let mut consumer = Consumer::new(with_password(
            &mock.bootstrap_servers(),
            Mechanism::ScramSha256,
            PASSWORD,
        ))
        .unwrap();
        consumer.assign([TopicPartition::new("t", 0)]).unwrap();
        assert_eq!(consume(&mut consumer, 10).await.len(), 10);
        let ours: BTreeSet<_> = consumer.connections().iter().map(|c| c.id).collect();
        let theirs: BTreeSet<u64> = mock.open_connections().iter().map(|(id, _)| *id).collect();
        assert_eq!((ours.len(), theirs.len()), (1, 1));
        let conn = *theirs.iter().next().unwrap();
        // Keep polling (records keep coming) until the mock saw three
        // authentications on that connection.
        let renewed = |mock: &MockCluster| {
            authenticated(mock)
                .iter()
                .filter(|(c, _, _)| *c == conn)
                .count()
                >= 3
        };
        let deadline = Instant::now() + WAIT;
        let mut seen = 10;
        while !renewed(&mock) && Instant::now() < deadline {
            produce(&mock, 1);
            seen += consume(&mut consumer, 1).await.len();
        }
        assert!(renewed(&mock), "{:?}", requests_by_connection(&mock));
        // The same sockets on both sides, nothing closed by the broker, and a
        // SaslHandshake + two SaslAuthenticate per SCRAM authentication.
        let still: BTreeSet<_> = consumer.connections().iter().map(|c| c.id).collect();
        assert_eq!(still, ours);
        assert_eq!(
            mock.open_connections()
                .iter()
                .map(|(id, _)| *id)
                .collect::<Vec<_>>(),
            [conn]
        );
        let apis = &requests_by_connection(&mock)[&conn];
        let count = |api| apis.iter().filter(|a| **a == Some(api)).count();
        assert!(count(ApiKey::SaslHandshake) >= 3, "{apis:?}");
        assert_eq!(
            count(ApiKey::SaslAuthenticate),
            2 * count(ApiKey::SaslHandshake)
        );
        assert!(!mock
            .events()
            .iter()
            .any(|e| matches!(e.kind, MockEventKind::Closed { .. })));
        assert!(seen > 10);
        consumer.close().await.unwrap();
        assert!(wait_for(WAIT, || mock.open_connections().is_empty()));
    })
}

/// SASL over TLS: the mock with a TLS listener and SCRAM users;
/// librdkafka's consumer (a peer judging the mock) and ours both
/// authenticate over TLS and read every record.
#[test]
fn sasl_ssl_authenticates_over_tls() {
    crate::common::block_on(async {
        let pki = common::tls::Pki::new("test CA");
        let leaf = pki.leaf(&["localhost", "127.0.0.1"]);
        let mock = MockCluster::builder()
            .tls(leaf.cert_pem.clone(), leaf.key_pem.clone())
            .sasl(MockSasl::new().user(USER, PASSWORD))
            .build()
            .unwrap();
        mock.create_topic("t", 1).unwrap();
        produce(&mock, 10);
        let dir = common::tls::TempDir::new("sasl_ssl");
        let ca = dir.write("ca.pem", &pki.ca_pem());

        // librdkafka: SASL_SSL with SCRAM-SHA-512.
        let rd: BaseConsumer =
            rd_config(&mock.bootstrap_servers(), Mechanism::ScramSha512, PASSWORD)
                .set("security.protocol", "SASL_SSL")
                .set("ssl.ca.location", ca.to_str().unwrap())
                .set("group.id", "rd")
                .create()
                .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("t", 0, Offset::Beginning).unwrap();
        rd.assign(&tpl).unwrap();
        let deadline = Instant::now() + WAIT;
        let mut rd_seen = 0;
        while rd_seen < 10 && Instant::now() < deadline {
            if let Some(m) = rd.poll(Duration::from_millis(100)) {
                m.expect("librdkafka over SASL_SSL");
                rd_seen += 1;
            }
        }
        assert_eq!(rd_seen, 10, "librdkafka read every record over SASL_SSL");
        drop(rd);

        // Ours: the same, with SCRAM-SHA-256.
        let mut consumer = Consumer::new(
            config(&mock.bootstrap_servers(), None)
                .security_protocol(SecurityProtocol::SaslSsl)
                .ssl_ca_location(&ca)
                .sasl_mechanism(Mechanism::ScramSha256)
                .sasl_username(USER)
                .sasl_password(PASSWORD)
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer.assign([TopicPartition::new("t", 0)]).unwrap();
        assert_eq!(consume(&mut consumer, 10).await.len(), 10);
        let mechanisms: BTreeSet<Mechanism> = authenticated(&mock)
            .into_iter()
            .map(|(_, m, _)| m)
            .collect();
        assert_eq!(
            mechanisms,
            BTreeSet::from([Mechanism::ScramSha512, Mechanism::ScramSha256])
        );
        assert_nothing_before_authentication(&mock);
        consumer.close().await.unwrap();
    })
}

// ===== OAUTHBEARER with an asynchronous token provider =====

/// Runs `body` once on each runtime built in, with the clients it makes
/// on that runtime (`client.runtime`): a tokio runtime made for it, then
/// async-std.
fn on_each_runtime<F, Fut>(body: F)
where
    F: Fn(ClientRuntime) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    #[cfg(feature = "runtime-tokio")]
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(body(ClientRuntime::Tokio));
    #[cfg(feature = "runtime-async-std")]
    async_std::task::block_on(body(ClientRuntime::AsyncStd));
}

/// Waits `duration` on `runtime`'s own timer, as a provider's HTTP call
/// awaits its socket. On tokio, outside a tokio runtime's context this
/// panics (the provider then fails): it passes only if the client runs
/// the provider's future on its runtime.
async fn sleep_on(runtime: ClientRuntime, duration: Duration) {
    match runtime {
        ClientRuntime::Tokio => tokio::time::sleep(duration).await,
        _ => async_std::task::sleep(duration).await,
    }
}

/// What an asynchronous test provider did.
#[derive(Default)]
struct ProviderLog {
    /// Calls made.
    calls: AtomicUsize,
    /// Calls whose future has not completed yet.
    pending: AtomicUsize,
    /// Completed calls that did not run in a tokio runtime's context (on
    /// tokio).
    off_runtime: AtomicUsize,
}

/// An asynchronous provider of unsecured tokens for `principal`, good for
/// `lifetime`: each call waits `delay` on the runtime's timer, and the
/// first `failures` calls fail.
fn async_provider(
    runtime: ClientRuntime,
    principal: &str,
    lifetime: Duration,
    delay: Duration,
    failures: usize,
    log: Arc<ProviderLog>,
) -> impl Fn() -> futures::future::BoxFuture<'static, Result<lazykafka::config::OAuthToken, String>>
       + Send
       + Sync
       + 'static {
    let unsecured = OAuthTokenProvider::unsecured(principal, lifetime, None, BTreeMap::new());
    move || {
        let unsecured = unsecured.clone();
        let log = log.clone();
        Box::pin(async move {
            let call = log.calls.fetch_add(1, Ordering::SeqCst);
            log.pending.fetch_add(1, Ordering::SeqCst);
            sleep_on(runtime, delay).await;
            if runtime == ClientRuntime::Tokio && tokio::runtime::Handle::try_current().is_err() {
                log.off_runtime.fetch_add(1, Ordering::SeqCst);
            }
            log.pending.fetch_sub(1, Ordering::SeqCst);
            if call < failures {
                return Err(format!("token endpoint unavailable (call {})", call + 1));
            }
            unsecured.token()
        })
    }
}

/// Our consumer and producer authenticate with an asynchronous provider
/// on each runtime: the provider awaits the runtime's timer for 300 ms,
/// and meanwhile the consumer's `poll` keeps returning (the provider is
/// awaited as a task, not run on the consumer's task under its lock).
/// The consumer reads what librdkafka's producer (a peer we did not
/// write) wrote to the same OAUTHBEARER listener, and our producer's
/// records too; one call serves every connection.
#[test]
fn an_async_provider_authenticates_consumer_and_producer_on_each_runtime() {
    on_each_runtime(|runtime| async move {
        let mock = sasl_mock(MockSasl::new().mechanisms([Mechanism::OAuthBearer]));
        let bootstrap = mock.bootstrap_servers();
        // librdkafka writes 10 records over OAUTHBEARER.
        let rd: BaseProducer = rd_config(&bootstrap, Mechanism::OAuthBearer, "")
            .create()
            .expect("librdkafka producer");
        for i in 0..10 {
            let value = format!("value-{i}");
            rd.send(BaseRecord::<(), _>::to("t").payload(&value).partition(0))
                .expect("queued");
        }
        rd.flush(WAIT).expect("librdkafka produced");
        drop(rd);

        let log = Arc::new(ProviderLog::default());
        let provider = async_provider(
            runtime,
            "dave",
            Duration::from_secs(600),
            Duration::from_millis(300),
            0,
            log.clone(),
        );
        let mut consumer = Consumer::new(
            config(&bootstrap, None)
                .client_runtime(runtime)
                .security_protocol(SecurityProtocol::SaslPlaintext)
                .sasl_mechanism(Mechanism::OAuthBearer)
                .oauthbearer_token_provider_async(provider)
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer.assign([TopicPartition::new("t", 0)]).unwrap();
        let mut values = Vec::new();
        let mut polls_while_pending = 0;
        let deadline = Instant::now() + WAIT;
        while values.len() < 10 && Instant::now() < deadline {
            let pending = log.pending.load(Ordering::SeqCst) > 0;
            let records = consumer
                .poll(Duration::from_millis(50))
                .await
                .unwrap_or_else(|e| panic!("{runtime:?}: {e}"));
            if pending && log.pending.load(Ordering::SeqCst) > 0 {
                polls_while_pending += 1;
            }
            values.extend(
                records
                    .iter()
                    .map(|r| String::from_utf8_lossy(r.value().unwrap_or_default()).into_owned()),
            );
        }
        assert_eq!(
            values,
            (0..10).map(|i| format!("value-{i}")).collect::<Vec<_>>()
        );
        assert!(
            polls_while_pending >= 2,
            "{runtime:?}: {polls_while_pending} polls returned while the provider waited"
        );
        assert_eq!(log.off_runtime.load(Ordering::SeqCst), 0, "{runtime:?}");
        // Bootstrap and leader connections, one call.
        assert_eq!(log.calls.load(Ordering::SeqCst), 1, "{runtime:?}");
        assert!(authenticated(&mock)
            .iter()
            .any(|(_, m, p)| *m == Mechanism::OAuthBearer && p == "dave"));
        assert_nothing_before_authentication(&mock);

        // Our producer, with a provider of its own.
        let plog = Arc::new(ProviderLog::default());
        let producer = lazykafka::Producer::new(
            lazykafka::ProducerConfig::builder()
                .bootstrap_servers(&bootstrap)
                .client_runtime(runtime)
                .security_protocol(SecurityProtocol::SaslPlaintext)
                .sasl_mechanism(Mechanism::OAuthBearer)
                .oauthbearer_token_provider_async(async_provider(
                    runtime,
                    "erin",
                    Duration::from_secs(600),
                    Duration::from_millis(100),
                    0,
                    plog.clone(),
                ))
                .build()
                .unwrap(),
        )
        .unwrap();
        for i in 10..15 {
            let record = lazykafka::ProducerRecord::new("t")
                .partition(0)
                .value(format!("value-{i}"));
            let delivery = producer.send(record).await.expect("queued");
            delivery
                .await
                .unwrap_or_else(|e| panic!("{runtime:?}: {e}"));
        }
        assert_eq!(plog.calls.load(Ordering::SeqCst), 1);
        assert_eq!(plog.off_runtime.load(Ordering::SeqCst), 0);
        assert!(authenticated(&mock).iter().any(|(_, _, p)| p == "erin"));
        producer.close_timeout(WAIT).await.unwrap();
        assert_eq!(consume(&mut consumer, 5).await.len(), 5, "{runtime:?}");
        consumer.close().await.unwrap();
    });
}

/// A provider that fails three times (its token endpoint down) and then
/// answers: the consumer reports a retriable error naming the address,
/// the mechanism and the provider's message, once; calls the provider
/// again at the reconnect backoff's pace (50, 100, 200 ms ± 20%), not in
/// a loop; and then reads every record.
#[test]
fn a_failing_async_provider_is_reported_retriable_and_the_consumer_goes_on() {
    on_each_runtime(|runtime| async move {
        let mock = sasl_mock(MockSasl::new());
        produce(&mock, 10);
        let bootstrap = mock.bootstrap_servers();
        let log = Arc::new(ProviderLog::default());
        let provider = async_provider(
            runtime,
            "frank",
            Duration::from_secs(600),
            Duration::from_millis(10),
            3,
            log.clone(),
        );
        let consumer = Consumer::new(
            config(&bootstrap, None)
                .client_runtime(runtime)
                .security_protocol(SecurityProtocol::SaslPlaintext)
                .sasl_mechanism(Mechanism::OAuthBearer)
                .oauthbearer_token_provider_async(provider)
                .build()
                .unwrap(),
        )
        .unwrap();
        let mut events = consumer.connection_events();
        consumer.assign([TopicPartition::new("t", 0)]).unwrap();
        let started = Instant::now();
        let mut errors = Vec::new();
        let mut values = 0;
        while values < 10 && started.elapsed() < WAIT {
            match consumer.poll(Duration::from_millis(100)).await {
                Ok(records) => values += records.len(),
                Err(e) => errors.push(e),
            }
        }
        assert_eq!(values, 10, "{runtime:?}: {errors:?}");
        assert_eq!(errors.len(), 1, "{runtime:?}: reported once: {errors:?}");
        let error = &errors[0];
        assert!(error.is_retriable() && !error.is_fatal(), "{error}");
        match error {
            Error::Connection {
                addr,
                cause: ConnectionError::TokenProvider { mechanism, message },
                ..
            } => {
                assert_eq!(addr, &bootstrap);
                assert_eq!(mechanism, "OAUTHBEARER");
                assert_eq!(message, "token endpoint unavailable (call 1)");
            }
            other => panic!("{runtime:?}: {other:?}"),
        }
        let text = error.to_string();
        assert!(
            text.contains(&bootstrap) && text.contains("OAUTHBEARER token provider failed"),
            "{text}"
        );
        assert_eq!(log.calls.load(Ordering::SeqCst), 4, "{runtime:?}");
        // Three failures backed off 50, 100 and 200 ms (±20%) at least,
        // and no more connections than calls.
        assert!(
            started.elapsed() >= Duration::from_millis(280),
            "{:?}",
            started.elapsed()
        );
        assert!(connects(&mock) <= 5, "{} connects", connects(&mock));
        consumer.close().await.unwrap();
        let mut closed_by_provider = 0;
        while let Some(e) = futures::StreamExt::next(&mut events).await {
            if let lazykafka::events::EventKind::Closed {
                error: Some(ConnectionError::TokenProvider { .. }),
                ..
            } = e.kind
            {
                closed_by_provider += 1;
            }
        }
        assert_eq!(closed_by_provider, 3, "{runtime:?}");
    });
}

/// KIP-368 with tokens of 2 s: the broker (the mock, as Kafka does) ends
/// each session with its token, so the connection lives on only if its
/// re-authentications use newer tokens; the cluster asks for each at 80%
/// of the last one's lifetime,
/// through the asynchronous provider (which takes 100 ms each time), and
/// the connection is renewed again and again, never closed, while records
/// keep flowing.
#[test]
fn sessions_ending_with_their_token_are_renewed_with_tokens_fetched_ahead() {
    on_each_runtime(|runtime| async move {
        let mock = sasl_mock(MockSasl::new().session_lifetime(Duration::from_secs(60)));
        produce(&mock, 10);
        let log = Arc::new(ProviderLog::default());
        let provider = async_provider(
            runtime,
            "grace",
            Duration::from_secs(2),
            Duration::from_millis(100),
            0,
            log.clone(),
        );
        let mut consumer = Consumer::new(
            config(&mock.bootstrap_servers(), None)
                .client_runtime(runtime)
                .security_protocol(SecurityProtocol::SaslPlaintext)
                .sasl_mechanism(Mechanism::OAuthBearer)
                .oauthbearer_token_provider_async(provider)
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer.assign([TopicPartition::new("t", 0)]).unwrap();
        assert_eq!(consume(&mut consumer, 10).await.len(), 10);
        let theirs: Vec<u64> = mock.open_connections().iter().map(|(id, _)| *id).collect();
        assert_eq!(theirs.len(), 1, "{runtime:?}");
        let conn = theirs[0];
        // Four authentications on the connection, and three tokens asked
        // for after the first: the connection then outlived three tokens.
        let renewed = |mock: &MockCluster| {
            authenticated(mock)
                .iter()
                .filter(|(c, _, _)| *c == conn)
                .count()
                >= 4
                && log.calls.load(Ordering::SeqCst) >= 4
        };
        let deadline = Instant::now() + WAIT;
        let mut seen = 10;
        while !renewed(&mock) && Instant::now() < deadline {
            produce(&mock, 1);
            seen += consume(&mut consumer, 1).await.len();
        }
        assert!(
            renewed(&mock),
            "{runtime:?}: {:?}",
            requests_by_connection(&mock)
        );
        assert!(seen > 10);
        // Each session ends with its token (2 s), and the mock refuses an
        // expired one: the socket lived on through every renewal because
        // each re-authentication had a newer token.
        assert_eq!(
            mock.open_connections()
                .iter()
                .map(|(id, _)| *id)
                .collect::<Vec<_>>(),
            [conn]
        );
        assert!(!mock
            .events()
            .iter()
            .any(|e| matches!(e.kind, MockEventKind::Closed { .. })));
        consumer.close().await.unwrap();
    });
}
