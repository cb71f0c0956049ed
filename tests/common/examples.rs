//! Examples built as child processes for tests.
//!
//! The binary comes from `cargo build --example NAME` run from here with
//! the cargo that runs the tests (`env!("CARGO")`), the same features and
//! profile, and `--message-format=json`: cargo names the executable it
//! built. That works with `cargo test --test X` too (which does not build
//! examples), and is a no-op when `cargo test` built it already.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// The features this test crate was built with, so the example is built
/// against the same library build (`default` included: a feature set
/// without it is another build of the library).
pub fn features() -> Vec<&'static str> {
    let mut f = Vec::new();
    if cfg!(feature = "default") {
        f.push("default");
    }
    if cfg!(feature = "runtime-async-std") {
        f.push("runtime-async-std");
    }
    if cfg!(feature = "runtime-tokio") {
        f.push("runtime-tokio");
    }
    if cfg!(feature = "gzip") {
        f.push("gzip");
    }
    if cfg!(feature = "snappy") {
        f.push("snappy");
    }
    if cfg!(feature = "lz4") {
        f.push("lz4");
    }
    if cfg!(feature = "zstd") {
        f.push("zstd");
    }
    // `cargo test` built the examples with these too: the same feature set
    // is the same build, not a second one.
    if cfg!(feature = "mock") {
        f.push("mock");
    }
    if cfg!(feature = "unstable-internals") {
        f.push("unstable-internals");
    }
    f
}

/// The path of the built example `name` (built once per test process).
pub fn example_bin(name: &str) -> PathBuf {
    static BINS: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut bins = BINS.lock().unwrap_or_else(|e| e.into_inner());
    bins.entry(name.to_owned())
        .or_insert_with(|| {
            let mut cmd = Command::new(env!("CARGO"));
            cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
                .args(["build", "--quiet", "--example", name])
                .args(["--message-format=json-render-diagnostics"])
                .args(["--no-default-features", "--features", &features().join(",")])
                .stderr(Stdio::inherit());
            // A test binary lives in target/<profile>/deps/.
            let exe = std::env::current_exe().unwrap();
            let profile_dir = exe.parent().and_then(|d| d.parent());
            if profile_dir.and_then(|d| d.file_name()) == Some("release".as_ref()) {
                cmd.arg("--release");
            }
            let out = cmd.output().expect("run cargo build --example");
            assert!(out.status.success(), "cargo build --example {name} failed");
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
                .find_map(|m| m["executable"].as_str().map(PathBuf::from))
                .expect("cargo named no executable for the example")
        })
        .clone()
}

/// Closes, in the child, every file descriptor but stdin, stdout and
/// stderr before `cmd` executes the program. librdkafka's mock cluster
/// accepts connections without `SOCK_CLOEXEC` (`accept` in
/// `rd_kafka_mock_broker_listen_io`), so a child started while one runs
/// would hold the broker side of each connection accepted so far: a
/// broker taken down, or a connection it closes, would stay open for the
/// client, answering nothing.
pub fn close_inherited_fds(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only async-signal-safe calls are made
    // (close_range(2), else close(2)); stdio is already in place.
    unsafe {
        cmd.pre_exec(|| {
            if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
                for fd in 3..libc::sysconf(libc::_SC_OPEN_MAX).clamp(3, 65_536) as i32 {
                    libc::close(fd);
                }
            }
            Ok(())
        })
    }
}
