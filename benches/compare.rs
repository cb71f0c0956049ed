//! lazykafka next to librdkafka (the `rdkafka` crate), in one run, on the
//! same brokers and the same data; and, in the lifecycle cases, next to
//! Apache Kafka's Java client as well.
//!
//! ```sh
//! cargo bench --bench compare                          # 3 rounds, full size
//! LAZYKAFKA_BENCH_SCALE=0.1 LAZYKAFKA_BENCH_ROUNDS=5 cargo bench --bench compare
//! cargo bench --bench compare -- --scale 0.1 --rounds 5  # the same
//! LAZYKAFKA_TANSU_BIN=/path/to/tansu cargo bench --bench compare  # adds tansu
//! ```
//!
//! The parent process hosts an in-process mock cluster
//! (`lazykafka::mock::MockCluster`, 3 brokers, filled from code) and, when
//! given, a tansu broker (filled with librdkafka's producer), and runs every
//! consumer in a child process of its own (this binary again, with
//! `--child`), which connects over loopback. Each child reports what it
//! measured about itself as one JSON line: throughput, time from the first
//! `poll` to the first record, CPU time (getrusage, less the census
//! thread's), peak RSS (`VmHWM`), threads, connection attempts (the client's
//! own counters: lazykafka's `broker_counters()`, librdkafka's statistics
//! `connects`), TCP sockets seen to the brokers (a census thread reading
//! `/proc/net/tcp*` every 2 ms), sockets held once consuming (the census
//! after the last record), and the CPU it spends per second polling with
//! nothing left to read. The parent counts, from the mock's request log,
//! the requests each client sent between its first poll and its first
//! record. The mock's own CPU is the parent's, not the child's.
//!
//! Clients alternate A B A B (lazykafka, then librdkafka, per round) so a
//! noisy machine affects both alike; medians and the ratio lazykafka /
//! librdkafka are printed and written, with every run, to
//! `target/bench-compare.json` (or `LAZYKAFKA_BENCH_OUT`). Environment:
//!
//! - `LAZYKAFKA_BENCH_SCALE` (default 1): multiplies the record counts
//!   (1,000,000 × 100 B, uncompressed and lz4; 100,000 × 10 KiB);
//! - `LAZYKAFKA_BENCH_ROUNDS` (default 3);
//! - `LAZYKAFKA_BENCH_TANSU_SCALE` (default: the scale): the record counts
//!   for tansu, which is much slower to fill and to serve;
//! - `LAZYKAFKA_TANSU_BIN`: a tansu binary; without it tansu is skipped;
//! - `LAZYKAFKA_BENCH_CASES`: a comma-separated subset of
//!   `100B,100B-lz4,10KiB,scale,sessions,sessions-rdmock,rebalance,tls,process`,
//!   the producer
//!   cases `produce-100B,produce-10KiB,produce-100B-keyed,produce-100B-lz4,
//!   produce-scale,produce-process,produce-apis`, `mock-lifecycle`, `kafka-lifecycle` (Apache Kafka,
//!   below) and `kafka-broker-idle` (only when named);
//! - `LAZYKAFKA_BENCH_JAVA=0`: no Java client in the lifecycle runs;
//!   `LAZYKAFKA_BENCH_JAVA_OPTS`: JVM options for it (split at spaces;
//!   default none: the JVM's defaults);
//! - `LAZYKAFKA_BENCH_STEADY_MS` (default 10000): the steady window of the
//!   `sessions` cases. `sessions` (KIP-227 incremental fetch sessions) puts
//!   2,000 × scale partitions (at least 30) over the 3 brokers of a mock,
//!   2 records each; each client reads every record in the topic, then
//!   polls for the steady window, once with a trickle of 100 records/s
//!   round the partitions (phase `trickle`) and once with nothing written
//!   (phase `idle`); the bench reports the Fetch request bytes per second
//!   the mock received in that window (`request_bytes`, sampled every
//!   50 ms), the Fetch requests per second, the client's CPU per second
//!   and its peak RSS, for lazykafka with sessions (the default),
//!   lazykafka with `fetch.sessions.enable=false` and librdkafka (no
//!   sessions). `sessions-rdmock` is the same on librdkafka's mock (in
//!   this process, filled and trickled by a librdkafka producer; no fetch
//!   sessions there, and no request bytes), for lazykafka and librdkafka;
//! - `LAZYKAFKA_BENCH_PARTITIONS`: a comma-separated list of partition
//!   counts for the `sessions` cases instead of 2,000 × scale (the curve:
//!   `100,1000,2000,10000`); with two counts or more the bench draws
//!   client CPU per second against them, one panel per broker, to
//!   `bench-many-partitions.svg` beside the JSON. The `rebalance` case
//!   (partition counts as `sessions`) has one group member per client
//!   subscribe to a topic of that many partitions, one record each, on our
//!   mock and on librdkafka's, and reports from the broker's request log
//!   the time from its last SyncGroup (the assignment) to its first Fetch
//!   and from its first JoinGroup to that Fetch, and from the child the
//!   time to the first record and the CPU and peak RSS to the last;
//! - `LAZYKAFKA_BENCH_PERF=DIR`: every timed child runs under
//!   `perf record -g`, its profile written to `DIR` (the timings then
//!   include perf's overhead: for profiles only);
//! - `LAZYKAFKA_BENCH_STRACE=0`: no strace runs.
//!
//! The `tls` case is the 100 B data set (the same record count) on a
//! second 3-broker mock with TLS listeners: a CA and a leaf certificate for
//! `localhost` and `127.0.0.1` are made with rcgen at run time and written
//! to a temp dir; both clients get `security.protocol=SSL` and
//! `ssl.ca.location` (the CA file). When `100B` runs too, the bench also
//! prints each client's TLS / plaintext CPU per record (`tls_vs_plain` in
//! the JSON).
//!
//! The producer cases write instead of reading, on a 3-broker mock of
//! their own (8 partitions, partition `p` led by broker `p % 3 + 1`):
//! 1,000,000 × scale records of 100 B (`produce-100B`, `produce-100B-lz4`
//! with lz4 on both clients, `produce-100B-keyed` with keys `k{i % 1000}`
//! placed by each client's murmur2 partitioner) and 50,000 × scale of
//! 10 KiB (`produce-10KiB`); keyless record `i` names partition `i % 8`.
//! Both producers are idempotent with `acks=all`, `linger.ms` 5,
//! `batch.size` 16384 and 5 requests in flight (the Java defaults,
//! lazykafka's); librdkafka also gets `queue.buffering.max.kbytes` 32768
//! (`buffer.memory`), `queue.buffering.max.messages` 0 (no count limit)
//! and `partitioner=murmur2_random`. lazykafka awaits each `send` and
//! keeps the delivery futures in a queue in the order sent, taking those
//! done from its front after every send, then awaits the rest in order; librdkafka's
//! `BaseProducer` sends each record and calls `poll(0)` after it (on
//! `QueueFull`, `poll(100 ms)` and the same record again), then polls
//! until every delivery report came. Each child reports records/s from
//! before the producer is created to the last delivery report (and from
//! the first report to the last), CPU (less the census thread's) per
//! record, peak RSS, threads and sockets held after the last report, and
//! its own connection count; the parent adds, from the mock's event log,
//! the connections accepted, the brokers they went to, the Produce
//! requests, and the records written (high watermarks; every partition is
//! emptied after each run). `produce-scale` is the `scale` case's
//! 1000-address bootstrap list in front of another 8-broker mock, 1000
//! records of 100 B to a topic of 6 partitions led by brokers 1, 2, 4, 5,
//! 7 and 8.
//!
//! The lifecycle runs put the three clients side by side the way the
//! project is about: how many sockets each holds, when, to which brokers,
//! and what it leaves behind. Each client is a child that pauses at named
//! points (this binary with `--child` and `LKB_LIFECYCLE`; the Java peer,
//! `tests/java/Peer.java`, in its `census-consumer` and `census-producer`
//! modes, compiled by the bench into `bench-java-peer/` beside its target
//! directory and run with the JVM's defaults on a class path of
//! `kafka-clients`, its compression jars and the SLF4J API), and all three
//! are measured alike from the parent: the sockets the child holds to the
//! brokers (its `/proc/PID/fd` placed in `/proc/net/tcp*`, with their
//! states) 3 s after it was created and subscribed
//! (`LAZYKAFKA_BENCH_SETTLE_MS`; before its first
//! `poll` or `send`), after the steady window that follows its last
//! record or delivery, and 0.5 s after it closed (the process still
//! alive); every socket it ever held (a sampler every 2 ms); its threads
//! and `VmRSS` at those points and `VmHWM` last; its CPU from its
//! first `poll` or `send` to its last record or delivery
//! (`/proc/PID/stat`) and in all (`wait4`). On a
//! mock the connections it accepted come from its log. `scale` runs them
//! after its throughput rounds (`scale-lifecycle`: each client a group
//! member subscribing to the topic, reading its 1000 records),
//! `produce-scale` likewise (`produce-scale-lifecycle`), and
//! `kafka-lifecycle`, when `LAZYKAFKA_KAFKA_BOOTSTRAP` is set
//! (`scripts/kafka.sh start; . .kafka/run/env`), on Apache Kafka's 3
//! brokers: a group consumer reading 200,000 × scale records of 100 B from
//! a topic of 6 partitions (replication 3), a producer writing 1,000 to
//! another, each once with the defaults (`kafka-lifecycle`,
//! `kafka-lifecycle-produce`) and once with `connections.max.idle.ms`
//! 5000 on the client (`-idle`: the steady census after 8 s).
//! `mock-lifecycle` is that consumer on a 3-broker mock; `kafka-broker-idle`
//! (only when `LAZYKAFKA_BENCH_CASES` names it: 11 minutes) runs the six
//! lifecycles with the defaults at once and takes the steady census 630 s
//! after the last record or delivery (`LAZYKAFKA_BENCH_BROKER_IDLE_MS`, the
//! brokers' `connections.max.idle.ms`, default 600000, plus 30 s), to see
//! what the brokers' idle closes leave (CLOSE_WAIT). The summary gives the
//! Java client's medians and the ratios to it beside the others', and the
//! brokers each client's sockets went to are printed per case. The closed
//! ports of the 1000-address list are held by sockets bound to them that
//! never listen, so that no other process can take them meanwhile.
//!
//! The `process` case measures whole processes as a user runs them: the
//! `consume` example (built first with `cargo build --release --example
//! consume`) and the same command line on librdkafka (this binary with
//! `--consume-librdkafka`), each reading 600,000 × scale records of 100 B
//! from 24 partitions to the end (`--offset beginning --count N`, JSON
//! lines to /dev/null); CPU time and peak RSS come from `wait4`.
//! `produce-process` does the same for the `produce` example (built with
//! `cargo build --release --example produce`) and its command line on
//! librdkafka's `BaseProducer` (`--produce-librdkafka`): 300,000 × scale
//! generated records of 100 B (`--generate N --size 100`) to 24
//! partitions, idempotent, `acks=all`, `linger.ms` 5, with each client's
//! default `batch.size`, then 16384 on both, then 1000000 on both; and
//! 30,000 × scale of 10 KiB with lz4; records/s from the wall time.
//! `LAZYKAFKA_BENCH_PRODUCE_EXAMPLE=PATH` measures another build of the
//! example instead (an older commit's, to compare). `produce-apis` runs
//! 1,000,000 × scale records of 100 B through lazykafka's two ways of
//! awaiting deliveries, as a tokio program (`--produce-futures`: `send`
//! and a `FuturesUnordered` of the futures; `--produce-reports`:
//! `send_reported` and `delivery_reports()`), beside librdkafka's twin.
//!
//! After the summary, each uncompressed data set's physical floor is
//! measured on the same bytes and printed next to both clients' CPU per
//! record: the bare parse + CRC-32C loop of the `records` bench and a
//! loopback `read` of the set (`floors` in the JSON).
//!
//! `LAZYKAFKA_BENCH_IDLE_MS` (default 1000) sets how long the children
//! poll with nothing to read for the idle figure; the JSON also has that
//! figure per thread name (`idle_threads_ms_per_s`, each thread's run time
//! from `/proc/self/task/*/schedstat`, the census thread left out) and
//! how often each thread ran in it (`idle_thread_runs_per_s`, the third
//! field of the same file). Every child also reports its minor page faults
//! (`minor_faults`, `getrusage`).
//!
//! `LAZYKAFKA_BENCH_WRAP` runs every timed child under a command, for
//! looking only (`strace -f -c -o /tmp/sc-{}`, `perf record -F 20000 -g
//! -o /tmp/p-{} --`): the words are split at spaces and `{}` becomes the
//! case, the client and a run number.
//!
//! lazykafka runs on async-std by default; built with
//! `--no-default-features --features runtime-tokio,gzip,snappy,lz4,zstd,mock`
//! it runs on a current-thread tokio runtime, or on a multi-thread one
//! (what `#[tokio::main]` builds) with `LAZYKAFKA_BENCH_TOKIO=multi` (each
//! child's JSON line says which, as `runtime`). `scripts/bench-runtimes.sh`
//! builds both and alternates them, round by round.
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it does nothing.
//!
//! The code, under `benches/compare/`: [`parent`] hosts the brokers, runs
//! the cases (a module per case family) and reports; [`child`] is one
//! measured client (or, with `LKB_LIFECYCLE`, a client pausing for the
//! parent's census); [`twin`] is the `consume` example's command line on
//! librdkafka, [`twin_produce`] the `produce` example's. [`data`], [`client_config`] and [`measure`] are shared by
//! both sides.

