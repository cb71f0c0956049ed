//! `ProducerConfig`: its own properties, the shared ones (run from the
//! consumer's table), librdkafka's names, and the Java producer's rules.

use super::{Case, CASES};
use crate::config::common;
use crate::config::{Acks, Compression, ProducerConfig, SecurityProtocol};
use crate::error::Error;
use std::collections::BTreeMap;
use std::time::Duration;

const BASE: [(&str, &str); 1] = [("bootstrap.servers", "localhost:9092")];

fn with(extra: &[(&str, &str)]) -> Result<ProducerConfig, Error> {
    ProducerConfig::from_properties(BASE.iter().chain(extra).copied())
}

fn rendered(config: &ProducerConfig, property: &str) -> Option<String> {
    config
        .to_properties()
        .into_iter()
        .find(|(k, _)| *k == property)
        .map(|(_, v)| v)
}

#[track_caller]
fn assert_config_error(result: Result<ProducerConfig, Error>, property: &str, needles: &[&str]) {
    match result {
        Err(Error::Config {
            property: p,
            reason,
        }) => {
            assert_eq!(p, property, "reason: {reason}");
            for needle in needles {
                assert!(
                    reason.contains(needle),
                    "{property}: {reason:?} lacks {needle:?}"
                );
            }
        }
        other => panic!("{property}: expected a config error, got {other:?}"),
    }
}

/// The producer's own properties, as the consumer's table has them
/// (`transactional.id` has no valid value: it is tested on its own).
const PRODUCER_CASES: &[Case] = &[
    Case {
        property: "acks",
        default: Some("all"),
        valid: " -1 ",
        valid_rendered: "all",
        invalid: &[
            ("2", "acks", &["\"2\"", "expected all, -1, 0 or 1"]),
            ("leader", "acks", &["\"leader\""]),
        ],
    },
    Case {
        property: "enable.idempotence",
        default: Some("true"),
        valid: "False",
        valid_rendered: "false",
        invalid: &[("yes", "enable.idempotence", &["\"yes\"", "true or false"])],
    },
    Case {
        property: "linger.ms",
        default: Some("5"),
        valid: "100",
        valid_rendered: "100",
        invalid: &[
            ("-1", "linger.ms", &["\"-1\"", "negative"]),
            ("0.5", "linger.ms", &["not an integer"]),
        ],
    },
    Case {
        property: "batch.size",
        default: Some("1000000"),
        valid: "0",
        valid_rendered: "0",
        invalid: &[("2147483648", "batch.size", &["at most 2147483647"])],
    },
    Case {
        property: "compression.type",
        default: Some("none"),
        valid: " ZSTD ",
        valid_rendered: "zstd",
        invalid: &[
            (
                "brotli",
                "compression.type",
                &["\"brotli\"", "none, gzip, snappy, lz4 or zstd"],
            ),
            ("inherit", "compression.type", &["\"inherit\""]),
        ],
    },
    Case {
        property: "max.request.size",
        default: Some("1048576"),
        valid: "2000000",
        valid_rendered: "2000000",
        invalid: &[("-5", "max.request.size", &["\"-5\"", "negative"])],
    },
    Case {
        property: "buffer.memory",
        default: Some("33554432"),
        valid: "67108864",
        valid_rendered: "67108864",
        invalid: &[("-1", "buffer.memory", &["negative"])],
    },
    Case {
        property: "max.block.ms",
        default: Some("60000"),
        valid: "0",
        valid_rendered: "0",
        invalid: &[("1m", "max.block.ms", &["\"1m\"", "not an integer"])],
    },
    Case {
        property: "delivery.timeout.ms",
        default: Some("120000"),
        valid: "30005",
        valid_rendered: "30005",
        invalid: &[
            (
                "30004",
                "delivery.timeout.ms",
                &["\"30004\"", "linger.ms + request.timeout.ms (5 + 30000)"],
            ),
            ("2147483648", "delivery.timeout.ms", &["at most 2147483647"]),
        ],
    },
    Case {
        property: "retries",
        default: Some("2147483647"),
        valid: "3",
        valid_rendered: "3",
        invalid: &[
            ("-1", "retries", &["negative"]),
            ("2147483648", "retries", &["at most 2147483647"]),
        ],
    },
    Case {
        property: "max.in.flight.requests.per.connection",
        default: Some("5"),
        valid: "2",
        valid_rendered: "2",
        invalid: &[(
            "0",
            "max.in.flight.requests.per.connection",
            &["\"0\"", "at least 1"],
        )],
    },
    Case {
        property: "partitioner.ignore.keys",
        default: Some("false"),
        valid: "TRUE",
        valid_rendered: "true",
        invalid: &[("1", "partitioner.ignore.keys", &["true or false"])],
    },
    Case {
        property: "partitioner",
        default: Some("murmur2_random"),
        valid: "Consistent_Random",
        valid_rendered: "consistent_random",
        invalid: &[("crc32", "partitioner", &["\"crc32\"", "consistent_random"])],
    },
    Case {
        property: "sticky.partitioning.linger.ms",
        default: Some("10"),
        valid: "0",
        valid_rendered: "0",
        invalid: &[(
            "900001",
            "sticky.partitioning.linger.ms",
            &["\"900001\"", "at most 900000"],
        )],
    },
    Case {
        property: "metadata.max.idle.ms",
        default: Some("300000"),
        valid: "5000",
        valid_rendered: "5000",
        invalid: &[(
            "4999",
            "metadata.max.idle.ms",
            &["\"4999\"", "at least 5000"],
        )],
    },
];

