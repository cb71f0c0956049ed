//! TLS (`security.protocol=SSL`), judged by peers this crate did not write:
//!
//! - librdkafka's consumer (OpenSSL) reads from `lazykafka::mock` over TLS:
//!   the mock's server side;
//! - our consumer reads through stunnel (OpenSSL) in front of librdkafka's
//!   mock cluster, each broker re-advertised on its stunnel port, with a
//!   client certificate whose key is encrypted PKCS#8;
//! - an untrusted CA, a certificate for another name, an expired
//!   certificate, and a listener that is not TLS each fail `poll` with a
//!   typed error naming the address and the cause, within seconds, with a
//!   bounded number of connects;
//! - `ssl.endpoint.identification.algorithm=none` and
//!   `enable.ssl.certificate.verification=false` let exactly what they
//!   should through.
//!
//! Certificates are made by each test (rcgen).

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

#[macro_use]
mod common;

use common::mock::RawMock;
use common::peers::{config, consume, expected, produce, values};
use common::tls::{encrypt_key, free_port, stunnel_bin, Leaf, Pki, Stunnel, TempDir};
use lazykafka::config::ConsumerConfigBuilder;
use lazykafka::config::Mechanism;
use lazykafka::events::ConnectionError;
use lazykafka::mock::{MockCluster, MockEventKind, MockRecord, MockSasl, TestCertificates};
use lazykafka::{Consumer, ConsumerConfig, Error, SecurityProtocol, TopicPartition};
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::Message as _;
use std::time::{Duration, Instant};

/// How long a failure may take to reach `poll`: seconds, not the API
/// timeout.
const PROMPT: Duration = Duration::from_secs(5);

/// A one-broker TLS mock with `records` records on `t`/0, serving `leaf`.
fn tls_mock(leaf: &Leaf, records: usize) -> MockCluster {
    let mock = MockCluster::builder()
        .tls(leaf.cert_pem.clone(), leaf.key_pem.clone())
        .build()
        .unwrap();
    mock.create_topic("t", 1).unwrap();
    mock.produce(
        "t",
        0,
        (0..records).map(|i| MockRecord::new(format!("value-{i}"))),
    )
    .unwrap();
    mock
}

fn ssl(bootstrap: &str, ca_pem: &str) -> ConsumerConfigBuilder {
    config(bootstrap, None)
        .security_protocol(SecurityProtocol::Ssl)
        .ssl_ca_pem(ca_pem)
}

async fn assigned(builder: ConsumerConfigBuilder) -> Consumer {
    let consumer = Consumer::new(builder.build().unwrap()).unwrap();
    consumer.assign([TopicPartition::new("t", 0)]).unwrap();
    consumer
}

/// Polls until an error, within [`PROMPT`]; returns it and when it came.
async fn first_error(consumer: &mut Consumer) -> (Error, Duration) {
    let start = Instant::now();
    while start.elapsed() < PROMPT {
        match consumer.poll(Duration::from_millis(100)).await {
            Err(e) => return (e, start.elapsed()),
            Ok(records) => assert!(records.is_empty(), "records through a failed handshake"),
        }
    }
    panic!("no error from poll within {PROMPT:?}");
}

/// The TLS cause of a bootstrap failure, checked to name `addr`.
fn tls_cause(e: &Error, addr: &str) -> String {
    let Error::BrokersUnreachable { attempts } = e else {
        panic!("expected BrokersUnreachable, got {e:?}");
    };
    assert_eq!(attempts.len(), 1, "{e}");
    assert_eq!(attempts[0].0, addr, "{e}");
    let ConnectionError::Tls { message } = &attempts[0].1 else {
        panic!("expected a TLS cause, got {e:?}");
    };
    assert!(e.to_string().contains(addr), "{e}");
    assert!(
        !e.is_retriable(),
        "a failed handshake is not retriable: {e}"
    );
    message.clone()
}

