//! Security on Apache Kafka itself (the cluster of `scripts/kafka.sh`, its
//! header lists the listeners, users and ACLs): what `tests/sasl.rs` and
//! `tests/tls.rs` check against the mocks, checked against the brokers
//! whose behaviour the mocks imitate, for our consumer and our producer.
//!
//! - SASL_SSL with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN (user alice, the
//!   cluster's CA): our producer writes, our group consumer reads it back,
//!   and every connection authenticated with the mechanism before it was
//!   ready.
//! - The certificate's host name (it names `localhost` only): dialled as
//!   `127.0.0.1`, `poll` and the producer's `send` name the address and
//!   the certificate's complaint within seconds; with
//!   `ssl.endpoint.identification.algorithm=none` the same addresses work.
//! - A CA that did not sign the brokers' certificate (one made by the test,
//!   and the system's roots): named the same way.
//! - A wrong password (SCRAM-SHA-512, PLAIN): `Error::Authentication` from
//!   `poll` with Kafka's words, not retriable, said once per address (not
//!   at every poll), the addresses tried again with the refusal backoff
//!   (not in a loop); a waiting call (`partitions_for`) and the producer's
//!   `send` name it.
//! - OAUTHBEARER with an unsecured JWT (`sub` = alice) on the OAUTH
//!   listener: produce and consume (and `sub` = restricted is refused the
//!   same topic: the token's subject is the principal).
//! - Re-authentication (KIP-368) on the REAUTH listener, whose sessions
//!   last 10 s: a consumer and a producer working for more than two
//!   sessions meet no error, every connection that lives longer than a
//!   session renews it on the same socket, and the broker closes none.
//! - ACLs (user `restricted`: read and describe `allowed-*` topics and
//!   groups only): a topic or group not named `allowed-*` is refused by
//!   name and code within seconds, producing is refused (`send` for a
//!   topic it may not describe; for an `allowed-*` topic, the idempotent
//!   producer's InitProducerId, CLUSTER_AUTHORIZATION_FAILED, and a plain
//!   producer's Produce, TOPIC_AUTHORIZATION_FAILED, by the record's
//!   delivery), and the allowed path reads and commits.
//!
//! The producer's `send` waits `max.block.ms` through connection problems
//! (it goes on trying, docs/producer.md): these tests give it 4 s, and it
//! then names the TLS or SASL cause in its `Error::Timeout`.
//!
//! "Within seconds" is a wait with a deadline ([`PROMPT`]), never a
//! measured speed. The clients' failures are compared with the docs'
//! promises (docs/security.md, docs/consumer.md, docs/producer.md):
//! whether an error is retriable says whether the client goes on by
//! itself.