/// Every case that applies to a producer: its own, then the consumer's
/// cases of the shared properties.
fn cases() -> impl Iterator<Item = &'static Case> {
    PRODUCER_CASES.iter().chain(
        CASES
            .iter()
            .filter(|c| common::PROPERTIES.contains(&c.property)),
    )
}

fn is_secret(property: &str) -> bool {
    ProducerConfig::SECRET_PROPERTIES.contains(&property)
}

#[test]
fn the_shared_properties_are_producer_properties() {
    for property in common::PROPERTIES {
        assert!(ProducerConfig::PROPERTIES.contains(property), "{property}");
    }
    assert_eq!(ProducerConfig::SECRET_PROPERTIES, common::SECRET_PROPERTIES);
}

#[test]
fn the_table_covers_every_property() {
    let mut covered: Vec<&str> = cases().map(|c| c.property).collect();
    covered.push("transactional.id");
    covered.sort_unstable();
    let mut properties = ProducerConfig::PROPERTIES.to_vec();
    properties.sort_unstable();
    assert_eq!(covered, properties);

    // Every property but the secrets and transactional.id is rendered, in
    // the order of PROPERTIES (files, not PEM texts, here).
    let config = with(&[
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "u"),
        ("sasl.password", "p"),
        ("sasl.oauthbearer.config", "principal=p"),
        ("ssl.ca.location", "a"),
        ("ssl.certificate.location", "b"),
        ("ssl.key.location", "c"),
        ("ssl.key.password", "d"),
    ])
    .unwrap();
    let keys: Vec<&str> = config.to_properties().into_iter().map(|(k, _)| k).collect();
    let expected: Vec<&str> = ProducerConfig::PROPERTIES
        .iter()
        .copied()
        .filter(|p| {
            !is_secret(p) && !["transactional.id", "ssl.ca.pem", "ssl.certificate.pem"].contains(p)
        })
        .collect();
    assert_eq!(keys, expected);
}

#[test]
fn every_property_has_its_default() {
    let config = with(&[]).unwrap();
    for case in cases() {
        let expected = if case.property == "bootstrap.servers" {
            Some("localhost:9092") // from BASE
        } else {
            case.default
        };
        assert_eq!(
            rendered(&config, case.property).as_deref(),
            expected,
            "{}",
            case.property
        );
    }
}