/// Polls for `span` and counts the connections `mock` accepted meanwhile:
/// a failed handshake is a refusal, backed off 1 s doubling to 30 s, so
/// a few seconds see two or three, not a tight loop's hundreds.
async fn connects_during(consumer: &mut Consumer, mock: &MockCluster, span: Duration) -> usize {
    let before = connects(mock);
    let start = Instant::now();
    while start.elapsed() < span {
        let _ = consumer.poll(Duration::from_millis(100)).await;
    }
    connects(mock) - before
}

fn connects(mock: &MockCluster) -> usize {
    mock.events()
        .iter()
        .filter(|e| matches!(e.kind, MockEventKind::Connected { .. }))
        .count()
}

/// A failed handshake: a typed error naming the address and containing
/// `needle`, from `poll` within seconds, said once, with a bounded number
/// of connects afterwards.
async fn fails_with(
    mock: &MockCluster,
    addr: &str,
    builder: impl Fn(&str) -> ConsumerConfigBuilder,
    needle: &str,
) {
    let mut consumer = assigned(builder(addr)).await;
    let (e, after) = first_error(&mut consumer).await;
    let message = tls_cause(&e, addr);
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
    assert!(after < PROMPT, "reported after {after:?}");
    let n = connects_during(&mut consumer, mock, Duration::from_secs(3)).await;
    assert!(
        (1..=3).contains(&n),
        "{n} connects in 3 s: no refusal backoff, or no retry"
    );
    consumer.close().await.unwrap();
    // A call that waits on the network, made first, names the cause at
    // once too, not after default.api.timeout.ms.
    let consumer = assigned(builder(addr)).await;
    let started = Instant::now();
    let e = consumer.partitions_for("t").await.unwrap_err();
    assert!(tls_cause(&e, addr).contains(needle), "{e}");
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
}

#[test]
fn consumes_from_a_tls_mock_with_the_ca_from_a_file_or_inline() {
    crate::common::block_on(async {
        let pki = Pki::new("test CA");
        let mock = tls_mock(&pki.leaf(&["localhost", "127.0.0.1"]), 20);
        let addr = mock.bootstrap_servers();
        let dir = TempDir::new("tls-ca");
        let ca_file = dir.write("ca.pem", &pki.ca_pem());
        // From properties, as a properties file has them.
        let from_file = ConsumerConfig::from_properties([
            ("bootstrap.servers", addr.as_str()),
            ("security.protocol", "ssl"),
            ("ssl.ca.location", ca_file.to_str().unwrap()),
            ("auto.offset.reset", "earliest"),
            ("fetch.max.wait.ms", "100"),
        ])
        .unwrap();
        for builder in [
            ssl(&addr, &pki.ca_pem()),
            // Dialled by name: SNI and the name check use "localhost".
            ssl(&addr.replace("127.0.0.1", "localhost"), &pki.ca_pem()),
        ] {
            let mut consumer = assigned(builder).await;
            let got = consume(&mut consumer, 20).await;
            assert_eq!(values(&got), expected(20));
            consumer.close().await.unwrap();
        }
        let mut consumer = Consumer::new(from_file).unwrap();
        consumer.assign([TopicPartition::new("t", 0)]).unwrap();
        assert_eq!(values(&consume(&mut consumer, 20).await), expected(20));
        consumer.close().await.unwrap();
    })
}

#[test]
fn an_untrusted_ca_is_a_tls_error_from_poll() {
    crate::common::block_on(async {
        let mock = tls_mock(&Pki::new("the broker's CA").leaf(&["127.0.0.1"]), 1);
        let other = Pki::new("another CA");
        fails_with(
            &mock,
            &mock.bootstrap_servers(),
            |addr| ssl(addr, &other.ca_pem()),
            "UnknownIssuer",
        )
        .await;
    })
}

