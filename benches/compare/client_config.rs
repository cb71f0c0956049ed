//! The settings both clients get, spelled out on each side: the
//! consumers' fetch settings (the Kafka defaults) and the producers' (the
//! Java producer's defaults).

/// Fetch settings both clients get (the Kafka defaults, spelled out).
pub(crate) const FETCH_MIN_BYTES: &str = "1";
pub(crate) const FETCH_MAX_WAIT_MS: &str = "500";
pub(crate) const FETCH_MAX_BYTES: &str = "52428800";
pub(crate) const MAX_PARTITION_FETCH_BYTES: &str = "1048576";
pub(crate) const CHECK_CRCS: &str = "true";

/// Producer settings both clients get: the Java producer's defaults,
/// spelled out (lazykafka's too, but for `batch.size`, whose default is
/// librdkafka's 1000000: these cases keep 16384 so that their figures
/// compare with the earlier ones); librdkafka's own defaults differ
/// (`batch.size` 1000000, `queue.buffering.max.kbytes` 1048576 and
/// `queue.buffering.max.messages` 100000, `partitioner`
/// consistent_random).
pub(crate) const PRODUCE_ACKS: &str = "all";
pub(crate) const PRODUCE_IDEMPOTENCE: &str = "true";
pub(crate) const PRODUCE_LINGER_MS: &str = "5";
pub(crate) const PRODUCE_BATCH_SIZE: &str = "16384";
pub(crate) const PRODUCE_MAX_IN_FLIGHT: &str = "5";
/// `buffer.memory` (33554432 B), in librdkafka's
/// `queue.buffering.max.kbytes`.
pub(crate) const PRODUCE_BUFFER_KBYTES: &str = "32768";
