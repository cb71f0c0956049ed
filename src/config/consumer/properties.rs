//! The table of the consumer's own properties (see
//! [`table`](super::super::table) for what a row says and what is made of
//! it; the properties every client takes are in
//! [`common`](super::super::common)). The defaults are the Java client's
//! unless the docs column says otherwise.

/// Hands the table of the consumer's own properties to `$generate` (one
/// of the macros of [`table`](super::super::table)), after `$args`.
macro_rules! consumer_table {
    ($generate:ident! { $($args:tt)* }) => {
        $generate! {
            $($args)*
            rows {
                GROUP_ID = "group.id" {
                    group_id: Option<String> = None;
                    parse: some_text;
                    check with(check_group_id);
                    render: shown_if_set;
                    get
                        /// `group.id`: the consumer group; `None` means manual assignment only
                        /// (no coordinator, no commits).
                        -> Option<&str> { .as_deref() };
                    set
                        /// `group.id`. Without one the consumer can only be assigned
                        /// partitions by hand.
                        (group_id: impl Into<String>) => Some(group_id.into());
                    docs [
                        "`Option<&str>`",
                        "none",
                        "consumer group; none = manual assignment only, no commits",
                        "not empty"
                    ];
                }
                GROUP_INSTANCE_ID = "group.instance.id" {
                    group_instance_id: Option<String> = None;
                    parse: some_text;
                    check with(check_group_instance_id);
                    render: shown_if_set;
                    get
                        /// `group.instance.id`: makes this member static (KIP-345).
                        -> Option<&str> { .as_deref() };
                    set
                        /// `group.instance.id` (static membership, KIP-345); needs a
                        /// `group.id`.
                        (id: impl Into<String>) => Some(id.into());
                    docs [
                        "`Option<&str>`",
                        "none",
                        "static membership (KIP-345)",
                        "needs `group.id`; 1-249 of `[A-Za-z0-9._-]`"
                    ];
                }
                GROUP_PROTOCOL = "group.protocol" {
                    group_protocol: GroupProtocol = GroupProtocol::Classic;
                    parse: parse_group_protocol;
                    render: shown;
                    get
                        /// `group.protocol`: `classic` (default; JoinGroup, SyncGroup and
                        /// client-side assignors) or `consumer` (KIP-848: ConsumerGroupHeartbeat
                        /// and assignment by the coordinator, Kafka 4.0+).
                        -> GroupProtocol;
                    set
                        /// `group.protocol`: classic (default) or consumer (KIP-848).
                        (protocol: GroupProtocol);
                    docs [
                        "`GroupProtocol`",
                        "`classic`",
                        "group protocol: `classic` (JoinGroup/SyncGroup, client-side assignors) or `consumer` (KIP-848: ConsumerGroupHeartbeat, assignment by the coordinator, Kafka 4.0+)",
                        "`classic` or `consumer` (any case); under `consumer`, setting `session.timeout.ms`, `heartbeat.interval.ms` or `partition.assignment.strategy` explicitly is an error (the coordinator owns them), as in the Java client"
                    ];
                }
                GROUP_REMOTE_ASSIGNOR = "group.remote.assignor" {
                    group_remote_assignor: Option<RemoteAssignor> = None;
                    parse: parse_remote_assignor;
                    render: shown_if_set;
                    get
                        /// `group.remote.assignor`: the coordinator-side assignor a member of
                        /// the consumer protocol asks for; `None` (default) lets the broker use
                        /// its default (`uniform` in Kafka).
                        -> Option<RemoteAssignor>;
                    set
                        /// `group.remote.assignor`: the coordinator-side assignor of the
                        /// consumer protocol; only with `group.protocol=consumer`.
                        (assignor: RemoteAssignor) => Some(assignor);
                    docs [
                        "`Option<RemoteAssignor>`",
                        "none (the broker's default, `uniform` in Kafka)",
                        "coordinator-side assignor a `consumer`-protocol member asks for",
                        "`uniform` or `range` (any case); `\"\"` means none; only with `group.protocol=consumer`"
                    ];
                }
                CLIENT_RACK = "client.rack" {
                    // Java's default is "", meaning no rack.
                    client_rack: Option<String> = None;
                    parse: text_or_none;
                    render: shown_if_set;
                    get
                        /// `client.rack`: the rack this consumer runs in, sent in the group
                        /// subscription and in every Fetch (v11+), so that a partition's
                        /// leader may name a follower in this rack to fetch from instead
                        /// (KIP-392; see `docs/consumer.md`).
                        -> Option<&str> { .as_deref() };
                    set
                        /// `client.rack`: sent in the group subscription and in Fetch (v11+),
                        /// so that a leader may name a follower in this rack to fetch from
                        /// (KIP-392). Empty means none.
                        (rack: impl Into<String>) =>
                            Some(rack.into()).filter(|rack: &String| !rack.is_empty());
                    docs [
                        "`Option<&str>`",
                        "none (Java: `\"\"`)",
                        "rack of this consumer: sent as RackId in Fetch (v11+), so a leader may name a follower in this rack to fetch from (KIP-392, [consumer.md](consumer.md#fetching-from-the-nearest-replica-clientrack)); and in the group subscription (classic) or as RackId in ConsumerGroupHeartbeat (consumer)",
                        "empty means none"
                    ];
                }
                AUTO_OFFSET_RESET = "auto.offset.reset" {
                    auto_offset_reset: OffsetReset = OffsetReset::Latest;
                    parse: parsed;
                    render: shown;
                    get
                        /// `auto.offset.reset` (default `latest`).
                        -> OffsetReset;
                    set
                        /// `auto.offset.reset`.
                        (reset: OffsetReset);
                    docs [
                        "`OffsetReset`",
                        "`latest`",
                        "where to start without a committed offset, or when out of range",
                        "`earliest`, `latest`, `none` (any case)"
                    ];
                }
                ENABLE_AUTO_COMMIT = "enable.auto.commit" {
                    // Unset: true with a group, false without (`build`).
                    enable_auto_commit: Option<bool> => bool = None;
                    parse: optional(parse_bool);
                    render: shown;
                    get
                        /// `enable.auto.commit` (default `true` with a `group.id`; always
                        /// `false` without one, as in the Java client).
                        -> bool;
                    set
                        /// `enable.auto.commit`. `true` needs a `group.id`.
                        (enable: bool) => Some(enable);
                    docs [
                        "`bool`",
                        "`true` with a group, `false` without",
                        "commit consumed positions periodically",
                        "`true` needs `group.id`"
                    ];
                }
                AUTO_COMMIT_INTERVAL_MS = "auto.commit.interval.ms" {
                    auto_commit_interval: Duration = Duration::from_millis(5_000);
                    parse: parse_ms;
                    check ms(0, INT_MAX);
                    render: ms;
                    get
                        /// `auto.commit.interval.ms` (default 5 s).
                        -> Duration;
                    set
                        /// `auto.commit.interval.ms`.
                        (interval: Duration);
                    docs [
                        "`Duration`",
                        "5000",
                        "auto-commit period",
                        "0-2147483647"
                    ];
                }
                ENABLE_AUTO_OFFSET_STORE = "enable.auto.offset.store" {
                    enable_auto_offset_store: bool = true;
                    parse: parse_bool;
                    render: shown;
                    get
                        /// `enable.auto.offset.store` (default `true`, as in librdkafka): every
                        /// record `poll` returns counts as processed, and commits (automatic,
                        /// [`Consumer::commit`](crate::Consumer::commit), on `close`) take the
                        /// consumed positions. With `false` they take only the offsets the
                        /// application stored with
                        /// [`Consumer::store_offset`](crate::Consumer::store_offset).
                        -> bool;
                    set
                        /// `enable.auto.offset.store`: `false` makes commits take only the
                        /// offsets stored with
                        /// [`Consumer::store_offset`](crate::Consumer::store_offset).
                        (enable: bool);
                    docs [
                        "`bool`",
                        "`true`",
                        "librdkafka's: `true`, every record `poll` returns counts as processed and commits take the consumed positions; `false`, auto-commit, `commit()`, a commit on revoke and `close()` take only the offsets stored with `Consumer::store_offset` / `store_offsets` (what was processed)",
                        "`true`/`false`"
                    ];
                }
                ISOLATION_LEVEL = "isolation.level" {
                    isolation_level: IsolationLevel = IsolationLevel::ReadUncommitted;
                    parse: parsed;
                    render: shown;
                    get
                        /// `isolation.level` (default `read_uncommitted`).
                        -> IsolationLevel;
                    set
                        /// `isolation.level`.
                        (level: IsolationLevel);
                    docs [
                        "`IsolationLevel`",
                        "`read_uncommitted`",
                        "whether to hide records of open and aborted transactions",
                        "`read_uncommitted`, `read_committed` (any case)"
                    ];
                }
                FETCH_MIN_BYTES = "fetch.min.bytes" {
                    fetch_min_bytes: u32 = 1;
                    parse: parse_u32;
                    check int(0);
                    render: shown;
                    get
                        /// `fetch.min.bytes`: how much data a Fetch waits for (default 1).
                        -> u32;
                    set
                        /// `fetch.min.bytes`; at most `fetch.max.bytes`.
                        (bytes: u32);
                    docs [
                        "`u32`",
                        "1",
                        "data a Fetch waits for",
                        "0-2147483647; at most `fetch.max.bytes`"
                    ];
                }
                FETCH_MAX_WAIT_MS = "fetch.max.wait.ms" {
                    fetch_max_wait: Duration = Duration::from_millis(500);
                    parse: parse_ms;
                    check ms(0, INT_MAX);
                    render: ms;
                    get
                        /// `fetch.max.wait.ms`: how long a Fetch waits for `fetch.min.bytes`
                        /// (default 500 ms).
                        -> Duration;
                    set
                        /// `fetch.max.wait.ms`.
                        (wait: Duration);
                    docs [
                        "`Duration`",
                        "500",
                        "how long a Fetch waits for `fetch.min.bytes`",
                        "0-2147483647"
                    ];
                }
                FETCH_MAX_BYTES = "fetch.max.bytes" {
                    fetch_max_bytes: u32 = 52_428_800;
                    parse: parse_u32;
                    check int(0);
                    render: shown;
                    get
                        /// `fetch.max.bytes`: the size a Fetch response aims to stay under
                        /// (default 52428800, 50 MiB).
                        -> u32;
                    set
                        /// `fetch.max.bytes`.
                        (bytes: u32);
                    docs [
                        "`u32`",
                        "52428800",
                        "size a Fetch response aims to stay under",
                        "0-2147483647"
                    ];
                }
                MAX_PARTITION_FETCH_BYTES = "max.partition.fetch.bytes" {
                    max_partition_fetch_bytes: u32 = 1_048_576;
                    parse: parse_u32;
                    check int(0);
                    render: shown;
                    get
                        /// `max.partition.fetch.bytes`: the same per partition (default
                        /// 1048576, 1 MiB).
                        -> u32;
                    set
                        /// `max.partition.fetch.bytes`.
                        (bytes: u32);
                    docs [
                        "`u32`",
                        "1048576",
                        "the same per partition",
                        "0-2147483647"
                    ];
                }
                MAX_POLL_RECORDS = "max.poll.records" {
                    max_poll_records: u32 = 500;
                    parse: parse_u32;
                    check int(1);
                    render: shown;
                    get
                        /// `max.poll.records`: the most records one `poll` returns (default
                        /// 500).
                        -> u32;
                    set
                        /// `max.poll.records`; at least 1.
                        (records: u32);
                    docs [
                        "`u32`",
                        "500",
                        "most records one `poll` returns",
                        "1-2147483647"
                    ];
                }
                SESSION_TIMEOUT_MS = "session.timeout.ms" {
                    session_timeout: Duration = Duration::from_millis(45_000);
                    parse: parse_ms;
                    check ms(1, INT_MAX);
                    render: ms;
                    get
                        /// `session.timeout.ms`: how long the coordinator waits for a heartbeat
                        /// before it removes this member (default 45 s).
                        -> Duration;
                    set
                        /// `session.timeout.ms`.
                        (timeout: Duration);
                    docs [
                        "`Duration`",
                        "45000",
                        "time without heartbeat before the coordinator drops the member",
                        "1-2147483647 (the broker enforces its own range, 6000-1800000 by default)"
                    ];
                }
                HEARTBEAT_INTERVAL_MS = "heartbeat.interval.ms" {
                    heartbeat_interval: Duration = Duration::from_millis(3_000);
                    parse: parse_ms;
                    check ms(1, INT_MAX);
                    render: ms;
                    get
                        /// `heartbeat.interval.ms` (default 3 s); always below the session
                        /// timeout.
                        -> Duration;
                    set
                        /// `heartbeat.interval.ms`; must be lower than `session.timeout.ms`.
                        (interval: Duration);
                    docs [
                        "`Duration`",
                        "3000",
                        "heartbeat period",
                        "1-2147483647; lower than `session.timeout.ms`"
                    ];
                }
                MAX_POLL_INTERVAL_MS = "max.poll.interval.ms" {
                    max_poll_interval: Duration = Duration::from_millis(300_000);
                    parse: parse_ms;
                    check ms(1, INT_MAX);
                    render: ms;
                    get
                        /// `max.poll.interval.ms`: the longest time between two polls before
                        /// the member leaves the group; also the JoinGroup rebalance timeout
                        /// (default 5 min).
                        -> Duration;
                    set
                        /// `max.poll.interval.ms`.
                        (interval: Duration);
                    docs [
                        "`Duration`",
                        "300000",
                        "longest time between polls before leaving the group; JoinGroup rebalance timeout",
                        "1-2147483647"
                    ];
                }
                PARTITION_ASSIGNMENT_STRATEGY = "partition.assignment.strategy" {
                    partition_assignment_strategy: Vec<AssignmentStrategy> = vec![
                        AssignmentStrategy::Range,
                        AssignmentStrategy::CooperativeSticky,
                    ];
                    parse: parse_strategies;
                    check with(check_strategies);
                    render: comma_list;
                    get
                        /// `partition.assignment.strategy`, in order of preference (default
                        /// `range,cooperative-sticky`).
                        -> &[AssignmentStrategy] { .as_slice() };
                    set
                        /// `partition.assignment.strategy`, in order of preference.
                        (strategies: impl IntoIterator<Item = AssignmentStrategy>) =>
                            strategies.into_iter().collect();
                    docs [
                        "`&[AssignmentStrategy]`",
                        "`range,cooperative-sticky`",
                        "assignors, in order of preference; see `docs/assignors.md`",
                        "comma list of `range`, `roundrobin`, `cooperative-sticky` or the Java class names `org.apache.kafka.clients.consumer.{Range,RoundRobin,CooperativeSticky}Assignor`; at least one; none twice; `sticky` (eager) is refused"
                    ];
                }
                DEFAULT_API_TIMEOUT_MS = "default.api.timeout.ms" {
                    default_api_timeout: Duration = Duration::from_millis(60_000);
                    parse: parse_ms;
                    check ms(0, INT_MAX);
                    render: ms;
                    get
                        /// `default.api.timeout.ms`: the timeout of blocking calls that take
                        /// none, such as `committed` (default 60 s).
                        -> Duration;
                    set
                        /// `default.api.timeout.ms`.
                        (timeout: Duration);
                    docs [
                        "`Duration`",
                        "60000",
                        "timeout of calls that take none (`committed`, ...)",
                        "0-2147483647"
                    ];
                }
                MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION = "max.in.flight.requests.per.connection" {
                    max_in_flight_requests_per_connection: u32 = 5;
                    parse: parse_u32;
                    check int(1);
                    render: shown;
                    get
                        /// `max.in.flight.requests.per.connection`: requests sent on one
                        /// connection before waiting for an answer (default 5).
                        -> u32;
                    set
                        /// `max.in.flight.requests.per.connection`; at least 1.
                        (requests: u32);
                    docs [
                        "`u32`",
                        "5 (a producer property in Java)",
                        "requests sent on a connection before waiting for answers",
                        "1-2147483647"
                    ];
                }
                CHECK_CRCS = "check.crcs" {
                    check_crcs: bool = true;
                    parse: parse_bool;
                    render: shown;
                    get
                        /// `check.crcs`: verify the CRC of every fetched record batch (default
                        /// `true`).
                        -> bool;
                    set
                        /// `check.crcs`.
                        (check: bool);
                    docs [
                        "`bool`",
                        "`true`",
                        "verify each fetched batch's CRC",
                        "`true`/`false`"
                    ];
                }
                ENABLE_PARTITION_EOF = "enable.partition.eof" {
                    enable_partition_eof: bool = false;
                    parse: parse_bool;
                    render: shown;
                    get
                        /// `enable.partition.eof` (librdkafka's name; default `false`): when
                        /// `true`, `poll` (and the stream) says once each time a partition's
                        /// position reaches the end of its log (the high watermark; the last
                        /// stable offset under `read_committed`), as an
                        /// [`Error::Fetch`] holding
                        /// [`FetchError::PartitionEof`](crate::error::FetchError::PartitionEof),
                        /// after the partition's records before it. It is retriable: a loop
                        /// that polls on past retriable errors goes on; one that reads until
                        /// caught up stops there ([`Error::partition_eof`](crate::Error::partition_eof)).
                        -> bool;
                    set
                        /// `enable.partition.eof`: say when a partition's position reaches
                        /// the end of its log (see [`ConsumerConfig::enable_partition_eof`]).
                        (enable: bool);
                    docs [
                        "`bool`",
                        "`false` (librdkafka's name; Java has none)",
                        "`true`: `poll` (and the stream) says once each time a partition's position reaches the end of its log (the high watermark; the last stable offset under `read_committed`), after the records before it, as a retriable `Error::Fetch(FetchError::PartitionEof { partition, offset })` (`Error::partition_eof()`); again after more records were read or after a seek ([consumer.md](consumer.md#the-end-of-a-partition))",
                        "`true`/`false`"
                    ];
                }
                FETCH_SESSIONS_ENABLE = "fetch.sessions.enable" {
                    fetch_sessions: bool = true;
                    parse: parse_bool;
                    render: shown;
                    get
                        /// `fetch.sessions.enable`: use incremental fetch sessions (KIP-227)
                        /// on each leader connection: after a full Fetch, requests list only
                        /// the partitions that changed. On by default, as in the Java client
                        /// (`false`: every Fetch is a full one outside any session); see
                        /// `docs/fetching.md`.
                        -> bool;
                    set
                        /// `fetch.sessions.enable`.
                        (enable: bool);
                    docs [
                        "`bool`",
                        "`true`",
                        "incremental fetch sessions (KIP-227), one per leader connection: after a full Fetch only changed partitions are listed and only changed partitions come back; `false`: every Fetch is a full one outside any session (`session_epoch` -1). On by default, as in the Java client (see docs/fetching.md)",
                        "`true`/`false`"
                    ];
                }
                EXCLUDE_INTERNAL_TOPICS = "exclude.internal.topics" {
                    exclude_internal_topics: bool = true;
                    parse: parse_bool;
                    render: shown;
                    get
                        /// `exclude.internal.topics` (default `true`): a pattern subscription
                        /// ([`Consumer::subscribe_pattern`](crate::Consumer)) under the classic
                        /// group protocol never matches an internal topic (one the metadata
                        /// marks IsInternal, such as `__consumer_offsets`), as in the Java
                        /// client; with `false` it may. Subscribing to an internal topic by
                        /// name always works. Under `group.protocol=consumer` the coordinator
                        /// resolves the pattern and this property does not apply.
                        -> bool;
                    set
                        /// `exclude.internal.topics`: whether a classic pattern subscription
                        /// leaves internal topics out (default `true`).
                        (exclude: bool);
                    docs [
                        "`bool`",
                        "`true`",
                        "a pattern subscription (`subscribe_pattern`) under the classic protocol never matches an internal topic (IsInternal in the metadata, such as `__consumer_offsets`), as in the Java client; by name one can always be subscribed to. Under `group.protocol=consumer` the coordinator resolves the pattern and this does not apply",
                        "`true`/`false`"
                    ];
                }
                RECEIVE_MESSAGE_MAX_BYTES = "receive.message.max.bytes" {
                    // Unset: grows to fit fetch.max.bytes (`build`).
                    receive_message_max_bytes: Option<u32> => u32 = None;
                    parse: optional(parse_u32);
                    check with(check_receive_limit);
                    render: shown;
                    get
                        /// `receive.message.max.bytes` (librdkafka's name): the largest response
                        /// frame accepted, checked before it is buffered (default 104857600,
                        /// 100 MiB; raised to `fetch.max.bytes` + 512 when that is larger and
                        /// this is not set).
                        -> u32;
                    set
                        /// `receive.message.max.bytes`; from 1000 to 2147483647, and at least
                        /// `fetch.max.bytes` + 512.
                        (bytes: u32) => Some(bytes);
                    docs [
                        "`u32`",
                        "104857600 (100 MiB; librdkafka's name)",
                        "largest response frame accepted, checked before buffering",
                        "1000-2147483647; at least `fetch.max.bytes` + 512; when unset, raised to `fetch.max.bytes` + 512 if that is larger (librdkafka's rule)"
                    ];
                }
            }
            unbound {}
        }
    };
}

pub(in crate::config) use consumer_table;