#[test]
fn a_certificate_for_another_name_is_a_tls_error_unless_names_are_not_checked() {
    crate::common::block_on(async {
        let pki = Pki::new("test CA");
        // Valid for kafka.example.com only: neither 127.0.0.1 nor localhost.
        let mock = tls_mock(&pki.leaf(&["kafka.example.com"]), 5);
        let addr = mock.bootstrap_servers();
        let ca = pki.ca_pem();
        fails_with(&mock, &addr, |a| ssl(a, &ca), "not valid for name").await;
        let by_name = addr.replace("127.0.0.1", "localhost");
        fails_with(&mock, &by_name, |a| ssl(a, &ca), "not valid for name").await;
        // ssl.endpoint.identification.algorithm=none: the chain is still
        // checked (an untrusted CA still fails), the name is not.
        let mut consumer = assigned(
            ssl(&addr, &pki.ca_pem()).ssl_endpoint_identification_algorithm(
                lazykafka::config::EndpointIdentification::None,
            ),
        )
        .await;
        assert_eq!(values(&consume(&mut consumer, 5).await), expected(5));
        consumer.close().await.unwrap();
        let other = Pki::new("another CA").ca_pem();
        fails_with(
            &mock,
            &addr,
            |a| {
                ssl(a, &other).ssl_endpoint_identification_algorithm(
                    lazykafka::config::EndpointIdentification::None,
                )
            },
            "UnknownIssuer",
        )
        .await;
    })
}

#[test]
fn an_expired_certificate_is_a_tls_error_from_poll() {
    crate::common::block_on(async {
        let pki = Pki::new("test CA");
        let mock = tls_mock(&pki.expired_leaf(&["127.0.0.1"]), 1);
        let ca = pki.ca_pem();
        fails_with(
            &mock,
            &mock.bootstrap_servers(),
            |a| ssl(a, &ca),
            "certificate expired",
        )
        .await;
    })
}

/// The other way round: a plaintext client at a TLS listener reads the
/// listener's TLS alert as an absurd frame size; the error says the
/// listener speaks TLS and which setting to change.
#[test]
fn a_plaintext_client_at_a_tls_listener_is_told_to_set_the_security_protocol() {
    crate::common::block_on(async {
        let mock = tls_mock(&Pki::new("test CA").leaf(&["127.0.0.1"]), 1);
        let mut consumer = told_to_set_the_security_protocol(&mock.bootstrap_servers()).await;
        let n = connects_during(&mut consumer, &mock, Duration::from_secs(3)).await;
        assert!(n <= 3, "{n} connects in 3 s");
        consumer.close().await.unwrap();
    })
}

/// The same against stunnel (OpenSSL), a TLS server we did not write:
/// OpenSSL answers a plaintext request with a reset, not an alert, so there
/// is no TLS record to recognise; the reset is named within seconds, with
/// the address.
#[test]
fn a_plaintext_client_at_stunnel_is_told_of_the_reset() {
    crate::common::block_on(async {
        let Some(bin) = stunnel_bin("a_plaintext_client_at_stunnel_is_told_of_the_reset") else {
            return;
        };
        let mock = RawMock::new(1);
        let dir = TempDir::new("tls-stunnel-plain");
        let listen = free_port();
        let _stunnel = Stunnel::start(
            &bin,
            &dir,
            &Pki::new("server CA").leaf(&["localhost"]),
            None,
            &[(listen, mock.ports()[0])],
        );
        let addr = format!("localhost:{listen}");
        let mut consumer = assigned(config(&addr, None)).await;
        let (e, after) = first_error(&mut consumer).await;
        assert!(after < PROMPT, "reported after {after:?}");
        let text = e.to_string();
        assert!(text.contains(&addr) && text.contains("reset"), "{text}");
        consumer.close().await.unwrap();
    })
}

/// A plaintext consumer of the TLS listener at `addr`: its first error,
/// within [`PROMPT`], says the listener speaks TLS and which setting to
/// change, and is not retriable. Returns the consumer.
async fn told_to_set_the_security_protocol(addr: &str) -> Consumer {
    let mut consumer = assigned(config(addr, None)).await;
    let (e, after) = first_error(&mut consumer).await;
    assert!(after < PROMPT, "reported after {after:?}");
    let text = e.to_string();
    assert!(
        text.contains("TLS listener") && text.contains("security.protocol"),
        "{text}"
    );
    assert!(!e.is_retriable(), "{e}");
    consumer
}

