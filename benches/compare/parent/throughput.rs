//! The consumer throughput cases: the data sets (`100B`, `100B-lz4`,
//! `10KiB`) on our mock and on tansu, the same on a mock with TLS
//! listeners (`tls`), and a 1000-address bootstrap list in front of an
//! 8-broker mock (`scale`), each client alternated A B A B, then once more
//! under strace; `scale` then runs the three clients' lifecycles
//! (lazykafka, librdkafka and Java, see [`lifecycle`](super::lifecycle))
//! on the same mock.

use super::job::{census_runs, run_child, Job};
use super::lifecycle::{self, Java, Life, Role};
use super::mock::Mock;
use super::options::Settings;
use crate::common::{self, Tansu};
use crate::data::{data_sets, values, DataSet};
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

/// The brokers a throughput case reads from.
struct Brokers<'a> {
    /// Their name in the results (`mock`, `tansu`).
    name: &'a str,
    bootstrap: &'a str,
    ports: &'a [u16],
    /// Our mock, whose request log each run adds to its results.
    mock: Option<&'a Mock>,
    /// The CA file, for TLS listeners.
    ca: Option<&'a str>,
}

/// The data sets asked for on a 3-broker mock, filled from code.
pub(crate) fn mock_cases(s: &Settings, sets: &[DataSet], runs: &mut Vec<Value>) {
    if !sets.iter().any(|d| s.wants(d.name)) {
        return;
    }
    let mock = Mock::new(3);
    for set in sets {
        if !s.wants(set.name) {
            continue;
        }
        mock.create_topic_round_robin(set.topic, set.partitions, "create topic");
        let t = Instant::now();
        mock.fill(set);
        eprintln!(
            "mock: filled {} × {} B ({}) in {:.1} s",
            set.records,
            set.value_len,
            set.compression,
            t.elapsed().as_secs_f64()
        );
    }
    let bootstrap = mock.bootstrap();
    let brokers = Brokers {
        name: "mock",
        bootstrap: &bootstrap,
        ports: &mock.ports(),
        mock: Some(&mock),
        ca: None,
    };
    throughput(s, &brokers, sets, runs);
}

/// The data sets asked for (at the tansu scale) on tansu, filled with
/// librdkafka's producer, when `LAZYKAFKA_TANSU_BIN` is set; a note
/// otherwise.
pub(crate) fn tansu_cases(s: &Settings, runs: &mut Vec<Value>, notes: &mut Vec<String>) {
    let tsets = data_sets(s.tansu_scale);
    if !tsets.iter().any(|d| s.wants(d.name)) {
        return;
    }
    let bin = match std::env::var("LAZYKAFKA_TANSU_BIN") {
        Ok(bin) if !bin.is_empty() => bin,
        _ => {
            let note = "tansu skipped: LAZYKAFKA_TANSU_BIN is not set".to_owned();
            println!("{note}");
            notes.push(note);
            return;
        }
    };
    let tansu = Tansu::start("compare").expect("tansu");
    for set in &tsets {
        if !s.wants(set.name) {
            continue;
        }
        tansu_topic(&bin, &tansu.addr, set.topic, set.partitions);
        let t = Instant::now();
        produce(&tansu.addr, set);
        eprintln!(
            "tansu: produced {} × {} B ({}) in {:.1} s",
            set.records,
            set.value_len,
            set.compression,
            t.elapsed().as_secs_f64()
        );
    }
    let brokers = Brokers {
        name: "tansu",
        bootstrap: &tansu.addr,
        ports: &[tansu.port],
        mock: None,
        ca: None,
    };
    throughput(s, &brokers, &tsets, runs);
}

/// Creates `topic` with `partitions` partitions on tansu (its CLI).
fn tansu_topic(bin: &str, addr: &str, topic: &str, partitions: i32) {
    let status = Command::new(bin)
        .args(["topic", "create", "--broker", &format!("tcp://{addr}")])
        .args(["--partitions", &partitions.to_string(), topic])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("tansu topic create");
    assert!(status.success(), "tansu topic create {topic}: {status}");
}

