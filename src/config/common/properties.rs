//! The table of the properties every client takes (see
//! [`table`](super::super::table) for what a row says and what is made of
//! it). The defaults are the Java client's unless the docs column says
//! otherwise.

/// Hands the table of shared properties to `$generate` (one of the
/// macros of [`table`](super::super::table)), after `$args`.
macro_rules! common_table {
    ($generate:ident! { $($args:tt)* }) => {
        $generate! {
            $($args)*
            rows {
                BOOTSTRAP_SERVERS = "bootstrap.servers" {
                    bootstrap_servers: Option<String> => Vec<BrokerAddress> = None;
                    parse: some_text;
                    render: comma_list;
                    get
                        /// `bootstrap.servers`: the brokers to ask for the cluster's metadata
                        /// before any broker is known. Required.
                        -> &[BrokerAddress] { .as_slice() };
                    set
                        /// `bootstrap.servers`: a comma-separated list of `host:port`.
                        (servers: impl AsRef<str>) => Some(servers.as_ref().to_owned());
                    docs [
                        "`bootstrap_servers(&str)` → `&[BrokerAddress]`",
                        "required",
                        "brokers asked for metadata before any broker is known",
                        "comma list of `host:port`, `[ipv6]:port` or unbracketed IPv6 with the port after the last `:`; optional `PLAINTEXT://` prefix; empty entries skipped; at least one; port 1-65535"
                    ];
                }
                CLIENT_ID = "client.id" {
                    client_id: String = "lazykafka".to_owned();
                    parse: text;
                    render: shown;
                    get
                        /// `client.id`, sent in every request header (default `lazykafka`).
                        -> &str { .as_str() };
                    set
                        /// `client.id`.
                        (client_id: impl Into<String>) => client_id.into();
                    docs [
                        "`&str`",
                        "`lazykafka` (Java: generated)",
                        "sent in every request header",
                        "any string"
                    ];
                }
                CONNECTIONS_MAX_IDLE_MS = "connections.max.idle.ms" {
                    connections_max_idle: Option<Duration> = Some(Duration::from_millis(540_000));
                    parse: parse_idle;
                    check with(check_idle);
                    render: render_idle;
                    get
                        /// `connections.max.idle.ms`: how long a connection may sit idle before
                        /// the client closes it (default 9 min); `None` (`-1`) never closes
                        /// idle connections.
                        -> Option<Duration>;
                    set
                        /// `connections.max.idle.ms`; `None` never closes idle connections.
                        (idle: Option<Duration>);
                    docs [
                        "`Option<Duration>`",
                        "540000",
                        "idle connections are closed after this; `-1` (`None`) never",
                        "`-1` or 1 and up"
                    ];
                }
                REQUEST_TIMEOUT_MS = "request.timeout.ms" {
                    request_timeout: Duration = Duration::from_millis(30_000);
                    parse: parse_ms;
                    check ms(0, INT_MAX);
                    render: ms;
                    get
                        /// `request.timeout.ms`: how long a request waits for its response
                        /// (default 30 s).
                        -> Duration;
                    set
                        /// `request.timeout.ms`.
                        (timeout: Duration);
                    docs [
                        "`Duration`",
                        "30000",
                        "how long a request waits for its response",
                        "0-2147483647"
                    ];
                }
                METADATA_MAX_AGE_MS = "metadata.max.age.ms" {
                    metadata_max_age: Duration = Duration::from_millis(300_000);
                    parse: parse_ms;
                    check ms(0, LONG_MAX);
                    render: ms;
                    get
                        /// `metadata.max.age.ms`: metadata older than this is refreshed
                        /// (default 5 min). A consumer also fetches from a preferred read
                        /// replica (KIP-392) this long before it asks the partition's leader
                        /// again.
                        -> Duration;
                    set
                        /// `metadata.max.age.ms`: for a consumer, also the lease of a
                        /// preferred read replica (KIP-392).
                        (age: Duration);
                    docs [
                        "`Duration`",
                        "300000",
                        "metadata older than this is refreshed; also how long a preferred read replica is fetched from before the leader is asked again (KIP-392); under a classic pattern subscription, how soon a new matching topic (or one gone) changes the subscription",
                        "0 and up"
                    ];
                }
                TOPIC_METADATA_PROPAGATION_MAX_MS = "topic.metadata.propagation.max.ms" {
                    topic_metadata_propagation_max: Duration = Duration::from_millis(5_000);
                    parse: parse_ms;
                    check ms(0, INT_MAX);
                    render: ms;
                    get
                        /// `topic.metadata.propagation.max.ms` (as librdkafka names it): how
                        /// long a topic may be missing from the cluster's metadata before
                        /// the client says so (default 5 s: Kafka's controller tells the
                        /// brokers of a new topic one by one, and a loaded broker may learn
                        /// of it more than a second after the topic was created; librdkafka
                        /// waits 30 s).
                        ///
                        /// A consumer's `poll` then reports a subscribed or assigned topic
                        /// (or partition) with [`Error::Topic`](crate::Error::Topic) or
                        /// [`Error::UnknownPartition`](crate::Error::UnknownPartition), and
                        /// its `partitions_for` gives up on it; a partition being fetched
                        /// whose metadata names no leader is reported
                        /// ([`Error::NoLeader`](crate::Error::NoLeader)) after the same time.
                        /// A producer's `send` fails for a topic that every Metadata answer
                        /// for this long said does not exist (UNKNOWN_TOPIC_OR_PARTITION:
                        /// [`DeliveryError::UnknownTopic`](crate::producer::DeliveryError::UnknownTopic)),
                        /// and its `partitions_for` with [`Error::Topic`](crate::Error::Topic).
                        -> Duration;
                    set
                        /// `topic.metadata.propagation.max.ms`.
                        (max: Duration);
                    docs [
                        "`Duration`",
                        "5000",
                        "how long a topic may be missing from the metadata before the client says so: a consumer's `poll` reports a subscribed or assigned topic (or partition) (`Error::Topic`, `Error::UnknownPartition`), and a fetched partition without a leader (`Error::NoLeader`); a producer's `send` fails once every Metadata answer for this long said the topic does not exist (`DeliveryError::UnknownTopic`, [producer.md](producer.md#a-topic-that-does-not-exist)); `partitions_for` of either gives up on it; librdkafka's name, whose default is 30000",
                        "0 to 2147483647"
                    ];
                }
                ALLOW_AUTO_CREATE_TOPICS = "allow.auto.create.topics" {
                    allow_auto_create_topics: bool = true;
                    parse: parse_bool;
                    render: shown;
                    get
                        /// `allow.auto.create.topics`: let Metadata requests create topics
                        /// that do not exist (those a consumer subscribes to, those a
                        /// producer sends to), where the broker allows it (its
                        /// `auto.create.topics.enable`). Default `true`, as the Java
                        /// consumer's and librdkafka's producer's (the Java producer always
                        /// allows it).
                        -> bool;
                    set
                        /// `allow.auto.create.topics`.
                        (allow: bool);
                    docs [
                        "`bool`",
                        "`true`",
                        "let Metadata create missing topics (subscribed, or produced to), where the broker allows it (`auto.create.topics.enable`); a producer's `send` to a topic that is not created fails after `topic.metadata.propagation.max.ms`",
                        "`true`/`false`"
                    ];
                }
                STATISTICS_INTERVAL_MS = "statistics.interval.ms" {
                    statistics_interval: Duration = Duration::ZERO;
                    parse: parse_ms;
                    // librdkafka's bound: a day.
                    check ms(0, 86_400_000);
                    render: ms;
                    get
                        /// `statistics.interval.ms` (librdkafka's name; default 0, none):
                        /// how often the client's statistics stream
                        /// ([`Consumer::statistics`](crate::Consumer::statistics),
                        /// [`Producer::statistics`](crate::Producer::statistics)) yields its
                        /// metrics. `None` when 0.
                        -> Option<Duration> = crate::config::common::non_zero;
                    set
                        /// `statistics.interval.ms`: how often the client's statistics
                        /// stream (`Consumer::statistics`, `Producer::statistics`) yields
                        /// its metrics; zero for never.
                        (interval: Duration);
                    docs [
                        "`Duration`",
                        "0 (none; librdkafka's name)",
                        "how often `statistics()` yields the client's metrics (`ConsumerMetrics`, `ProducerMetrics`; serde-serializable) ([consumer.md](consumer.md#metrics), [producer.md](producer.md#metrics))",
                        "0-86400000"
                    ];
                }
                METADATA_RECOVERY_STRATEGY = "metadata.recovery.strategy" {
                    metadata_recovery_strategy: MetadataRecoveryStrategy =
                        MetadataRecoveryStrategy::Rebootstrap;
                    parse: parsed;
                    render: shown;
                    get
                        /// `metadata.recovery.strategy` (KIP-899): whether the client goes
                        /// back to the bootstrap addresses when the brokers it knows cannot
                        /// give it metadata (default `rebootstrap`).
                        -> MetadataRecoveryStrategy;
                    set
                        /// `metadata.recovery.strategy`.
                        (strategy: MetadataRecoveryStrategy);
                    docs [
                        "`MetadataRecoveryStrategy`",
                        "`rebootstrap`",
                        "`rebootstrap`: back to the bootstrap addresses (resolved again) when no known broker can be reached, on REBOOTSTRAP_REQUIRED (KIP-1102), or after `metadata.recovery.rebootstrap.trigger.ms` without metadata; `none`: only the brokers of the last metadata",
                        "`rebootstrap`, `none`"
                    ];
                }
                METADATA_RECOVERY_REBOOTSTRAP_TRIGGER_MS = "metadata.recovery.rebootstrap.trigger.ms" {
                    metadata_recovery_rebootstrap_trigger: Duration = Duration::from_millis(300_000);
                    parse: parse_ms;
                    check ms(0, LONG_MAX);
                    render: ms;
                    get
                        /// `metadata.recovery.rebootstrap.trigger.ms` (KIP-1102): how long
                        /// metadata may be wanted without an answer before the client goes
                        /// back to the bootstrap addresses (default 5 min).
                        -> Duration;
                    set
                        /// `metadata.recovery.rebootstrap.trigger.ms`.
                        (trigger: Duration);
                    docs [
                        "`Duration`",
                        "300000",
                        "with `rebootstrap`: how long metadata may be wanted without an answer before the bootstrap addresses are asked again",
                        "0 and up"
                    ];
                }
                RECONNECT_BACKOFF_MS = "reconnect.backoff.ms" {
                    reconnect_backoff: Option<Duration> => Duration = None;
                    parse: optional(parse_ms);
                    check ms(0, LONG_MAX);
                    render: ms;
                    get
                        /// `reconnect.backoff.ms`: the first wait before reconnecting to a
                        /// broker (default 50 ms).
                        -> Duration;
                    set
                        /// `reconnect.backoff.ms`. Setting it without
                        /// `reconnect.backoff.max.ms` turns exponential backoff off, as in the
                        /// Java client.
                        (backoff: Duration) => Some(backoff);
                    docs [
                        "`Duration`",
                        "50",
                        "first wait before reconnecting to a broker",
                        "0 and up"
                    ];
                }
                RECONNECT_BACKOFF_MAX_MS = "reconnect.backoff.max.ms" {
                    reconnect_backoff_max: Option<Duration> => Duration = None;
                    parse: optional(parse_ms);
                    check ms(0, LONG_MAX);
                    render: ms;
                    get
                        /// `reconnect.backoff.max.ms`: the wait doubles up to this (default
                        /// 1 s). As in the Java client, setting only `reconnect.backoff.ms`
                        /// makes this the same value, which turns the doubling off.
                        -> Duration;
                    set
                        /// `reconnect.backoff.max.ms`; at least `reconnect.backoff.ms`.
                        (backoff: Duration) => Some(backoff);
                    docs [
                        "`Duration`",
                        "1000",
                        "the wait doubles (±20% jitter) up to this",
                        "0 and up; at least `reconnect.backoff.ms`; when unset but `reconnect.backoff.ms` is set, equals it (no doubling), as in Java"
                    ];
                }
                SOCKET_CONNECTION_SETUP_TIMEOUT_MS = "socket.connection.setup.timeout.ms" {
                    socket_connection_setup_timeout: Duration = Duration::from_millis(10_000);
                    parse: parse_ms;
                    check ms(1, LONG_MAX);
                    render: ms;
                    get
                        /// `socket.connection.setup.timeout.ms`: how long the first connect
                        /// attempt to a broker may take (default 10 s).
                        -> Duration;
                    set
                        /// `socket.connection.setup.timeout.ms`.
                        (timeout: Duration);
                    docs [
                        "`Duration`",
                        "10000",
                        "first connect attempt's timeout, covering the whole setup: TCP, ApiVersions and SASL authentication",
                        "1 and up"
                    ];
                }
                SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS = "socket.connection.setup.timeout.max.ms" {
                    socket_connection_setup_timeout_max: Duration = Duration::from_millis(30_000);
                    parse: parse_ms;
                    check ms(1, LONG_MAX);
                    render: ms;
                    get
                        /// `socket.connection.setup.timeout.max.ms`: the setup timeout grows on
                        /// consecutive failures up to this (default 30 s).
                        -> Duration;
                    set
                        /// `socket.connection.setup.timeout.max.ms`; at least
                        /// `socket.connection.setup.timeout.ms`.
                        (timeout: Duration);
                    docs [
                        "`Duration`",
                        "30000",
                        "the timeout grows on consecutive failures up to this",
                        "1 and up; at least `socket.connection.setup.timeout.ms`"
                    ];
                }
                SOCKET_KEEPALIVE_ENABLE = "socket.keepalive.enable" {
                    socket_keepalive: bool = true;
                    parse: parse_bool;
                    render: shown;
                    get
                        /// `socket.keepalive.enable`: turn on TCP keepalive (default `true`).
                        -> bool;
                    set
                        /// `socket.keepalive.enable`.
                        (enable: bool);
                    docs [
                        "`bool`",
                        "`true` (librdkafka's name; Java has none)",
                        "TCP keepalive",
                        "`true`/`false`"
                    ];
                }
                RETRY_BACKOFF_MS = "retry.backoff.ms" {
                    retry_backoff: Duration = Duration::from_millis(100);
                    parse: parse_ms;
                    check ms(0, LONG_MAX);
                    render: ms;
                    get
                        /// `retry.backoff.ms`: the wait before retrying a failed request
                        /// (default 100 ms).
                        -> Duration;
                    set
                        /// `retry.backoff.ms`.
                        (backoff: Duration);
                    docs [
                        "`Duration`",
                        "100",
                        "wait before retrying a failed request (every request kind: Metadata, FindCoordinator, JoinGroup/SyncGroup/Heartbeat, OffsetFetch, ListOffsets, OffsetForLeaderEpoch, Fetch errors)",
                        "0 and up"
                    ];
                }
                RETRY_BACKOFF_MAX_MS = "retry.backoff.max.ms" {
                    retry_backoff_max: Duration => Duration = Duration::from_millis(1000);
                    parse: parse_ms;
                    check ms(0, LONG_MAX);
                    render: ms;
                    get
                        /// `retry.backoff.max.ms`: the wait before retrying a request that
                        /// failed again doubles (±20% jitter) up to this (default 1 s;
                        /// KIP-580). Never below `retry.backoff.ms`. A consumer applies one
                        /// policy to every request kind: Metadata, FindCoordinator, the
                        /// group's requests, OffsetFetch, ListOffsets, OffsetForLeaderEpoch
                        /// and Fetch errors.
                        -> Duration;
                    set
                        /// `retry.backoff.max.ms`; a value below `retry.backoff.ms` is taken
                        /// as `retry.backoff.ms` (no doubling).
                        (backoff: Duration);
                    docs [
                        "`Duration`",
                        "1000",
                        "the retry wait doubles (±20% jitter) while the same request keeps failing, up to this (KIP-580)",
                        "0 and up; below `retry.backoff.ms` it is taken as `retry.backoff.ms`"
                    ];
                }
                CLIENT_RUNTIME = "client.runtime" {
                    client_runtime: ClientRuntime = ClientRuntime::Auto;
                    parse: parsed;
                    render: shown;
                    get
                        /// `client.runtime` (default `auto`): which async runtime the client
                        /// runs on; see [`ClientRuntime`].
                        -> ClientRuntime;
                    set
                        /// `client.runtime`: which async runtime the client runs on.
                        (runtime: ClientRuntime);
                    docs [
                        "`ClientRuntime`",
                        "`auto` (lazykafka's own)",
                        "the async runtime the consumer runs on, chosen by `Consumer::new`: `auto` is tokio when `new` runs inside a tokio runtime (with the cargo feature `runtime-tokio`), async-std otherwise (with `runtime-tokio` alone, a consumer created outside a tokio runtime runs on the one its first `poll` runs in, and a first `poll` outside any returns `Error::Config`); `tokio` is the runtime `new` runs in; `async-std` is async-std even inside a tokio runtime. See the README's \"Choosing a runtime\" and the rustdoc of `lazykafka::runtime`",
                        "`auto`, `tokio`, `async-std` (any case); checked by `Consumer::new`, not by the configuration: a value whose cargo feature (`runtime-tokio`, `runtime-async-std`) is not built, or `tokio` outside a tokio runtime, is an `Error::Config` there"
                    ];
                }
                SECURITY_PROTOCOL = "security.protocol" {
                    security_protocol: SecurityProtocol = SecurityProtocol::Plaintext;
                    parse: parsed;
                    render: shown;
                    get
                        /// `security.protocol`: plain TCP or TLS, with or without SASL (default
                        /// `PLAINTEXT`). See `docs/security.md`.
                        -> SecurityProtocol;
                    set
                        /// `security.protocol`.
                        (protocol: SecurityProtocol);
                    docs [
                        "`SecurityProtocol`",
                        "`PLAINTEXT`",
                        "TCP or TLS, with or without SASL ([security.md](security.md))",
                        "`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`, any case"
                    ];
                }
                SSL_CA_LOCATION = "ssl.ca.location" {
                    ssl_ca_location: Option<PathBuf> = None;
                    parse: ca_location;
                    render: path_if_set;
                    get
                        /// `ssl.ca.location`: a PEM file (or a directory of PEM files) of the
                        /// certificates that may sign a broker's certificate. With neither this
                        /// nor `ssl.ca.pem`, the system's root certificates are trusted.
                        -> Option<&Path> { .as_deref() };
                    set
                        /// `ssl.ca.location`: a PEM file or a directory of PEM files.
                        (path: impl Into<PathBuf>) => Some(path.into());
                    docs [
                        "`Option<&Path>`",
                        "unset: the system's roots",
                        "PEM file or directory of the CAs that may sign a broker's certificate",
                        "a path; `probe` or empty means unset; not with `ssl.ca.pem`"
                    ];
                }
                SSL_CA_PEM = "ssl.ca.pem" {
                    ssl_ca_pem: Option<String> = None;
                    parse: text_or_none;
                    render: shown_if_set;
                    get
                        /// `ssl.ca.pem`: the CA certificates as PEM text, instead of a file.
                        -> Option<&str> { .as_deref() };
                    set
                        /// `ssl.ca.pem`.
                        (pem: impl Into<String>) => Some(pem.into());
                    docs [
                        "`Option<&str>`",
                        "unset",
                        "the same as PEM text",
                        "PEM; not with `ssl.ca.location`"
                    ];
                }
                SSL_CERTIFICATE_LOCATION = "ssl.certificate.location" {
                    ssl_certificate_location: Option<PathBuf> = None;
                    parse: path_or_none;
                    render: path_if_set;
                    get
                        /// `ssl.certificate.location`: this client's certificate chain (PEM
                        /// file), for brokers that authenticate clients by certificate.
                        -> Option<&Path> { .as_deref() };
                    set
                        /// `ssl.certificate.location`.
                        (path: impl Into<PathBuf>) => Some(path.into());
                    docs [
                        "`Option<&Path>`",
                        "unset",
                        "this client's certificate chain (mutual TLS)",
                        "a path; needs a key; not with `ssl.certificate.pem`"
                    ];
                }
                SSL_CERTIFICATE_PEM = "ssl.certificate.pem" {
                    ssl_certificate_pem: Option<String> = None;
                    parse: text_or_none;
                    render: shown_if_set;
                    get
                        /// `ssl.certificate.pem`: this client's certificate chain as PEM text.
                        -> Option<&str> { .as_deref() };
                    set
                        /// `ssl.certificate.pem`.
                        (pem: impl Into<String>) => Some(pem.into());
                    docs [
                        "`Option<&str>`",
                        "unset",
                        "the same as PEM text",
                        "PEM; needs a key"
                    ];
                }
                SSL_KEY_LOCATION = "ssl.key.location" {
                    ssl_key_location: Option<PathBuf> = None;
                    parse: path_or_none;
                    render: path_if_set;
                    get
                        /// `ssl.key.location`: the private key of this client's certificate
                        /// (PEM file: PKCS#8, PKCS#1 RSA, SEC1 EC, or encrypted PKCS#8 with
                        /// `ssl.key.password`).
                        -> Option<&Path> { .as_deref() };
                    set
                        /// `ssl.key.location`.
                        (path: impl Into<PathBuf>) => Some(path.into());
                    docs [
                        "`Option<&Path>`",
                        "unset",
                        "the certificate's private key (PKCS#8, PKCS#1, SEC1, or encrypted PKCS#8)",
                        "a path; needs a certificate; not with `ssl.key.pem`"
                    ];
                }
                SSL_KEY_PEM = "ssl.key.pem" {
                    ssl_key_pem: Option<Secret> = None;
                    parse: secret_or_none;
                    render: secret;
                    get
                        /// `ssl.key.pem`: the private key as PEM text (a secret: never shown by
                        /// `Debug` nor rendered by [`to_properties`](Self::to_properties)).
                        -> Option<&str> { .as_ref().map(Secret::expose) };
                    set
                        /// `ssl.key.pem` (a secret).
                        (pem: impl Into<String>) => Some(Secret::new(pem));
                    docs [
                        "`Option<&str>`",
                        "unset",
                        "the same as PEM text; a secret: never in `Debug` nor `to_properties`",
                        "PEM"
                    ];
                }
                SSL_KEY_PASSWORD = "ssl.key.password" {
                    ssl_key_password: Option<Secret> = None;
                    // Not trimmed: a password may begin or end with a space.
                    parse untrimmed: secret_or_none;
                    render: secret;
                    get
                        /// `ssl.key.password`: the password of an encrypted PKCS#8 key (a
                        /// secret, like `ssl.key.pem`).
                        -> Option<&str> { .as_ref().map(Secret::expose) };
                    set
                        /// `ssl.key.password` (a secret).
                        (password: impl Into<String>) => Some(Secret::new(password));
                    docs [
                        "`Option<&str>`",
                        "unset",
                        "password of an encrypted PKCS#8 key; a secret",
                        "any text, not trimmed"
                    ];
                }
                SSL_ENDPOINT_IDENTIFICATION_ALGORITHM = "ssl.endpoint.identification.algorithm" {
                    ssl_endpoint_identification_algorithm: EndpointIdentification =
                        EndpointIdentification::Https;
                    parse: parsed;
                    render: shown;
                    get
                        /// `ssl.endpoint.identification.algorithm`: whether a broker's
                        /// certificate must name the host it was dialled by (default `https`:
                        /// it must).
                        -> EndpointIdentification;
                    set
                        /// `ssl.endpoint.identification.algorithm`.
                        (check: EndpointIdentification);
                    docs [
                        "`EndpointIdentification`",
                        "`https`",
                        "whether the certificate must name the host dialled",
                        "`https`, `none` (or empty)"
                    ];
                }
                ENABLE_SSL_CERTIFICATE_VERIFICATION = "enable.ssl.certificate.verification" {
                    enable_ssl_certificate_verification: bool = true;
                    parse: parse_bool;
                    render: shown;
                    get
                        /// `enable.ssl.certificate.verification` (librdkafka's name): verify
                        /// brokers' certificates at all (default `true`; `false` accepts any
                        /// certificate, which encrypts but does not authenticate).
                        -> bool;
                    set
                        /// `enable.ssl.certificate.verification`.
                        (enable: bool);
                    docs [
                        "`bool`",
                        "`true` (librdkafka's name)",
                        "verify brokers' certificates at all",
                        "`true`/`false`"
                    ];
                }
                SASL_MECHANISM = "sasl.mechanism" {
                    sasl_mechanism: Option<crate::sasl::Mechanism> = None;
                    also SASL_MECHANISMS;
                    parse: parse_mechanism;
                    render: shown_if_set;
                    get
                        /// `sasl.mechanism` (librdkafka: `sasl.mechanisms`), if set.
                        -> Option<crate::sasl::Mechanism>;
                    set
                        /// `sasl.mechanism`: required with `SASL_PLAINTEXT` and `SASL_SSL`.
                        (mechanism: crate::sasl::Mechanism) => Some(mechanism);
                    docs [
                        "`Option<Mechanism>`",
                        "none",
                        "SASL mechanism",
                        "`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER` (any case); required with `SASL_*`; ignored otherwise",
                        " (librdkafka: `sasl.mechanisms`)"
                    ];
                }
                SASL_USERNAME = "sasl.username" {
                    sasl_username: Option<String> = None;
                    parse: some_text;
                    render: shown_if_set;
                    get
                        /// `sasl.username`, if set.
                        -> Option<&str> { .as_deref() };
                    set
                        /// `sasl.username` (PLAIN, SCRAM).
                        (username: impl Into<String>) => Some(username.into());
                    docs [
                        "`Option<&str>`",
                        "none",
                        "PLAIN and SCRAM user",
                        "required with PLAIN and SCRAM"
                    ];
                }
                SASL_PASSWORD = "sasl.password" {
                    // Its setter is `common_setters`'s, whose rustdoc names the
                    // configuration type.
                    sasl_password: Option<Secret> = None;
                    parse: some_secret;
                    render: secret;
                    get
                        /// `sasl.password`, if set (its `Debug` and `Display` show
                        /// `[redacted]`).
                        -> Option<&Secret> { .as_ref() };
                    docs [
                        "`Option<&Secret>`",
                        "none",
                        "PLAIN and SCRAM password; never shown by `Debug` nor listed by `to_properties`",
                        "required with PLAIN and SCRAM"
                    ];
                }
                SASL_OAUTHBEARER_CONFIG = "sasl.oauthbearer.config" {
                    sasl_oauthbearer_config: Option<String> = None;
                    parse: parse_oauthbearer_config;
                    render: shown_if_set;
                    get
                        /// `sasl.oauthbearer.config`, if set.
                        -> Option<&str> { .as_deref() };
                    set
                        /// `sasl.oauthbearer.config`: for unsecured OAUTHBEARER tokens,
                        /// `principal=NAME` and optionally `lifeSeconds=N` (3600), `scope=S`,
                        /// `extension_KEY=VALUE`, separated by spaces (librdkafka's syntax).
                        (config: impl Into<String>) => {
                            let config = config.into();
                            (!config.is_empty()).then_some(config)
                        };
                    docs [
                        "`Option<&str>`",
                        "none",
                        "unsecured OAUTHBEARER token settings (librdkafka's syntax)",
                        "space-separated `principal=`, `lifeSeconds=` (positive), `scope=`, `extension_NAME=`; `principal` required with unsecured tokens"
                    ];
                }
                ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT = "enable.sasl.oauthbearer.unsecure.jwt" {
                    enable_sasl_oauthbearer_unsecure_jwt: bool = false;
                    parse: parse_bool;
                    render: shown;
                    get
                        /// `enable.sasl.oauthbearer.unsecure.jwt` (default `false`).
                        -> bool;
                    set
                        /// `enable.sasl.oauthbearer.unsecure.jwt`: make unsecured
                        /// (`"alg":"none"`) OAUTHBEARER tokens from `sasl.oauthbearer.config`,
                        /// for test brokers that accept them.
                        (enable: bool);
                    docs [
                        "`bool`",
                        "`false`",
                        "make unsecured OAUTHBEARER tokens (tests)",
                        "`true`/`false`; not together with a token provider"
                    ];
                }
            }
            unbound {
                // Parsed and rendered by `CommonBuilder::parse_unbound` and
                // `Common::render`: it has a single accepted value.
                CLIENT_DNS_LOOKUP = "client.dns.lookup" {
                    docs [
                        "—",
                        "`use_all_dns_ips`",
                        "names are resolved at connect time and every address is tried",
                        "only `use_all_dns_ips`"
                    ];
                }
            }
        }
    };
}

pub(in crate::config) use common_table;