#[path = "compare/child/mod.rs"]
mod child;
#[path = "compare/client_config.rs"]
mod client_config;
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "compare/data.rs"]
mod data;
#[path = "support/floor.rs"]
mod floor;
#[path = "compare/measure.rs"]
mod measure;
#[path = "compare/parent/mod.rs"]
mod parent;
/// The `consume` example's JSON line, for its librdkafka twin.
#[path = "../examples/support/record_line.rs"]
mod record_line;
#[path = "compare/twin.rs"]
mod twin;
#[path = "compare/twin_produce.rs"]
mod twin_produce;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--child") {
        child::run();
        return;
    }
    if args.get(1).map(String::as_str) == Some("--consume-librdkafka") {
        std::process::exit(twin::run(&args[2..]));
    }
    match args.get(1).map(String::as_str) {
        Some("--produce-librdkafka") => std::process::exit(twin_produce::run(&args[2..])),
        Some("--produce-futures") => {
            std::process::exit(twin_produce::run_lazykafka(&args[2..], false))
        }
        Some("--produce-reports") => {
            std::process::exit(twin_produce::run_lazykafka(&args[2..], true))
        }
        _ => {}
    }
    if !args.iter().any(|a| a == "--bench") {
        eprintln!("compare: a benchmark; run it with `cargo bench --bench compare`");
        return;
    }
    parent::run(&args);
}
