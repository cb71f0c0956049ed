//! The layer order of docs/architecture.md, checked on the source: each
//! layer names only the crate modules below it. `error` wraps the errors
//! of the layers under it, so none of those uses `crate::error` (or
//! `config`, whose parsing returns that `Error`): that would form a cycle.
//! The runtime-free producer, `config` and the runtime sit above `error`;
//! the clients' cores sit above `error` and `config` but below the
//! runtime, which drives them through `cluster::ClientCore` without naming
//! them; every sans-IO layer is free of async, sockets, threads and clock
//! reads (time is an argument).

use std::fs;
use std::path::{Path, PathBuf};

/// Each layer and the crate modules it may use.
const LAYERS: &[(&str, &[&str])] = &[
    ("protocol", &[]),
    // A run of failures and when it was last reported, for every layer
    // that reports failures which go on.
    ("streak", &[]),
    ("records", &["protocol"]),
    // SASL's mechanisms (PLAIN, SCRAM, OAUTHBEARER) are pure; the cluster
    // runs their exchanges on each new connection.
    ("sasl", &[]),
    ("cluster", &["protocol", "events", "sasl", "streak"]),
    ("group", &["protocol", "cluster"]),
    (
        "fetch",
        &[
            "protocol", "records", "cluster", "group", "events", "streak",
        ],
    ),
    // What both clients and the runtime report: connection events and
    // counters, and the metrics made of them.
    ("events", &["protocol"]),
    ("metrics", &["events"]),
    // The crate's error wraps the errors of the layers under it, the
    // producer's per-record ones included (they live in `error`, and
    // `lazykafka::producer` names them too), so it uses nothing above.
    (
        "error",
        &["protocol", "records", "cluster", "group", "fetch", "events"],
    ),
    // The producer's runtime-free parts (its partitioners take
    // `cluster::Rng` as their random source and fail with
    // `error::PartitionerError`; its accumulator builds record batches for
    // topic partitions). Its core and handle are below.
    (
        "producer",
        &["protocol", "cluster", "records", "group", "error"],
    ),
    // The properties: their values are types of the layers they configure
    // (the producer's `partitioner` names a `BuiltinPartitioner` of the
    // runtime-free producer above), never of a client's core or handle.
    (
        "config",
        &[
            "protocol", "records", "cluster", "group", "fetch", "error", "sasl", "producer",
        ],
    ),
    ("tls", &["config", "sasl", "error"]),
    // The runtime drives any client's core through `cluster::ClientCore`
    // and names no client: neither `consumer` nor `producer`.
    (
        "runtime",
        &[
            "protocol", "cluster", "config", "error", "events", "sasl", "tls", "streak",
        ],
    ),
    // The statistics stream both clients hand out, paced by the runtime.
    ("statistics", &["error", "runtime"]),
];

/// The files of a layer's directory that are not that layer: the
/// producer's core (see `CORE_FILES`) and its handle, which uses the
/// runtime as the consumer's does (a file, or a directory and all under
/// it).
const NOT_LAYER: &[&str] = &["producer/core", "producer/api.rs"];

fn in_layer(src: &Path, file: &Path) -> bool {
    !NOT_LAYER.iter().any(|f| file.starts_with(src.join(f)))
}

/// The clients' sans-IO cores (the consumer's and the producer's, files
/// or directories named here) and the crate modules they may use: never
/// `runtime`, nor the `mock` their tests use.
const CORE_FILES: &[&str] = &["consumer/core", "consumer/offsets.rs", "producer/core"];

/// The files of `CORE_FILES`, directories walked; an entry that is neither
/// a file nor a directory fails the test (a core that moved must be named
/// again here). Whole unit-test files (`tests.rs`) are left out: they step
/// the core on the crate's test harness and the mock.
fn core_files(src: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in CORE_FILES {
        let path = src.join(entry);
        if path.is_dir() {
            rust_files(&path, &mut files);
            files.retain(|f| f.file_name().is_none_or(|n| n != "tests.rs"));
        } else {
            assert!(path.is_file(), "{} is gone", path.display());
            files.push(path);
        }
    }
    files
}
const CORE_ALLOWED: &[&str] = &[
    "protocol", "records", "cluster", "group", "fetch", "events", "metrics", "error", "config",
    "producer", "streak",
];

/// The layers with no IO at all (`sasl` is left out: an OAUTHBEARER token
/// provider, called by the application's side, may read the wall clock).
const SANS_IO: &[&str] = &[
    "protocol", "streak", "records", "cluster", "group", "fetch", "producer", "metrics",
];