/// Produces `set` into `topic` with librdkafka, partition `i % n`.
pub(crate) fn produce(bootstrap: &str, set: &DataSet) {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("compression.codec", set.compression)
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.kbytes", "1048576")
        .create()
        .expect("librdkafka producer");
    let pool = values(set.value_len);
    for i in 0..set.records {
        let record: BaseRecord<'_, (), [u8]> = BaseRecord::to(set.topic)
            .payload(&pool[i % pool.len()][..])
            .partition(i as i32 % set.partitions);
        common::peers::send(&producer, record);
    }
    producer
        .flush(Duration::from_secs(300))
        .expect("flush the data set");
}

/// One broker's throughput cases, A B A B.
fn throughput(s: &Settings, brokers: &Brokers<'_>, sets: &[DataSet], runs: &mut Vec<Value>) {
    for set in sets {
        if !s.wants(set.name) {
            continue;
        }
        let job = |client| Job {
            ca: brokers.ca,
            ..Job::new(
                client,
                brokers.bootstrap,
                set.topic,
                set.partitions,
                set.records,
                brokers.ports,
            )
        };
        for round in 0..s.rounds {
            for client in ["lazykafka", "librdkafka"] {
                if let Some(m) = brokers.mock {
                    m.clear_requests();
                }
                let mut r = run_child(&job(client));
                if let Some(m) = brokers.mock {
                    m.add_requests(&mut r);
                }
                r["broker"] = json!(brokers.name);
                r["case"] = json!(set.name);
                r["client"] = json!(client);
                r["round"] = json!(round);
                r["expected_records"] = json!(set.records);
                eprintln!("{}", brief(&r));
                runs.push(r);
            }
        }
        census_runs(brokers.name, set.name, runs, |client| Job {
            strace: true,
            ..job(client)
        });
    }
}

/// A consumer run's line on standard error.
fn brief(r: &Value) -> String {
    format!(
        "  {:<6} {:<9} {:<10} round {}: {:>9.0} rec/s {:>7.1} MB/s, first record {:>7.1} ms, \
         cpu {:.2} s, hwm {:.0} MB, sockets {} opened / {} held{}",
        r["broker"].as_str().unwrap_or(""),
        r["case"].as_str().unwrap_or(""),
        r["client"].as_str().unwrap_or(""),
        r["round"],
        r["rec_per_s"].as_f64().unwrap_or(f64::NAN),
        r["mb_per_s"].as_f64().unwrap_or(f64::NAN),
        r["ttfr_ms"].as_f64().unwrap_or(f64::NAN),
        r["cpu_s"].as_f64().unwrap_or(f64::NAN),
        r["vmhwm_kb"].as_f64().unwrap_or(f64::NAN) / 1024.0,
        r["connects"],
        r["held"],
        if r["timed_out"].as_bool() == Some(true) {
            " TIMED OUT"
        } else {
            ""
        }
    )
}

/// `n` loopback ports where a connect is refused at once, held for as
/// long as the sockets returned live: each a TCP socket bound to
/// `127.0.0.1:0` that never listens (without `SO_REUSEADDR`, so that no
/// other process can bind the port meanwhile: a port merely closed
/// again was taken by another test's listener on this shared machine,
/// and a client of the scale case then talked to that).
fn closed_ports(n: usize) -> (Vec<u16>, Vec<std::os::fd::OwnedFd>) {
    use std::os::fd::FromRawFd as _;
    let mut ports = Vec::with_capacity(n);
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        // SAFETY: plain socket calls on a socket this function owns; the
        // descriptor is handed to `OwnedFd` at once.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            held.push(std::os::fd::OwnedFd::from_raw_fd(fd));
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let bound = libc::bind(fd, (&raw const addr).cast(), len);
            assert_eq!(bound, 0, "bind: {}", std::io::Error::last_os_error());
            let mut len = len;
            let named = libc::getsockname(fd, (&raw mut addr).cast(), &mut len);
            assert_eq!(named, 0, "getsockname: {}", std::io::Error::last_os_error());
            ports.push(u16::from_be(addr.sin_port));
        }
    }
    (ports, held)
}