#[test]
fn typed_getters_return_the_defaults() {
    let c = ProducerConfig::builder()
        .bootstrap_servers("localhost:9092")
        .build()
        .unwrap();
    let ms = Duration::from_millis;
    assert_eq!(c.acks(), Acks::All);
    assert!(c.enable_idempotence());
    assert_eq!(c.linger(), ms(5));
    assert_eq!(c.batch_size(), 1_000_000);
    assert_eq!(c.sticky_partitioning_linger(), ms(10));
    assert_eq!(c.compression_type(), Compression::None);
    assert_eq!(c.max_request_size(), 1_048_576);
    assert_eq!(c.buffer_memory(), 33_554_432);
    assert_eq!(c.max_block(), ms(60_000));
    assert_eq!(c.delivery_timeout(), ms(120_000));
    assert_eq!(c.request_timeout(), ms(30_000));
    assert_eq!(c.retries(), i32::MAX as u32);
    assert_eq!(c.max_in_flight_requests_per_connection(), 5);
    assert!(!c.partitioner_ignore_keys());
    assert_eq!(c.metadata_max_idle(), ms(300_000));
    // The shared ones: the consumer's defaults.
    assert_eq!(c.bootstrap_servers()[0].port(), 9092);
    assert_eq!(c.client_id(), "lazykafka");
    assert_eq!(c.connections_max_idle(), Some(ms(540_000)));
    assert_eq!(c.metadata_max_age(), ms(300_000));
    assert_eq!(c.reconnect_backoff(), ms(50));
    assert_eq!(c.reconnect_backoff_max(), ms(1000));
    assert_eq!(c.retry_backoff(), ms(100));
    assert_eq!(c.retry_backoff_max(), ms(1000));
    assert_eq!(c.socket_connection_setup_timeout(), ms(10_000));
    assert_eq!(c.socket_connection_setup_timeout_max(), ms(30_000));
    assert!(c.socket_keepalive());
    assert_eq!(c.client_runtime(), crate::config::ClientRuntime::Auto);
    assert_eq!(c.security_protocol(), SecurityProtocol::Plaintext);
    assert_eq!(c.ssl_ca_location(), None);
    assert_eq!(c.sasl_mechanism(), None);
    let consumer = crate::config::ConsumerConfig::builder()
        .bootstrap_servers("localhost:9092")
        .build()
        .unwrap()
        .to_properties();
    for (k, v) in c.to_properties() {
        if common::PROPERTIES.contains(&k) {
            let theirs = consumer.iter().find(|(c, _)| *c == k).map(|(_, v)| v);
            assert_eq!(Some(&v), theirs, "{k}");
        }
    }
}

#[test]
fn every_property_parses() {
    let defaults = with(&[]).unwrap().to_properties();
    for case in cases() {
        let config = with(&[(case.property, case.valid)])
            .unwrap_or_else(|e| panic!("{}={:?}: {e}", case.property, case.valid));
        let expected = (!is_secret(case.property)).then_some(case.valid_rendered);
        assert_eq!(
            rendered(&config, case.property).as_deref(),
            expected,
            "{}",
            case.property
        );
        // Setting one property changes no other (the reconnect pair aside).
        for (k, v) in config.to_properties() {
            if k != case.property
                && !(k == "reconnect.backoff.max.ms" && case.property == "reconnect.backoff.ms")
            {
                let default = defaults.iter().find(|(d, _)| *d == k).map(|(_, v)| v);
                assert_eq!(Some(&v), default, "setting {} changed {k}", case.property);
            }
        }
        // And it reads back.
        let secrets: Vec<(&str, &str)> = is_secret(case.property)
            .then_some((case.property, case.valid))
            .into_iter()
            .collect();
        let again = ProducerConfig::from_properties(
            config
                .to_properties()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .chain(secrets.iter().map(|(k, v)| (k.to_string(), v.to_string()))),
        )
        .unwrap();
        assert_eq!(again, config, "{}", case.property);
    }
}

#[test]
fn every_invalid_value_is_an_error_naming_the_property() {
    for case in cases() {
        for (value, property, needles) in case.invalid {
            assert_config_error(with(&[(case.property, value)]), property, needles);
        }
    }
}

