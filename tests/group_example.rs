//! The `group` example, run as a child process: on its own in-process
//! cluster (no flags) and against librdkafka's mock cluster
//! (`--bootstrap`), it prints the assignment, every record and each
//! commit; SIGTERM makes it revoke, close and exit 0; what it committed is
//! what librdkafka reads back. The binary is built as in
//! `tests/consume_example.rs` (`common::examples::example_bin`).

// Drives a `Consumer` or `runtime::*`: built with a runtime feature only.
#![cfg(any(feature = "runtime-async-std", feature = "runtime-tokio"))]

mod common;

use common::examples::example_bin;
use common::mock::RawMock;
use common::peers::{produce, rd_committed};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

/// The example running, its stdout collected line by line.
struct Run {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Run {
    fn start(args: &[&str]) -> Run {
        let mut child = Command::new(example_bin("group"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the example");
        let (tx, lines) = channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Run {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads lines until `done` holds on them all (fails at the deadline).
    fn until(&mut self, what: &str, done: impl Fn(&[String]) -> bool) {
        let deadline = Instant::now() + WAIT;
        while !done(&self.seen) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!(
                    "{what}: not within {WAIT:?}; stdout so far: {:#?}",
                    self.seen
                ),
            }
        }
    }

    /// Sends SIGTERM; returns the exit code and every line printed.
    fn terminate(mut self) -> (Option<i32>, Vec<String>) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        let deadline = Instant::now() + WAIT;
        let code = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status.code();
            }
            assert!(
                Instant::now() < deadline,
                "no exit within {WAIT:?} of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        // The pipe is closed once the process is gone.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(line);
        }
        (code, std::mem::take(&mut self.seen))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // A failed test leaves no process behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn records(lines: &[String]) -> Vec<&String> {
    lines.iter().filter(|l| l.starts_with("record ")).collect()
}

fn committed_total(lines: &[String]) -> usize {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("committed "))
        .map(|rest| rest.split(' ').next().unwrap().parse::<usize>().unwrap())
        .sum()
}

#[test]
fn on_its_own_cluster_it_consumes_commits_and_ends_cleanly_on_sigterm() {
    let mut run = Run::start(&[]);
    run.until("6 records committed", |l| committed_total(l) == 6);
    assert_eq!(run.seen[0], "assigned orders-0,orders-1,orders-2");
    let mut got: Vec<&str> = records(&run.seen).iter().map(|l| l.as_str()).collect();
    got.sort_unstable();
    let mut expected: Vec<String> = (0..6)
        .map(|i| {
            format!(
                "record orders-{}@{} key=order-{i} value=widget x{i}",
                i % 3,
                i / 3
            )
        })
        .collect();
    expected.sort_unstable();
    assert_eq!(got, expected);

    let (code, lines) = run.terminate();
    assert_eq!(code, Some(0), "exit code; stdout: {lines:#?}");
    let n = lines.len();
    assert_eq!(
        &lines[n - 2..],
        ["revoked orders-0,orders-1,orders-2", "closed"],
        "{lines:#?}"
    );
}

#[test]
fn against_librdkafkas_mock_what_it_committed_is_read_back() {
    let mock = RawMock::new(3);
    mock.create_topic("t", 2);
    mock.set_group_coordinator("ge", 2);
    mock.cap_group_versions();
    let bootstrap = mock.bootstraps().join(",");
    produce(&bootstrap, "t", 2, 10, "none");
    let mut run = Run::start(&["--bootstrap", &bootstrap, "--topic", "t", "--group", "ge"]);
    run.until("10 records committed", |l| committed_total(l) == 10);
    assert_eq!(run.seen[0], "assigned t-0,t-1");
    assert_eq!(records(&run.seen).len(), 10);
    let (code, lines) = run.terminate();
    assert_eq!(code, Some(0), "exit code; stdout: {lines:#?}");
    assert_eq!(lines.last().map(String::as_str), Some("closed"));
    assert_eq!(
        rd_committed(&bootstrap, "ge", "t", &[0, 1]),
        [Some(5), Some(5)]
    );
}
