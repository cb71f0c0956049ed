//! The records the cases read and write: the text-like value pool, the
//! consumer cases' data sets and what a producer child writes.

/// Text-like values (lowercase letters from a xorshift generator), so lz4
/// has something realistic to do; a pool of 64 distinct values.
pub(crate) fn values(len: usize) -> Vec<Vec<u8>> {
    (0..64u64)
        .map(|i| {
            let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Skewed toward a few letters, as text is.
                    let r = (x % 100) as u8;
                    b'a' + if r < 60 { r % 6 } else { r % 26 }
                })
                .collect()
        })
        .collect()
}

/// One data set: `records` values of `value_len` bytes over `partitions`
/// partitions of `topic`.
#[derive(Debug, Clone)]
pub(crate) struct DataSet {
    pub(crate) name: &'static str,
    pub(crate) topic: &'static str,
    pub(crate) records: usize,
    pub(crate) value_len: usize,
    pub(crate) compression: &'static str,
    pub(crate) partitions: i32,
}

/// The consumer throughput cases' data sets, their record counts times
/// `scale` (at least 8).
pub(crate) fn data_sets(scale: f64) -> Vec<DataSet> {
    let n = |base: f64| ((base * scale).round() as usize).max(8);
    vec![
        DataSet {
            name: "100B",
            topic: "b100",
            records: n(1_000_000.0),
            value_len: 100,
            compression: "none",
            partitions: 8,
        },
        DataSet {
            name: "100B-lz4",
            topic: "b100lz4",
            records: n(1_000_000.0),
            value_len: 100,
            compression: "lz4",
            partitions: 8,
        },
        DataSet {
            name: "10KiB",
            topic: "b10k",
            records: n(100_000.0),
            value_len: 10 * 1024,
            compression: "none",
            partitions: 8,
        },
    ]
}

/// What a producer child writes: values of `value_len` bytes (the
/// consumer cases' text-like pool), compressed with `compression`; keyed
/// records (`k{i % 1000}`) go where the partitioner puts them, keyless
/// record `i` to partition `i % partitions`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Produce {
    pub(crate) value_len: usize,
    pub(crate) compression: &'static str,
    pub(crate) keyed: bool,
}
