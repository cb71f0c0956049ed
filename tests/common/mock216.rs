//! librdkafka 2.16's mock cluster, from the PyPI wheel
//! `confluent-kafka==2.16.1`, in a child process
//! (`tests/support/mock216.py`, which reaches the wheel's bundled
//! librdkafka through ctypes) driven by one-line commands on its stdin.
//! The `rdkafka` dev-dependency bundles librdkafka 2.12, whose mock
//! ([`super::mock::RawMock`]) serves the consumer group protocol of
//! KIP-848 differently: both judge our requests.
//!
//! The Python comes from `LAZYKAFKA_PYTHON` (the project venv's, set by
//! `scripts/test.sh`, which installs the wheel there). Without it a test
//! is skipped, and says so on stderr; with `LAZYKAFKA_REQUIRE_BROKER=1` it
//! fails instead.

use super::clusters::TestCluster;
use lazykafka::protocol::ApiKey;
use lazykafka::ErrorCode;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

/// How long the process may take to start, and to answer one command.
const ANSWER: Duration = Duration::from_secs(30);

/// The Python that has confluent-kafka 2.16.1, or `None` (with a note on
/// stderr) when `LAZYKAFKA_PYTHON` is not set; a failure then when
/// `LAZYKAFKA_REQUIRE_BROKER=1`.
pub fn python(test: &str) -> Option<String> {
    match std::env::var("LAZYKAFKA_PYTHON") {
        Ok(python) if !python.is_empty() => Some(python),
        _ => {
            assert!(
                std::env::var("LAZYKAFKA_REQUIRE_BROKER").as_deref() != Ok("1"),
                "{test}: LAZYKAFKA_REQUIRE_BROKER=1 but LAZYKAFKA_PYTHON is not set"
            );
            eprintln!("{test}: skipped (LAZYKAFKA_PYTHON is not set: no librdkafka 2.16 mock)");
            None
        }
    }
}

/// The mock cluster process: killed (by its PID) when dropped.
pub struct Mock216 {
    child: Child,
    io: Mutex<(ChildStdin, Receiver<String>)>,
    bootstraps: Vec<String>,
}

impl Mock216 {
    /// A cluster of `brokers` brokers (ids 1..=n) on loopback ports, with
    /// request tracking on, from `python` (see [`python`]). Panics if the
    /// process does not start and name its brokers within 30 s.
    pub fn start_with(python: &str, brokers: i32) -> Mock216 {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/mock216.py");
        let mut child = Command::new(python)
            .args([script, "--brokers", &brokers.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {python} {script}: {e}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        // A thread reads the answers, so that each wait has a deadline.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut mock = Mock216 {
            child,
            io: Mutex::new((stdin, rx)),
            bootstraps: Vec::new(),
        };
        let first = mock.answer();
        let servers = first
            .strip_prefix("bootstrap ")
            .unwrap_or_else(|| panic!("mock216.py said {first:?}, not its bootstrap servers"));
        mock.bootstraps = servers.split(',').map(str::to_owned).collect();
        assert_eq!(mock.bootstraps.len(), brokers as usize, "{servers}");
        mock
    }

    /// The next line the process writes, within [`ANSWER`].
    fn answer(&self) -> String {
        let io = self.io.lock().unwrap_or_else(|e| e.into_inner());
        match io.1.recv_timeout(ANSWER) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("mock216.py: no answer within {ANSWER:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("mock216.py exited"),
        }
    }

    /// Sends one command and returns what follows `ok` in its answer;
    /// panics on `error ...` or no answer within 30 s.
    pub fn command(&self, line: &str) -> String {
        let reply = {
            let mut io = self.io.lock().unwrap_or_else(|e| e.into_inner());
            writeln!(io.0, "{line}").expect("write to mock216.py");
            io.0.flush().expect("write to mock216.py");
            match io.1.recv_timeout(ANSWER) {
                Ok(reply) => reply,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("mock216.py: no answer to {line:?} within {ANSWER:?}")
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("mock216.py exited at {line:?}")
                }
            }
        };
        match reply.strip_prefix("ok") {
            Some(rest) => rest.trim_start().to_owned(),
            None => panic!("mock216.py: {line:?}: {reply}"),
        }
    }

    /// Limits the versions the mock advertises for `api_key`.
    pub fn set_apiversion(&self, api_key: i16, min: i16, max: i16) {
        self.command(&format!("apiversion {api_key} {min} {max}"));
    }

