//! Apache Kafka itself: the 3-broker KRaft cluster `scripts/kafka.sh`
//! started (its variables, `LAZYKAFKA_KAFKA_*`), and the Java client as a
//! peer (`tests/java/Peer.java`, driven as a child process whose output is
//! JSON lines).
//!
//! One cluster serves every test of the test command: each test makes
//! topics and groups of its own ([`Kafka::unique`]), so tests run side by
//! side. Only `tests/kafka_faults.rs` stops brokers, and the test command
//! runs it alone.

/// Runs each named `async fn name()` as the test `apache_kafka::name`, on
/// the runtime the tests run their clients on (async-std when it is
/// built, tokio alone otherwise): the test command runs each on both.
#[allow(unused_macros)]
macro_rules! on_apache_kafka {
    ($($name:ident),* $(,)?) => {
        mod apache_kafka {
            $(
                #[test]
                fn $name() {
                    crate::common::block_on(super::$name())
                }
            )*
        }
    };
}

/// As [`on_apache_kafka`], for tests that stop brokers: `#[ignore]`d, so
/// that only the test command's run of them, alone and on a cluster of
/// their own (`--run-ignored only --test-threads 1`), runs them.
#[allow(unused_macros)]
macro_rules! on_apache_kafka_alone {
    ($($name:ident),* $(,)?) => {
        mod apache_kafka {
            $(
                #[test]
                #[ignore = "stops brokers: scripts/test.sh runs these alone, on a cluster of their own"]
                fn $name() {
                    crate::common::block_on(super::$name())
                }
            )*
        }
    };
}

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The cluster of `scripts/kafka.sh`.
#[derive(Debug, Clone)]
pub struct Kafka {
    /// `bootstrap.servers` of the PLAINTEXT listeners (no authentication).
    pub bootstrap: String,
    /// The SASL_SSL listeners (SCRAM-SHA-256/512, PLAIN), as `localhost:port`:
    /// the brokers' certificate names `localhost` only.
    pub sasl_ssl: String,
    /// The SASL_PLAINTEXT listeners with OAUTHBEARER (unsecured JWTs).
    pub oauth: String,
    /// The SASL_PLAINTEXT listeners (SCRAM-SHA-512, PLAIN) whose sessions
    /// last [`Kafka::reauth_ms`] (KIP-368).
    pub reauth: String,
    /// The session lifetime on the REAUTH listeners.
    pub reauth_ms: u64,
    /// The PEM file of the CA that signed the brokers' certificate.
    pub ca: PathBuf,
    /// Each broker's PLAINTEXT address, by node id (1..=3).
    pub brokers: Vec<(i32, String)>,
    peer: PathBuf,
    script: PathBuf,
    bin: PathBuf,
}

/// The users of the cluster: `admin` and `alice` are super users;
/// `restricted` may only read and describe topics and groups named
/// `allowed-*`. Each one's password is its name with `-secret`.
pub const SUPER_USER: (&str, &str) = ("alice", "alice-secret");
/// See [`SUPER_USER`].
pub const RESTRICTED_USER: (&str, &str) = ("restricted", "restricted-secret");

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// `1=host:port 2=host:port ...` (`LAZYKAFKA_KAFKA_BROKERS`): each broker's
/// address by node id.
fn brokers(list: &str) -> Vec<(i32, String)> {
    list.split_whitespace()
        .map(|entry| {
            let (id, addr) = entry.split_once('=').expect("id=host:port");
            (id.parse().expect("node id"), addr.to_owned())
        })
        .collect()
}

