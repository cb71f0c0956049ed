//! Which partition a record goes to (documented with the `producer`
//! module, which re-exports all of it).

use std::fmt;
use std::time::{Duration, Instant};

use crate::cluster::Rng;
use crate::error::PartitionerError;

/// Kafka's murmur2 hash of `data`: `org.apache.kafka.common.utils.Utils.murmur2`
/// (32-bit MurmurHash2, seed `0x9747b28c`, the tail read little-endian), the
/// hash the Java client places keyed records with. librdkafka's `rd_murmur2`
/// computes the same.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    // Java's `int length` is the array's length; arrays longer than
    // i32::MAX do not exist there. Truncating like a Java int keeps larger
    // inputs (which no Kafka record can be) well-defined.
    let mut h = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        // Java's switch falls through from case 3 to case 1.
        if tail.len() == 3 {
            h ^= u32::from(tail[2]) << 16;
        }
        if tail.len() >= 2 {
            h ^= u32::from(tail[1]) << 8;
        }
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// `org.apache.kafka.common.utils.Utils.toPositive`: the number with its
/// sign bit cleared (not its absolute value: `-1` gives `i32::MAX`).
pub const fn to_positive(number: i32) -> i32 {
    number & 0x7fff_ffff
}

/// The partition of a record with `key` in a topic of `partition_count`
/// partitions, as the Java client chooses it
/// (`BuiltInPartitioner.partitionForKey`): `toPositive(murmur2(key)) %
/// partition_count`. An empty key is a key (it hashes); only a missing key
/// is placed by the sticky partitioner.
pub fn partition_for_key(key: &[u8], partition_count: i32) -> Result<i32, PartitionerError> {
    if partition_count <= 0 {
        return Err(PartitionerError::NoPartitions {
            topic: None,
            partition_count,
        });
    }
    Ok(to_positive(murmur2(key)) % partition_count)
}

/// librdkafka's FNV-1a hash of `data` (`rd_fnv1a`): 32-bit FNV-1a, then
/// the absolute value of the result read as a signed number (as Sarama's
/// hash partitioner takes it; `i32::MIN` stays as it is).
pub fn fnv1a(data: &[u8]) -> u32 {
    const PRIME: u32 = 0x0100_0193;
    const OFFSET: u32 = 0x811c_9dc5;
    let h = data
        .iter()
        .fold(OFFSET, |h, b| (h ^ u32::from(*b)).wrapping_mul(PRIME)) as i32;
    h.wrapping_abs() as u32
}

/// How records without a partition of their own are placed by key: the
/// values of librdkafka's `partitioner` property, so that a producer moving
/// from librdkafka (rust-rdkafka) keeps each key on the partition it was
/// on. The default, [`Murmur2Random`](Self::Murmur2Random), is the Java
/// producer's placement; librdkafka's default is
/// [`ConsistentRandom`](Self::ConsistentRandom).
///
/// "Sticky" below is the topic's sticky partitioner (KIP-794);
/// librdkafka places those records on a sticky partition too (chosen at
/// random every `sticky.partitioning.linger.ms`), so they land on no
/// partition in particular with either client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum BuiltinPartitioner {
    /// `murmur2_random` (the default): `toPositive(murmur2(key)) %
    /// partitions` ([`partition_for_key`]), the Java producer's placement;
    /// a null key: sticky.
    #[default]
    Murmur2Random,
    /// `murmur2`: the same hash; a null key hashes as an empty one (one
    /// partition for all).
    Murmur2,
    /// `consistent_random`, librdkafka's default: `crc32(key) % partitions`
    /// (CRC-32 as zlib's); a null or empty key: sticky.
    ConsistentRandom,
    /// `consistent`: `crc32(key) % partitions`; a null or empty key goes
    /// to partition 0 (the CRC-32 of nothing is 0).
    Consistent,
    /// `fnv1a_random`: `fnv1a(key) % partitions` ([`fnv1a`]); a null key:
    /// sticky.
    Fnv1aRandom,
    /// `fnv1a`: the same; a null key hashes as an empty one.
    Fnv1a,
    /// `random`: each keyed record on a partition chosen at random; a null
    /// key: sticky.
    Random,
}