    /// As librdkafka 2.12's mock ([`super::mock::RawMock::cap_group_versions`]),
    /// 2.16's advertises JoinGroup v6 and SyncGroup v4 (flexible) but reads
    /// them as non-flexible, and LeaveGroup v3+ as v0-2: the connection is
    /// dropped. Capped for the classic members of a test.
    pub fn cap_group_versions(&self) {
        self.set_apiversion(ApiKey::JoinGroup.code(), 0, 5);
        self.set_apiversion(ApiKey::SyncGroup.code(), 0, 3);
        self.set_apiversion(ApiKey::LeaveGroup.code(), 0, 2);
    }
}

impl Drop for Mock216 {
    fn drop(&mut self) {
        // The process also exits when its stdin closes; the kill makes it
        // immediate.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Mock216 {
    /// Every request received since tracking started: (broker id, API key,
    /// when, in librdkafka's monotonic microseconds).
    fn requests_timed(&self) -> Vec<(i32, i16, i64)> {
        self.command("requests")
            .split_whitespace()
            .map(|r| {
                let mut parts = r
                    .split(':')
                    .map(|p| p.parse::<i64>().expect("BROKER:KEY:MICROS"));
                let (b, k, t) = (parts.next(), parts.next(), parts.next());
                (b.unwrap() as i32, k.unwrap() as i16, t.unwrap())
            })
            .collect()
    }
}

impl TestCluster for Mock216 {
    /// Needs `LAZYKAFKA_PYTHON`: check [`python`] first.
    fn start(brokers: i32) -> Self {
        let python = std::env::var("LAZYKAFKA_PYTHON").expect("LAZYKAFKA_PYTHON");
        let mock = Mock216::start_with(&python, brokers);
        mock.cap_group_versions();
        mock
    }
    fn create_topic(&self, topic: &str, leaders: &[i32]) {
        self.command(&format!("topic {topic} {}", leaders.len()));
        for (p, b) in leaders.iter().enumerate() {
            self.set_leader(topic, p as i32, *b);
        }
    }
    fn set_coordinator(&self, group: &str, broker: i32) {
        self.command(&format!("coordinator {group} {broker}"));
    }
    fn set_delay(&self, broker: i32, millis: u64) {
        self.command(&format!("rtt {broker} {millis}"));
    }
    fn clear_requests(&self) {
        self.command("clear");
    }
    fn name(&self) -> &'static str {
        "librdkafka 2.16 mock"
    }
    fn bootstraps(&self) -> Vec<String> {
        self.bootstraps.clone()
    }
    fn requests(&self) -> Vec<(i32, i16)> {
        self.requests_timed()
            .into_iter()
            .map(|(broker, api, _)| (broker, api))
            .collect()
    }
    fn request_times(&self, api: ApiKey) -> Vec<std::time::Duration> {
        super::clusters::times_of(api, self.requests_timed())
    }
    fn broker_down(&self, broker: i32) {
        self.command(&format!("down {broker}"));
    }
    fn broker_up(&self, broker: i32) {
        self.command(&format!("up {broker}"));
    }
    fn set_leader(&self, topic: &str, partition: i32, broker: i32) {
        self.command(&format!("leader {topic} {partition} {broker}"));
    }
    fn remove_leader(&self, topic: &str, partition: i32, _broker: i32) {
        self.set_leader(topic, partition, -1)
    }
    fn restore_leader(&self, topic: &str, partition: i32, broker: i32) {
        self.set_leader(topic, partition, broker)
    }
    fn push_errors(&self, api: ApiKey, code: ErrorCode, count: usize) {
        // librdkafka's error codes are Kafka's.
        let codes = vec![code.code().to_string(); count].join(" ");
        self.command(&format!("errors {} {codes}", api.code()));
    }
    fn set_metadata_error(&self, topic: &str, code: Option<ErrorCode>) {
        let code = code.map_or(0, |c| c.code());
        self.command(&format!("topic_error {topic} {code}"));
    }
    fn set_consumer_group_timing(&self, heartbeat_ms: i32, session_ms: i32) {
        self.command(&format!("consumer_timing {heartbeat_ms} {session_ms}"));
    }
    fn set_regex_refresh(&self, _millis: u64) {
        // As 2.12's: the regex is matched at each heartbeat.
    }
}