impl Kafka {
    /// The cluster, from `LAZYKAFKA_KAFKA_*`. Without it the calling test
    /// is skipped and says so on stderr; but when
    /// `LAZYKAFKA_REQUIRE_KAFKA=1` (set by the test command) a missing
    /// cluster is a failure, so nothing is skipped there.
    pub fn get(test: &str) -> Option<Kafka> {
        let Some(bootstrap) = var("LAZYKAFKA_KAFKA_BOOTSTRAP") else {
            assert!(
                var("LAZYKAFKA_REQUIRE_KAFKA").as_deref() != Some("1"),
                "{test}: LAZYKAFKA_REQUIRE_KAFKA=1 but LAZYKAFKA_KAFKA_BOOTSTRAP is not set"
            );
            eprintln!(
                "{test}: skipped (no Apache Kafka: run scripts/kafka.sh start and eval \"$(scripts/kafka.sh env)\")"
            );
            return None;
        };
        let need = |name: &str| var(name).unwrap_or_else(|| panic!("{name} is not set"));
        let brokers = brokers(&need("LAZYKAFKA_KAFKA_BROKERS"));
        Some(Kafka {
            bootstrap,
            sasl_ssl: need("LAZYKAFKA_KAFKA_SASL_SSL_BOOTSTRAP"),
            oauth: need("LAZYKAFKA_KAFKA_OAUTH_BOOTSTRAP"),
            reauth: need("LAZYKAFKA_KAFKA_REAUTH_BOOTSTRAP"),
            reauth_ms: need("LAZYKAFKA_KAFKA_REAUTH_MS").parse().expect("ms"),
            ca: need("LAZYKAFKA_KAFKA_CA").into(),
            brokers,
            peer: need("LAZYKAFKA_KAFKA_PEER").into(),
            script: need("LAZYKAFKA_KAFKA_SCRIPT").into(),
            bin: need("LAZYKAFKA_KAFKA_BIN").into(),
        })
    }

    /// The other cluster of the test command (its main one, when this is
    /// the cluster of the broker-stopping tests), from
    /// `LAZYKAFKA_KAFKA_OTHER_BOOTSTRAP` and `LAZYKAFKA_KAFKA_OTHER_BROKERS`
    /// (as `scripts/test.sh` exports them there): its PLAINTEXT listeners
    /// only, and this cluster's tools and peers. Skipped or failed as
    /// [`Kafka::get`].
    pub fn other(&self, test: &str) -> Option<Kafka> {
        let Some(bootstrap) = var("LAZYKAFKA_KAFKA_OTHER_BOOTSTRAP") else {
            assert!(
                var("LAZYKAFKA_REQUIRE_KAFKA").as_deref() != Some("1"),
                "{test}: LAZYKAFKA_REQUIRE_KAFKA=1 but LAZYKAFKA_KAFKA_OTHER_BOOTSTRAP is not set"
            );
            eprintln!(
                "{test}: skipped (no second cluster: set LAZYKAFKA_KAFKA_OTHER_BOOTSTRAP and LAZYKAFKA_KAFKA_OTHER_BROKERS to another cluster's)"
            );
            return None;
        };
        let brokers = brokers(
            &var("LAZYKAFKA_KAFKA_OTHER_BROKERS")
                .expect("LAZYKAFKA_KAFKA_OTHER_BROKERS is not set"),
        );
        Some(Kafka {
            bootstrap,
            brokers,
            ..self.clone()
        })
    }

    /// The PLAINTEXT ports, in node-id order.
    pub fn ports(&self) -> Vec<u16> {
        self.brokers.iter().map(|(_, a)| port_of(a)).collect()
    }

    /// The node id behind a PLAINTEXT port.
    pub fn broker_of_port(&self, port: u16) -> Option<i32> {
        self.brokers
            .iter()
            .find(|(_, a)| port_of(a) == port)
            .map(|(id, _)| *id)
    }

    /// The PLAINTEXT address of broker `id`.
    pub fn address(&self, id: i32) -> &str {
        &self
            .brokers
            .iter()
            .find(|(b, _)| *b == id)
            .expect("node id")
            .1
    }