impl BuiltinPartitioner {
    /// Every value, in the order of librdkafka's documentation.
    pub const ALL: [BuiltinPartitioner; 7] = [
        BuiltinPartitioner::Random,
        BuiltinPartitioner::Consistent,
        BuiltinPartitioner::ConsistentRandom,
        BuiltinPartitioner::Murmur2,
        BuiltinPartitioner::Murmur2Random,
        BuiltinPartitioner::Fnv1a,
        BuiltinPartitioner::Fnv1aRandom,
    ];

    /// The property value (`murmur2_random`, ...).
    pub fn name(self) -> &'static str {
        match self {
            BuiltinPartitioner::Murmur2Random => "murmur2_random",
            BuiltinPartitioner::Murmur2 => "murmur2",
            BuiltinPartitioner::ConsistentRandom => "consistent_random",
            BuiltinPartitioner::Consistent => "consistent",
            BuiltinPartitioner::Fnv1aRandom => "fnv1a_random",
            BuiltinPartitioner::Fnv1a => "fnv1a",
            BuiltinPartitioner::Random => "random",
        }
    }

    /// The value named `name` (as librdkafka spells it; any case).
    pub fn from_name(name: &str) -> Option<BuiltinPartitioner> {
        let name = name.trim().to_ascii_lowercase();
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Where a record with `key` (`None`: null) goes in a topic of
    /// `partition_count` partitions (at least 1), as librdkafka's
    /// `rd_kafka_msg_partitioner` places it.
    pub fn placement(self, key: Option<&[u8]>, partition_count: i32) -> Placement {
        use BuiltinPartitioner as B;
        let count = partition_count.max(1);
        let modulo = |h: u32| Placement::Partition((h % count as u32) as i32);
        match (self, key) {
            (B::Murmur2Random | B::Fnv1aRandom | B::ConsistentRandom | B::Random, None) => {
                Placement::Sticky
            }
            (B::ConsistentRandom, Some([])) => Placement::Sticky,
            (B::Murmur2Random | B::Murmur2, key) => {
                Placement::Partition(to_positive(murmur2(key.unwrap_or_default())) % count)
            }
            (B::ConsistentRandom | B::Consistent, key) => {
                modulo(crc32fast::hash(key.unwrap_or_default()))
            }
            (B::Fnv1aRandom | B::Fnv1a, key) => modulo(fnv1a(key.unwrap_or_default())),
            (B::Random, Some(_)) => Placement::Random,
        }
    }
}

impl fmt::Display for BuiltinPartitioner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A custom choice of partition, in place of the built-in one (the Java
/// client's `partitioner.class`, `org.apache.kafka.clients.producer.Partitioner`).
///
/// It is asked for every record that does not name its partition, keyed or
/// not, and `partitioner.ignore.keys` does not apply to it. It may be called
/// from several tasks at once: keep any state it has behind its own
/// synchronisation (a round-robin counter in an atomic, say).
///
/// ```
/// use lazykafka::producer::Partitioner;
///
/// /// Every record of a tenant ("tenant/...") on the same partition.
/// struct ByTenant;
///
/// impl Partitioner for ByTenant {
///     fn partition(&self, _topic: &str, key: Option<&[u8]>, _value: Option<&[u8]>, count: i32) -> i32 {
///         let tenant = key
///             .and_then(|k| k.split(|&b| b == b'/').next())
///             .unwrap_or_default();
///         lazykafka::producer::partition_for_key(tenant, count).unwrap_or(0)
///     }
/// }
/// assert_eq!(
///     ByTenant.partition("t", Some(b"acme/1"), None, 8),
///     ByTenant.partition("t", Some(b"acme/2"), None, 8),
/// );
/// ```
pub trait Partitioner: Send + Sync {
    /// The partition, in `0..partition_count`, for a record of `topic` with
    /// this key and value (as serialized; `None` when null).
    /// `partition_count` is at least 1. A partition outside the range fails
    /// the record with [`PartitionerError::CustomPartitionOutOfRange`].
    fn partition(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        partition_count: i32,
    ) -> i32;
}

/// A record whose partition is to be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordToPlace<'a> {
    /// Its topic.
    pub topic: &'a str,
    /// The partition it names, if any.
    pub partition: Option<i32>,
    /// Its key, serialized (`None`: null).
    pub key: Option<&'a [u8]>,
    /// Its value, serialized (`None`: null).
    pub value: Option<&'a [u8]>,
}