#[test]
fn a_plain_listener_is_a_tls_error_from_poll() {
    crate::common::block_on(async {
        let pki = Pki::new("test CA");
        let mock = MockCluster::new(1).unwrap();
        let ca = pki.ca_pem();
        fails_with(
            &mock,
            &mock.bootstrap_servers(),
            |a| ssl(a, &ca),
            "TLS handshake failed",
        )
        .await;
    })
}

#[test]
fn without_certificate_verification_any_certificate_is_accepted() {
    crate::common::block_on(async {
        let mock = tls_mock(&Pki::new("unknown CA").expired_leaf(&["elsewhere"]), 5);
        let mut consumer = assigned(
            config(&mock.bootstrap_servers(), None)
                .security_protocol(SecurityProtocol::Ssl)
                .enable_ssl_certificate_verification(false),
        )
        .await;
        assert_eq!(values(&consume(&mut consumer, 5).await), expected(5));
        consumer.close().await.unwrap();
    })
}

/// What librdkafka's `consumer` reads of `t`/0 from its beginning: up to
/// 10 values, for at most 30 s.
fn read_ten(consumer: &BaseConsumer) -> Vec<String> {
    let mut list = rdkafka::TopicPartitionList::new();
    list.add_partition_offset("t", 0, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&list).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while seen.len() < 10 && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => seen.push(String::from_utf8_lossy(m.payload().unwrap()).into_owned()),
            Some(Err(e)) => panic!("librdkafka: {e}"),
            None => {}
        }
    }
    seen
}

fn expected_ten() -> Vec<String> {
    (0..10).map(|i| format!("value-{i}")).collect()
}

/// librdkafka's consumer (OpenSSL, host name verification on) reads from
/// `lazykafka::mock` over TLS.
#[test]
fn librdkafka_reads_from_the_tls_mock() {
    let pki = Pki::new("test CA");
    let mock = tls_mock(&pki.leaf(&["localhost", "127.0.0.1"]), 10);
    let dir = TempDir::new("tls-rdkafka");
    let ca = dir.write("ca.pem", &pki.ca_pem());
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", mock.bootstrap_servers())
        .set("security.protocol", "SSL")
        .set("ssl.ca.location", ca.to_str().unwrap())
        .set("ssl.endpoint.identification.algorithm", "https")
        .set("group.id", "rd")
        .set("enable.auto.commit", "false")
        .create()
        .expect("librdkafka consumer");
    assert_eq!(read_ten(&consumer), expected_ten());
    // Every connection it made was TLS: the mock served requests on them.
    assert!(mock
        .events()
        .iter()
        .any(|e| matches!(e.kind, MockEventKind::Request { .. })));
}