#[test]
fn transactional_id_is_refused_with_the_reason() {
    for value in ["tx-1", ""] {
        assert_config_error(
            with(&[("transactional.id", value)]),
            "transactional.id",
            &["transactions are not supported yet"],
        );
    }
    assert_eq!(rendered(&with(&[]).unwrap(), "transactional.id"), None);
}

#[test]
fn librdkafka_names_are_accepted() {
    let ms = Duration::from_millis;
    let c = with(&[
        ("queue.buffering.max.ms", "50"),
        ("compression.codec", "snappy"),
        ("message.timeout.ms", "300000"),
        ("request.required.acks", "-1"),
        ("queue.buffering.max.kbytes", "1024"),
        ("message.max.bytes", "2000000"),
        ("message.send.max.retries", "10"),
        ("sasl.mechanisms", "PLAIN"),
    ])
    .unwrap();
    assert_eq!(c.linger(), ms(50));
    assert_eq!(c.compression_type(), Compression::Snappy);
    assert_eq!(c.delivery_timeout(), ms(300_000));
    assert_eq!(c.acks(), Acks::All);
    assert_eq!(c.buffer_memory(), 1024 * 1024);
    assert_eq!(c.max_request_size(), 2_000_000);
    assert_eq!(c.retries(), 10);
    assert_eq!(c.sasl_mechanism(), Some(crate::sasl::Mechanism::Plain));
    // The same as the Java names, which to_properties renders.
    let java = with(&[
        ("linger.ms", "50"),
        ("compression.type", "snappy"),
        ("delivery.timeout.ms", "300000"),
        ("acks", "all"),
        ("buffer.memory", "1048576"),
        ("max.request.size", "2000000"),
        ("retries", "10"),
        ("sasl.mechanism", "PLAIN"),
    ])
    .unwrap();
    assert_eq!(c, java);
    let listed = c.to_properties();
    assert!(listed
        .iter()
        .all(|(k, _)| ProducerConfig::PROPERTIES.contains(k)));

    // request.required.acks=1 is acks=1: default idempotence goes off.
    let leader = with(&[("request.required.acks", "1")]).unwrap();
    assert_eq!(leader.acks(), Acks::Leader);
    assert!(!leader.enable_idempotence());

    // A syntax error names the property as given...
    assert_config_error(
        with(&[("compression.codec", "brotli")]),
        "compression.codec",
        &["\"brotli\""],
    );
    assert_config_error(
        with(&[("request.required.acks", "2")]),
        "request.required.acks",
        &["\"2\""],
    );
    assert_config_error(
        with(&[("queue.buffering.max.kbytes", "18014398509481984")]),
        "queue.buffering.max.kbytes",
        &["too large"],
    );
    // ...librdkafka's "no timeout" has no equivalent...
    assert_config_error(
        with(&[("message.timeout.ms", "0")]),
        "message.timeout.ms",
        &["\"0\"", "no timeout"],
    );
    // ...and a range error found by build names the Java property.
    assert_config_error(
        with(&[("message.timeout.ms", "1000")]),
        "delivery.timeout.ms",
        &["\"1000\"", "linger.ms + request.timeout.ms"],
    );
}

#[test]
fn explicit_idempotence_refuses_what_it_cannot_work_with() {
    let on = ("enable.idempotence", "true");
    for (property, value) in [
        ("acks", "1"),
        ("acks", "0"),
        ("retries", "0"),
        ("max.in.flight.requests.per.connection", "6"),
    ] {
        let quoted = format!("{value:?}");
        assert_config_error(
            with(&[on, (property, value)]),
            property,
            &[&quoted, "idempotent", "enable.idempotence"],
        );
    }
    // Java's order: retries, then acks, then requests in flight.
    assert_config_error(with(&[on, ("acks", "0"), ("retries", "0")]), "retries", &[]);
    // Typed, the same.
    let typed = ProducerConfig::builder()
        .bootstrap_servers("a:1")
        .enable_idempotence(true)
        .acks(Acks::Leader)
        .build();
    assert_config_error(typed, "acks", &["must be all"]);
    // Within its limits it is on.
    let c = with(&[on, ("max.in.flight.requests.per.connection", "5")]).unwrap();
    assert!(c.enable_idempotence());
}

