//! What a bench run is asked for, from its flags (`--scale`, `--rounds`)
//! and the environment (`LAZYKAFKA_BENCH_*`, see the crate documentation):
//! the scale, the rounds, the cases, where the results go, and the
//! many-partitions cases' partition counts and steady window.

use std::collections::BTreeSet;

/// What a bench run is asked for.
pub(crate) struct Settings {
    pub(crate) scale: f64,
    pub(crate) tansu_scale: f64,
    pub(crate) rounds: usize,
    pub(crate) cases: Option<BTreeSet<String>>,
    pub(crate) out: std::path::PathBuf,
}

/// The settings of this run: a flag wins over its environment variable.
pub(crate) fn settings(args: &[String]) -> Settings {
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let scale: f64 = arg("--scale")
        .or_else(|| env("LAZYKAFKA_BENCH_SCALE"))
        .map(|v| v.parse().expect("scale: a number"))
        .unwrap_or(1.0);
    let tansu_scale = env("LAZYKAFKA_BENCH_TANSU_SCALE")
        .map(|v| v.parse().expect("tansu scale: a number"))
        .unwrap_or(scale);
    let rounds = arg("--rounds")
        .or_else(|| env("LAZYKAFKA_BENCH_ROUNDS"))
        .map(|v| v.parse().expect("rounds: a number"))
        .unwrap_or(3);
    let cases =
        env("LAZYKAFKA_BENCH_CASES").map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    let out = env("LAZYKAFKA_BENCH_OUT")
        .map(Into::into)
        .unwrap_or_else(|| {
            let target = env("CARGO_TARGET_DIR").unwrap_or_else(|| "target".into());
            std::path::Path::new(&target).join("bench-compare.json")
        });
    Settings {
        scale,
        tansu_scale,
        rounds,
        cases,
        out,
    }
}

impl Settings {
    /// Whether `case` runs: every case does when `LAZYKAFKA_BENCH_CASES`
    /// is not set.
    pub(crate) fn wants(&self, case: &str) -> bool {
        self.cases.as_ref().is_none_or(|c| c.contains(case))
    }

    /// Whether `LAZYKAFKA_BENCH_CASES` names `case`: for the cases that
    /// run only when asked for (`kafka-broker-idle`, 11 minutes).
    pub(crate) fn names(&self, case: &str) -> bool {
        self.cases.as_ref().is_some_and(|c| c.contains(case))
    }
}

/// The partition counts of the many-partitions cases:
/// `LAZYKAFKA_BENCH_PARTITIONS` (a comma-separated list, for the
/// curve), else 2,000 × scale (at least 30).
pub(crate) fn many_partition_counts(s: &Settings) -> Vec<i32> {
    match std::env::var("LAZYKAFKA_BENCH_PARTITIONS") {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(|p| {
                p.trim()
                    .parse()
                    .expect("LAZYKAFKA_BENCH_PARTITIONS: numbers")
            })
            .collect(),
        _ => vec![((2000.0 * s.scale).round() as i32).max(30)],
    }
}

/// The steady window of the `sessions` cases, in ms:
/// `LAZYKAFKA_BENCH_STEADY_MS`, default 10000.
pub(crate) fn steady_ms() -> u64 {
    std::env::var("LAZYKAFKA_BENCH_STEADY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}
