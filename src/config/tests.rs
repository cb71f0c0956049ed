use super::*;
use crate::config::{EndpointIdentification, SecurityProtocol};
use std::collections::HashMap;
use std::time::Duration;

const BASE: [(&str, &str); 2] = [("bootstrap.servers", "localhost:9092"), ("group.id", "g")];

fn with(extra: &[(&str, &str)]) -> Result<ConsumerConfig, Error> {
    ConsumerConfig::from_properties(BASE.iter().chain(extra).copied())
}

fn rendered(config: &ConsumerConfig, property: &str) -> Option<String> {
    config
        .to_properties()
        .into_iter()
        .find(|(k, _)| *k == property)
        .map(|(_, v)| v)
}

#[track_caller]
fn assert_config_error(result: Result<ConsumerConfig, Error>, property: &str, needles: &[&str]) {
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

/// One row per property: its default as `to_properties` renders it, a valid
/// input and how it renders, and an invalid input with the property the
/// error names and words the reason must contain.
struct Case {
    property: &'static str,
    default: Option<&'static str>,
    valid: &'static str,
    valid_rendered: &'static str,
    invalid: &'static [(&'static str, &'static str, &'static [&'static str])],
}

const CASES: &[Case] = &[
    Case {
        property: "bootstrap.servers",
        default: Some("localhost:9092"), // from BASE
        valid: " a:1, [::1]:2,,PLAINTEXT://b.example.com:3,SSL://c:4 ",
        valid_rendered: "a:1,[::1]:2,b.example.com:3,c:4",
        invalid: &[
            ("kafka", "bootstrap.servers", &["\"kafka\"", "host:port"]),
            (" , ", "bootstrap.servers", &["no broker address"]),
            ("a:0", "bootstrap.servers", &["\"a:0\"", "port"]),
            ("a:99999", "bootstrap.servers", &["port"]),
            ("a:x", "bootstrap.servers", &["port"]),
            (":9092", "bootstrap.servers", &["host is empty"]),
            ("[::1:9092", "bootstrap.servers", &["unclosed"]),
            ("a b:9092", "bootstrap.servers", &["characters"]),
            ("http://a:9092", "bootstrap.servers", &["security protocol"]),
        ],
    },
    Case {
        property: "group.id",
        default: Some("g"), // from BASE
        valid: "billing",
        valid_rendered: "billing",
        invalid: &[("", "group.id", &["must not be empty"])],
    },
    Case {
        property: "group.instance.id",
        default: None,
        valid: "pod-1.zone_a",
        valid_rendered: "pod-1.zone_a",
        invalid: &[
            ("pod 1", "group.instance.id", &["\"pod 1\"", "letters"]),
            ("", "group.instance.id", &["must not be empty"]),
        ],
    },
    Case {
        property: "group.protocol",
        default: Some("classic"),
        valid: " CONSUMER ",
        valid_rendered: "consumer",
        invalid: &[(
            "eager",
            "group.protocol",
            &["\"eager\"", "expected classic or consumer"],
        )],
    },
    Case {
        // Valid only with group.protocol=consumer, which
        // `every_property_parses` adds for it.
        property: "group.remote.assignor",
        default: None,
        valid: "Uniform",
        valid_rendered: "uniform",
        invalid: &[
            (
                "sticky",
                "group.remote.assignor",
                &["\"sticky\"", "expected uniform or range"],
            ),
            (
                "range",
                "group.remote.assignor",
                &["not supported with group.protocol=classic"],
            ),
        ],
    },
    Case {
        property: "client.id",
        default: Some("lazykafka"),
        valid: " billing-app ",
        valid_rendered: "billing-app",
        invalid: &[],
    },
    Case {
        property: "client.rack",
        default: None,
        valid: "eu-west-1a",
        valid_rendered: "eu-west-1a",
        invalid: &[],
    },
    Case {
        property: "auto.offset.reset",
        default: Some("latest"),
        valid: "EARLIEST",
        valid_rendered: "earliest",
        invalid: &[("oldest", "auto.offset.reset", &["\"oldest\"", "earliest"])],
    },
    Case {
        property: "enable.auto.commit",
        default: Some("true"),
        valid: "False",
        valid_rendered: "false",
        invalid: &[("yes", "enable.auto.commit", &["\"yes\"", "true or false"])],
    },
    Case {
        property: "auto.commit.interval.ms",
        default: Some("5000"),
        valid: "0",
        valid_rendered: "0",
        invalid: &[
            ("-1", "auto.commit.interval.ms", &["\"-1\"", "negative"]),
            (
                "2147483648",
                "auto.commit.interval.ms",
                &["at most 2147483647"],
            ),
        ],
    },
    Case {
        property: "enable.auto.offset.store",
        default: Some("true"),
        valid: "FALSE",
        valid_rendered: "false",
        invalid: &[("0", "enable.auto.offset.store", &["\"0\"", "true or false"])],
    },
    Case {
        property: "isolation.level",
        default: Some("read_uncommitted"),
        valid: "read_committed",
        valid_rendered: "read_committed",
        invalid: &[("serializable", "isolation.level", &["\"serializable\""])],
    },
    Case {
        property: "fetch.min.bytes",
        default: Some("1"),
        valid: "0",
        valid_rendered: "0",
        invalid: &[
            ("1kb", "fetch.min.bytes", &["\"1kb\"", "not an integer"]),
            (
                "52428801",
                "fetch.min.bytes",
                &["fetch.max.bytes (52428800)"],
            ),
        ],
    },
    Case {
        property: "fetch.max.wait.ms",
        default: Some("500"),
        valid: "100",
        valid_rendered: "100",
        invalid: &[("0.5", "fetch.max.wait.ms", &["\"0.5\"", "not an integer"])],
    },
    Case {
        property: "fetch.max.bytes",
        default: Some("52428800"),
        valid: "1000",
        valid_rendered: "1000",
        invalid: &[
            ("2147483648", "fetch.max.bytes", &["at most 2147483647"]),
            ("0", "fetch.min.bytes", &["fetch.max.bytes (0)"]),
        ],
    },
    Case {
        property: "max.partition.fetch.bytes",
        default: Some("1048576"),
        valid: "2048",
        valid_rendered: "2048",
        invalid: &[("-3", "max.partition.fetch.bytes", &["\"-3\"", "negative"])],
    },
    Case {
        property: "max.poll.records",
        default: Some("500"),
        valid: "1",
        valid_rendered: "1",
        invalid: &[("0", "max.poll.records", &["\"0\"", "at least 1"])],
    },
    Case {
        property: "session.timeout.ms",
        default: Some("45000"),
        valid: "6000",
        valid_rendered: "6000",
        invalid: &[
            ("2147483648", "session.timeout.ms", &["at most 2147483647"]),
            ("0", "session.timeout.ms", &["at least 1"]),
            // Lower than the default heartbeat interval.
            (
                "3000",
                "heartbeat.interval.ms",
                &["session.timeout.ms (3000)"],
            ),
        ],
    },
    Case {
        property: "heartbeat.interval.ms",
        default: Some("3000"),
        valid: "1000",
        valid_rendered: "1000",
        invalid: &[
            (
                "45000",
                "heartbeat.interval.ms",
                &["\"45000\"", "lower than session.timeout.ms (45000)"],
            ),
            ("0", "heartbeat.interval.ms", &["at least 1"]),
        ],
    },
    Case {
        property: "max.poll.interval.ms",
        default: Some("300000"),
        valid: "1000",
        valid_rendered: "1000",
        invalid: &[("0", "max.poll.interval.ms", &["\"0\"", "at least 1"])],
    },
    Case {
        property: "partition.assignment.strategy",
        default: Some("range,cooperative-sticky"),
        valid: "org.apache.kafka.clients.consumer.RoundRobinAssignor , cooperative-sticky",
        valid_rendered: "roundrobin,cooperative-sticky",
        invalid: &[
            (
                "sticky",
                "partition.assignment.strategy",
                &["cooperative-sticky"],
            ),
            (
                "range,fancy",
                "partition.assignment.strategy",
                &["\"range,fancy\"", "unknown assignor \"fancy\""],
            ),
            ("range,range", "partition.assignment.strategy", &["twice"]),
            (" ", "partition.assignment.strategy", &["at least one"]),
        ],
    },
    Case {
        property: "connections.max.idle.ms",
        default: Some("540000"),
        valid: "-1",
        valid_rendered: "-1",
        invalid: &[
            ("-2", "connections.max.idle.ms", &["\"-2\"", "-1"]),
            ("0", "connections.max.idle.ms", &["\"0\"", "-1"]),
            ("never", "connections.max.idle.ms", &["\"never\""]),
        ],
    },
    Case {
        property: "request.timeout.ms",
        default: Some("30000"),
        valid: "5000",
        valid_rendered: "5000",
        invalid: &[("30s", "request.timeout.ms", &["\"30s\"", "not an integer"])],
    },
    Case {
        property: "default.api.timeout.ms",
        default: Some("60000"),
        valid: "5000",
        valid_rendered: "5000",
        invalid: &[("-5", "default.api.timeout.ms", &["\"-5\"", "negative"])],
    },
    Case {
        property: "metadata.max.age.ms",
        default: Some("300000"),
        valid: "9223372036854775807",
        valid_rendered: "9223372036854775807",
        invalid: &[("-1", "metadata.max.age.ms", &["\"-1\"", "negative"])],
    },
    Case {
        property: "metadata.recovery.strategy",
        default: Some("rebootstrap"),
        valid: "NONE",
        valid_rendered: "none",
        invalid: &[(
            "sometimes",
            "metadata.recovery.strategy",
            &["\"sometimes\"", "rebootstrap", "none"],
        )],
    },
    Case {
        property: "metadata.recovery.rebootstrap.trigger.ms",
        default: Some("300000"),
        valid: "60000",
        valid_rendered: "60000",
        invalid: &[(
            "-1",
            "metadata.recovery.rebootstrap.trigger.ms",
            &["\"-1\"", "negative"],
        )],
    },
    Case {
        property: "topic.metadata.propagation.max.ms",
        default: Some("5000"),
        valid: "30000",
        valid_rendered: "30000",
        invalid: &[(
            "2147483648",
            "topic.metadata.propagation.max.ms",
            &["\"2147483648\""],
        )],
    },
    Case {
        property: "reconnect.backoff.ms",
        default: Some("50"),
        valid: "200",
        valid_rendered: "200",
        invalid: &[("fast", "reconnect.backoff.ms", &["\"fast\""])],
    },
    Case {
        property: "reconnect.backoff.max.ms",
        default: Some("1000"),
        valid: "5000",
        valid_rendered: "5000",
        invalid: &[(
            "10",
            "reconnect.backoff.max.ms",
            &["\"10\"", "reconnect.backoff.ms (50)"],
        )],
    },
    Case {
        property: "socket.connection.setup.timeout.ms",
        default: Some("10000"),
        valid: "5000",
        valid_rendered: "5000",
        invalid: &[
            ("0", "socket.connection.setup.timeout.ms", &["at least 1"]),
            (
                "40000",
                "socket.connection.setup.timeout.max.ms",
                &["socket.connection.setup.timeout.ms (40000)"],
            ),
        ],
    },
    Case {
        property: "socket.connection.setup.timeout.max.ms",
        default: Some("30000"),
        valid: "60000",
        valid_rendered: "60000",
        invalid: &[(
            "1000",
            "socket.connection.setup.timeout.max.ms",
            &["\"1000\"", "socket.connection.setup.timeout.ms (10000)"],
        )],
    },
    Case {
        property: "socket.keepalive.enable",
        default: Some("true"),
        valid: "false",
        valid_rendered: "false",
        invalid: &[("1", "socket.keepalive.enable", &["\"1\"", "true or false"])],
    },
    Case {
        property: "retry.backoff.ms",
        default: Some("100"),
        valid: "0",
        valid_rendered: "0",
        invalid: &[("-100", "retry.backoff.ms", &["\"-100\""])],
    },
    Case {
        property: "retry.backoff.max.ms",
        default: Some("1000"),
        valid: "5000",
        valid_rendered: "5000",
        invalid: &[("-1", "retry.backoff.max.ms", &["\"-1\""])],
    },
    Case {
        property: "max.in.flight.requests.per.connection",
        default: Some("5"),
        valid: "1",
        valid_rendered: "1",
        invalid: &[(
            "0",
            "max.in.flight.requests.per.connection",
            &["\"0\"", "at least 1"],
        )],
    },
    Case {
        property: "check.crcs",
        default: Some("true"),
        valid: "FALSE",
        valid_rendered: "false",
        invalid: &[("no", "check.crcs", &["\"no\""])],
    },
    Case {
        property: "enable.partition.eof",
        default: Some("false"),
        valid: "TRUE",
        valid_rendered: "true",
        invalid: &[("1", "enable.partition.eof", &["\"1\""])],
    },
    Case {
        property: "statistics.interval.ms",
        default: Some("0"),
        valid: "5000",
        valid_rendered: "5000",
        invalid: &[
            ("-1", "statistics.interval.ms", &["\"-1\""]),
            ("86400001", "statistics.interval.ms", &["at most 86400000"]),
        ],
    },
    Case {
        property: "fetch.sessions.enable",
        default: Some("true"),
        valid: "false",
        valid_rendered: "false",
        invalid: &[("off", "fetch.sessions.enable", &["\"off\""])],
    },
    Case {
        property: "allow.auto.create.topics",
        default: Some("true"),
        valid: "false",
        valid_rendered: "false",
        invalid: &[("maybe", "allow.auto.create.topics", &["\"maybe\""])],
    },
    Case {
        property: "exclude.internal.topics",
        default: Some("true"),
        valid: "false",
        valid_rendered: "false",
        invalid: &[("", "exclude.internal.topics", &["\"\""])],
    },
    Case {
        property: "receive.message.max.bytes",
        default: Some("104857600"),
        valid: "60000000",
        valid_rendered: "60000000",
        invalid: &[
            (
                "999",
                "receive.message.max.bytes",
                &["\"999\"", "from 1000"],
            ),
            (
                "1000000",
                "receive.message.max.bytes",
                &["\"1000000\"", "fetch.max.bytes (52428800) + 512"],
            ),
        ],
    },
    Case {
        property: "client.dns.lookup",
        default: Some("use_all_dns_ips"),
        valid: "USE_ALL_DNS_IPS",
        valid_rendered: "use_all_dns_ips",
        invalid: &[(
            "resolve_canonical_bootstrap_servers_only",
            "client.dns.lookup",
            &["only use_all_dns_ips"],
        )],
    },
    Case {
        property: "client.runtime",
        default: Some("auto"),
        valid: " Async-Std ",
        valid_rendered: "async-std",
        invalid: &[(
            "async_std",
            "client.runtime",
            &["\"async_std\"", "auto, tokio or async-std"],
        )],
    },
    Case {
        property: "security.protocol",
        default: Some("PLAINTEXT"),
        valid: "ssl",
        valid_rendered: "SSL",
        invalid: &[
            (
                "TLS",
                "security.protocol",
                &["\"TLS\"", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"],
            ),
            // SASL needs a mechanism (and credentials): see sasl_* below.
            ("sasl_plaintext", "sasl.mechanism", &["required", "GSSAPI"]),
        ],
    },
    Case {
        property: "ssl.ca.location",
        default: None,
        valid: " /etc/kafka/ca.pem ",
        valid_rendered: "/etc/kafka/ca.pem",
        invalid: &[],
    },
    Case {
        property: "ssl.ca.pem",
        default: None,
        valid: "-----BEGIN CERTIFICATE-----",
        valid_rendered: "-----BEGIN CERTIFICATE-----",
        invalid: &[],
    },
    Case {
        property: "ssl.certificate.location",
        default: None,
        valid: "/etc/kafka/client.pem",
        valid_rendered: "/etc/kafka/client.pem",
        invalid: &[],
    },
    Case {
        property: "ssl.certificate.pem",
        default: None,
        valid: "-----BEGIN CERTIFICATE-----",
        valid_rendered: "-----BEGIN CERTIFICATE-----",
        invalid: &[],
    },
    Case {
        property: "ssl.key.location",
        default: None,
        valid: "/etc/kafka/client.key",
        valid_rendered: "/etc/kafka/client.key",
        invalid: &[],
    },
    // The two secrets are never rendered (`valid_rendered` is unused).
    Case {
        property: "ssl.key.pem",
        default: None,
        valid: "-----BEGIN PRIVATE KEY-----",
        valid_rendered: "",
        invalid: &[],
    },
    Case {
        property: "ssl.key.password",
        default: None,
        valid: "s3cret",
        valid_rendered: "",
        invalid: &[],
    },
    Case {
        property: "ssl.endpoint.identification.algorithm",
        default: Some("https"),
        valid: "NONE",
        valid_rendered: "none",
        invalid: &[(
            "http",
            "ssl.endpoint.identification.algorithm",
            &["\"http\"", "https or none"],
        )],
    },
    Case {
        property: "enable.ssl.certificate.verification",
        default: Some("true"),
        valid: "false",
        valid_rendered: "false",
        invalid: &[(
            "no",
            "enable.ssl.certificate.verification",
            &["true or false"],
        )],
    },
    Case {
        property: "sasl.mechanism",
        default: None,
        // Ignored without a SASL security.protocol, as Java does, but kept.
        valid: "scram-sha-512",
        valid_rendered: "SCRAM-SHA-512",
        invalid: &[
            ("GSSAPI", "sasl.mechanism", &["\"GSSAPI\"", "Kerberos"]),
            ("MD5", "sasl.mechanism", &["\"MD5\"", "SCRAM-SHA-256"]),
        ],
    },
    Case {
        property: "sasl.username",
        default: None,
        valid: " alice ",
        valid_rendered: "alice",
        invalid: &[],
    },
    Case {
        property: "sasl.password",
        default: None,
        valid: "hunter2",
        valid_rendered: "",
        invalid: &[],
    },
    Case {
        property: "sasl.oauthbearer.config",
        default: None,
        valid: " principal=admin lifeSeconds=60 ",
        valid_rendered: "principal=admin lifeSeconds=60",
        invalid: &[
            (
                "principal",
                "sasl.oauthbearer.config",
                &["\"principal\"", "key=value"],
            ),
            ("lifeSeconds=-1", "sasl.oauthbearer.config", &["positive"]),
        ],
    },
    Case {
        property: "enable.sasl.oauthbearer.unsecure.jwt",
        default: Some("false"),
        valid: "TRUE",
        valid_rendered: "true",
        invalid: &[(
            "yes",
            "enable.sasl.oauthbearer.unsecure.jwt",
            &["true or false"],
        )],
    },
];

fn is_secret(property: &str) -> bool {
    ConsumerConfig::SECRET_PROPERTIES.contains(&property)
}

#[test]
fn the_table_covers_every_property() {
    let covered: Vec<&str> = CASES.iter().map(|c| c.property).collect();
    assert_eq!(covered, ConsumerConfig::PROPERTIES);
    // Every property but the secrets is rendered, in the table's order:
    // the files from one configuration, the PEM texts (which exclude the
    // files) from another.
    let keys = |extra: &[(&str, &str)]| -> Vec<&'static str> {
        with(extra)
            .unwrap()
            .to_properties()
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    };
    let common = [
        ("group.instance.id", "i"),
        ("client.rack", "r"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "u"),
        ("sasl.password", "p"),
        ("sasl.oauthbearer.config", "principal=p"),
    ];
    let files = keys(
        &[
            &common[..],
            &[
                ("ssl.ca.location", "a"),
                ("ssl.certificate.location", "b"),
                ("ssl.key.location", "c"),
                ("ssl.key.password", "d"),
            ],
        ]
        .concat(),
    );
    let pems = keys(
        &[
            &common[..],
            &[
                ("ssl.ca.pem", "a"),
                ("ssl.certificate.pem", "b"),
                ("ssl.key.pem", "c"),
                ("ssl.key.password", "d"),
            ],
        ]
        .concat(),
    );
    let expected = |skip: &[&str]| -> Vec<&str> {
        ConsumerConfig::PROPERTIES
            .iter()
            .copied()
            .filter(|p| !is_secret(p) && !skip.contains(p) && *p != "group.remote.assignor")
            .collect()
    };
    // Under group.protocol=consumer the classic-only properties are left
    // out (setting them there is an error) and the remote assignor is in.
    let consumer = keys(
        &[
            &common[..],
            &[
                ("ssl.ca.location", "a"),
                ("ssl.certificate.location", "b"),
                ("ssl.key.location", "c"),
                ("group.protocol", "consumer"),
                ("group.remote.assignor", "range"),
            ],
        ]
        .concat(),
    );
    let consumer_expected: Vec<&str> = ConsumerConfig::PROPERTIES
        .iter()
        .copied()
        .filter(|p| {
            !is_secret(p)
                && ![
                    "ssl.ca.pem",
                    "ssl.certificate.pem",
                    "session.timeout.ms",
                    "heartbeat.interval.ms",
                    "partition.assignment.strategy",
                ]
                .contains(p)
        })
        .collect();
    assert_eq!(consumer, consumer_expected, "under group.protocol=consumer");
    assert_eq!(
        files,
        expected(&["ssl.ca.pem", "ssl.certificate.pem"]),
        "with files"
    );
    assert_eq!(
        pems,
        expected(&[
            "ssl.ca.location",
            "ssl.certificate.location",
            "ssl.key.location"
        ]),
        "with PEM texts"
    );
}

#[test]
fn the_shared_properties_are_consumer_properties() {
    for property in common::PROPERTIES {
        assert!(ConsumerConfig::PROPERTIES.contains(property), "{property}");
    }
    assert_eq!(ConsumerConfig::SECRET_PROPERTIES, common::SECRET_PROPERTIES);
}

#[test]
fn every_property_has_its_default() {
    let config = with(&[]).unwrap();
    for case in CASES {
        assert_eq!(
            rendered(&config, case.property).as_deref(),
            case.default,
            "{}",
            case.property
        );
    }
}

#[test]
fn every_property_parses() {
    for case in CASES {
        let needs: &[(&str, &str)] = if case.property == "group.remote.assignor" {
            &[("group.protocol", "consumer")]
        } else {
            &[]
        };
        let config = with(&[needs, &[(case.property, case.valid)]].concat())
            .unwrap_or_else(|e| panic!("{}={:?}: {e}", case.property, case.valid));
        let expected = (!is_secret(case.property)).then_some(case.valid_rendered);
        assert_eq!(
            rendered(&config, case.property).as_deref(),
            expected,
            "{}",
            case.property
        );
        // Setting one property changes no other (the reconnect pair aside).
        let defaults = with(&[]).unwrap().to_properties();
        for (k, v) in config.to_properties() {
            if k != case.property
                && !needs.iter().any(|(n, _)| *n == k)
                && !(k == "reconnect.backoff.max.ms" && case.property == "reconnect.backoff.ms")
            {
                let default = defaults.iter().find(|(d, _)| *d == k).map(|(_, v)| v);
                assert_eq!(Some(&v), default, "setting {} changed {k}", case.property);
            }
        }
    }
}

#[test]
fn every_invalid_value_is_an_error_naming_the_property() {
    for case in CASES {
        for (value, property, needles) in case.invalid {
            assert_config_error(with(&[(case.property, value)]), property, needles);
        }
    }
}

#[test]
fn typed_getters_return_the_defaults() {
    let c = ConsumerConfig::builder()
        .bootstrap_servers("localhost:9092")
        .group_id("g")
        .build()
        .unwrap();
    let ms = Duration::from_millis;
    assert_eq!(c.bootstrap_servers()[0].host(), "localhost");
    assert_eq!(c.bootstrap_servers()[0].port(), 9092);
    assert_eq!(c.group_id(), Some("g"));
    assert_eq!(c.group_instance_id(), None);
    assert_eq!(c.client_id(), "lazykafka");
    assert_eq!(c.client_rack(), None);
    assert_eq!(c.auto_offset_reset(), OffsetReset::Latest);
    assert!(c.enable_auto_commit());
    assert_eq!(c.auto_commit_interval(), ms(5000));
    assert_eq!(c.isolation_level(), IsolationLevel::ReadUncommitted);
    assert_eq!(c.fetch_min_bytes(), 1);
    assert_eq!(c.fetch_max_wait(), ms(500));
    assert_eq!(c.fetch_max_bytes(), 52_428_800);
    assert_eq!(c.max_partition_fetch_bytes(), 1_048_576);
    assert_eq!(c.max_poll_records(), 500);
    assert_eq!(c.session_timeout(), ms(45_000));
    assert_eq!(c.heartbeat_interval(), ms(3000));
    assert_eq!(c.max_poll_interval(), ms(300_000));
    assert_eq!(
        c.partition_assignment_strategy(),
        [
            AssignmentStrategy::Range,
            AssignmentStrategy::CooperativeSticky
        ]
    );
    assert_eq!(c.rebalance_protocol(), RebalanceProtocol::Eager);
    assert_eq!(c.connections_max_idle(), Some(ms(540_000)));
    assert_eq!(c.request_timeout(), ms(30_000));
    assert_eq!(c.default_api_timeout(), ms(60_000));
    assert_eq!(c.metadata_max_age(), ms(300_000));
    assert_eq!(c.reconnect_backoff(), ms(50));
    assert_eq!(c.reconnect_backoff_max(), ms(1000));
    assert_eq!(c.socket_connection_setup_timeout(), ms(10_000));
    assert_eq!(c.socket_connection_setup_timeout_max(), ms(30_000));
    assert!(c.socket_keepalive());
    assert_eq!(c.client_runtime(), ClientRuntime::Auto);
    assert_eq!(c.retry_backoff(), ms(100));
    assert_eq!(c.max_in_flight_requests_per_connection(), 5);
    assert!(c.check_crcs());
    assert!(c.fetch_sessions());
    assert!(c.allow_auto_create_topics());
    assert!(c.exclude_internal_topics());
    assert_eq!(
        c.receive_message_max_bytes() as usize,
        crate::protocol::DEFAULT_MAX_FRAME_SIZE
    );
    assert_eq!(c.security_protocol(), SecurityProtocol::Plaintext);
    assert_eq!(c.ssl_ca_location(), None);
    assert_eq!(c.ssl_ca_pem(), None);
    assert_eq!(c.ssl_certificate_location(), None);
    assert_eq!(c.ssl_certificate_pem(), None);
    assert_eq!(c.ssl_key_location(), None);
    assert_eq!(c.ssl_key_pem(), None);
    assert_eq!(c.ssl_key_password(), None);
    assert_eq!(
        c.ssl_endpoint_identification_algorithm(),
        EndpointIdentification::Https
    );
    assert!(c.enable_ssl_certificate_verification());
}

#[test]
fn security_protocols_say_whether_they_use_tls_and_sasl() {
    let cases = [
        ("plaintext", SecurityProtocol::Plaintext, false, false),
        ("Ssl", SecurityProtocol::Ssl, true, false),
        (
            "sasl_plaintext",
            SecurityProtocol::SaslPlaintext,
            false,
            true,
        ),
        ("SASL_SSL", SecurityProtocol::SaslSsl, true, true),
    ];
    for (text, protocol, tls, sasl) in cases {
        let parsed: SecurityProtocol = text.parse().unwrap();
        assert_eq!(parsed, protocol);
        assert_eq!(parsed.to_string(), text.to_ascii_uppercase());
        assert_eq!(
            (parsed.uses_tls(), parsed.uses_sasl()),
            (tls, sasl),
            "{text}"
        );
    }
}

#[test]
fn a_file_and_a_pem_text_for_the_same_thing_are_refused() {
    for (location, pem) in [
        ("ssl.ca.location", "ssl.ca.pem"),
        ("ssl.certificate.location", "ssl.certificate.pem"),
        ("ssl.key.location", "ssl.key.pem"),
    ] {
        assert_config_error(
            with(&[(location, "/x"), (pem, "-----BEGIN-----")]),
            pem,
            &[location, "only one"],
        );
    }
}

#[test]
fn secrets_are_never_shown() {
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nTOPSECRETKEYBYTES\n-----END PRIVATE KEY-----";
    const PASSWORD: &str = "hunter2-password";
    let builder = ConsumerConfig::builder()
        .bootstrap_servers("localhost:9093")
        .security_protocol(SecurityProtocol::Ssl)
        .ssl_certificate_pem("-----BEGIN CERTIFICATE-----")
        .ssl_key_pem(KEY)
        .ssl_key_password(PASSWORD);
    let config = builder.clone().build().unwrap();
    let from_properties = with(&[
        ("security.protocol", "SSL"),
        ("ssl.certificate.pem", "-----BEGIN CERTIFICATE-----"),
        ("ssl.key.pem", KEY),
        ("ssl.key.password", PASSWORD),
    ])
    .unwrap();
    assert_eq!(config.ssl_key_pem(), Some(KEY));
    assert_eq!(from_properties.ssl_key_password(), Some(PASSWORD));
    let shown = [
        format!("{builder:?}"),
        format!("{config:?}"),
        format!("{config:#?}"),
        format!("{from_properties:?}"),
        format!("{:?}", config.to_properties()),
    ];
    for text in &shown {
        assert!(!text.contains("TOPSECRET"), "the key shows in {text}");
        assert!(!text.contains(PASSWORD), "the password shows in {text}");
    }
    assert!(shown[1].contains("[redacted]"), "{}", shown[1]);
    // The rendered properties read back, less the secrets.
    let rendered = config.to_properties();
    assert!(rendered.iter().all(|(k, _)| !k.starts_with("ssl.key.p")));
}

#[test]
fn typed_setters_match_the_properties() {
    let ms = Duration::from_millis;
    let typed = ConsumerConfig::builder()
        .bootstrap_servers("a:1,b:2")
        .group_id("g")
        .group_instance_id("i")
        .client_id("c")
        .client_rack("r")
        .auto_offset_reset(OffsetReset::None)
        .enable_auto_commit(false)
        .auto_commit_interval(ms(1))
        .isolation_level(IsolationLevel::ReadCommitted)
        .fetch_min_bytes(2)
        .fetch_max_wait(ms(3))
        .fetch_max_bytes(4000)
        .max_partition_fetch_bytes(5)
        .max_poll_records(6)
        .session_timeout(ms(7000))
        .heartbeat_interval(ms(8))
        .max_poll_interval(ms(9))
        .partition_assignment_strategy([AssignmentStrategy::CooperativeSticky])
        .connections_max_idle(None)
        .request_timeout(ms(10))
        .default_api_timeout(ms(11))
        .metadata_max_age(ms(12))
        .reconnect_backoff(ms(13))
        .reconnect_backoff_max(ms(14))
        .socket_connection_setup_timeout(ms(15))
        .socket_connection_setup_timeout_max(ms(16))
        .socket_keepalive(false)
        .retry_backoff(ms(17))
        .retry_backoff_max(ms(170))
        .max_in_flight_requests_per_connection(18)
        .check_crcs(false)
        .fetch_sessions(false)
        .allow_auto_create_topics(false)
        .exclude_internal_topics(false)
        .receive_message_max_bytes(5000)
        .client_runtime(ClientRuntime::Tokio)
        .security_protocol(SecurityProtocol::SaslSsl)
        .ssl_ca_location("/ca")
        .ssl_certificate_pem("cert")
        .ssl_key_pem("key")
        .ssl_key_password("pw")
        .ssl_endpoint_identification_algorithm(EndpointIdentification::None)
        .enable_ssl_certificate_verification(false)
        .sasl_mechanism(crate::sasl::Mechanism::ScramSha256)
        .sasl_username("alice")
        .sasl_password("alice-secret")
        .sasl_oauthbearer_config("principal=p")
        .enable_sasl_oauthbearer_unsecure_jwt(false)
        .build()
        .unwrap();
    let from_properties = ConsumerConfig::from_properties([
        ("security.protocol", "SASL_SSL"),
        ("ssl.ca.location", "/ca"),
        ("ssl.certificate.pem", "cert"),
        ("ssl.key.pem", "key"),
        ("ssl.key.password", "pw"),
        ("ssl.endpoint.identification.algorithm", "none"),
        ("enable.ssl.certificate.verification", "false"),
        ("bootstrap.servers", "a:1,b:2"),
        ("group.id", "g"),
        ("group.instance.id", "i"),
        ("client.id", "c"),
        ("client.rack", "r"),
        ("auto.offset.reset", "none"),
        ("enable.auto.commit", "false"),
        ("auto.commit.interval.ms", "1"),
        ("isolation.level", "read_committed"),
        ("fetch.min.bytes", "2"),
        ("fetch.max.wait.ms", "3"),
        ("fetch.max.bytes", "4000"),
        ("max.partition.fetch.bytes", "5"),
        ("max.poll.records", "6"),
        ("session.timeout.ms", "7000"),
        ("heartbeat.interval.ms", "8"),
        ("max.poll.interval.ms", "9"),
        ("partition.assignment.strategy", "cooperative-sticky"),
        ("connections.max.idle.ms", "-1"),
        ("request.timeout.ms", "10"),
        ("default.api.timeout.ms", "11"),
        ("metadata.max.age.ms", "12"),
        ("reconnect.backoff.ms", "13"),
        ("reconnect.backoff.max.ms", "14"),
        ("socket.connection.setup.timeout.ms", "15"),
        ("socket.connection.setup.timeout.max.ms", "16"),
        ("socket.keepalive.enable", "false"),
        ("retry.backoff.ms", "17"),
        ("retry.backoff.max.ms", "170"),
        ("max.in.flight.requests.per.connection", "18"),
        ("check.crcs", "false"),
        ("fetch.sessions.enable", "false"),
        ("allow.auto.create.topics", "false"),
        ("exclude.internal.topics", "false"),
        ("receive.message.max.bytes", "5000"),
        ("client.runtime", "tokio"),
        // librdkafka's name for sasl.mechanism.
        ("sasl.mechanisms", "SCRAM-SHA-256"),
        ("sasl.username", "alice"),
        ("sasl.password", "alice-secret"),
        ("sasl.oauthbearer.config", "principal=p"),
        ("enable.sasl.oauthbearer.unsecure.jwt", "false"),
    ])
    .unwrap();
    assert_eq!(typed, from_properties);
    assert_eq!(typed.rebalance_protocol(), RebalanceProtocol::Cooperative);
    assert_eq!(typed.isolation_level(), IsolationLevel::ReadCommitted);
    // And back again: the rendered properties lack the secrets, which are
    // added as an application adds them, from where it keeps them.
    let secrets = [
        ("ssl.key.pem", "key".to_owned()),
        ("ssl.key.password", "pw".to_owned()),
        ("sasl.password", "alice-secret".to_owned()),
    ];
    assert_eq!(
        ConsumerConfig::from_properties(typed.to_properties().into_iter().chain(secrets)).unwrap(),
        typed
    );
}

const SASL: [(&str, &str); 1] = [("security.protocol", "SASL_PLAINTEXT")];

fn with_sasl(extra: &[(&str, &str)]) -> Result<ConsumerConfig, Error> {
    ConsumerConfig::from_properties(BASE.iter().chain(&SASL).chain(extra).copied())
}

#[test]
fn sasl_needs_a_mechanism_and_its_credentials() {
    assert_config_error(with_sasl(&[]), "sasl.mechanism", &["required"]);
    for m in ["PLAIN", "SCRAM-SHA-256", "scram-sha-512"] {
        assert_config_error(
            with_sasl(&[("sasl.mechanism", m), ("sasl.password", "p")]),
            "sasl.username",
            &["required"],
        );
        assert_config_error(
            with_sasl(&[("sasl.mechanism", m), ("sasl.username", "u")]),
            "sasl.password",
            &["required"],
        );
        let config = with_sasl(&[
            ("sasl.mechanism", m),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
        ])
        .unwrap();
        let sasl = config.common().sasl_config().unwrap();
        assert_eq!(sasl.mechanism.name(), m.to_uppercase());
        assert_eq!((sasl.username.as_str(), sasl.password.expose()), ("u", "p"));
    }
    // OAUTHBEARER: a provider, or unsecured tokens with a principal.
    assert_config_error(
        with_sasl(&[("sasl.mechanism", "OAUTHBEARER")]),
        "sasl.mechanism",
        &["token provider", "enable.sasl.oauthbearer.unsecure.jwt"],
    );
    assert_config_error(
        with_sasl(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
        ]),
        "sasl.oauthbearer.config",
        &["principal"],
    );
    let unsecured = with_sasl(&[
        ("sasl.mechanism", "OAUTHBEARER"),
        ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
        ("sasl.oauthbearer.config", "principal=admin lifeSeconds=60"),
    ])
    .unwrap();
    let provider = unsecured
        .common()
        .sasl_config()
        .unwrap()
        .token_provider
        .unwrap();
    let token = provider.token().unwrap();
    assert_eq!(token.lifetime(), Duration::from_secs(60));
    assert_eq!(
        crate::sasl::parse_unsecured_jws(token.value().expose())
            .unwrap()
            .0,
        "admin"
    );
    let both = ConsumerConfig::builder()
        .bootstrap_servers("a:1")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl_mechanism(crate::sasl::Mechanism::OAuthBearer)
        .oauthbearer_token_provider(|| Err("none".into()))
        .enable_sasl_oauthbearer_unsecure_jwt(true)
        .build();
    assert_config_error(
        both,
        "enable.sasl.oauthbearer.unsecure.jwt",
        &["one or the other"],
    );
    // Without SASL, the sasl.* properties are ignored (Java and librdkafka
    // do the same): a shared properties file may carry them.
    let plain = with(&[("sasl.mechanism", "PLAIN")]).unwrap();
    assert_eq!(plain.common().sasl_config(), None);
}

#[test]
fn secrets_never_show_in_debug_properties_or_errors() {
    let secret = "hunter2-do-not-log";
    let builder = ConsumerConfig::builder()
        .bootstrap_servers("a:1")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl_mechanism(crate::sasl::Mechanism::Plain)
        .sasl_username("alice")
        .sasl_password(secret);
    assert!(!format!("{builder:?}").contains(secret));
    let config = builder.build().unwrap();
    assert_eq!(config.sasl_password().unwrap().expose(), secret);
    assert!(!format!("{config:?}").contains(secret));
    assert!(!format!("{:?}", config.common().sasl_config()).contains(secret));
    let listed = config.to_properties();
    assert!(!format!("{listed:?}").contains(secret));
    assert!(listed.iter().all(|(k, _)| *k != "sasl.password"));
    let json = serde_json::to_string(&listed.into_iter().collect::<BTreeMap<_, _>>()).unwrap();
    assert!(!json.contains(secret));
    // A config error about another property does not echo the password.
    let err = with_sasl(&[("sasl.mechanism", "PLAIN"), ("sasl.password", secret)]).unwrap_err();
    assert!(!err.to_string().contains(secret), "{err}");
    // OAUTHBEARER tokens: the provider and its tokens print no token.
    let config = ConsumerConfig::builder()
        .bootstrap_servers("a:1")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl_mechanism(crate::sasl::Mechanism::OAuthBearer)
        .oauthbearer_token_provider(move || {
            Ok(crate::sasl::OAuthToken::new(secret, Duration::from_secs(1)))
        })
        .build()
        .unwrap();
    let token = config
        .oauthbearer_token_provider()
        .unwrap()
        .token()
        .unwrap();
    assert!(!format!("{config:?} {token:?}").contains(secret));
}

#[test]
fn bootstrap_servers_is_required() {
    assert_config_error(
        ConsumerConfig::builder().build(),
        "bootstrap.servers",
        &["required"],
    );
    assert_config_error(
        ConsumerConfig::from_properties([("group.id", "g")]),
        "bootstrap.servers",
        &["required"],
    );
}

#[test]
fn bootstrap_addresses_parse() {
    let c = ConsumerConfig::builder()
        .bootstrap_servers("kafka-1:9092, 10.0.0.1:9093,[fe80::1%eth0]:9094,::1:9095")
        .build()
        .unwrap();
    let shown: Vec<String> = c
        .bootstrap_servers()
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert_eq!(
        shown,
        [
            "kafka-1:9092",
            "10.0.0.1:9093",
            "[fe80::1%eth0]:9094",
            "[::1]:9095"
        ]
    );
    assert_eq!(c.bootstrap_servers()[3].host(), "::1");
}

#[test]
fn without_a_group_auto_commit_is_off_and_cannot_be_turned_on() {
    let c = ConsumerConfig::builder()
        .bootstrap_servers("a:1")
        .build()
        .unwrap();
    assert!(!c.enable_auto_commit());
    let c = ConsumerConfig::builder()
        .bootstrap_servers("a:1")
        .enable_auto_commit(false)
        .build()
        .unwrap();
    assert!(!c.enable_auto_commit());
    assert_config_error(
        ConsumerConfig::builder()
            .bootstrap_servers("a:1")
            .enable_auto_commit(true)
            .build(),
        "enable.auto.commit",
        &["group.id"],
    );
}

#[test]
fn classic_only_properties_are_refused_under_the_consumer_protocol() {
    let consumer = ("group.protocol", "consumer");
    // Unset, they are simply not used.
    let config = with(&[consumer]).unwrap();
    assert_eq!(config.group_protocol(), GroupProtocol::Consumer);
    assert_eq!(config.group_remote_assignor(), None);
    for (property, value) in [
        ("session.timeout.ms", "45000"),
        ("heartbeat.interval.ms", "3000"),
        ("partition.assignment.strategy", "range"),
    ] {
        // Even at their defaults: set explicitly is a mistake to report.
        assert_config_error(
            with(&[consumer, (property, value)]),
            property,
            &["not supported with group.protocol=consumer", "KIP-848"],
        );
        // Under classic they are fine.
        with(&[(property, value)]).unwrap();
    }
    let typed = ConsumerConfig::builder()
        .bootstrap_servers("a:1")
        .group_id("g")
        .group_protocol(GroupProtocol::Consumer)
        .session_timeout(Duration::from_secs(10));
    assert_config_error(
        typed.build(),
        "session.timeout.ms",
        &["group.protocol=consumer"],
    );
    let ok = ConsumerConfig::builder()
        .bootstrap_servers("a:1")
        .group_id("g")
        .group_protocol(GroupProtocol::Consumer)
        .group_remote_assignor(RemoteAssignor::Range)
        .build()
        .unwrap();
    assert_eq!(ok.group_remote_assignor(), Some(RemoteAssignor::Range));
    assert_eq!(
        ConsumerConfig::from_properties(ok.to_properties()).unwrap(),
        ok
    );
    assert_config_error(
        with(&[("group.remote.assignor", "uniform")]),
        "group.remote.assignor",
        &["group.protocol=classic", "partition.assignment.strategy"],
    );
}

#[test]
fn static_membership_needs_a_group() {
    assert_config_error(
        ConsumerConfig::from_properties([("bootstrap.servers", "a:1"), ("group.instance.id", "i")]),
        "group.instance.id",
        &["\"i\"", "group.id"],
    );
    let long = "x".repeat(250);
    assert_config_error(
        with(&[("group.instance.id", &long)]),
        "group.instance.id",
        &["249"],
    );
}

#[test]
fn reconnect_backoff_alone_turns_exponential_backoff_off() {
    // Java's CommonClientConfigs.postProcessReconnectBackoffConfigs.
    let c = with(&[("reconnect.backoff.ms", "200")]).unwrap();
    assert_eq!(c.reconnect_backoff_max(), Duration::from_millis(200));
    let c = with(&[("reconnect.backoff.ms", "2000")]).unwrap();
    assert_eq!(c.reconnect_backoff_max(), Duration::from_millis(2000));
    let c = with(&[("reconnect.backoff.max.ms", "8000")]).unwrap();
    assert_eq!(c.reconnect_backoff(), Duration::from_millis(50));
    assert_eq!(c.reconnect_backoff_max(), Duration::from_millis(8000));
    assert_config_error(
        with(&[
            ("reconnect.backoff.ms", "500"),
            ("reconnect.backoff.max.ms", "100"),
        ]),
        "reconnect.backoff.max.ms",
        &["\"100\"", "(500)"],
    );
}

#[test]
fn receive_limit_grows_with_fetch_max_bytes_unless_set() {
    let c = with(&[("fetch.max.bytes", "209715200")]).unwrap();
    assert_eq!(c.receive_message_max_bytes(), 209_715_200 + 512);
    let c = with(&[
        ("fetch.max.bytes", "1000"),
        ("receive.message.max.bytes", "1512"),
    ])
    .unwrap();
    assert_eq!(c.receive_message_max_bytes(), 1512);
    assert_config_error(
        with(&[
            ("fetch.max.bytes", "1000"),
            ("receive.message.max.bytes", "1511"),
        ]),
        "receive.message.max.bytes",
        &["fetch.max.bytes (1000) + 512"],
    );
    assert_config_error(
        with(&[("receive.message.max.bytes", "2147483648")]),
        "receive.message.max.bytes",
        &["at most 2147483647"],
    );
}

#[test]
fn typed_durations_are_checked_in_whole_milliseconds() {
    let base = || {
        ConsumerConfig::builder()
            .bootstrap_servers("a:1")
            .group_id("g")
    };
    assert_config_error(
        base()
            .heartbeat_interval(Duration::from_micros(900))
            .build(),
        "heartbeat.interval.ms",
        &["\"0\"", "at least 1"],
    );
    assert_config_error(
        base()
            .session_timeout(Duration::from_secs(3_000_000))
            .build(),
        "session.timeout.ms",
        &["\"3000000000\"", "at most 2147483647"],
    );
    assert_config_error(
        base()
            .connections_max_idle(Some(Duration::from_micros(10)))
            .build(),
        "connections.max.idle.ms",
        &["-1"],
    );
    assert_config_error(
        base().fetch_max_bytes(u32::MAX).build(),
        "fetch.max.bytes",
        &["at most 2147483647"],
    );
    assert_config_error(
        base().partition_assignment_strategy([]).build(),
        "partition.assignment.strategy",
        &["at least one"],
    );
    let c = base()
        .heartbeat_interval(Duration::from_micros(1500))
        .build()
        .unwrap();
    assert_eq!(rendered(&c, "heartbeat.interval.ms").as_deref(), Some("1"));
}

#[test]
fn an_empty_rack_is_no_rack() {
    for config in [
        with(&[("client.rack", " ")]).unwrap(),
        ConsumerConfig::builder()
            .bootstrap_servers("a:1")
            .client_rack("")
            .build()
            .unwrap(),
    ] {
        assert_eq!(config.client_rack(), None);
        assert_eq!(rendered(&config, "client.rack"), None);
    }
}

#[test]
fn later_properties_override_earlier_ones() {
    let c = with(&[("max.poll.records", "1"), ("max.poll.records", "2")]).unwrap();
    assert_eq!(c.max_poll_records(), 2);
}

#[test]
fn unknown_properties_are_errors_with_hints() {
    let cases: &[(&str, &str)] = &[
        ("fetch.min.byte", "did you mean \"fetch.min.bytes\"?"),
        ("session.timeout", "did you mean \"session.timeout.ms\"?"),
        ("Group.Id", "did you mean \"group.id\"?"),
        ("ssl.keystore.location", "PEM files"),
        ("sasl.kerberos.service.name", "Kerberos"),
        ("sasl.usernme", "did you mean \"sasl.username\"?"),
        ("value.deserializer", "as bytes"),
        ("linger.mss", "did you mean \"linger.ms\"?"),
    ];
    for (property, hint) in cases {
        assert_config_error(with(&[(property, "1")]), property, &[hint]);
    }
    match with(&[("completely.different", "x")]) {
        Err(Error::Config { reason, .. }) => assert_eq!(reason, "unknown property"),
        other => panic!("{other:?}"),
    }
    let err = with(&[("lingr.ms", "5")]).unwrap_err();
    assert!(!err.is_retriable());
}

/// One property map for both clients: the producer's properties (Java and
/// librdkafka names) are accepted by the consumer and change nothing (a
/// `warn` line names each).
#[test]
fn the_producers_properties_are_ignored() {
    let plain = with(&[]).unwrap();
    for (property, value) in [
        ("linger.ms", "5"),
        ("acks", "all"),
        ("batch.size", "1000"),
        ("queue.buffering.max.ms", "5"),
        ("message.timeout.ms", "1000"),
        ("transactional.id", "t"),
        ("partitioner", "consistent_random"),
    ] {
        assert_eq!(with(&[(property, value)]).unwrap(), plain, "{property}");
    }
}

#[test]
fn error_display_names_property_and_value() {
    let err = with(&[("heartbeat.interval.ms", "50000")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "configuration property heartbeat.interval.ms: invalid value \"50000\": \
         must be lower than session.timeout.ms (45000)"
    );
}

#[test]
fn serde_from_json() {
    let json = r#"{
        "bootstrap.servers": ["kafka-1:9092", "kafka-2:9092"],
        "group.id": "billing",
        "group.instance.id": null,
        "enable.auto.commit": false,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 2000.0,
        "fetch.max.bytes": "1048576",
        "connections.max.idle.ms": -1,
        "partition.assignment.strategy": ["cooperative-sticky"]
    }"#;
    let c: ConsumerConfig = serde_json::from_str(json).unwrap();
    assert_eq!(c.bootstrap_servers().len(), 2);
    assert_eq!(c.group_id(), Some("billing"));
    assert_eq!(c.group_instance_id(), None);
    assert!(!c.enable_auto_commit());
    assert_eq!(c.session_timeout(), Duration::from_millis(6000));
    assert_eq!(c.heartbeat_interval(), Duration::from_millis(2000));
    assert_eq!(c.fetch_max_bytes(), 1_048_576);
    assert_eq!(c.connections_max_idle(), None);
    assert_eq!(c.rebalance_protocol(), RebalanceProtocol::Cooperative);

    // Errors name the property.
    let err = serde_json::from_str::<ConsumerConfig>(
        r#"{"bootstrap.servers": "a:1", "fetch.min.bytes": 1.5}"#,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("fetch.min.bytes: invalid value \"1.5\": not an integer"),
        "{err}"
    );
    let err =
        serde_json::from_str::<ConsumerConfig>(r#"{"bootstrap.servers": "a:1", "lingr.ms": 5}"#)
            .unwrap_err();
    assert!(
        err.to_string().contains("lingr.ms: unknown property"),
        "{err}"
    );
    let err = serde_json::from_str::<ConsumerConfig>(
        r#"{"bootstrap.servers": "a:1", "fetch": {"min.bytes": 1}}"#,
    )
    .unwrap_err();
    assert!(err.to_string().contains("cannot be a map"), "{err}");
    // Nested in an application's own settings.
    #[derive(serde::Deserialize)]
    struct App {
        consumer: ConsumerConfig,
    }
    let app: App = serde_json::from_str(r#"{"consumer": {"bootstrap.servers": "a:1"}}"#).unwrap();
    assert_eq!(app.consumer.client_id(), "lazykafka");
}

#[test]
fn from_a_hash_map() {
    let map: HashMap<String, String> = [
        ("bootstrap.servers", "a:1"),
        ("group.id", "g"),
        ("max.poll.records", "7"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let c = ConsumerConfig::from_properties(&map).unwrap();
    assert_eq!(c.max_poll_records(), 7);
    // Via serde too.
    let c: ConsumerConfig = serde_json::from_value(serde_json::to_value(&map).unwrap()).unwrap();
    assert_eq!(c.max_poll_records(), 7);
}

#[test]
fn enum_values_round_trip() {
    for r in [
        OffsetReset::Earliest,
        OffsetReset::Latest,
        OffsetReset::None,
    ] {
        assert_eq!(r.as_str().parse::<OffsetReset>().unwrap(), r);
    }
    for l in [
        IsolationLevel::ReadUncommitted,
        IsolationLevel::ReadCommitted,
    ] {
        assert_eq!(l.to_string().parse::<IsolationLevel>().unwrap(), l);
    }
    for r in [
        ClientRuntime::Auto,
        ClientRuntime::Tokio,
        ClientRuntime::AsyncStd,
    ] {
        assert_eq!(r.to_string().parse::<ClientRuntime>().unwrap(), r);
    }
    assert_eq!(ClientRuntime::default(), ClientRuntime::Auto);
    assert_eq!(OffsetReset::default(), OffsetReset::Latest);
    assert_eq!(IsolationLevel::default(), IsolationLevel::ReadUncommitted);
}

#[test]
fn edit_distance_is_levenshtein() {
    assert_eq!(edit_distance("", "abc"), 3);
    assert_eq!(edit_distance("kitten", "sitting"), 3);
    assert_eq!(edit_distance("same", "same"), 0);
}

mod docs;
mod producer;

mod round_trip {
    use super::*;
    use proptest::prelude::*;

    fn arb_config() -> impl Strategy<Value = ConsumerConfig> {
        (
            (
                proptest::option::of("[a-z]{1,8}"),
                any::<bool>(),
                0u32..=2_000_000,
                1u32..=2_000_000,
                1u64..100_000,
                0u64..100_000,
            ),
            (
                proptest::option::of(1u64..1_000_000),
                proptest::sample::subsequence(AssignmentStrategy::ALL.to_vec(), 1..=3),
                proptest::option::of(0u64..10_000),
                proptest::option::of(0u64..10_000),
                proptest::option::of(2_000_000u32..i32::MAX as u32),
            ),
        )
            .prop_filter_map(
                "invalid combination",
                |(
                    (group, auto_commit, min_bytes, max_bytes, session, heartbeat),
                    (idle, strategies, backoff, backoff_max, receive),
                )| {
                    let mut b = ConsumerConfig::builder()
                        .bootstrap_servers("a:1")
                        .fetch_min_bytes(min_bytes)
                        .fetch_max_bytes(max_bytes)
                        .session_timeout(Duration::from_millis(session))
                        .heartbeat_interval(Duration::from_millis(heartbeat))
                        .connections_max_idle(idle.map(Duration::from_millis))
                        .partition_assignment_strategy(strategies);
                    if let Some(g) = group {
                        b = b.group_id(g).enable_auto_commit(auto_commit);
                    }
                    if let Some(ms) = backoff {
                        b = b.reconnect_backoff(Duration::from_millis(ms));
                    }
                    if let Some(ms) = backoff_max {
                        b = b.reconnect_backoff_max(Duration::from_millis(ms));
                    }
                    if let Some(bytes) = receive {
                        b = b.receive_message_max_bytes(bytes);
                    }
                    b.build().ok()
                },
            )
    }

    proptest! {
        #[test]
        fn to_properties_reads_back_equal(config in arb_config()) {
            let again = ConsumerConfig::from_properties(config.to_properties()).unwrap();
            prop_assert_eq!(&again, &config);
            let json = serde_json::to_string(&config.to_properties().into_iter().collect::<BTreeMap<_, _>>()).unwrap();
            let from_json: ConsumerConfig = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(&from_json, &config);
        }

        #[test]
        fn arbitrary_properties_never_panic(
            key in proptest::sample::select(ConsumerConfig::PROPERTIES.to_vec()),
            value in ".{0,24}",
        ) {
            let _ = with(&[(key, &value)]);
        }
    }
}

/// librdkafka's names for the Java properties are read as those, as a
/// map moved over from a librdkafka client has them.
#[test]
fn librdkafka_names_are_read_as_the_properties_they_name() {
    let aliases = [
        ("metadata.broker.list", "b9:9092", "bootstrap.servers"),
        (
            "topic.metadata.refresh.interval.ms",
            "12345",
            "metadata.max.age.ms",
        ),
        ("socket.timeout.ms", "23456", "request.timeout.ms"),
        ("fetch.wait.max.ms", "123", "fetch.max.wait.ms"),
        (
            "fetch.message.max.bytes",
            "54321",
            "max.partition.fetch.bytes",
        ),
        ("auto.commit.enable", "false", "enable.auto.commit"),
    ];
    for (alias, value, known) in aliases {
        let by_alias = with(&[(alias, value)]).unwrap();
        let by_name = with(&[(known, value)]).unwrap();
        assert_eq!(
            rendered(&by_alias, known),
            rendered(&by_name, known),
            "{alias}"
        );
        assert_eq!(
            rendered(&by_alias, known).as_deref(),
            Some(value),
            "{alias}"
        );
        assert_eq!(by_alias.to_properties(), by_name.to_properties(), "{alias}");
    }
}

/// librdkafka's own properties: accepted where the value asks for what
/// this crate does anyway (nothing changes), refused with what to use
/// instead otherwise.
#[test]
fn librdkafka_only_properties_are_accepted_or_refused_with_what_to_use() {
    let defaults = with(&[]).unwrap().to_properties();
    for (property, value) in [
        ("debug", "broker,cgrp,fetch"),
        ("api.version.request", "true"),
        ("broker.address.family", "any"),
    ] {
        let config = with(&[(property, value)]).unwrap_or_else(|e| panic!("{property}: {e}"));
        assert_eq!(config.to_properties(), defaults, "{property}={value}");
    }
    for (property, value, hint) in [
        (
            "api.version.request",
            "false",
            "ApiVersions is always asked",
        ),
        ("broker.address.family", "v4", "bootstrap.servers"),
    ] {
        assert_config_error(with(&[(property, value)]), property, &[hint]);
    }
    // Still not a typo's way in: a near miss is refused.
    assert_config_error(with(&[("debugg", "all")]), "debugg", &["unknown property"]);
}
