//! The physical floor of CPU per record for each uncompressed data set,
//! measured in the parent on the same bytes, and printed next to both
//! clients' CPU per record (`floors` in the JSON).

use super::options::Settings;
use super::report::median;
use crate::data::{values, DataSet};
use crate::floor;
use crate::measure::cpu_time;
use serde_json::{json, Value};
use std::time::Duration;

/// How many times the set is parsed and read, each.
const REPEAT: usize = 5;

/// Each uncompressed data set asked for: its floor, printed with both
/// clients' median CPU per record on the mock (and how many times the
/// floor that is); returned by data set name for the report.
pub(crate) fn report(
    s: &Settings,
    sets: &[DataSet],
    runs: &[Value],
) -> serde_json::Map<String, Value> {
    let mut floor_report = serde_json::Map::new();
    for set in sets
        .iter()
        .filter(|d| d.compression == "none" && s.wants(d.name))
    {
        let f = floors(set);
        let of = |client: &str| {
            median(
                runs.iter()
                    .filter(|r| r["broker"] == "mock" && r["case"] == set.name)
                    .filter(|r| r["client"] == client)
                    .filter_map(|r| r["cpu_us_per_record"].as_f64())
                    .collect(),
            )
        };
        let floor = f["sum_us_per_record"].as_f64().unwrap_or(f64::NAN);
        let vs = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3} ({:.2}x)", v / floor));
        println!(
            "\nfloor / {}: parse + CRC-32C {:.3} µs/record, loopback read {:.3} µs/record, \
             sum {floor:.3}; CPU µs/record (x the floor): lazykafka {}, librdkafka {}",
            set.name,
            f["parse_crc_us_per_record"].as_f64().unwrap_or(f64::NAN),
            f["loopback_read_us_per_record"]
                .as_f64()
                .unwrap_or(f64::NAN),
            vs(of("lazykafka")),
            vs(of("librdkafka")),
        );
        floor_report.insert(set.name.to_owned(), f);
    }
    floor_report
}

/// The physical floor of CPU per record for an uncompressed data set,
/// measured in this process on the same bytes (batches built as the
/// mock holds them): the bare parse + CRC-32C loop of the `records`
/// bench (`check.crcs=true` asks for the CRC), and a loopback `read` of
/// the set (a writer thread sends it over a 127.0.0.1 socket; the
/// reading thread's CPU is counted, reading into one reused 1 MiB
/// buffer). A consumer can go no lower than their sum.
fn floors(set: &DataSet) -> Value {
    let records = if set.value_len >= 1024 {
        5_000
    } else {
        200_000
    };
    let bytes = batches(set, records);
    let per_record = |cpu: Duration| cpu.as_secs_f64() * 1e6 / (records * REPEAT) as f64;
    let crc = per_record(parse_crc_cpu(&bytes));
    let read = per_record(loopback_read_cpu(&bytes));
    json!({
        "records": records * REPEAT,
        "bytes_per_record": bytes.len() as f64 / records as f64,
        "parse_crc_us_per_record": crc,
        "loopback_read_us_per_record": read,
        "sum_us_per_record": crc + read,
    })
}

/// The first `records` records of `set` as record batches, as the mock
/// holds them (up to 1000 records and about 1 MB a batch).
fn batches(set: &DataSet, records: usize) -> Vec<u8> {
    use lazykafka::records::RecordBatchBuilder;
    let pool = values(set.value_len);
    let per_batch = (1_000_000 / set.value_len).clamp(1, 1000);
    let mut bytes = Vec::new();
    let mut offset = 0;
    while offset < records {
        let mut b = RecordBatchBuilder::new(offset as i64);
        for i in offset..(offset + per_batch).min(records) {
            b.append(0, None, Some(&pool[i % pool.len()]), &[])
                .expect("append");
        }
        bytes.extend_from_slice(&b.build().expect("batch"));
        offset += per_batch;
    }
    bytes
}

/// This thread's CPU time parsing `bytes` and checking their CRCs
/// [`REPEAT`] times.
fn parse_crc_cpu(bytes: &[u8]) -> Duration {
    let cpu0 = cpu_time(libc::RUSAGE_THREAD);
    let mut sum = 0;
    for _ in 0..REPEAT {
        sum += floor::bare_parse_crc(std::hint::black_box(bytes));
    }
    assert!(sum > 0);
    cpu_time(libc::RUSAGE_THREAD).saturating_sub(cpu0)
}

/// This thread's CPU time reading `bytes` [`REPEAT`] times from a
/// loopback socket, written by another thread.
fn loopback_read_cpu(bytes: &[u8]) -> Duration {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut w = std::net::TcpStream::connect(addr).expect("connect");
            for _ in 0..REPEAT {
                for chunk in bytes.chunks(1 << 20) {
                    std::io::Write::write_all(&mut w, chunk).expect("write");
                }
            }
        });
        let (mut r, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 1 << 20];
        let (mut left, cpu0) = (bytes.len() * REPEAT, cpu_time(libc::RUSAGE_THREAD));
        while left > 0 {
            let n = std::io::Read::read(&mut r, &mut buf).expect("read");
            assert!(n > 0, "early EOF");
            left = left.saturating_sub(n);
        }
        cpu_time(libc::RUSAGE_THREAD).saturating_sub(cpu0)
    })
}