// Drives a `Consumer` or a `Producer`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::kafka::{Kafka, RESTRICTED_USER, SUPER_USER};
use common::peers::WAIT;
use common::tls::Pki;
use futures::{FutureExt, StreamExt};
use lazykafka::config::{EndpointIdentification, Mechanism};
use lazykafka::events::{
    CloseReason, ConnectionError, ConnectionEvent, ConnectionEvents, ConnectionId, EventKind,
};
use lazykafka::producer::DeliveryError;
use lazykafka::{
    Acks, Consumer, ConsumerConfig, Error, ErrorCode, OffsetReset, Producer, ProducerConfig,
    ProducerRecord, SecurityProtocol, TopicPartition,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long a refusal may take to be named: seconds, not an API timeout.
const PROMPT: Duration = Duration::from_secs(10);

/// Which certificates a client trusts.
#[derive(Debug, Clone)]
enum Ca {
    /// `ssl.ca.location`.
    File(PathBuf),
    /// `ssl.ca.pem`.
    Pem(String),
    /// Neither: the system's roots.
    System,
}

/// How a client logs in.
#[derive(Debug, Clone)]
enum Login {
    /// PLAIN or SCRAM.
    Password {
        mechanism: Mechanism,
        user: String,
        password: String,
    },
    /// OAUTHBEARER with unsecured tokens for `principal`.
    UnsecuredJwt { principal: String },
}

/// A client's security settings, set on a consumer's or a producer's
/// builder by [`secured!`].
#[derive(Debug, Clone)]
struct Security {
    protocol: SecurityProtocol,
    ca: Ca,
    check_names: bool,
    login: Login,
}

impl Security {
    /// SASL_SSL with the cluster's CA.
    fn sasl_ssl(kafka: &Kafka, mechanism: Mechanism, (user, password): (&str, &str)) -> Self {
        Security {
            protocol: SecurityProtocol::SaslSsl,
            ca: Ca::File(kafka.ca.clone()),
            check_names: true,
            login: Login::Password {
                mechanism,
                user: user.to_owned(),
                password: password.to_owned(),
            },
        }
    }

    /// SASL_PLAINTEXT with a password (the REAUTH listener).
    fn sasl_plaintext(mechanism: Mechanism, (user, password): (&str, &str)) -> Self {
        Security {
            protocol: SecurityProtocol::SaslPlaintext,
            ca: Ca::System,
            check_names: true,
            login: Login::Password {
                mechanism,
                user: user.to_owned(),
                password: password.to_owned(),
            },
        }
    }

    /// SASL_PLAINTEXT with unsecured OAUTHBEARER tokens (the OAUTH listener).
    fn unsecured_jwt(principal: &str) -> Self {
        Security {
            protocol: SecurityProtocol::SaslPlaintext,
            ca: Ca::System,
            check_names: true,
            login: Login::UnsecuredJwt {
                principal: principal.to_owned(),
            },
        }
    }

    fn trusting(mut self, ca: Ca) -> Self {
        self.ca = ca;
        self
    }

    fn without_name_check(mut self) -> Self {
        self.check_names = false;
        self
    }

    fn with_password(mut self, wrong: &str) -> Self {
        if let Login::Password { password, .. } = &mut self.login {
            *password = wrong.to_owned();
        }
        self
    }
}

/// `$builder` (a consumer's or a producer's: the setters are the same)
/// with `$security`'s settings, through the typed setters.
macro_rules! secured {
    ($builder:expr, $security:expr) => {{
        let s: &Security = $security;
        let mut b = $builder.security_protocol(s.protocol);
        match &s.ca {
            Ca::File(path) => b = b.ssl_ca_location(path),
            Ca::Pem(pem) => b = b.ssl_ca_pem(pem.as_str()),
            Ca::System => {}
        }
        if !s.check_names {
            b = b.ssl_endpoint_identification_algorithm(EndpointIdentification::None);
        }
        match &s.login {
            Login::Password {
                mechanism,
                user,
                password,
            } => {
                b = b
                    .sasl_mechanism(*mechanism)
                    .sasl_username(user.as_str())
                    .sasl_password(password.as_str())
            }
            Login::UnsecuredJwt { principal } => {
                b = b
                    .sasl_mechanism(Mechanism::OAuthBearer)
                    .enable_sasl_oauthbearer_unsecure_jwt(true)
                    .sasl_oauthbearer_config(format!("principal={principal}"))
            }
        }
        b
    }};
}

fn consumer(bootstrap: &str, security: &Security, group: Option<&str>) -> Consumer {
    let mut b = secured!(
        ConsumerConfig::builder()
            .bootstrap_servers(bootstrap)
            .auto_offset_reset(OffsetReset::Earliest)
            .fetch_max_wait(Duration::from_millis(100))
            .enable_auto_commit(false),
        security
    );
    if let Some(group) = group {
        b = b.group_id(group);
    }
    Consumer::new(b.build().unwrap()).unwrap()
}

fn producer_config(bootstrap: &str, security: &Security) -> lazykafka::ProducerConfigBuilder {
    secured!(
        ProducerConfig::builder()
            .bootstrap_servers(bootstrap)
            .linger(Duration::from_millis(5)),
        security
    )
}

fn producer(bootstrap: &str, security: &Security) -> Producer {
    Producer::new(producer_config(bootstrap, security).build().unwrap()).unwrap()
}

/// The SASL_SSL addresses as `127.0.0.1:port`, which the brokers'
/// certificate (for `localhost` only) does not name.
fn by_ip(kafka: &Kafka) -> String {
    kafka.sasl_ssl.replace("localhost", "127.0.0.1")
}

fn value(topic: &str, i: usize) -> String {
    format!("{topic}-value-{i}")
}

/// Sends `range`'s records to `topic` and waits (within [`WAIT`]) for each
/// delivery; any error fails the test.
async fn produce(producer: &Producer, topic: &str, range: std::ops::Range<usize>) {
    let mut deliveries = Vec::new();
    for i in range {
        let record = ProducerRecord::new(topic)
            .key(format!("key-{i}"))
            .value(value(topic, i));
        let delivery = producer
            .send(record)
            .await
            .unwrap_or_else(|e| panic!("send record {i} to {topic}: {e}"));
        deliveries.push((i, delivery));
    }
    for (i, delivery) in deliveries {
        let written = common::timeout(WAIT, delivery)
            .await
            .unwrap_or_else(|| panic!("record {i} to {topic}: no delivery within {WAIT:?}"))
            .unwrap_or_else(|e| panic!("record {i} to {topic}: {e}"));
        assert_eq!(&*written.topic, topic, "record {i}: {written:?}");
    }
}

/// Polls until `count` records came (within [`WAIT`]); returns their
/// values. Any error fails the test: a secured path that works meets none.
async fn consume(consumer: &Consumer, count: usize) -> BTreeSet<String> {
    let deadline = Instant::now() + WAIT;
    let mut values = BTreeSet::new();
    let mut polled = 0;
    while polled < count {
        assert!(
            Instant::now() < deadline,
            "{polled} of {count} records within {WAIT:?}"
        );
        let records = consumer
            .poll(Duration::from_millis(200))
            .await
            .unwrap_or_else(|e| panic!("poll, after {polled} of {count} records: {e}"));
        polled += records.len();
        for r in records {
            values.insert(String::from_utf8_lossy(r.value().unwrap_or_default()).into_owned());
        }
    }
    assert_eq!(polled, count, "more records than written: {values:?}");
    values
}

fn drain(events: &mut ConnectionEvents) -> Vec<ConnectionEvent> {
    let mut out = Vec::new();
    while let Some(Some(e)) = events.next().now_or_never() {
        out.push(e);
    }
    out
}

/// Every connection that became ready authenticated with `mechanism`
/// first (the `Authenticated` event before its `Ready`), and some did.
fn assert_authenticated_before_ready(what: &str, events: &[ConnectionEvent], mechanism: &str) {
    let mut authenticated = BTreeSet::new();
    let mut ready = 0;
    for e in events {
        match &e.kind {
            EventKind::Authenticated {
                mechanism: m,
                reauthentication,
                ..
            } => {
                assert_eq!(
                    m, mechanism,
                    "{what}: connection {} authenticated with another mechanism: {e}",
                    e.connection
                );
                if !reauthentication {
                    authenticated.insert(e.connection);
                }
            }
            EventKind::Ready => {
                ready += 1;
                assert!(
                    authenticated.contains(&e.connection),
                    "{what}: connection {} ready without authenticating: {events:#?}",
                    e.connection
                );
            }
            _ => {}
        }
    }
    assert!(ready > 0, "{what}: no connection became ready: {events:#?}");
}

/// Polls until an error comes (within [`PROMPT`]) and returns it. A
/// record polled meanwhile fails the test.
async fn first_error(what: &str, consumer: &Consumer) -> Error {
    let start = Instant::now();
    while start.elapsed() < PROMPT {
        match consumer.poll(Duration::from_millis(100)).await {
            Err(e) => {
                eprintln!("{what}: poll, after {:?}: {e}", start.elapsed());
                return e;
            }
            Ok(records) => assert!(
                records.is_empty(),
                "{what}: {} records through a refusal",
                records.len()
            ),
        }
    }
    panic!("{what}: no error from poll within {PROMPT:?}");
}

/// Polls for `span`; returns the errors `poll` returned meanwhile, and
/// fails on a record.
async fn errors_during(what: &str, consumer: &Consumer, span: Duration) -> Vec<Error> {
    let start = Instant::now();
    let mut errors = Vec::new();
    while start.elapsed() < span {
        match consumer.poll(Duration::from_millis(100)).await {
            Err(e) => errors.push(e),
            Ok(records) => assert!(
                records.is_empty(),
                "{what}: {} records through a refusal",
                records.len()
            ),
        }
    }
    errors
}

/// A bootstrap failure over TLS: `Error::BrokersUnreachable` whose every
/// attempt is one of `bootstrap`'s addresses with a TLS cause containing
/// `needle`; its text names them; not retriable (docs/security.md: a
/// certificate does not become valid by waiting).
fn assert_tls_refusal(what: &str, e: &Error, bootstrap: &str, needle: &str) {
    let Error::BrokersUnreachable { attempts } = e else {
        panic!("{what}: expected BrokersUnreachable, got {e:?}");
    };
    let addresses: BTreeSet<&str> = bootstrap.split(',').collect();
    assert_eq!(
        attempts.len(),
        addresses.len(),
        "{what}: reported once every bootstrap address failed: {e:?}"
    );
    for (addr, cause) in attempts {
        assert!(
            addresses.contains(addr.as_str()),
            "{what}: {addr} is not a bootstrap address: {e:?}"
        );
        match cause {
            ConnectionError::Tls { message } => assert!(
                message.contains(needle),
                "{what}: {addr}: the TLS cause {message:?} lacks {needle:?}"
            ),
            other => panic!("{what}: {addr}: expected a TLS cause, got {other:?}"),
        }
        assert!(e.to_string().contains(addr.as_str()), "{what}: {e}");
    }
    assert!(
        !e.is_retriable(),
        "{what}: a failed handshake is retriable: {e}"
    );
    assert!(!e.is_fatal(), "{what}: {e}");
}

/// The address an `Error::Authentication` names.
fn addr_of(e: &Error) -> String {
    match e {
        Error::Authentication { addr, .. } => addr.clone(),
        other => panic!("expected Error::Authentication, got {other:?}"),
    }
}

/// A producer whose brokers refuse it, with the default `max.block.ms`
/// (60 s): `send` names the refusal within [`PROMPT`] (the error contains
/// each of `needles`), not after `max.block.ms`, and so does
/// `partitions_for`; a refusal does not pass by itself, so neither is
/// retriable.
async fn assert_send_refused(what: &str, producer: &Producer, topic: &str, needles: &[&str]) {
    assert_eq!(
        producer.config().max_block(),
        Duration::from_secs(60),
        "the default max.block.ms"
    );
    let sent = common::timeout(PROMPT, producer.send(ProducerRecord::new(topic).value("x")))
        .await
        .unwrap_or_else(|| panic!("{what}: send did not return within {PROMPT:?}"));
    let e = match sent {
        Ok(_) => panic!("{what}: send queued a record though every broker refused us"),
        Err(e) => e,
    };
    eprintln!("{what}: send: {e}");
    assert!(
        !matches!(e, Error::Timeout { .. }),
        "{what}: the refusal itself, not a timeout: {e}"
    );
    for needle in needles {
        assert!(
            e.to_string().contains(needle),
            "{what}: send's error {e} lacks {needle:?}"
        );
    }
    assert!(
        !e.is_retriable(),
        "{what}: a refusal does not pass by itself: {e}"
    );
    let listed = common::timeout(PROMPT, producer.partitions_for(topic))
        .await
        .unwrap_or_else(|| panic!("{what}: partitions_for did not return within {PROMPT:?}"));
    match listed {
        Err(e) => assert!(e.to_string().contains(needles[0]), "{what}: {e}"),
        Ok(p) => panic!("{what}: partitions_for answered {p:?} though refused"),
    }
}

// ===== 1. SASL_SSL =====

/// Our producer writes 30 records over SASL_SSL with `mechanism`, our
/// group consumer reads them back; each connection of both authenticated
/// with `mechanism` before it carried a request.
async fn sasl_ssl_round_trip(mechanism: Mechanism) {
    let Some(kafka) = Kafka::get("sasl_ssl_round_trip") else {
        return;
    };
    let name = mechanism.name().to_lowercase();
    let topic = kafka.unique(&format!("sec-{name}"));
    kafka.create_topic(&topic, 3, 3, &[]);
    let group = kafka.unique(&format!("sec-{name}-g"));
    let security = Security::sasl_ssl(&kafka, mechanism, SUPER_USER);

    let producer = producer(&kafka.sasl_ssl, &security);
    let mut producer_events = producer.connection_events();
    produce(&producer, &topic, 0..30).await;
    producer.close_timeout(WAIT).await.unwrap();
    assert_authenticated_before_ready(
        &format!("{mechanism} producer"),
        &drain(&mut producer_events),
        mechanism.name(),
    );

    let consumer = consumer(&kafka.sasl_ssl, &security, Some(&group));
    let mut consumer_events = consumer.connection_events();
    consumer.subscribe([topic.as_str()]).unwrap();
    let values = consume(&consumer, 30).await;
    assert_eq!(
        values,
        (0..30).map(|i| value(&topic, i)).collect::<BTreeSet<_>>(),
        "{mechanism}: what the consumer read"
    );
    // The group works over it too: a commit, read back.
    consumer.commit().await.unwrap();
    let committed = consumer
        .committed((0..3).map(|p| TopicPartition::new(&topic, p)))
        .await
        .unwrap();
    let total: i64 = committed.values().map(|o| o.unwrap_or(0)).sum();
    assert_eq!(total, 30, "{mechanism}: committed offsets {committed:?}");
    consumer.close().await.unwrap();
    assert_authenticated_before_ready(
        &format!("{mechanism} consumer"),
        &drain(&mut consumer_events),
        mechanism.name(),
    );
}

async fn sasl_ssl_with_scram_sha_256_produces_and_consumes() {
    sasl_ssl_round_trip(Mechanism::ScramSha256).await
}

async fn sasl_ssl_with_scram_sha_512_produces_and_consumes() {
    sasl_ssl_round_trip(Mechanism::ScramSha512).await
}

async fn sasl_ssl_with_plain_produces_and_consumes() {
    sasl_ssl_round_trip(Mechanism::Plain).await
}

// ===== 2. The certificate's host name =====

/// Dialled as `127.0.0.1`, the brokers' certificate (for `localhost`)
/// fails the host-name check: named by `poll` and by the producer within
/// seconds. With the check off (`ssl.endpoint.identification.algorithm`
/// `none`; the chain is still checked), the same addresses work.
async fn a_certificate_for_another_name_is_refused_unless_names_are_not_checked() {
    let Some(kafka) =
        Kafka::get("a_certificate_for_another_name_is_refused_unless_names_are_not_checked")
    else {
        return;
    };
    let bootstrap = by_ip(&kafka);
    let topic = kafka.unique("sec-names");
    kafka.create_topic(&topic, 1, 3, &[]);
    let security = Security::sasl_ssl(&kafka, Mechanism::ScramSha512, SUPER_USER);

    let consumer = consumer(&bootstrap, &security, None);
    consumer.assign([TopicPartition::new(&topic, 0)]).unwrap();
    let e = first_error("by IP", &consumer).await;
    assert_tls_refusal(
        "by IP",
        &e,
        &bootstrap,
        r#"not valid for name "127.0.0.1"; certificate is only valid for DnsName("localhost")"#,
    );
    consumer.close().await.unwrap();

    let producer = producer(&bootstrap, &security);
    assert_send_refused(
        "producer by IP",
        &producer,
        &topic,
        &["127.0.0.1", "not valid for name"],
    )
    .await;
    producer.close_timeout(Duration::ZERO).await.ok();

    // The host name not checked: the chain still is (the cluster's CA).
    let unchecked = security.without_name_check();
    let producer = self::producer(&bootstrap, &unchecked);
    produce(&producer, &topic, 0..10).await;
    producer.close_timeout(WAIT).await.unwrap();
    let consumer = self::consumer(&bootstrap, &unchecked, None);
    consumer.assign([TopicPartition::new(&topic, 0)]).unwrap();
    assert_eq!(consume(&consumer, 10).await.len(), 10);
    consumer.close().await.unwrap();
}

// ===== 3. An unknown CA =====

/// A CA that did not sign the brokers' certificate, given inline (one the
/// test made) or the system's roots (no CA configured): named by `poll`
/// and by the producer within seconds.
async fn an_unknown_ca_is_refused() {
    let Some(kafka) = Kafka::get("an_unknown_ca_is_refused") else {
        return;
    };
    let other = Pki::new("not the cluster's CA");
    let topic = kafka.unique("sec-ca");
    kafka.create_topic(&topic, 1, 3, &[]);
    for (what, ca) in [
        ("a test CA", Ca::Pem(other.ca_pem())),
        ("the system's roots", Ca::System),
    ] {
        let security = Security::sasl_ssl(&kafka, Mechanism::ScramSha256, SUPER_USER).trusting(ca);
        let consumer = consumer(&kafka.sasl_ssl, &security, None);
        consumer.assign([TopicPartition::new(&topic, 0)]).unwrap();
        let e = first_error(what, &consumer).await;
        assert_tls_refusal(what, &e, &kafka.sasl_ssl, "UnknownIssuer");
        consumer.close().await.unwrap();

        let producer = producer(&kafka.sasl_ssl, &security);
        assert_send_refused(what, &producer, &topic, &["localhost:", "UnknownIssuer"]).await;
        producer.close_timeout(Duration::ZERO).await.ok();
    }
}

// ===== 4. A wrong password =====

/// A wrong password: `Error::Authentication` from `poll` within seconds,
/// naming a bootstrap address, the mechanism and Kafka's words; not
/// retriable, not fatal (the consumer tries again with the refusal
/// backoff, so a fix is picked up), not said again at every poll, and no
/// connection storm. A waiting call (`partitions_for`) names it at once.
/// The producer's `send` names it too.
async fn a_wrong_password_is_refused(mechanism: Mechanism) {
    let Some(kafka) = Kafka::get("a_wrong_password_is_refused") else {
        return;
    };
    let topic = kafka.unique("sec-password");
    kafka.create_topic(&topic, 1, 3, &[]);
    let security =
        Security::sasl_ssl(&kafka, mechanism, SUPER_USER).with_password("not-alice-secret");
    let what = format!("{mechanism}, a wrong password");

    let consumer = consumer(&kafka.sasl_ssl, &security, None);
    let mut events = consumer.connection_events();
    consumer.assign([TopicPartition::new(&topic, 0)]).unwrap();
    let e = first_error(&what, &consumer).await;
    match &e {
        Error::Authentication {
            addr,
            mechanism: m,
            message,
            ..
        } => {
            assert!(
                kafka.sasl_ssl.split(',').any(|a| a == addr),
                "{what}: {addr} is not a bootstrap address"
            );
            assert_eq!(m, mechanism.name(), "{what}: {e}");
            assert!(
                message.contains("Authentication failed"),
                "{what}: Kafka's words are missing: {message:?}"
            );
            assert!(e.to_string().contains(addr.as_str()), "{what}: {e}");
        }
        other => panic!("{what}: expected Error::Authentication, got {other:?}"),
    }
    assert!(!e.is_retriable(), "{what}: {e}");
    assert!(!e.is_fatal(), "{what}: {e}");
    assert!(
        !e.to_string().contains("not-alice-secret"),
        "{what}: the password in the error: {e}"
    );
    // Said once per address (each bootstrap address is tried in turn),
    // not at every poll; and the addresses are tried again with the
    // refusal backoff (1 s doubling, ±20%), not in a loop.
    let mut said = BTreeSet::from([addr_of(&e)]);
    drain(&mut events);
    let again = errors_during(&what, &consumer, Duration::from_secs(3)).await;
    let later = drain(&mut events);
    for e in &again {
        assert!(
            matches!(e, Error::Authentication { .. }) && !e.is_retriable(),
            "{what}: then {e:?}"
        );
        assert!(
            said.insert(addr_of(e)),
            "{what}: {} said twice within 3 s: {again:?}",
            addr_of(e)
        );
    }
    let mut attempts: BTreeMap<&str, usize> = BTreeMap::new();
    for e in &later {
        if matches!(e.kind, EventKind::Connecting) {
            *attempts.entry(e.addr.as_str()).or_default() += 1;
        }
        assert!(
            !matches!(e.kind, EventKind::Ready | EventKind::Authenticated { .. }),
            "{what}: authenticated with a wrong password: {e}"
        );
    }
    assert!(
        attempts.values().all(|n| *n <= 3),
        "{what}: connection attempts in 3 s, by address: {attempts:?}"
    );
    consumer.close().await.unwrap();

    // A call that waits on the network names it at once too.
    let consumer = self::consumer(&kafka.sasl_ssl, &security, None);
    let e = common::timeout(PROMPT, consumer.partitions_for(&topic))
        .await
        .unwrap_or_else(|| panic!("{what}: partitions_for did not return within {PROMPT:?}"))
        .unwrap_err();
    assert!(
        e.to_string().contains("authentication failed") && !e.is_retriable(),
        "{what}: partitions_for: {e}"
    );
    consumer.close().await.unwrap();

    let producer = producer(&kafka.sasl_ssl, &security);
    assert_send_refused(
        &what,
        &producer,
        &topic,
        &[
            "localhost:",
            &format!("SASL {} authentication failed", mechanism.name()),
            "Authentication failed",
        ],
    )
    .await;
    producer.close_timeout(Duration::ZERO).await.ok();
}

async fn a_wrong_scram_sha_512_password_is_refused() {
    a_wrong_password_is_refused(Mechanism::ScramSha512).await
}

async fn a_wrong_plain_password_is_refused() {
    a_wrong_password_is_refused(Mechanism::Plain).await
}

// ===== 5. OAUTHBEARER =====

/// Unsecured JWTs (`sub` = alice) on the OAUTH listener, whose broker
/// validates them with its unsecured validator: produce and consume. The
/// token's `sub` is the principal Kafka authorizes: with `sub` =
/// restricted, the same topic is refused.
async fn oauthbearer_with_an_unsecured_jwt_produces_and_consumes() {
    let Some(kafka) = Kafka::get("oauthbearer_with_an_unsecured_jwt_produces_and_consumes") else {
        return;
    };
    let topic = kafka.unique("sec-oauth");
    kafka.create_topic(&topic, 3, 3, &[]);
    let group = kafka.unique("sec-oauth-g");
    let security = Security::unsecured_jwt(SUPER_USER.0);

    let producer = producer(&kafka.oauth, &security);
    let mut producer_events = producer.connection_events();
    produce(&producer, &topic, 0..20).await;
    producer.close_timeout(WAIT).await.unwrap();
    assert_authenticated_before_ready(
        "OAUTHBEARER producer",
        &drain(&mut producer_events),
        "OAUTHBEARER",
    );

    let consumer = consumer(&kafka.oauth, &security, Some(&group));
    let mut consumer_events = consumer.connection_events();
    consumer.subscribe([topic.as_str()]).unwrap();
    assert_eq!(
        consume(&consumer, 20).await,
        (0..20).map(|i| value(&topic, i)).collect::<BTreeSet<_>>()
    );
    consumer.close().await.unwrap();
    assert_authenticated_before_ready(
        "OAUTHBEARER consumer",
        &drain(&mut consumer_events),
        "OAUTHBEARER",
    );

    let restricted = self::producer(&kafka.oauth, &Security::unsecured_jwt(RESTRICTED_USER.0));
    match common::timeout(
        PROMPT,
        restricted.send(ProducerRecord::new(&topic).value("x")),
    )
    .await
    {
        Some(Err(Error::Topic { topic: t, code })) => {
            assert_eq!(t, topic);
            assert_eq!(code, ErrorCode::TopicAuthorizationFailed);
        }
        Some(Err(other)) => panic!("sub=restricted: expected Error::Topic, got {other:?}"),
        Some(Ok(_)) => panic!("sub=restricted: send queued a record for {topic}"),
        None => panic!("sub=restricted: send did not return within {PROMPT:?}"),
    }
    restricted.close_timeout(Duration::ZERO).await.ok();
}

// ===== 6. Re-authentication (KIP-368) =====

/// One connection's life, from its events.
#[derive(Debug, Default)]
struct Life {
    ready: Option<Duration>,
    closed: Option<(Duration, CloseReason, Option<ConnectionError>)>,
    /// When each re-authentication came, with the session lifetime.
    renewals: Vec<(Duration, Option<Duration>)>,
    what: String,
}

fn lives(events: &[ConnectionEvent]) -> BTreeMap<ConnectionId, Life> {
    let mut lives: BTreeMap<ConnectionId, Life> = BTreeMap::new();
    for e in events {
        let life = lives.entry(e.connection).or_default();
        life.what = format!("{} {} ({})", e.connection, e.addr, e.purpose);
        match &e.kind {
            EventKind::Ready => life.ready = Some(e.at),
            EventKind::Authenticated {
                reauthentication: true,
                session_lifetime,
                ..
            } => life.renewals.push((e.at, *session_lifetime)),
            EventKind::Closed { reason, error } => {
                life.closed = Some((e.at, *reason, error.clone()))
            }
            _ => {}
        }
    }
    lives
}

/// KIP-368 as the connections show it: no connection closed by the
/// broker or on an error; each renewal on a connection that was ready and
/// not closed yet, with a session of about `session`; every connection
/// that stayed up longer than a session renewed it; and at least one
/// connection renewed twice.
fn assert_sessions_renewed(
    what: &str,
    events: &[ConnectionEvent],
    session: Duration,
    end: Duration,
) {
    let lives = lives(events);
    let mut most = 0;
    for life in lives.values() {
        eprintln!(
            "{what}: {}: ready at {:?}, renewed at {:?}, closed {:?}",
            life.what, life.ready, life.renewals, life.closed
        );
        if let Some((at, reason, error)) = &life.closed {
            assert!(
                !matches!(reason, CloseReason::Error | CloseReason::Peer),
                "{what}: {} closed at {at:?} ({reason}: {error:?})",
                life.what
            );
        }
        for (at, lifetime) in &life.renewals {
            let ready = life
                .ready
                .unwrap_or_else(|| panic!("{what}: {} renewed at {at:?}, never ready", life.what));
            assert!(
                ready < *at,
                "{what}: {} renewed before it was ready",
                life.what
            );
            if let Some((closed, ..)) = life.closed {
                assert!(
                    *at < closed,
                    "{what}: {} renewed after it closed",
                    life.what
                );
            }
            let lifetime = lifetime
                .unwrap_or_else(|| panic!("{what}: {} renewed without a lifetime", life.what));
            assert!(
                lifetime <= session && lifetime >= session * 9 / 10,
                "{what}: {} renewed for {lifetime:?}, the listener's sessions last {session:?}",
                life.what
            );
        }
        if let Some(ready) = life.ready {
            let until = life.closed.as_ref().map_or(end, |(at, ..)| *at);
            // The renewal starts at 85-95% of the session; its event comes
            // when it is done, which a busy debug build may make late.
            if until.saturating_sub(ready) > session * 3 / 2 {
                assert!(
                    !life.renewals.is_empty(),
                    "{what}: {} was up from {ready:?} to {until:?} without renewing its {session:?} session",
                    life.what
                );
            }
        }
        most = most.max(life.renewals.len());
    }
    assert!(
        most >= 2,
        "{what}: no connection renewed twice in {end:?}: {lives:#?}"
    );
}

/// On the REAUTH listener (sessions of `LAZYKAFKA_KAFKA_REAUTH_MS`, 10 s):
/// a group consumer (SCRAM-SHA-512) and a producer (PLAIN) work for more
/// than two sessions, a record at a time, and meet no error; their
/// connections renew their sessions and stay open.
async fn sessions_are_renewed_on_live_connections() {
    let Some(kafka) = Kafka::get("sessions_are_renewed_on_live_connections") else {
        return;
    };
    let session = Duration::from_millis(kafka.reauth_ms);
    let topic = kafka.unique("sec-reauth");
    kafka.create_topic(&topic, 3, 3, &[]);
    let group = kafka.unique("sec-reauth-g");
    let consumer_security = Security::sasl_plaintext(Mechanism::ScramSha512, SUPER_USER);
    let producer_security = Security::sasl_plaintext(Mechanism::Plain, SUPER_USER);

    let created = Instant::now();
    let consumer = consumer(&kafka.reauth, &consumer_security, Some(&group));
    let producer = producer(&kafka.reauth, &producer_security);
    let mut consumer_events = consumer.connection_events();
    let mut producer_events = producer.connection_events();
    consumer.subscribe([topic.as_str()]).unwrap();

    let run = session * 2 + Duration::from_secs(3);
    let mut sent = 0;
    let mut seen = BTreeSet::new();
    while created.elapsed() < run {
        produce(&producer, &topic, sent..sent + 1).await;
        sent += 1;
        let deadline = Instant::now() + PROMPT;
        while seen.len() < sent {
            assert!(
                Instant::now() < deadline,
                "record {} not read within {PROMPT:?}",
                sent - 1
            );
            for r in consumer
                .poll(Duration::from_millis(100))
                .await
                .unwrap_or_else(|e| panic!("poll at {:?}: {e}", created.elapsed()))
            {
                seen.insert(String::from_utf8_lossy(r.value().unwrap_or_default()).into_owned());
            }
        }
    }
    let end = created.elapsed();
    assert_eq!(
        seen,
        (0..sent).map(|i| value(&topic, i)).collect::<BTreeSet<_>>()
    );
    let consumer_seen = drain(&mut consumer_events);
    let producer_seen = drain(&mut producer_events);
    assert_sessions_renewed("consumer", &consumer_seen, session, end);
    assert_sessions_renewed("producer", &producer_seen, session, end);
    assert_authenticated_before_ready("consumer", &consumer_seen, "SCRAM-SHA-512");
    assert_authenticated_before_ready("producer", &producer_seen, "PLAIN");
    producer.close_timeout(WAIT).await.unwrap();
    consumer.close().await.unwrap();
}

// ===== 7. ACLs =====

/// The restricted user over SASL_SSL.
fn restricted(kafka: &Kafka) -> Security {
    Security::sasl_ssl(kafka, Mechanism::ScramSha256, RESTRICTED_USER)
}

/// A topic with `count` records from the Java producer (as a super user,
/// on the PLAINTEXT listener).
fn topic_with_records(kafka: &Kafka, what: &str, count: usize) -> String {
    let topic = kafka.unique(what);
    kafka.create_topic(&topic, 1, 3, &[]);
    if count > 0 {
        kafka.peer(&["produce", "--topic", &topic, "--count", &count.to_string()]);
    }
    topic
}

/// The allowed path: `restricted` reads an `allowed-*` topic (written by
/// the Java producer) in an `allowed-*` group, and commits.
async fn restricted_reads_an_allowed_topic_in_an_allowed_group() {
    let Some(kafka) = Kafka::get("restricted_reads_an_allowed_topic_in_an_allowed_group") else {
        return;
    };
    let topic = topic_with_records(&kafka, "allowed-sec", 20);
    let group = kafka.unique("allowed-sec-g");
    let consumer = consumer(&kafka.sasl_ssl, &restricted(&kafka), Some(&group));
    consumer.subscribe([topic.as_str()]).unwrap();
    let values = consume(&consumer, 20).await;
    assert_eq!(
        values,
        (0..20)
            .map(|i| format!("value-{i}"))
            .collect::<BTreeSet<_>>()
    );
    consumer.commit().await.unwrap();
    let tp = TopicPartition::new(&topic, 0);
    let committed = consumer.committed([tp.clone()]).await.unwrap();
    assert_eq!(committed.get(&tp), Some(&Some(20)), "{committed:?}");
    consumer.close().await.unwrap();
}

/// A topic not named `allowed-*`: TOPIC_AUTHORIZATION_FAILED naming it,
/// from `poll` within seconds, whether assigned or subscribed (in an
/// allowed group); not retriable, said once, and no record comes.
async fn restricted_is_refused_a_topic_not_named_allowed() {
    let Some(kafka) = Kafka::get("restricted_is_refused_a_topic_not_named_allowed") else {
        return;
    };
    let topic = topic_with_records(&kafka, "denied-sec", 5);
    let group = kafka.unique("allowed-sec-g");
    for subscribed in [false, true] {
        let what = if subscribed { "subscribed" } else { "assigned" };
        let consumer = if subscribed {
            let c = consumer(&kafka.sasl_ssl, &restricted(&kafka), Some(&group));
            c.subscribe([topic.as_str()]).unwrap();
            c
        } else {
            let c = consumer(&kafka.sasl_ssl, &restricted(&kafka), None);
            c.assign([TopicPartition::new(&topic, 0)]).unwrap();
            c
        };
        let e = first_error(what, &consumer).await;
        match &e {
            Error::Topic { topic: t, code } => {
                assert_eq!(t, &topic, "{what}: {e}");
                assert_eq!(*code, ErrorCode::TopicAuthorizationFailed, "{what}: {e}");
            }
            other => panic!("{what}: expected Error::Topic, got {other:?}"),
        }
        assert!(!e.is_retriable(), "{what}: {e}");
        let again = errors_during(what, &consumer, Duration::from_secs(3)).await;
        assert!(again.is_empty(), "{what}: said again: {again:?}");
        consumer.close().await.unwrap();
    }
}

/// A group not named `allowed-*` (the topic allowed): GROUP_AUTHORIZATION_FAILED
/// naming the group, from `poll` within seconds; not retriable.
async fn restricted_is_refused_a_group_not_named_allowed() {
    let Some(kafka) = Kafka::get("restricted_is_refused_a_group_not_named_allowed") else {
        return;
    };
    let topic = topic_with_records(&kafka, "allowed-sec", 5);
    let group = kafka.unique("denied-sec-g");
    let consumer = consumer(&kafka.sasl_ssl, &restricted(&kafka), Some(&group));
    consumer.subscribe([topic.as_str()]).unwrap();
    let e = first_error("a denied group", &consumer).await;
    match &e {
        Error::Group { group: g, code, .. } => {
            assert_eq!(g, &group, "{e}");
            assert_eq!(*code, Some(ErrorCode::GroupAuthorizationFailed), "{e}");
        }
        other => panic!("expected Error::Group, got {other:?}"),
    }
    assert!(!e.is_retriable(), "{e}");
    let again = errors_during("a denied group", &consumer, Duration::from_secs(3)).await;
    assert!(again.is_empty(), "said again: {again:?}");
    consumer.close().await.unwrap();
}

/// `restricted` may write nothing: a topic not named `allowed-*` is
/// refused by `send` (its metadata); on an `allowed-*` topic (which it may
/// describe) the idempotent producer's InitProducerId is refused, and a
/// producer without idempotence has its Produce refused: each named by
/// the record's delivery within seconds, with the topic and the code.
async fn restricted_cannot_produce() {
    let Some(kafka) = Kafka::get("restricted_cannot_produce") else {
        return;
    };
    common::peers::logs::capture();
    let denied = topic_with_records(&kafka, "denied-sec", 0);
    let allowed = topic_with_records(&kafka, "allowed-sec", 0);
    let security = restricted(&kafka);

    // Idempotent (the default).
    let producer = producer(&kafka.sasl_ssl, &security);
    let sent = common::timeout(
        PROMPT,
        producer.send(ProducerRecord::new(&denied).value("x")),
    )
    .await
    .unwrap_or_else(|| panic!("send to {denied} did not return within {PROMPT:?}"));
    let e = match sent {
        Err(e) => e,
        Ok(_) => panic!("send queued a record for {denied}, which restricted may not describe"),
    };
    match &e {
        Error::Topic { topic, code } => {
            assert_eq!(topic, &denied, "{e}");
            assert_eq!(*code, ErrorCode::TopicAuthorizationFailed, "{e}");
        }
        other => panic!("send to {denied}: expected Error::Topic, got {other:?}"),
    }
    assert!(!e.is_retriable(), "{e}");

    for round in 0..2 {
        let delivery = producer
            .send(ProducerRecord::new(&allowed).value(format!("x{round}")))
            .await
            .unwrap_or_else(|e| panic!("send to {allowed} (which restricted may describe): {e}"));
        let flushed = common::timeout(PROMPT, producer.flush(PROMPT)).await;
        let outcome = common::timeout(PROMPT, delivery)
            .await
            .unwrap_or_else(|| panic!("round {round}: no delivery outcome within {PROMPT:?}"));
        match &outcome {
            Err(e @ Error::Delivery(DeliveryError::Broker { topic, code, .. })) => {
                eprintln!("round {round}: {e}");
                assert_eq!(topic, &allowed);
                assert_eq!(*code, ErrorCode::ClusterAuthorizationFailed, "{e}");
                assert!(
                    e.to_string().contains(&allowed)
                        && e.to_string().contains("CLUSTER_AUTHORIZATION_FAILED"),
                    "{e}"
                );
                assert!(!e.is_retriable(), "{e}");
            }
            other => panic!("round {round}: expected CLUSTER_AUTHORIZATION_FAILED, got {other:?}"),
        }
        assert!(
            matches!(flushed, Some(Ok(()))),
            "round {round}: flush: {flushed:?}"
        );
    }
    assert!(
        !common::peers::logs::find(
            log::Level::Warn,
            "InitProducerId refused with CLUSTER_AUTHORIZATION_FAILED"
        )
        .is_empty(),
        "the refusal was not logged"
    );
    producer.close_timeout(Duration::ZERO).await.ok();

    // Without idempotence: Produce itself is refused.
    let producer = Producer::new(
        producer_config(&kafka.sasl_ssl, &security)
            .acks(Acks::Leader)
            .build()
            .unwrap(),
    )
    .unwrap();
    let delivery = producer
        .send(ProducerRecord::new(&allowed).value("y"))
        .await
        .unwrap();
    let outcome = common::timeout(PROMPT, delivery)
        .await
        .unwrap_or_else(|| panic!("acks=1: no delivery outcome within {PROMPT:?}"));
    match &outcome {
        Err(e @ Error::Delivery(DeliveryError::Broker { topic, code, .. })) => {
            eprintln!("acks=1: {e}");
            assert_eq!(topic, &allowed);
            assert_eq!(*code, ErrorCode::TopicAuthorizationFailed, "{e}");
            assert!(!e.is_retriable(), "{e}");
        }
        other => panic!("acks=1: expected TOPIC_AUTHORIZATION_FAILED, got {other:?}"),
    }
    producer.close_timeout(Duration::ZERO).await.ok();
}

on_apache_kafka!(
    sasl_ssl_with_scram_sha_256_produces_and_consumes,
    sasl_ssl_with_scram_sha_512_produces_and_consumes,
    sasl_ssl_with_plain_produces_and_consumes,
    a_certificate_for_another_name_is_refused_unless_names_are_not_checked,
    an_unknown_ca_is_refused,
    a_wrong_scram_sha_512_password_is_refused,
    a_wrong_plain_password_is_refused,
    oauthbearer_with_an_unsecured_jwt_produces_and_consumes,
    sessions_are_renewed_on_live_connections,
    restricted_reads_an_allowed_topic_in_an_allowed_group,
    restricted_is_refused_a_topic_not_named_allowed,
    restricted_is_refused_a_group_not_named_allowed,
    restricted_cannot_produce,
);