/// Our consumer through stunnel (OpenSSL) in front of librdkafka's
/// two-broker mock: each broker advertised as `localhost` on its stunnel
/// port, so every connection (bootstrap and leaders) is TLS to a server we
/// did not write, checked against the name `localhost`; stunnel demands a
/// client certificate, given as files with an encrypted PKCS#8 key.
#[test]
fn consumes_through_stunnel_with_a_client_certificate() {
    crate::common::block_on(async {
        let Some(bin) = stunnel_bin("consumes_through_stunnel_with_a_client_certificate") else {
            return;
        };
        let mock = RawMock::new(2);
        mock.create_topic("t", 2);
        mock.set_leader("t", 0, 1);
        mock.set_leader("t", 1, 2);
        produce(&mock.bootstraps().join(","), "t", 2, 40, "none");
        let servers = Pki::new("server CA");
        let clients = Pki::new("client CA");
        let dir = TempDir::new("tls-stunnel");
        let listen: Vec<u16> = mock.ports().iter().map(|_| free_port()).collect();
        let services: Vec<(u16, u16)> = listen.iter().copied().zip(mock.ports()).collect();
        let _stunnel = Stunnel::start(
            &bin,
            &dir,
            &servers.leaf(&["localhost"]),
            Some(&clients.ca_pem()),
            &services,
        );
        for (id, port) in (1..).zip(&listen) {
            mock.advertise(id, "localhost", *port);
        }
        let client = clients.leaf(&["consumer"]);
        let ca = dir.write("ca.pem", &servers.ca_pem());
        let cert = dir.write("client.pem", &client.cert_pem);
        let key = dir.write("client.key", &encrypt_key(&client, "pass phrase"));
        let mut consumer = Consumer::new(
            config(&format!("localhost:{}", listen[0]), None)
                .security_protocol(SecurityProtocol::Ssl)
                .ssl_ca_location(&ca)
                .ssl_certificate_location(&cert)
                .ssl_key_location(&key)
                .ssl_key_password("pass phrase")
                .build()
                .unwrap(),
        )
        .unwrap();
        consumer
            .assign([TopicPartition::new("t", 0), TopicPartition::new("t", 1)])
            .unwrap();
        let got = consume(&mut consumer, 40).await;
        assert_eq!(values(&got), expected(40));
        // Every connection went to a stunnel port.
        let live = consumer.connections();
        assert!(!live.is_empty());
        for c in &live {
            let port: u16 = c.addr.rsplit(':').next().unwrap().parse().unwrap();
            assert!(listen.contains(&port), "{c:?} is not through stunnel");
        }
        consumer.close().await.unwrap();

        // Without the client certificate, stunnel refuses the handshake with
        // an alert (under TLS 1.3 it arrives after the client's side of the
        // handshake, with the first response).
        let mut refused = Consumer::new(
            config(&format!("localhost:{}", listen[0]), None)
                .security_protocol(SecurityProtocol::Ssl)
                .ssl_ca_location(&ca)
                .build()
                .unwrap(),
        )
        .unwrap();
        refused.assign([TopicPartition::new("t", 0)]).unwrap();
        let (e, after) = first_error(&mut refused).await;
        let message = tls_cause(&e, &format!("localhost:{}", listen[0]));
        assert!(after < PROMPT, "reported after {after:?}");
        assert!(message.contains("alert"), "{message}");
    })
}

/// The `consume` example takes the TLS properties through `--property`.
/// (The example runs on async-std only.)
#[cfg(feature = "runtime-async-std")]
#[test]
fn the_consume_example_reads_over_tls_with_properties() {
    let pki = Pki::new("test CA");
    let mock = tls_mock(&pki.leaf(&["127.0.0.1"]), 5);
    let dir = TempDir::new("tls-example");
    let ca = dir.write("ca.pem", &pki.ca_pem());
    let mut child = std::process::Command::new(common::examples::example_bin("consume"))
        .args(["--bootstrap", &mock.bootstrap_servers(), "--topic", "t"])
        .args(["--from-beginning", "--count", "5"])
        .args(["--property", "security.protocol=SSL"])
        .args(["--property", &format!("ssl.ca.location={}", ca.display())])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let exited = common::wait_for(Duration::from_secs(30), || {
        child.try_wait().unwrap().is_some()
    });
    if !exited {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        exited && out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().count(), 5, "{stdout}");
    assert!(stdout.contains("value-4"), "{stdout}");
}

/// A leader whose certificate fails (here: dialled by the IP address the
/// metadata advertises, with a certificate for `localhost` only) is an
/// `Error::Connection` naming the broker, at its first failure: a slow
/// reconnect backoff shows that the error came before any second attempt.
#[test]
fn a_leader_failing_tls_is_reported_at_its_first_failure() {
    crate::common::block_on(async {
        let pki = Pki::new("test CA");
        let leaf = pki.leaf(&["localhost"]);
        let mock = MockCluster::builder()
            .brokers(2)
            .tls(leaf.cert_pem, leaf.key_pem)
            .build()
            .unwrap();
        mock.create_topic_with_leaders("t", &[2]).unwrap();
        let bootstrap = format!("localhost:{}", mock.broker_addr(1).unwrap().port());
        let leader = mock.broker_addr(2).unwrap().to_string();
        let mut consumer = assigned(
            ssl(&bootstrap, &pki.ca_pem())
                .reconnect_backoff(Duration::from_secs(2))
                .reconnect_backoff_max(Duration::from_secs(2)),
        )
        .await;
        let leader_connects = || {
            mock.events()
                .iter()
                .filter(|e| e.broker == 2 && matches!(e.kind, MockEventKind::Connected { .. }))
                .count()
        };
        let (e, after) = first_error(&mut consumer).await;
        assert_eq!(leader_connects(), 1, "reported after a second attempt: {e}");
        assert!(after < PROMPT, "reported after {after:?}");
        match &e {
            Error::Connection {
                broker,
                addr,
                purpose,
                cause: ConnectionError::Tls { message },
            } => {
                assert_eq!(*broker, Some(2));
                assert_eq!(addr, &leader);
                assert_eq!(*purpose, lazykafka::events::Purpose::Leader);
                assert!(message.contains("not valid for name"), "{message}");
            }
            other => panic!("expected a leader TLS error, got {other:?}"),
        }
        assert!(e.to_string().contains(&leader), "{e}");
        assert!(!e.is_retriable(), "{e}");
        consumer.close().await.unwrap();
    })
}