/// Where a record goes: [`BuiltinPartitioner::placement`]'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Placement {
    /// This partition.
    Partition(i32),
    /// The partition the topic's sticky partitioner is on.
    Sticky,
    /// A partition chosen at random for this record
    /// ([`BuiltinPartitioner::Random`]).
    Random,
}

/// Where a record goes, given its topic's `partition_count`, the producer's
/// `partitioner.ignore.keys`, its custom partitioner if any, and its
/// `partitioner` (`builtin`): the steps of `KafkaProducer.partition` (see
/// the module's documentation), with the key placed as `builtin` says.
pub fn place(
    record: &RecordToPlace<'_>,
    partition_count: i32,
    ignore_keys: bool,
    custom: Option<&dyn Partitioner>,
    builtin: BuiltinPartitioner,
) -> Result<Placement, PartitionerError> {
    if partition_count <= 0 {
        return Err(PartitionerError::NoPartitions {
            topic: Some(record.topic.to_owned()),
            partition_count,
        });
    }
    if let Some(partition) = record.partition {
        if !(0..partition_count).contains(&partition) {
            return Err(PartitionerError::RecordPartitionOutOfRange {
                topic: record.topic.to_owned(),
                partition,
                partition_count,
            });
        }
        return Ok(Placement::Partition(partition));
    }
    if let Some(custom) = custom {
        let partition = custom.partition(record.topic, record.key, record.value, partition_count);
        if !(0..partition_count).contains(&partition) {
            return Err(PartitionerError::CustomPartitionOutOfRange {
                topic: record.topic.to_owned(),
                partition,
                partition_count,
            });
        }
        return Ok(Placement::Partition(partition));
    }
    if ignore_keys {
        return Ok(Placement::Sticky);
    }
    Ok(builtin.placement(record.key, partition_count))
}

/// Random numbers for the sticky partitioner: any generator (the crate's
/// own seeded one is internal), or a counter in a test.
pub trait RandomSource {
    /// The next 32 random bits.
    fn next_u32(&mut self) -> u32;
}

impl RandomSource for Rng {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
}

/// What the sticky partitioner knows of its topic's partitions: how many
/// there are, and which of them have a leader (the Java client's
/// `Cluster.availablePartitionsForTopic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicPartitions<'a> {
    /// How many partitions the topic has.
    pub count: i32,
    /// The partitions with a known leader, in any order.
    pub available: &'a [i32],
}

/// The uniform sticky partitioner of KIP-794 for one topic: the Java
/// client's `BuiltInPartitioner`, which places the records that name no
/// partition and are not placed by key.
///
/// It stays on one partition until `batch.size` bytes were appended there,
/// then moves to another, chosen at random among the partitions with a
/// leader (all of them when none has one). Made
/// [`with_linger`](StickyPartitioner::with_linger), it also moves on once
/// it has been on a partition that long (librdkafka's
/// `sticky.partitioning.linger.ms`), so that a producer sending little
/// spreads its records as one sending much does; the time is told with
/// the appends that read a clock ([`appended_at`](StickyPartitioner::appended_at)). The Java client's adaptive
/// weights (`partitioner.adaptive.partitioning.enable`, favouring short
/// queues) are not applied: docs/producer.md, "Not yet".
///
/// The producer uses it in three steps, as `RecordAccumulator.append`
/// does: [`partition`](StickyPartitioner::partition) says where the next
/// record goes; the record is appended there; then
/// [`appended_at`](StickyPartitioner::appended_at) counts its bytes, with
/// `switch_allowed` false while that partition's queue holds a batch that
/// is not full (the switch then waits for the batch to fill, or until twice
/// `batch.size` was appended).
///
/// ```
/// use lazykafka::producer::{RandomSource, StickyPartitioner, TopicPartitions};
///
/// // Any generator will do (here xorshift32): the partitioner asks it for
/// // 32 random bits at a time.
/// struct XorShift(u32);
/// impl RandomSource for XorShift {
///     fn next_u32(&mut self) -> u32 {
///         self.0 ^= self.0 << 13;
///         self.0 ^= self.0 >> 17;
///         self.0 ^= self.0 << 5;
///         self.0
///     }
/// }
///
/// let mut rng = XorShift(7);
/// let topic = TopicPartitions { count: 3, available: &[0, 1, 2] };
/// let mut sticky = StickyPartitioner::new("orders", 100);
/// let first = sticky.partition(&topic, &mut rng)?;
/// sticky.appended_at(60, true, None);
/// assert_eq!(sticky.partition(&topic, &mut rng)?, first); // 60 < 100
/// assert!(sticky.appended_at(60, true, None)); // 120 >= 100: the next record moves
/// # Ok::<(), lazykafka::producer::PartitionerError>(())
/// ```
#[derive(Debug, Clone)]
pub struct StickyPartitioner {
    topic: String,
    batch_size: u64,
    /// The longest stay on a partition, if bounded.
    linger: Option<Duration>,
    current: Option<Current>,
}