#[test]
fn default_idempotence_gives_way_to_settings_against_it() {
    for (property, value) in [
        ("acks", "1"),
        ("acks", "0"),
        ("retries", "0"),
        ("max.in.flight.requests.per.connection", "6"),
    ] {
        let c = with(&[(property, value)]).unwrap_or_else(|e| panic!("{property}: {e}"));
        assert!(!c.enable_idempotence(), "{property}={value}");
        assert_eq!(rendered(&c, "enable.idempotence").as_deref(), Some("false"));
        assert_eq!(rendered(&c, property).as_deref(), Some(value));
        // It reads back equal: the rendered false is explicit.
        assert_eq!(
            ProducerConfig::from_properties(c.to_properties()).unwrap(),
            c
        );
    }
    // Turned off explicitly, anything goes.
    let c = with(&[
        ("enable.idempotence", "false"),
        ("acks", "0"),
        ("retries", "0"),
    ])
    .unwrap();
    assert!(!c.enable_idempotence());
    assert_eq!(c.acks(), Acks::None);
}

#[test]
fn delivery_timeout_covers_linger_and_a_request() {
    let ms = Duration::from_millis;
    // Left at its default, it is raised (Java's KafkaProducer does it).
    let c = with(&[("request.timeout.ms", "200000")]).unwrap();
    assert_eq!(c.delivery_timeout(), ms(200_005));
    assert_eq!(
        ProducerConfig::from_properties(c.to_properties()).unwrap(),
        c
    );
    // Set, it must be large enough.
    assert_config_error(
        with(&[
            ("request.timeout.ms", "200000"),
            ("delivery.timeout.ms", "120000"),
        ]),
        "delivery.timeout.ms",
        &["\"120000\"", "(5 + 200000)"],
    );
    with(&[("linger.ms", "0"), ("delivery.timeout.ms", "30000")]).unwrap();
    // linger.ms beyond an int is taken as one, as Java does.
    let c = with(&[("linger.ms", "9223372036854775807")]).unwrap();
    assert_eq!(c.linger(), ms(i32::MAX as u64));
    assert_eq!(c.delivery_timeout(), ms(i32::MAX as u64));
    assert_eq!(
        ProducerConfig::from_properties(c.to_properties()).unwrap(),
        c
    );
    assert_config_error(
        with(&[
            ("linger.ms", "9223372036854775807"),
            ("delivery.timeout.ms", "120000"),
        ]),
        "delivery.timeout.ms",
        &["(2147483647 + 30000)"],
    );
}

/// One property map for both clients: the consumer's properties (Java
/// and librdkafka names) are accepted by the producer and change nothing
/// (a `warn` line names each); a misspelt one is still refused.
#[test]
fn the_consumers_properties_are_ignored() {
    let plain = with(&[]).unwrap();
    for (property, value) in [
        ("group.id", "g"),
        ("fetch.max.bytes", "1000"),
        ("session.timeout.ms", "10000"),
        ("auto.offset.reset", "earliest"),
        ("fetch.wait.max.ms", "100"),
        ("enable.auto.commit", "false"),
    ] {
        assert_eq!(with(&[(property, value)]).unwrap(), plain, "{property}");
    }
    assert_config_error(
        with(&[("group.idd", "g")]),
        "group.idd",
        &["unknown property"],
    );
}

