//! The table of the producer's own properties (see
//! [`table`](super::super::table) for what a row says and what is made of
//! it; the properties every client takes are in
//! [`common`](super::super::common)). The defaults are the Java producer's;
//! `also` names librdkafka's names read the same way.

/// Hands the table of the producer's own properties to `$generate` (one
/// of the macros of [`table`](super::super::table)), after `$args`.
macro_rules! producer_table {
    ($generate:ident! { $($args:tt)* }) => {
        $generate! {
            $($args)*
            rows {
                ACKS = "acks" {
                    acks: Acks = Acks::All;
                    also REQUEST_REQUIRED_ACKS;
                    parse: parse_acks;
                    render: shown;
                    get
                        /// `acks`: how many acknowledgements a Produce request waits for
                        /// (default [`Acks::All`]).
                        -> Acks;
                    set
                        /// `acks`. Other than [`Acks::All`], it turns default idempotence off,
                        /// and is an error with `enable_idempotence(true)`.
                        (acks: Acks);
                    docs [
                        "`Acks` (`None`, `Leader`, `All`)",
                        "`all`",
                        "acknowledgements a Produce request waits for: none (`0`), the leader's (`1`), every in-sync replica's (`all`)",
                        "`all` (any case), `-1` (read as `all`), `0`, `1`"
                    ];
                }
                ENABLE_IDEMPOTENCE = "enable.idempotence" {
                    // Unset: on, unless settings against it turn it off (`build`).
                    enable_idempotence: Option<bool> => bool = None;
                    parse: optional(parse_bool);
                    render: shown;
                    get
                        /// `enable.idempotence`: whether the producer is idempotent (KIP-98: a
                        /// producer id and per-partition sequence numbers, so that a retried
                        /// batch is written once and in order). On by default, as in the Java
                        /// client; this is the effective value. Left at its default, it is
                        /// turned off (as the Java 3.x client does) by `acks` other than `all`,
                        /// `retries=0` or `max.in.flight.requests.per.connection` above 5; set
                        /// to `true` explicitly, those are errors.
                        -> bool;
                    set
                        /// `enable.idempotence`. Set to `true`, the settings it needs (`acks`
                        /// all, `retries` above 0, at most 5 requests in flight) are checked;
                        /// left unset, settings that contradict it turn it off.
                        (enable: bool) => Some(enable);
                    docs [
                        "`bool`",
                        "`true`",
                        "idempotent producer (KIP-98): a producer id and sequence numbers, so that a retried batch is written once and in order",
                        "see [Idempotence](#idempotence); the getter returns the effective value"
                    ];
                }
                LINGER_MS = "linger.ms" {
                    // Taken as at most 2147483647 ms (`build`).
                    linger: Duration => Duration = Duration::from_millis(5);
                    also QUEUE_BUFFERING_MAX_MS;
                    parse: parse_ms;
                    check ms(0, LONG_MAX);
                    render: ms;
                    get
                        /// `linger.ms`: how long a batch waits for more records before it is
                        /// sent (default 5 ms). Values above 2147483647 ms are taken as
                        /// 2147483647, as the Java client does.
                        -> Duration;
                    set
                        /// `linger.ms`.
                        (linger: Duration);
                    docs [
                        "`Duration`",
                        "5",
                        "how long a batch waits for more records before it is sent",
                        "0 and up; above 2147483647 it is taken as 2147483647, as the Java producer does"
                    ];
                }
                BATCH_SIZE = "batch.size" {
                    batch_size: u32 = 1_000_000;
                    parse: parse_u32;
                    check int(0);
                    render: shown;
                    get
                        /// `batch.size`: the most bytes of records one partition's batch holds
                        /// (default 1000000, librdkafka's; the Java client's is 16384); a larger
                        /// record goes in a batch of its own. `0` turns batching off. A batch
                        /// takes memory as records come, not `batch.size` up front
                        /// (docs/producer.md, "Semantics, by property").
                        -> u32;
                    set
                        /// `batch.size`; at most 2147483647.
                        (bytes: u32);
                    docs [
                        "`u32`",
                        "1000000",
                        "most bytes of records in one partition's batch (librdkafka's default; the Java client's is 16384); a larger record gets a batch of its own; 0 turns batching off",
                        "0-2147483647"
                    ];
                }
                COMPRESSION_TYPE = "compression.type" {
                    compression_type: Compression = Compression::None;
                    also COMPRESSION_CODEC;
                    parse: parse_compression;
                    check with(check_codec_built);
                    render: shown;
                    get
                        /// `compression.type`: the codec record batches are compressed with
                        /// (default [`Compression::None`]).
                        -> Compression;
                    set
                        /// `compression.type`; the codec's cargo feature must be built.
                        (compression: Compression);
                    docs [
                        "`Compression`",
                        "`none`",
                        "codec of the record batches",
                        "`none`, `gzip`, `snappy`, `lz4`, `zstd` (any case); a codec whose cargo feature (`gzip`, `snappy`, `lz4`, `zstd`, all on by default) is not built is refused; librdkafka's topic-level `inherit` and the brokers' `producer` and `uncompressed` are refused; the levels (`compression.gzip.level`, `compression.lz4.level`, `compression.zstd.level`) are not configurable: each codec compresses at a fixed level"
                    ];
                }
                MAX_REQUEST_SIZE = "max.request.size" {
                    max_request_size: u32 = 1_048_576;
                    also MESSAGE_MAX_BYTES;
                    parse: parse_u32;
                    check int(0);
                    render: shown;
                    get
                        /// `max.request.size`: the largest Produce request, and so the largest
                        /// record, the producer sends (default 1048576, 1 MiB).
                        -> u32;
                    set
                        /// `max.request.size`; at most 2147483647.
                        (bytes: u32);
                    docs [
                        "`u32`",
                        "1048576",
                        "largest Produce request, and so largest record",
                        "0-2147483647"
                    ];
                }
                BUFFER_MEMORY = "buffer.memory" {
                    buffer_memory: u64 = 33_554_432;
                    parse: parse_integer;
                    check with(check_buffer_memory);
                    render: shown;
                    get
                        /// `buffer.memory`: the bytes of records waiting to be sent the
                        /// producer holds before `send` waits (default 33554432, 32 MiB).
                        -> u64;
                    set
                        /// `buffer.memory`; at most 9223372036854775807.
                        (bytes: u64);
                    docs [
                        "`u64`",
                        "33554432",
                        "bytes of records waiting to be sent held before `send` waits",
                        "0-9223372036854775807"
                    ];
                }
                MAX_BLOCK_MS = "max.block.ms" {
                    max_block: Duration = Duration::from_millis(60_000);
                    parse: parse_ms;
                    check ms(0, LONG_MAX);
                    render: ms;
                    get
                        /// `max.block.ms`: how long `send` may wait for metadata or for room in
                        /// `buffer.memory` before it fails (default 60 s).
                        -> Duration;
                    set
                        /// `max.block.ms`.
                        (max_block: Duration);
                    docs [
                        "`Duration`",
                        "60000",
                        "how long `send` may wait for metadata or buffer room",
                        "0 and up"
                    ];
                }
                DELIVERY_TIMEOUT_MS = "delivery.timeout.ms" {
                    // Unset: the default, which `linger.ms` + `request.timeout.ms` raise
                    // (`build`).
                    delivery_timeout: Option<Duration> => Duration = None;
                    parse: optional(parse_ms);
                    check ms(0, INT_MAX);
                    render: ms;
                    get
                        /// `delivery.timeout.ms`: how long after `send` a record may take to be
                        /// acknowledged, retries included, before it fails (default 120 s).
                        /// At least `linger.ms` + `request.timeout.ms`: set lower, it is an
                        /// error; left at its default, it is raised to that sum, as in the Java
                        /// client.
                        -> Duration;
                    set
                        /// `delivery.timeout.ms`; at least `linger.ms` + `request.timeout.ms`.
                        (timeout: Duration) => Some(timeout);
                    docs [
                        "`Duration`",
                        "120000",
                        "time from `send` to acknowledgement, retries included, before a record fails",
                        "0-2147483647; at least `linger.ms` + `request.timeout.ms`: set lower, an error; left at its default, raised to that sum (Java's `KafkaProducer` rule)"
                    ];
                }
                RETRIES = "retries" {
                    retries: u32 = i32::MAX as u32;
                    also MESSAGE_SEND_MAX_RETRIES;
                    parse: parse_u32;
                    check int(0);
                    render: shown;
                    get
                        /// `retries`: how many times a failed batch is sent again, within
                        /// `delivery.timeout.ms` (default 2147483647: as many as that allows).
                        -> u32;
                    set
                        /// `retries`; at most 2147483647. `0` turns default idempotence off,
                        /// and is an error with `enable_idempotence(true)`.
                        (retries: u32);
                    docs [
                        "`u32`",
                        "2147483647",
                        "times a failed batch is sent again, within `delivery.timeout.ms`",
                        "0-2147483647"
                    ];
                }
                MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION = "max.in.flight.requests.per.connection" {
                    max_in_flight_requests_per_connection: u32 = 5;
                    parse: parse_u32;
                    check int(1);
                    render: shown;
                    get
                        /// `max.in.flight.requests.per.connection`: Produce requests sent on
                        /// one connection before waiting for an answer (default 5; at most 5
                        /// with idempotence).
                        -> u32;
                    set
                        /// `max.in.flight.requests.per.connection`; at least 1. Above 5, it
                        /// turns default idempotence off, and is an error with
                        /// `enable_idempotence(true)`.
                        (requests: u32);
                    docs [
                        "`u32`",
                        "5",
                        "Produce requests sent on a connection before waiting for answers",
                        "1-2147483647; at most 5 with idempotence"
                    ];
                }
                PARTITIONER_IGNORE_KEYS = "partitioner.ignore.keys" {
                    partitioner_ignore_keys: bool = false;
                    parse: parse_bool;
                    render: shown;
                    get
                        /// `partitioner.ignore.keys`: place keyed records as if they had no key,
                        /// with the sticky partitioner (default `false`; see
                        /// docs/producer.md, "Where a record goes").
                        -> bool;
                    set
                        /// `partitioner.ignore.keys`.
                        (ignore: bool);
                    docs [
                        "`bool`",
                        "`false`",
                        "place keyed records with the sticky partitioner, as if they had no key ([producer.md](producer.md#where-a-record-goes))",
                        "`true`/`false`"
                    ];
                }
                PARTITIONER = "partitioner" {
                    partitioner: BuiltinPartitioner = BuiltinPartitioner::Murmur2Random;
                    parse: parse_partitioner;
                    render: shown;
                    get
                        /// `partitioner` (librdkafka's property): how keyed records are
                        /// placed (default [`BuiltinPartitioner::Murmur2Random`], the Java
                        /// producer's placement; `consistent_random` is librdkafka's
                        /// default, and keeps keys where rust-rdkafka put them).
                        -> BuiltinPartitioner;
                    set
                        /// `partitioner`.
                        (partitioner: BuiltinPartitioner);
                    docs [
                        "`BuiltinPartitioner`",
                        "`murmur2_random`",
                        "how keyed records are placed: the Java producer's murmur2 by default; librdkafka's default is `consistent_random` (CRC-32), which a producer moving from librdkafka sets to keep each key's partition (`lazykafka::producer::BuiltinPartitioner`)",
                        "`murmur2_random`, `murmur2`, `consistent_random`, `consistent`, `fnv1a_random`, `fnv1a`, `random` (any case)"
                    ];
                }
                STICKY_PARTITIONING_LINGER_MS = "sticky.partitioning.linger.ms" {
                    sticky_partitioning_linger: Duration = Duration::from_millis(10);
                    parse: parse_ms;
                    check ms(0, 900_000);
                    render: ms;
                    get
                        /// `sticky.partitioning.linger.ms` (librdkafka's property): the sticky
                        /// partitioner moves on from a partition once it has been there this
                        /// long, or once `batch.size` bytes went there, whichever comes first
                        /// (default 10 ms, as librdkafka; `0`: a partition drawn for each
                        /// record). The time is looked at when a record opens a batch.
                        -> Duration;
                    set
                        /// `sticky.partitioning.linger.ms`; at most 900000 ms.
                        (linger: Duration);
                    docs [
                        "`Duration`",
                        "10",
                        "how long the sticky partitioner stays on a partition at most (it also moves on after `batch.size` bytes; [producer.md](producer.md#where-a-record-goes)); 0 draws a partition for each record",
                        "0-900000"
                    ];
                }
                METADATA_MAX_IDLE_MS = "metadata.max.idle.ms" {
                    metadata_max_idle: Duration = Duration::from_millis(300_000);
                    parse: parse_ms;
                    check ms(METADATA_MAX_IDLE_MIN_MS, LONG_MAX);
                    render: ms;
                    get
                        /// `metadata.max.idle.ms`: a topic not produced to for this long is
                        /// dropped from the metadata the producer keeps (default 5 min; at
                        /// least 5 s).
                        -> Duration;
                    set
                        /// `metadata.max.idle.ms`; at least 5 s.
                        (idle: Duration);
                    docs [
                        "`Duration`",
                        "300000",
                        "a topic not produced to for this long leaves the producer's metadata",
                        "5000 and up"
                    ];
                }
            }
            unbound {
                // Refused by `ProducerConfigBuilder::set_known`, whatever the
                // value, so that its error says why.
                TRANSACTIONAL_ID = "transactional.id" {
                    docs [
                        "—",
                        "unset",
                        "transactions",
                        "refused, whatever the value: transactions are not supported yet"
                    ];
                }
            }
        }
    };
}

pub(in crate::config) use producer_table;