#[derive(Debug, Clone, Copy)]
struct Current {
    partition: i32,
    produced_bytes: u64,
    /// The first time told for this partition ([`StickyPartitioner::appended_at`]).
    since: Option<Instant>,
}

impl StickyPartitioner {
    /// The partitioner of `topic`, moving on after `batch_size` bytes
    /// (`batch.size`; 0 counts as 1, as `KafkaProducer` makes it).
    pub fn new(topic: impl Into<String>, batch_size: u32) -> Self {
        StickyPartitioner {
            topic: topic.into(),
            batch_size: u64::from(batch_size.max(1)),
            linger: None,
            current: None,
        }
    }

    /// Moves on from a partition also once it has been there for
    /// `linger` (`sticky.partitioning.linger.ms`), as told by
    /// [`StickyPartitioner::appended_at`]; `Duration::ZERO` moves on after
    /// every record.
    pub fn with_linger(mut self, linger: Duration) -> Self {
        self.linger = Some(linger);
        self
    }

    /// The partition chosen for the records now, if one is (before the
    /// first record and after a switch, none is until
    /// [`StickyPartitioner::partition`] draws one).
    pub fn current(&self) -> Option<i32> {
        self.current.map(|c| c.partition)
    }

    /// The partition the next record goes to: the current one, or (at the
    /// start and after a switch) a new one drawn from `rng`
    /// (`BuiltInPartitioner.peekCurrentPartitionInfo`).
    pub fn partition(
        &mut self,
        topic: &TopicPartitions<'_>,
        rng: &mut impl RandomSource,
    ) -> Result<i32, PartitionerError> {
        if let Some(current) = self.current {
            return Ok(current.partition);
        }
        let partition = self.next_partition(topic, rng)?;
        self.current = Some(Current {
            partition,
            produced_bytes: 0,
            since: None,
        });
        Ok(partition)
    }

    /// Counts `bytes` appended to the current partition; returns whether
    /// the next record goes elsewhere (`BuiltInPartitioner.updatePartitionInfo`):
    /// after `batch.size` bytes when `switch_allowed`, after twice that in
    /// any case. Called with 0 bytes and `switch_allowed` once the
    /// partition's batches are all full, it completes a switch held back
    /// before. Nothing happens while no partition is current.
    ///
    /// `at` is the time of the append when the caller read a clock for it
    /// (`None` otherwise): the first time told for a partition starts its
    /// stay, and a later one at least the
    /// [`linger`](StickyPartitioner::with_linger) after it ends the stay
    /// (whatever `switch_allowed` says). With a linger of zero every
    /// append ends it.
    pub fn appended_at(&mut self, bytes: usize, switch_allowed: bool, at: Option<Instant>) -> bool {
        let Some(current) = self.current.as_mut() else {
            return false;
        };
        current.produced_bytes = current
            .produced_bytes
            .saturating_add(u64::try_from(bytes).unwrap_or(u64::MAX));
        let produced = current.produced_bytes;
        let stayed = match (self.linger, at) {
            (Some(linger), _) if linger.is_zero() => true,
            (Some(linger), Some(at)) => match current.since {
                Some(since) => at.saturating_duration_since(since) >= linger,
                None => {
                    current.since = Some(at);
                    false
                }
            },
            _ => false,
        };
        if stayed
            || (produced >= self.batch_size && switch_allowed)
            || produced >= self.batch_size.saturating_mul(2)
        {
            // The next partition is drawn when the next record asks, from
            // the metadata of that moment.
            self.current = None;
            true
        } else {
            false
        }
    }