/// What code without IO never contains: async code, sockets, threads and
/// clock reads.
const IO_TOKENS: &[&str] = &[
    "async fn",
    "async move",
    ".await",
    "Instant::now(",
    "SystemTime::now(",
    "std::thread",
    "std::net::Tcp",
    "TcpStream",
    "TcpListener",
    "UdpSocket",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crate modules `source` names in code (`crate::x`), with their lines;
/// comments are skipped, so doc links to higher layers stay allowed.
fn crate_uses(source: &str) -> Vec<(usize, String)> {
    let mut uses = Vec::new();
    for (n, line) in source.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for (i, _) in line.match_indices("crate::") {
            let module: String = line[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            uses.push((n + 1, module));
        }
    }
    uses
}

#[test]
fn each_layer_uses_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (layer, allowed) in LAYERS {
        let mut files = Vec::new();
        let dir = src.join(layer);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
        files.retain(|f| in_layer(&src, f));
        let file = src.join(format!("{layer}.rs"));
        if file.is_file() {
            files.push(file);
        }
        assert!(!files.is_empty(), "no source for {layer}");
        for file in files {
            let source = fs::read_to_string(&file).unwrap();
            for (line, module) in crate_uses(&source) {
                if module != *layer && !allowed.contains(&module.as_str()) {
                    violations.push(format!("{}:{line}: crate::{module}", file.display()));
                }
            }
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
}

/// The lines of `source` that are code, before its unit tests (an inline
/// `#[cfg(test)] mod ... {` at the end, which may read the clock to start
/// a manual one), with their numbers.
fn code_lines(source: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = source.lines().collect();
    let mut out = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let next = lines.get(n + 1).map_or("", |l| l.trim());
        if line.trim() == "#[cfg(test)]" && next.starts_with("mod ") && next.ends_with('{') {
            break;
        }
        if !line.trim_start().starts_with("//") {
            out.push((n + 1, *line));
        }
    }
    out
}

/// The IO tokens in `source`'s code, with their lines. A token ending in a
/// name must end where the name does (`.await`, not `.awaiting_metadata`).
fn io_uses(source: &str) -> Vec<(usize, &'static str)> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (n, line) in code_lines(source) {
        for token in IO_TOKENS {
            let whole = line.match_indices(token).any(|(i, _)| {
                !token.ends_with(ident) || !line[i + token.len()..].starts_with(ident)
            });
            if whole {
                found.push((n, *token));
            }
        }
    }
    found
}

/// The dependency runs one way: the public handles (`consumer/api/`,
/// `producer/api.rs`) use the runtime and their cores, and neither a core
/// nor the runtime names a handle (nor does the runtime name a core: see
/// `LAYERS`).
#[test]
fn the_runtime_and_the_core_never_use_the_handle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("runtime"), &mut files);
    files.extend(core_files(&src));
    let mut violations = Vec::new();
    for file in files {
        let source = fs::read_to_string(&file).unwrap();
        for (n, line) in code_lines(&source) {
            let names_handle = ["consumer::", "producer::"].iter().any(|client| {
                line.match_indices(client)
                    .any(|(i, _)| !line[i + client.len()..].starts_with("core"))
            }) || line.contains("super::api");
            if names_handle {
                violations.push(format!("{}:{n}: {}", file.display(), line.trim()));
            }
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn the_consumer_core_uses_no_runtime() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for path in core_files(&src) {
        let source = fs::read_to_string(&path).unwrap();
        for (line, module) in crate_uses(&source) {
            if !CORE_ALLOWED.contains(&module.as_str()) {
                violations.push(format!("{}:{line}: crate::{module}", path.display()));
            }
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn the_sans_io_layers_have_no_async_sockets_threads_or_clock() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for layer in SANS_IO {
        let dir = src.join(layer);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
        let file = src.join(format!("{layer}.rs"));
        if file.is_file() {
            files.push(file);
        }
    }
    files.retain(|f| in_layer(&src, f));
    files.extend(core_files(&src));
    let mut violations = Vec::new();
    for file in files {
        // Whole test files drive a manual clock from a real start.
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let source = fs::read_to_string(&file).unwrap();
        for (line, token) in io_uses(&source) {
            violations.push(format!("{}:{line}: {token}", file.display()));
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn the_io_scan_sees_a_clock_read_and_skips_comments_and_unit_tests() {
    let source = "let t = Instant::now();\nm.awaiting();\nf().await;\n// x.await\n\
                  #[cfg(test)]\nmod tests {\n    async fn f() {}\n}\n";
    assert_eq!(io_uses(source), vec![(1, "Instant::now("), (3, ".await")]);
}

#[test]
fn the_scan_sees_a_use_and_skips_a_comment() {
    let uses = crate_uses("use crate::error::ErrorCode;\n/// [`E`](crate::error::Error)\n");
    assert_eq!(uses, vec![(1, "error".to_owned())]);
}