#[test]
fn unknown_properties_are_errors_with_hints() {
    let cases: &[(&str, &str)] = &[
        ("linger.m", "did you mean \"linger.ms\"?"),
        ("bacth.size", "did you mean \"batch.size\"?"),
        ("enable.idempotance", "did you mean \"enable.idempotence\"?"),
        ("Acks", "did you mean \"acks\"?"),
        ("retry", "did you mean \"retries\"?"),
        ("key.serializer", "as bytes"),
        ("value.serializer", "as bytes"),
        ("transaction.timeout.ms", "transactions are not supported"),
        ("compression.zstd.level", "not configurable"),
        ("partitioner.class", "Partitioner"),
        ("ssl.truststore.location", "PEM files"),
        ("sasl.kerberos.service.name", "Kerberos"),
    ];
    for (property, hint) in cases {
        assert_config_error(with(&[(property, "1")]), property, &[hint]);
    }
    match with(&[("completely.different", "x")]) {
        Err(Error::Config { reason, .. }) => assert_eq!(reason, "unknown property"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn typed_setters_match_the_properties() {
    let ms = Duration::from_millis;
    let typed = ProducerConfig::builder()
        .bootstrap_servers("a:1,b:2")
        .client_id("c")
        .acks(Acks::None)
        .enable_idempotence(false)
        .linger(ms(1))
        .batch_size(2)
        .compression_type(Compression::Gzip)
        .max_request_size(3)
        .buffer_memory(4)
        .max_block(ms(5))
        .delivery_timeout(ms(60_000))
        .request_timeout(ms(7))
        .retries(8)
        .max_in_flight_requests_per_connection(9)
        .partitioner_ignore_keys(true)
        .metadata_max_idle(ms(10_000))
        .metadata_max_age(ms(11))
        .connections_max_idle(None)
        .reconnect_backoff(ms(12))
        .reconnect_backoff_max(ms(13))
        .socket_connection_setup_timeout(ms(14))
        .socket_connection_setup_timeout_max(ms(15))
        .socket_keepalive(false)
        .retry_backoff(ms(16))
        .retry_backoff_max(ms(170))
        .client_runtime(crate::config::ClientRuntime::Tokio)
        .security_protocol(SecurityProtocol::SaslSsl)
        .ssl_ca_location("/ca")
        .ssl_certificate_pem("cert")
        .ssl_key_pem("key")
        .ssl_key_password("pw")
        .ssl_endpoint_identification_algorithm(crate::config::EndpointIdentification::None)
        .enable_ssl_certificate_verification(false)
        .sasl_mechanism(crate::sasl::Mechanism::ScramSha512)
        .sasl_username("alice")
        .sasl_password("alice-secret")
        .sasl_oauthbearer_config("principal=p")
        .enable_sasl_oauthbearer_unsecure_jwt(false)
        .build()
        .unwrap();
    let from_properties = ProducerConfig::from_properties([
        ("bootstrap.servers", "a:1,b:2"),
        ("client.id", "c"),
        ("acks", "0"),
        ("enable.idempotence", "false"),
        ("linger.ms", "1"),
        ("batch.size", "2"),
        ("compression.type", "gzip"),
        ("max.request.size", "3"),
        ("buffer.memory", "4"),
        ("max.block.ms", "5"),
        ("delivery.timeout.ms", "60000"),
        ("request.timeout.ms", "7"),
        ("retries", "8"),
        ("max.in.flight.requests.per.connection", "9"),
        ("partitioner.ignore.keys", "true"),
        ("metadata.max.idle.ms", "10000"),
        ("metadata.max.age.ms", "11"),
        ("connections.max.idle.ms", "-1"),
        ("reconnect.backoff.ms", "12"),
        ("reconnect.backoff.max.ms", "13"),
        ("socket.connection.setup.timeout.ms", "14"),
        ("socket.connection.setup.timeout.max.ms", "15"),
        ("socket.keepalive.enable", "false"),
        ("retry.backoff.ms", "16"),
        ("retry.backoff.max.ms", "170"),
        ("client.runtime", "tokio"),
        ("security.protocol", "SASL_SSL"),
        ("ssl.ca.location", "/ca"),
        ("ssl.certificate.pem", "cert"),
        ("ssl.key.pem", "key"),
        ("ssl.key.password", "pw"),
        ("ssl.endpoint.identification.algorithm", "none"),
        ("enable.ssl.certificate.verification", "false"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.username", "alice"),
        ("sasl.password", "alice-secret"),
        ("sasl.oauthbearer.config", "principal=p"),
        ("enable.sasl.oauthbearer.unsecure.jwt", "false"),
    ])
    .unwrap();
    assert_eq!(typed, from_properties);
    assert_eq!(typed.acks(), Acks::None);
    assert_eq!(typed.buffer_memory(), 4);
    // And back again, with the secrets added as an application adds them.
    let secrets = [
        ("ssl.key.pem", "key".to_owned()),
        ("ssl.key.password", "pw".to_owned()),
        ("sasl.password", "alice-secret".to_owned()),
    ];
    assert_eq!(
        ProducerConfig::from_properties(typed.to_properties().into_iter().chain(secrets)).unwrap(),
        typed
    );
    assert_config_error(
        ProducerConfig::builder()
            .bootstrap_servers("a:1")
            .buffer_memory(u64::MAX)
            .build(),
        "buffer.memory",
        &["at most 9223372036854775807"],
    );
}

#[test]
fn shared_rules_hold_for_the_producer() {
    assert_config_error(
        ProducerConfig::builder().build(),
        "bootstrap.servers",
        &["required"],
    );
    // Security: the consumer's checks, with this builder named in advice.
    let oauth = with(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "OAUTHBEARER"),
    ]);
    assert_config_error(
        oauth,
        "sasl.mechanism",
        &["ProducerConfigBuilder::oauthbearer_token_provider"],
    );
    assert_config_error(
        with(&[("ssl.ca.location", "/x"), ("ssl.ca.pem", "-----BEGIN-----")]),
        "ssl.ca.pem",
        &["ssl.ca.location", "only one"],
    );
    let c = with(&[("reconnect.backoff.ms", "200")]).unwrap();
    assert_eq!(c.reconnect_backoff_max(), Duration::from_millis(200));
}

#[test]
fn secrets_are_never_shown() {
    const PASSWORD: &str = "hunter2-password";
    let builder = ProducerConfig::builder()
        .bootstrap_servers("a:1")
        .security_protocol(SecurityProtocol::SaslSsl)
        .sasl_mechanism(crate::sasl::Mechanism::Plain)
        .sasl_username("alice")
        .sasl_password(PASSWORD)
        .ssl_key_password(PASSWORD);
    let config = builder.clone().build().unwrap();
    assert_eq!(config.sasl_password().unwrap().expose(), PASSWORD);
    assert_eq!(config.ssl_key_password(), Some(PASSWORD));
    for text in [
        format!("{builder:?}"),
        format!("{config:#?}"),
        format!("{:?}", config.to_properties()),
    ] {
        assert!(!text.contains(PASSWORD), "the password shows in {text}");
    }
}

#[test]
fn serde_from_json() {
    let json = r#"{
        "bootstrap.servers": ["kafka-1:9092", "kafka-2:9092"],
        "acks": 1,
        "linger.ms": 20.0,
        "compression.type": "lz4",
        "partitioner.ignore.keys": true,
        "transactional.id": null
    }"#;
    let c: ProducerConfig = serde_json::from_str(json).unwrap();
    assert_eq!(c.bootstrap_servers().len(), 2);
    assert_eq!(c.acks(), Acks::Leader);
    assert!(!c.enable_idempotence());
    assert_eq!(c.linger(), Duration::from_millis(20));
    assert_eq!(c.compression_type(), Compression::Lz4);
    assert!(c.partitioner_ignore_keys());
    let err = serde_json::from_str::<ProducerConfig>(
        r#"{"bootstrap.servers": "a:1", "enable.idempotence": true, "acks": 0}"#,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("acks: invalid value \"0\""),
        "{err}"
    );
    // to_properties as JSON reads back.
    let map: BTreeMap<_, _> = c.to_properties().into_iter().collect();
    let again: ProducerConfig = serde_json::from_value(serde_json::to_value(map).unwrap()).unwrap();
    assert_eq!(again, c);
}

#[test]
fn enum_values_round_trip() {
    for a in [Acks::None, Acks::Leader, Acks::All] {
        assert_eq!(a.as_str().parse::<Acks>().unwrap(), a);
        assert_eq!(a.to_string().parse::<Acks>().unwrap(), a);
    }
    assert_eq!(" ALL ".parse::<Acks>().unwrap(), Acks::All);
    assert_eq!(Acks::default(), Acks::All);
    for c in Compression::ALL {
        assert_eq!(c.name().parse::<Compression>().unwrap(), c);
        assert_eq!(
            c.to_string().to_uppercase().parse::<Compression>().unwrap(),
            c
        );
        // Every codec is built here (the tests run with every feature).
        let config = with(&[("compression.type", c.name())]).unwrap();
        assert_eq!(config.compression_type(), c);
    }
}

mod round_trip {
    use super::*;
    use proptest::prelude::*;

    fn arb_config() -> impl Strategy<Value = ProducerConfig> {
        (
            (
                proptest::option::of(any::<bool>()),
                proptest::sample::select(vec![Acks::None, Acks::Leader, Acks::All]),
                0u64..1_000_000,
                0u32..=i32::MAX as u32,
                proptest::sample::select(Compression::ALL.to_vec()),
            ),
            (
                proptest::option::of(0u64..=i32::MAX as u64),
                0u64..100_000,
                0u32..10,
                1u32..10,
                5_000u64..10_000_000,
            ),
        )
            .prop_filter_map(
                "invalid combination",
                |(
                    (idempotence, acks, linger, batch, compression),
                    (delivery, request, retries, in_flight, idle),
                )| {
                    let mut b = ProducerConfig::builder()
                        .bootstrap_servers("a:1")
                        .acks(acks)
                        .linger(Duration::from_millis(linger))
                        .batch_size(batch)
                        .compression_type(compression)
                        .request_timeout(Duration::from_millis(request))
                        .retries(retries)
                        .max_in_flight_requests_per_connection(in_flight)
                        .metadata_max_idle(Duration::from_millis(idle));
                    if let Some(enable) = idempotence {
                        b = b.enable_idempotence(enable);
                    }
                    if let Some(ms) = delivery {
                        b = b.delivery_timeout(Duration::from_millis(ms));
                    }
                    b.build().ok()
                },
            )
    }

    proptest! {
        #[test]
        fn to_properties_reads_back_equal(config in arb_config()) {
            let again = ProducerConfig::from_properties(config.to_properties()).unwrap();
            prop_assert_eq!(&again, &config);
        }

        #[test]
        fn arbitrary_properties_never_panic(
            key in proptest::sample::select(ProducerConfig::PROPERTIES.to_vec()),
            value in ".{0,24}",
        ) {
            let _ = with(&[(key, &value)]);
        }
    }
}

/// The shared librdkafka names work for a producer too (with
/// `statistics.interval.ms`); the consumer's partition EOF does not.
#[test]
fn librdkafka_names_are_read_by_a_producer() {
    let by_alias = with(&[("socket.timeout.ms", "23456"), ("debug", "msg")]).unwrap();
    assert_eq!(
        rendered(&by_alias, "request.timeout.ms").as_deref(),
        Some("23456")
    );
    // librdkafka's statistics interval is the producer's too, with the
    // consumer's limits.
    let every = with(&[("statistics.interval.ms", "500")]).unwrap();
    assert_eq!(
        every.statistics_interval(),
        Some(Duration::from_millis(500))
    );
    assert_eq!(with(&[]).unwrap().statistics_interval(), None);
    assert_config_error(
        with(&[("statistics.interval.ms", "86400001")]),
        "statistics.interval.ms",
        &["at most 86400000"],
    );
    // A consumer property: ignored (one map for both clients).
    assert!(with(&[("enable.partition.eof", "false")]).is_ok());
    // A bad value under librdkafka's name is named as written.
    assert_config_error(
        with(&[("socket.timeout.ms", "soon")]),
        "socket.timeout.ms",
        &["read as request.timeout.ms"],
    );
}