/// The scale cases' bootstrap list: the list itself, every port in it,
/// and the sockets that keep its closed ports refusing (to be kept while
/// the list is in use).
pub(crate) type ScaleBootstrap = (String, Vec<u16>, Vec<std::os::fd::OwnedFd>);

/// 1000 bootstrap addresses: 992 closed loopback ports and the brokers
/// of `mock` (8), shuffled with a fixed seed; every port among them
/// (closed ones first, then the brokers'); and the sockets holding the
/// closed ports.
pub(crate) fn scale_bootstrap(mock: &Mock) -> ScaleBootstrap {
    let (closed, held) = closed_ports(992);
    let mut addrs: Vec<String> = closed.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    addrs.extend(mock.bootstrap().split(',').map(str::to_owned));
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for i in (1..addrs.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        addrs.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let mut ports = closed;
    ports.extend(mock.ports());
    (addrs.join(","), ports, held)
}

/// 1000 bootstrap addresses: 992 closed loopback ports and the 8 brokers
/// of a mock cluster, shuffled (fixed seed); the topic's 2 partitions
/// are led by brokers 2 and 7. Then `scale-lifecycle`: each client (Java
/// too, when it can run) as a group member subscribing to the topic and
/// reading its 1000 records, censused at each pause.
pub(crate) fn scale_case(s: &Settings, runs: &mut Vec<Value>, java: Option<&Java>) {
    let mock = Mock::new(8);
    let topic = "scale";
    mock.cluster
        .create_topic_with_leaders(topic, &[2, 7])
        .expect("scale topic");
    let set = DataSet {
        name: "scale",
        topic,
        records: 1000,
        value_len: 100,
        compression: "none",
        partitions: 2,
    };
    mock.fill(&set);
    let (bootstrap, ports, _closed) = scale_bootstrap(&mock);
    let brokers = Brokers {
        name: "mock",
        bootstrap: &bootstrap,
        ports: &ports,
        mock: Some(&mock),
        ca: None,
    };
    throughput(s, &brokers, std::slice::from_ref(&set), runs);
    let ids = mock.brokers();
    lifecycle::rounds(
        s,
        "mock",
        "scale-lifecycle",
        java,
        Some(&mock),
        |client, round| Life {
            role: Role::Consumer,
            bootstrap: &bootstrap,
            brokers: &ids,
            topic,
            partitions: set.partitions,
            records: set.records,
            group: Some(format!(
                "bench-scale-{client}-{round}-{}",
                std::process::id()
            )),
            properties: Vec::new(),
            steady: Duration::from_millis(2000),
        },
        runs,
    );
}

/// The 100 B data set on a second 3-broker mock with TLS listeners (a
/// CA and a leaf for `localhost` and `127.0.0.1`, made now); both
/// clients get the CA file and `security.protocol=SSL`.
pub(crate) fn tls_case(s: &Settings, runs: &mut Vec<Value>) {
    use common::tls::{Pki, TempDir};
    let pki = Pki::new("lazykafka bench CA");
    let leaf = pki.leaf(&["localhost", "127.0.0.1"]);
    let dir = TempDir::new("bench-tls");
    let ca = dir.write("ca.pem", &pki.ca_pem());
    let ca = ca.to_str().expect("a UTF-8 temp path");
    let mut set = data_sets(s.scale)
        .into_iter()
        .find(|d| d.name == "100B")
        .expect("the 100B data set");
    set.name = "tls";
    set.topic = "b100tls";
    let mock = Mock::tls(3, &leaf.cert_pem, &leaf.key_pem);
    mock.create_topic_round_robin(set.topic, set.partitions, "create topic");
    let t = Instant::now();
    mock.fill(&set);
    eprintln!(
        "mock (TLS): filled {} × {} B ({}) in {:.1} s",
        set.records,
        set.value_len,
        set.compression,
        t.elapsed().as_secs_f64()
    );
    let brokers = Brokers {
        name: "mock",
        bootstrap: &mock.bootstrap(),
        ports: &mock.ports(),
        mock: Some(&mock),
        ca: Some(ca),
    };
    throughput(s, &brokers, &[set], runs);
}