    /// `BuiltInPartitioner.nextPartition`.
    fn next_partition(
        &self,
        topic: &TopicPartitions<'_>,
        rng: &mut impl RandomSource,
    ) -> Result<i32, PartitionerError> {
        // Java's `Utils.toPositive(ThreadLocalRandom.current().nextInt())`.
        let random = u64::from(to_positive(rng.next_u32() as i32) as u32);
        if !topic.available.is_empty() {
            let i = random % topic.available.len() as u64;
            return Ok(topic.available[i as usize]);
        }
        if topic.count <= 0 {
            return Err(PartitionerError::NoPartitions {
                topic: Some(self.topic.clone()),
                partition_count: topic.count,
            });
        }
        Ok((random % topic.count as u64) as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // Named, so that proptest's prelude (which has a trait of that name)
    // does not shadow it.
    use crate::cluster::Rng;
    use proptest::prelude::*;

    /// The default keyed placement, the Java producer's.
    const B: BuiltinPartitioner = BuiltinPartitioner::Murmur2Random;

    /// librdkafka's placements of null, empty and plain keys under each
    /// `partitioner` value (`rd_kafka_msg_partitioner`); the hashes are
    /// zlib's CRC-32 ("123456789" gives 0xcbf43926) and FNV-1a with
    /// Sarama's absolute value. tests/partitioner_peers.rs checks 10,000
    /// keys against librdkafka's producer itself.
    #[test]
    fn builtin_partitioners_place_keys_as_librdkafka() {
        use BuiltinPartitioner as P;
        assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
        // FNV-1a 32 of "a" is 0xe40c292c: negative as an i32, so negated.
        assert_eq!(fnv1a(b"a"), 0xe40c_292cu32.wrapping_neg());
        assert_eq!(fnv1a(b""), 0x811c_9dc5u32.wrapping_neg());
        let n = 7;
        let part = |p: P, key: Option<&[u8]>| p.placement(key, n);
        let at = |h: u32| Placement::Partition((h % n as u32) as i32);
        let k: &[u8] = b"123456789";
        assert_eq!(part(P::Consistent, Some(k)), at(0xcbf4_3926));
        assert_eq!(part(P::ConsistentRandom, Some(k)), at(0xcbf4_3926));
        assert_eq!(part(P::Consistent, None), Placement::Partition(0));
        assert_eq!(part(P::Consistent, Some(b"")), Placement::Partition(0));
        assert_eq!(part(P::ConsistentRandom, None), Placement::Sticky);
        assert_eq!(part(P::ConsistentRandom, Some(b"")), Placement::Sticky);
        let murmur = |key: &[u8]| Placement::Partition(to_positive(murmur2(key)) % n);
        assert_eq!(part(P::Murmur2Random, Some(k)), murmur(k));
        assert_eq!(part(P::Murmur2, Some(k)), murmur(k));
        assert_eq!(part(P::Murmur2Random, Some(b"")), murmur(b""));
        assert_eq!(part(P::Murmur2Random, None), Placement::Sticky);
        assert_eq!(part(P::Murmur2, None), murmur(b""));
        assert_eq!(part(P::Fnv1a, Some(b"a")), at(fnv1a(b"a")));
        assert_eq!(part(P::Fnv1aRandom, Some(b"")), at(fnv1a(b"")));
        assert_eq!(part(P::Fnv1a, None), at(fnv1a(b"")));
        assert_eq!(part(P::Fnv1aRandom, None), Placement::Sticky);
        assert_eq!(part(P::Random, Some(k)), Placement::Random);
        assert_eq!(part(P::Random, None), Placement::Sticky);
        for p in P::ALL {
            assert_eq!(P::from_name(&p.name().to_uppercase()), Some(p));
            // The key is ignored with partitioner.ignore.keys.
            let keyed = RecordToPlace {
                topic: "t",
                partition: None,
                key: Some(k),
                value: None,
            };
            assert_eq!(place(&keyed, n, true, None, p), Ok(Placement::Sticky));
        }
        assert_eq!(P::from_name("crc32"), None);
        assert_eq!(P::default(), P::Murmur2Random);
    }

    /// apache/kafka `clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java`,
    /// `testMurmur2`: the Java client's own vectors.
    const JAVA_UTILS_TEST: &[(&[u8], i32)] = &[
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (
            b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
            -58897971,
        ),
        (b"abc", 479470107),
    ];

    /// librdkafka's `unittest_murmur2` (`src/rdmurmur2.c`, librdkafka
    /// 2.12.1), whose results it states are the Java client's.
    const LIBRDKAFKA_UNITTEST: &[(&[u8], u32)] = &[
        (b"kafka", 0xd067cf64),
        (b"giberish123456789", 0x8f552b0c),
        (b"1234", 0x9fc97b14),
        (b"234", 0xe7c009ca),
        (b"34", 0x873930da),
        (b"4", 0x5a4b5ca1),
        (b"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x78424f1c),
        (b"reAmbleWillBeRemoved,ThePrePartThatIs", 0x4a62b377),
        (b"eAmbleWillBeRemoved,ThePrePartThatIs", 0xe0e4e09e),
        (b"AmbleWillBeRemoved,ThePrePartThatIs", 0x62b8b43f),
        (b"", 0x106e08d9),
    ];

    #[test]
    fn murmur2_gives_the_java_clients_values() {
        for &(key, expected) in JAVA_UTILS_TEST {
            assert_eq!(murmur2(key), expected, "{:?}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn murmur2_gives_librdkafkas_values() {
        for &(key, expected) in LIBRDKAFKA_UNITTEST {
            assert_eq!(
                murmur2(key),
                expected as i32,
                "{:?}",
                String::from_utf8_lossy(key)
            );
        }
    }

    #[test]
    fn to_positive_clears_the_sign_bit() {
        assert_eq!(to_positive(5), 5);
        assert_eq!(to_positive(0), 0);
        assert_eq!(to_positive(-1), i32::MAX);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-973932308), -973932308 & 0x7fffffff);
    }

    #[test]
    fn keys_are_placed_by_the_positive_hash_modulo_the_count() {
        // murmur2("21") = -973932308; toPositive = 1173551340.
        assert_eq!(partition_for_key(b"21", 1), Ok(0));
        assert_eq!(partition_for_key(b"21", 7), Ok(1173551340 % 7));
        assert_eq!(partition_for_key(b"abc", 100), Ok(479470107 % 100));
        assert_eq!(
            partition_for_key(b"abc", 0),
            Err(PartitionerError::NoPartitions {
                topic: None,
                partition_count: 0
            })
        );
        assert!(partition_for_key(b"abc", -3).is_err());
    }

    proptest! {
        #[test]
        fn a_key_always_lands_in_range(key in proptest::collection::vec(any::<u8>(), 0..64), count in 1i32..=i32::MAX) {
            let p = partition_for_key(&key, count).unwrap();
            prop_assert!((0..count).contains(&p));
        }
    }

    /// The Java test's `SequentialPartitioner`: 0, 1, 2, ...
    struct Counting(u32);

    impl RandomSource for Counting {
        fn next_u32(&mut self) -> u32 {
            let n = self.0;
            self.0 += 1;
            n
        }
    }

    const ALL3: TopicPartitions<'static> = TopicPartitions {
        count: 3,
        available: &[0, 1, 2],
    };

    // After BuiltInPartitionerTest.stickyPartitionsTest: no switch before
    // the sticky batch size (3 here), a switch after it; one partition
    // switches to itself.
    #[test]
    fn the_partition_holds_until_batch_size_bytes_then_moves() {
        let mut rng = Counting(0);
        let mut sticky = StickyPartitioner::new("a", 3);
        assert_eq!(sticky.current(), None);
        let first = sticky.partition(&ALL3, &mut rng).unwrap();
        assert_eq!(sticky.current(), Some(first));
        assert!(!sticky.appended_at(1, true, None));
        assert_eq!(sticky.partition(&ALL3, &mut rng).unwrap(), first);
        assert!(!sticky.appended_at(1, true, None));
        assert_eq!(sticky.partition(&ALL3, &mut rng).unwrap(), first);
        assert!(sticky.appended_at(1, true, None));
        assert_eq!(sticky.current(), None, "switched: none until the next draw");
        assert_ne!(sticky.partition(&ALL3, &mut rng).unwrap(), first);

        let one = TopicPartitions {
            count: 1,
            available: &[0],
        };
        let mut sticky = StickyPartitioner::new("b", 1);
        for _ in 0..10 {
            assert_eq!(sticky.partition(&one, &mut rng).unwrap(), 0);
            assert!(sticky.appended_at(1, true, None));
        }
    }

    // librdkafka's sticky.partitioning.linger.ms: the stay starts at the
    // first time told for the partition and ends at the first append told
    // at least the linger after it; appends that read no clock change
    // nothing; a linger of zero moves on after every record.
    #[test]
    fn the_partition_holds_at_most_the_sticky_linger() {
        let t0 = Instant::now();
        let ms = |n: u64| Some(t0 + Duration::from_millis(n));
        let mut rng = Counting(0);
        let mut sticky =
            StickyPartitioner::new("a", 1_000_000).with_linger(Duration::from_millis(10));
        let first = sticky.partition(&ALL3, &mut rng).unwrap();
        // No time told yet: however long, no stay has started.
        assert!(!sticky.appended_at(100, true, None));
        assert!(!sticky.appended_at(100, true, ms(2)), "the stay starts");
        assert!(!sticky.appended_at(100, true, None));
        assert!(!sticky.appended_at(100, true, ms(11)), "9 ms in");
        assert_eq!(sticky.partition(&ALL3, &mut rng).unwrap(), first);
        assert!(sticky.appended_at(100, true, ms(12)), "10 ms in");
        let second = sticky.partition(&ALL3, &mut rng).unwrap();
        assert_ne!(second, first);
        // The new partition's stay starts at its own first time.
        assert!(!sticky.appended_at(100, true, ms(15)));
        assert!(!sticky.appended_at(100, true, ms(24)));
        assert!(sticky.appended_at(100, true, ms(25)));
        // The bytes still end a stay first when they come first.
        let third = sticky.partition(&ALL3, &mut rng).unwrap();
        assert!(!sticky.appended_at(600_000, true, ms(26)));
        assert!(sticky.appended_at(400_000, true, ms(27)));
        assert_ne!(sticky.partition(&ALL3, &mut rng).unwrap(), third);

        let mut every = StickyPartitioner::new("b", 1_000_000).with_linger(Duration::ZERO);
        for _ in 0..5 {
            every.partition(&ALL3, &mut rng).unwrap();
            assert!(every.appended_at(1, true, None));
        }
        // Without a linger, time told changes nothing (the Java client's).
        let mut java = StickyPartitioner::new("c", 1_000_000);
        java.partition(&ALL3, &mut rng).unwrap();
        assert!(!java.appended_at(1, true, ms(0)));
        assert!(!java.appended_at(1, true, ms(60_000)));
    }

    #[test]
    fn a_held_back_switch_happens_at_twice_the_batch_size_or_when_allowed() {
        let mut rng = Counting(0);
        let mut sticky = StickyPartitioner::new("a", 10);
        let first = sticky.partition(&ALL3, &mut rng).unwrap();
        // The batch is not full: no switch at 10 bytes...
        assert!(!sticky.appended_at(10, false, None));
        assert_eq!(sticky.partition(&ALL3, &mut rng).unwrap(), first);
        // ...nor at 19, but at 20 (twice the batch size) in any case.
        assert!(!sticky.appended_at(9, false, None));
        assert!(sticky.appended_at(1, false, None));
        let second = sticky.partition(&ALL3, &mut rng).unwrap();
        assert_ne!(second, first);
        // Held back at 12, completed by a zero-byte call once allowed.
        assert!(!sticky.appended_at(12, false, None));
        assert_eq!(sticky.partition(&ALL3, &mut rng).unwrap(), second);
        assert!(sticky.appended_at(0, true, None));
        assert_ne!(sticky.partition(&ALL3, &mut rng).unwrap(), second);
        // Nothing to count before the first partition is chosen.
        assert!(!StickyPartitioner::new("c", 1).appended_at(5, true, None));
    }

    #[test]
    fn a_batch_size_of_zero_counts_as_one() {
        let mut rng = Counting(0);
        let mut sticky = StickyPartitioner::new("a", 0);
        let first = sticky.partition(&ALL3, &mut rng).unwrap();
        assert!(!sticky.appended_at(0, true, None));
        assert_eq!(sticky.partition(&ALL3, &mut rng).unwrap(), first);
        assert!(sticky.appended_at(1, true, None));
    }

    // After BuiltInPartitionerTest.unavailablePartitionsTest: a partition
    // without a leader is never chosen while others have one; with none
    // available, any partition is.
    #[test]
    fn partitions_without_a_leader_are_left_out() {
        let mut rng = Rng::new(11);
        let a = TopicPartitions {
            count: 3,
            available: &[0, 2],
        };
        let mut sticky = StickyPartitioner::new("a", 1);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..100 {
            let p = sticky.partition(&a, &mut rng).unwrap();
            assert_ne!(p, 1);
            seen.insert(p);
            sticky.appended_at(1, true, None);
        }
        assert_eq!(seen, [0, 2].into());

        let b = TopicPartitions {
            count: 2,
            available: &[1],
        };
        let mut sticky = StickyPartitioner::new("b", 1);
        for _ in 0..100 {
            assert_eq!(sticky.partition(&b, &mut rng).unwrap(), 1);
            sticky.appended_at(1, true, None);
        }

        let c = TopicPartitions {
            count: 1,
            available: &[],
        };
        let mut sticky = StickyPartitioner::new("c", 1);
        assert_eq!(sticky.partition(&c, &mut rng).unwrap(), 0);
        sticky.appended_at(1, true, None);
        assert_eq!(sticky.partition(&c, &mut rng).unwrap(), 0);

        let none = TopicPartitions {
            count: 0,
            available: &[],
        };
        assert_eq!(
            StickyPartitioner::new("d", 1).partition(&none, &mut rng),
            Err(PartitionerError::NoPartitions {
                topic: Some("d".into()),
                partition_count: 0
            })
        );
    }

    #[test]
    fn uniform_choice_covers_every_partition_evenly() {
        let mut rng = Rng::new(3);
        let topic = TopicPartitions {
            count: 4,
            available: &[0, 1, 2, 3],
        };
        let mut sticky = StickyPartitioner::new("a", 1);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[sticky.partition(&topic, &mut rng).unwrap() as usize] += 1;
            sticky.appended_at(1, true, None);
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    struct Fixed(i32);

    impl Partitioner for Fixed {
        fn partition(&self, _: &str, _: Option<&[u8]>, _: Option<&[u8]>, _: i32) -> i32 {
            self.0
        }
    }

    fn record<'a>(partition: Option<i32>, key: Option<&'a [u8]>) -> RecordToPlace<'a> {
        RecordToPlace {
            topic: "t",
            partition,
            key,
            value: Some(b"v"),
        }
    }

    #[test]
    fn placement_follows_the_java_clients_order() {
        let keyed = record(None, Some(b"abc"));
        let by_key = Placement::Partition(479470107 % 10);
        // A named partition wins over everything.
        assert_eq!(
            place(
                &record(Some(3), Some(b"abc")),
                10,
                false,
                Some(&Fixed(7)),
                B
            ),
            Ok(Placement::Partition(3))
        );
        // Then a custom partitioner, keyed or not, ignore.keys or not.
        assert_eq!(
            place(&keyed, 10, true, Some(&Fixed(7)), B),
            Ok(Placement::Partition(7))
        );
        assert_eq!(
            place(&record(None, None), 10, false, Some(&Fixed(7)), B),
            Ok(Placement::Partition(7))
        );
        // Then the key.
        assert_eq!(place(&keyed, 10, false, None, B), Ok(by_key));
        assert_eq!(
            place(&record(None, Some(b"")), 10, false, None, B),
            Ok(Placement::Partition(to_positive(0x106e08d9) % 10))
        );
        // partitioner.ignore.keys, or no key: the sticky partitioner.
        assert_eq!(place(&keyed, 10, true, None, B), Ok(Placement::Sticky));
        assert_eq!(
            place(&record(None, None), 10, false, None, B),
            Ok(Placement::Sticky)
        );
    }

    #[test]
    fn partitions_out_of_range_are_refused() {
        assert_eq!(
            place(&record(Some(10), None), 10, false, None, B),
            Err(PartitionerError::RecordPartitionOutOfRange {
                topic: "t".into(),
                partition: 10,
                partition_count: 10
            })
        );
        assert!(place(&record(Some(-1), None), 10, false, None, B).is_err());
        for bad in [-1, 10, i32::MIN] {
            let err = place(&record(None, None), 10, false, Some(&Fixed(bad)), B).unwrap_err();
            assert_eq!(
                err,
                PartitionerError::CustomPartitionOutOfRange {
                    topic: "t".into(),
                    partition: bad,
                    partition_count: 10
                }
            );
            assert!(err.to_string().contains("custom partitioner"), "{err}");
        }
        assert_eq!(
            place(&record(None, Some(b"k")), 0, false, None, B),
            Err(PartitionerError::NoPartitions {
                topic: Some("t".into()),
                partition_count: 0
            })
        );
    }
}