    /// A name no other test (of this run or an earlier one on the same
    /// cluster) uses: `what-<pid>-<n>-<millis>`.
    pub fn unique(&self, what: &str) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            % 100_000_000;
        format!(
            "{what}-{}-{}-{millis}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Creates a topic with the Java Admin client and waits until every
    /// partition has a leader.
    pub fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication: i32,
        configs: &[(&str, &str)],
    ) {
        let partitions = partitions.to_string();
        let replication = replication.to_string();
        // `--if-not-exists`: on a loaded machine the Java Admin client may
        // retry a CreateTopics whose answer came after its own timeout, and
        // the retry then meets the topic its first attempt created
        // (TopicExistsException, seen in the test command). The names
        // tests give ([`Kafka::unique`]) are theirs alone, and the wait
        // below checks the partitions.
        let mut args = vec![
            "create-topic",
            "--topic",
            topic,
            "--partitions",
            &partitions,
            "--replication",
            &replication,
            "--if-not-exists",
        ];
        let configs: Vec<String> = configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        for c in &configs {
            args.extend(["--config", c]);
        }
        self.peer(&args);
        // The broker asked may not know the topic yet: UNKNOWN_TOPIC_OR_PARTITION
        // until its metadata has it.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let parts = self.try_describe(topic);
            if parts.as_ref().is_ok_and(|parts| {
                parts.len() == partitions.parse::<usize>().unwrap()
                    && parts.iter().all(|p| p.leader >= 0)
            }) {
                self.wait_known_everywhere(topic, parts.unwrap().len(), deadline);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{topic}: partitions without a leader: {parts:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Creates a topic whose partition `i` has the replicas
    /// `replicas[i]` (the first is its preferred leader), with Kafka's
    /// `kafka-topics` tool, and waits until every partition has a leader.
    pub fn create_topic_on(&self, topic: &str, replicas: &[&[i32]]) {
        let assignment: Vec<String> = replicas
            .iter()
            .map(|r| r.iter().map(i32::to_string).collect::<Vec<_>>().join(":"))
            .collect();
        let out = self
            .tool("kafka-topics")
            .args([
                "--bootstrap-server",
                &self.bootstrap,
                "--create",
                "--topic",
                topic,
            ])
            .args(["--replica-assignment", &assignment.join(",")])
            .output()
            .expect("run kafka-topics");
        assert!(
            out.status.success(),
            "kafka-topics --create {topic}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // As in [`Kafka::create_topic`]: the broker asked may not know it yet.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let parts = self.try_describe(topic);
            if parts.as_ref().is_ok_and(|parts| {
                parts.len() == replicas.len()
                    && parts.iter().zip(replicas).all(|(p, r)| p.leader == r[0])
            }) {
                self.wait_known_everywhere(topic, replicas.len(), deadline);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{topic}: leaders not in place: {parts:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until every running broker's Metadata answer names `topic`
    /// with `partitions` partitions, each with a leader, as Apache Kafka's
    /// own tests do after creating a topic (`waitForAllPartitionsMetadata`):
    /// the controller tells the brokers of a new topic one by one, and on a
    /// loaded machine a broker may learn of it seconds after another. A
    /// broker that refuses the connection (stopped by a test) is passed
    /// over: it reads the metadata log before it serves again.
    fn wait_known_everywhere(&self, topic: &str, partitions: usize, deadline: Instant) {
        for (id, addr) in &self.brokers {
            loop {
                let seen = raw_metadata(addr, topic);
                match &seen {
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break,
                    Ok(t)
                        if t.error_code == 0
                            && t.partitions.len() == partitions
                            && t.partitions.iter().all(|p| p.leader_id >= 0) =>
                    {
                        break
                    }
                    _ => {}
                }
                assert!(
                    Instant::now() < deadline,
                    "{topic}: broker {id} ({addr}) does not know it yet: {seen:?}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// A group name of [`Kafka::unique`]'s kind whose coordinator is
    /// broker `id`: the leader of the `__consumer_offsets` partition the
    /// name hashes to (Java's `String.hashCode`, as the broker computes it).
    pub fn group_on(&self, what: &str, id: i32) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        let offsets = loop {
            let parts = self.try_describe("__consumer_offsets").unwrap_or_default();
            if !parts.is_empty() && parts.iter().all(|p| p.leader >= 0) {
                break parts;
            }
            assert!(
                Instant::now() < deadline,
                "__consumer_offsets has no leaders: {parts:?}"
            );
            // A FindCoordinator creates the topic.
            let _ = self
                .peer_command(&["admin", "describe-group", "--group", "lazykafka-probe"])
                .output();
            std::thread::sleep(Duration::from_millis(500));
        };
        assert!(
            offsets.iter().any(|p| p.leader == id),
            "broker {id} leads no partition of __consumer_offsets: {offsets:?}"
        );
        loop {
            let group = self.unique(what);
            let p = java_hash(&group).checked_abs().unwrap_or(0) % offsets.len() as i32;
            if offsets[p as usize].leader == id {
                return group;
            }
        }
    }

    /// Each partition of `topic`: leader, replicas and ISR, as the Java
    /// Admin client describes them.
    pub fn describe(&self, topic: &str) -> Vec<PartitionInfo> {
        // A topic just made may be unknown for a moment to the broker the
        // Admin client asks (its metadata follows the controller's).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.try_describe(topic) {
                Ok(parts) => return parts,
                Err(e)
                    if e.contains("UnknownTopicOrPartitionException")
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("describe {topic}: {e}"),
            }
        }
    }

    /// As [`Kafka::describe`]; `Err` with the peer's output when it fails
    /// (the topic does not exist, say).
    pub fn try_describe(&self, topic: &str) -> Result<Vec<PartitionInfo>, String> {
        let events = self.try_peer(&["admin", "describe-topic", "--topic", topic])?;
        let mut out: Vec<PartitionInfo> = events
            .into_iter()
            .filter(|e| e["event"] == "partition")
            .map(|e| PartitionInfo {
                partition: e["partition"].as_i64().unwrap() as i32,
                leader: e["leader"].as_i64().unwrap_or(-1) as i32,
                replicas: ids(&e["replicas"]),
                isr: ids(&e["isr"]),
            })
            .collect();
        out.sort_by_key(|p| p.partition);
        Ok(out)
    }

    /// Runs the Java peer to its end on the PLAINTEXT listeners; panics,
    /// with its output, when it fails.
    pub fn peer(&self, args: &[&str]) -> Vec<Value> {
        self.try_peer(args)
            .unwrap_or_else(|e| panic!("Java peer {args:?} failed: {e}"))
    }

    /// As [`Kafka::peer`]; `Err` with its output when it fails. The admin
    /// steps and `create-topic` go to this process's serving peer
    /// ([`AdminServer`]) when it is free, without a JVM of their own.
    pub fn try_peer(&self, args: &[&str]) -> Result<Vec<Value>, String> {
        if matches!(args.first(), Some(&"admin") | Some(&"create-topic")) {
            if let Some(answer) = AdminServer::run(&self.peer, &self.peer_args(args)) {
                return answer;
            }
        }
        // Its input stays open until it exits: a consumer stops at the end
        // of its input.
        let mut child = self
            .peer_command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run the Java peer");
        let stdin = child.stdin.take();
        let out = child.wait_with_output().expect("run the Java peer");
        drop(stdin);
        let events = parse_lines(&String::from_utf8_lossy(&out.stdout));
        if out.status.success() {
            Ok(events)
        } else {
            Err(format!(
                "{}: {events:?}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// The Java peer's arguments for `args`: `--bootstrap` set to the
    /// PLAINTEXT listeners (a later `--bootstrap` in `args` wins).
    fn peer_args(&self, args: &[&str]) -> Vec<String> {
        // The mode (and an admin action) first, then the options.
        let split = if args.first() == Some(&"admin") { 2 } else { 1 };
        let split = split.min(args.len());
        let mut out: Vec<String> = args[..split].iter().map(|a| a.to_string()).collect();
        if !args.contains(&"--bootstrap") {
            out.extend(["--bootstrap".to_owned(), self.bootstrap.clone()]);
        }
        out.extend(args[split..].iter().map(|a| a.to_string()));
        out
    }

    /// The Java peer's command, with `--bootstrap` set to the PLAINTEXT
    /// listeners (a later `--bootstrap` in `args` wins).
    pub fn peer_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.peer);
        cmd.args(self.peer_args(args));
        super::examples::close_inherited_fds(&mut cmd);
        cmd
    }

    /// Starts the Java peer as a child; its JSON lines are collected as
    /// they come.
    pub fn spawn_peer(&self, args: &[&str]) -> Peer {
        let mut cmd = self.peer_command(args);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Peer::spawn(cmd, format!("Java peer {args:?}"))
    }

    /// A Kafka tool (`kafka-topics`, `kafka-configs`, ...) from the
    /// cluster's release.
    pub fn tool(&self, name: &str) -> Command {
        Command::new(self.bin.join(name))
    }

    /// Kills broker `id` with SIGKILL.
    pub fn kill(&self, id: i32) {
        self.script(&["kill", &id.to_string()]);
    }

    /// Stops broker `id` cleanly (SIGTERM: a controlled shutdown that moves
    /// its leaders away first) and waits for it to exit.
    pub fn shutdown(&self, id: i32) {
        self.script(&["shutdown", &id.to_string()]);
    }

    /// Starts broker `id` again, without waiting for anything (with every
    /// broker down, one alone has no quorum: start them all, then
    /// [`Kafka::restart`] the last).
    pub fn start(&self, id: i32) {
        self.script(&["restart", &id.to_string()]);
    }

    /// Starts broker `id` again, waits until the cluster lists it and it
    /// is back in the ISR of every partition it holds, then gives each
    /// partition its preferred leader again (as the broker's own
    /// `auto.leader.rebalance.enable` would after 5 minutes), so that the
    /// next scenario finds leaders where it placed them.
    ///
    /// A broker not listed within 2 minutes (the test command's machine is
    /// loaded: three clusters and the suites share two cores) is started
    /// again if it exited, and waited on once more; the panic then carries
    /// what `scripts/kafka.sh diagnose` says of it.
    pub fn restart(&self, id: i32) {
        self.script(&["restart", &id.to_string()]);
        let wait = ["wait-cluster", "--brokers", "3", "--timeout-ms", "120000"];
        if let Err(first) = self.try_peer(&wait) {
            let diagnosis = self.diagnose(id);
            eprintln!(
                "broker {id} is not listed 2 minutes after its restart: {first}\n{diagnosis}"
            );
            // Starts it if it exited; says it runs otherwise.
            self.script(&["restart", &id.to_string()]);
            if let Err(second) = self.try_peer(&wait) {
                panic!(
                    "broker {id} is not listed 4 minutes after its restart: {second}\n\
                     after 2 minutes:\n{diagnosis}\nnow:\n{}",
                    self.diagnose(id)
                );
            }
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let out = self
                .tool("kafka-leader-election")
                .args(["--bootstrap-server", &self.bootstrap])
                .args(["--election-type", "preferred", "--all-topic-partitions"])
                .output()
                .expect("run kafka-leader-election");
            let offsets = self.try_describe("__consumer_offsets").unwrap_or_default();
            if out.status.success() && offsets.iter().any(|p| p.leader == id) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "broker {id} leads nothing after its restart: {offsets:?}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// What `scripts/kafka.sh diagnose` says of broker `id`: whether it
    /// runs, and its log's last errors and lines.
    pub fn diagnose(&self, id: i32) -> String {
        match Command::new(&self.script)
            .args(["diagnose", &id.to_string()])
            .output()
        {
            Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
            Err(e) => format!("scripts/kafka.sh diagnose {id}: {e}"),
        }
    }

    fn script(&self, args: &[&str]) {
        let status = Command::new(&self.script)
            .args(args)
            .status()
            .expect("run scripts/kafka.sh");
        assert!(status.success(), "scripts/kafka.sh {args:?}: {status}");
    }
}

/// One partition of [`Kafka::describe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub partition: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

fn ids(v: &Value) -> Vec<i32> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_i64())
                .map(|x| x as i32)
                .collect()
        })
        .unwrap_or_default()
}

/// Java's `String.hashCode` (over UTF-16 code units, wrapping).
pub fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

fn port_of(addr: &str) -> u16 {
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

/// The Java peer serving admin steps (`Peer serve`) for this process:
/// started at the first step, one at a time, its stdin closed (and so its
/// end) when the process ends. A JVM's start costs more CPU than most
/// admin steps (about 1.5 s of a core here), and tests take several.
struct AdminServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    stderr: Arc<Mutex<String>>,
}

static ADMIN_SERVER: Mutex<Option<AdminServer>> = Mutex::new(None);

impl AdminServer {
    fn start(peer: &std::path::Path) -> Option<AdminServer> {
        let mut cmd = Command::new(peer);
        cmd.arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        super::examples::close_inherited_fds(&mut cmd);
        let mut child = cmd.spawn().ok()?;
        let stdin = child.stdin.take()?;
        let stdout = BufReader::new(child.stdout.take()?);
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take()?;
        let collected = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut err, &mut buf) {
                if n == 0 {
                    break;
                }
                let mut all = collected.lock().unwrap_or_else(|e| e.into_inner());
                all.push_str(&String::from_utf8_lossy(&buf[..n]));
                let excess = all.len().saturating_sub(64 * 1024);
                if excess > 0 {
                    let cut = (excess..all.len())
                        .find(|&i| all.is_char_boundary(i))
                        .unwrap_or(0);
                    all.drain(..cut);
                }
            }
        });
        Some(AdminServer {
            child,
            stdin,
            stdout,
            stderr,
        })
    }

    /// Runs one step on the process's server: `None` when it is busy with
    /// another thread's step or cannot run (the caller then starts a peer
    /// of its own), else the step's events or its failure.
    fn run(peer: &std::path::Path, args: &[String]) -> Option<Result<Vec<Value>, String>> {
        if args.iter().any(|a| a.contains(['\t', '\n'])) {
            return None;
        }
        let mut slot = match ADMIN_SERVER.try_lock() {
            Ok(slot) => slot,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        if slot.is_none() {
            *slot = AdminServer::start(peer);
        }
        let server = slot.as_mut()?;
        let answer = server.step(args);
        if answer.is_none() {
            // It died: the next step starts another.
            let mut dead = slot.take()?;
            let _ = dead.child.kill();
            let _ = dead.child.wait();
        }
        answer
    }

    fn step(&mut self, args: &[String]) -> Option<Result<Vec<Value>, String>> {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        writeln!(self.stdin, "{}", args.join("\t")).ok()?;
        self.stdin.flush().ok()?;
        let mut events = Vec::new();
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).ok()? == 0 {
                return None;
            }
            if !line.starts_with('{') {
                continue;
            }
            let event: Value = serde_json::from_str(line.trim_end()).ok()?;
            if event["event"] == "served" {
                return Some(if event["ok"] == true {
                    Ok(events)
                } else {
                    // Its stack trace, if any, comes before the step's end
                    // mark on stderr (`-- served --`): wait a little for it.
                    let deadline = Instant::now() + Duration::from_secs(2);
                    while !self
                        .stderr
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .contains("-- served --")
                        && Instant::now() < deadline
                    {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    let stderr = self
                        .stderr
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone();
                    Err(format!("(served) {events:?}\n{stderr}"))
                });
            }
            events.push(event);
        }
    }
}

/// The partitions in a list of the Java peer's `[topic, p]` pairs.
pub fn java_partitions(list: &Value) -> std::collections::BTreeSet<i32> {
    list.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|tp| tp[1].as_i64())
                .map(|p| p as i32)
                .collect()
        })
        .unwrap_or_default()
}

fn parse_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// A peer running as a child process (the Java peer, or one of this
/// crate's examples printing JSON lines), its output collected by a thread.
pub struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Arc<Mutex<Vec<Value>>>,
    stderr: Arc<Mutex<String>>,
    what: String,
}

impl Peer {
    /// Spawns `cmd` (its stdout and stderr piped).
    pub fn spawn(mut cmd: Command, what: String) -> Peer {
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
        let events = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().unwrap();
        let sink = events.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    sink.lock().unwrap().push(v);
                }
            }
        });
        let err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let mut s = sink.lock().unwrap();
                // The last 64 KiB are enough to say what went wrong.
                if s.len() > 64 * 1024 {
                    let cut = s.len() - 32 * 1024;
                    let cut = (cut..s.len()).find(|i| s.is_char_boundary(*i)).unwrap_or(0);
                    s.drain(..cut);
                }
                s.push_str(&line);
                s.push('\n');
            }
        });
        let stdin = child.stdin.take();
        Peer {
            child,
            stdin,
            events,
            stderr,
            what,
        }
    }

    /// Every JSON line so far.
    pub fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap().clone()
    }

    /// The lines whose `event` is `kind`.
    pub fn events_of(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["event"] == kind)
            .collect()
    }

    /// The records it consumed: (topic, partition, offset, key, value).
    pub fn records(&self) -> Vec<(String, i32, i64, String, String)> {
        self.events_of("record")
            .iter()
            .map(|e| {
                (
                    e["topic"].as_str().unwrap_or_default().to_owned(),
                    e["partition"].as_i64().unwrap() as i32,
                    e["offset"].as_i64().unwrap(),
                    e["key"].as_str().unwrap_or_default().to_owned(),
                    e["value"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// Waits (at most `timeout`) until `cond` holds of the lines so far.
    pub fn wait(&self, timeout: Duration, mut cond: impl FnMut(&[Value]) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if cond(&self.events.lock().unwrap()) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What it wrote to stderr (the last part).
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// A description for failure messages: what it is, its lines and its
    /// stderr.
    pub fn report(&self) -> String {
        let events = self.events();
        let tail = &events[events.len().saturating_sub(20)..];
        format!(
            "{}: last lines {tail:?}\nstderr:\n{}",
            self.what,
            self.stderr()
        )
    }

    /// Asks it to stop (a `stop` line, then end of input) and waits at
    /// most `timeout` for it to exit; kills it after that. Returns whether
    /// it exited by itself with success.
    pub fn stop(&mut self, timeout: Duration) -> bool {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"stop\n");
        }
        self.wait_exit(timeout)
    }

    /// Sends a signal (`libc::SIGTERM`, `libc::SIGKILL`, ...).
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }

    /// Waits at most `timeout` for it to exit; kills it after that. Returns
    /// whether it exited with success.
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.success();
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A Java consumer's assignment, from its callbacks in order
    /// (`assigned`, `revoked`, `lost`).
    pub fn assignment(&self) -> std::collections::BTreeSet<i32> {
        let mut now = std::collections::BTreeSet::new();
        for e in self.events() {
            let parts = java_partitions(&e["partitions"]);
            match e["event"].as_str() {
                Some("assigned") => now.extend(parts),
                Some("revoked") | Some("lost") => now.retain(|p| !parts.contains(p)),
                _ => {}
            }
        }
        now
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `topic` as the broker at `addr` alone knows it: one Metadata request
/// (without creating topics) on a connection of its own.
fn raw_metadata(
    addr: &str,
    topic: &str,
) -> std::io::Result<lazykafka::protocol::messages::metadata::MetadataResponseTopic> {
    use lazykafka::protocol::frame::{decode_response, encode_request};
    use lazykafka::protocol::messages::metadata::{
        MetadataRequest, MetadataRequestTopic, MetadataResponse,
    };
    use lazykafka::protocol::ApiKey;
    use std::io::{Error, ErrorKind, Read};
    let version = ApiKey::Metadata.client_versions().max;
    let request = MetadataRequest {
        topics: Some(vec![MetadataRequestTopic {
            name: Some(topic.to_owned()),
            ..MetadataRequestTopic::default()
        }]),
        allow_auto_topic_creation: false,
        ..MetadataRequest::default()
    };
    let frame = encode_request(&request, version, 1, Some("lazykafka-tests"))
        .map_err(|e| Error::new(ErrorKind::InvalidInput, format!("{e:?}")))?;
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(&frame)?;
    let mut prefix = [0u8; 4];
    s.read_exact(&mut prefix)?;
    let size = usize::try_from(i32::from_be_bytes(prefix))
        .ok()
        .filter(|n| *n < 64 << 20)
        .ok_or_else(|| Error::new(ErrorKind::InvalidData, "absurd frame size"))?;
    let mut body = vec![0u8; size];
    s.read_exact(&mut body)?;
    let (_, answer) = decode_response::<MetadataResponse>(body.into(), version)
        .map_err(|e| Error::new(ErrorKind::InvalidData, format!("{e:?}")))?;
    answer
        .topics
        .into_iter()
        .find(|t| t.name.as_deref() == Some(topic))
        .ok_or_else(|| Error::new(ErrorKind::NotFound, "the answer does not name the topic"))
}