/// A one-broker `SASL_SSL` mock (SCRAM-SHA-512, user alice) with 10
/// records on `t`/0, its TLS from `TestCertificates`; and the CA.
fn sasl_ssl_mock() -> (MockCluster, TestCertificates) {
    let certs = TestCertificates::localhost().unwrap();
    let mock = MockCluster::builder()
        .tls(certs.cert_pem(), certs.key_pem())
        .sasl(
            MockSasl::new()
                .user("alice", "alice-secret")
                .mechanisms([Mechanism::ScramSha512]),
        )
        .build()
        .unwrap();
    mock.create_topic("t", 1).unwrap();
    mock.produce(
        "t",
        0,
        (0..10).map(|i| MockRecord::new(format!("value-{i}"))),
    )
    .unwrap();
    (mock, certs)
}

/// `TestCertificates` is all a `SASL_SSL` test needs: our consumer
/// trusts the CA it made, inline, and reads every record, by address and
/// by name.
#[test]
fn consumes_over_sasl_ssl_with_test_certificates() {
    crate::common::block_on(async {
        let (mock, certs) = sasl_ssl_mock();
        let addr = mock.bootstrap_servers();
        for bootstrap in [addr.clone(), addr.replace("127.0.0.1", "localhost")] {
            let builder = ConsumerConfig::builder()
                .set_all([
                    ("bootstrap.servers", bootstrap.as_str()),
                    ("security.protocol", "SASL_SSL"),
                    ("ssl.ca.pem", certs.ca_pem()),
                    ("sasl.mechanism", "SCRAM-SHA-512"),
                    ("sasl.username", "alice"),
                    ("sasl.password", "alice-secret"),
                    ("auto.offset.reset", "earliest"),
                    ("fetch.max.wait.ms", "100"),
                ])
                .unwrap();
            let mut consumer = assigned(builder).await;
            assert_eq!(values(&consume(&mut consumer, 10).await), expected(10));
            consumer.close().await.unwrap();
        }
        // Another CA's certificates are not trusted: the check is real.
        let other = TestCertificates::localhost().unwrap();
        fails_with(
            &mock,
            &addr,
            |addr| ssl(addr, other.ca_pem()),
            "UnknownIssuer",
        )
        .await;
    })
}

/// librdkafka's consumer (OpenSSL, host name verification on, SCRAM)
/// trusts the CA `TestCertificates` made, given inline (`ssl.ca.pem`).
#[test]
fn librdkafka_reads_over_sasl_ssl_with_test_certificates() {
    let (mock, certs) = sasl_ssl_mock();
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", mock.bootstrap_servers())
        .set("security.protocol", "SASL_SSL")
        .set("ssl.ca.pem", certs.ca_pem())
        .set("ssl.endpoint.identification.algorithm", "https")
        .set("sasl.mechanisms", "SCRAM-SHA-512")
        .set("sasl.username", "alice")
        .set("sasl.password", "alice-secret")
        .set("group.id", "rd")
        .set("enable.auto.commit", "false")
        .create()
        .expect("librdkafka consumer");
    assert_eq!(read_ten(&consumer), expected_ten());
}
