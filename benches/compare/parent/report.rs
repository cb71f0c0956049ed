//! The results: medians and ratios of the runs (the summary), the summary
//! table, table cells for the cases that print their own tables, and
//! TLS over plaintext CPU per record.

use super::{lifecycle, producer};
use serde_json::{json, Value};

/// The median of the finite values of `v`, `None` when there are none.
pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The median of `metric` over `runs`.
pub(crate) fn median_of<'a>(
    runs: impl IntoIterator<Item = &'a Value>,
    metric: &str,
) -> Option<f64> {
    median(
        runs.into_iter()
            .filter_map(|r| r[metric].as_f64())
            .collect(),
    )
}

/// A table cell: `v` with `decimals` places, or "-".
pub(crate) fn cell(v: Option<f64>, decimals: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.decimals$}"))
}

/// `x / y` as a table cell (3 places), or "-".
pub(crate) fn ratio_cell(x: Option<f64>, y: Option<f64>) -> String {
    match (x, y) {
        (Some(x), Some(y)) if y != 0.0 => format!("{:.3}", x / y),
        _ => "-".into(),
    }
}

/// A run's number, NaN when it has none (for the lines printed per
/// run).
pub(crate) fn num(r: &Value, key: &str) -> f64 {
    r[key].as_f64().unwrap_or(f64::NAN)
}

/// The metrics summarised, with how each is shown.
const METRICS: &[(&str, &str)] = &[
    ("rec_per_s", "records/s (from first poll)"),
    ("mb_per_s", "MB/s (from first poll)"),
    ("rec_per_s_steady", "records/s (from first record)"),
    ("mb_per_s_steady", "MB/s (from first record)"),
    ("ttfr_ms", "first record, ms"),
    ("requests_before_first_mock", "requests before it (mock)"),
    (
        "requests_before_first_own",
        "requests before it (own count)",
    ),
    ("connects", "connection attempts (own count)"),
    ("connect_calls", "connect() calls (strace)"),
    ("connect_ports", "addresses connected to (strace)"),
    ("seen", "sockets seen (census)"),
    ("held", "sockets held consuming"),
    ("vmhwm_mb", "peak RSS, MB"),
    ("cpu_s", "CPU time, s"),
    ("cpu_us_per_record", "CPU µs/record"),
    ("threads", "threads"),
    ("idle_cpu_ms_per_s", "CPU ms/s polling with no data"),
];

/// Per broker and case (in the order they ran), each metric's median
/// for both clients and their ratio; metrics neither client has are left
/// out. Where the Java client ran too (the lifecycle cases), its median
/// (`java`) and the ratios lazykafka / Java (`ratio_java`) and
/// librdkafka / Java (`ratio_librdkafka_java`) are added.
pub(crate) fn summarise(runs: &[Value]) -> Vec<Value> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in runs {
        let k = (
            r["broker"].as_str().unwrap_or("").to_owned(),
            r["case"].as_str().unwrap_or("").to_owned(),
        );
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out = Vec::new();
    for (broker, case) in keys {
        // The lifecycle runs (`lifecycle: true`) have figures of their own.
        let is_lifecycle = runs
            .iter()
            .any(|r| r["case"] == case.as_str() && r["lifecycle"] == true);
        let metrics = if is_lifecycle {
            lifecycle::METRICS
        } else if case.starts_with("produce") {
            producer::METRICS
        } else {
            METRICS
        };
        for (metric, label) in metrics {
            let of = |client: &str| {
                median(
                    runs.iter()
                        .filter(|r| {
                            r["broker"] == broker.as_str()
                                && r["case"] == case.as_str()
                                && r["client"] == client
                        })
                        .filter_map(|r| r[*metric].as_f64())
                        .collect(),
                )
            };
            let (a, b, j) = (of("lazykafka"), of("librdkafka"), of("java"));
            if a.is_none() && b.is_none() && j.is_none() {
                continue;
            }
            let over = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) if y != 0.0 => Some(x / y),
                _ => None,
            };
            let mut row = json!({
                "broker": broker, "case": case, "metric": metric, "label": label,
                "lazykafka": a, "librdkafka": b, "ratio": over(a, b),
            });
            if j.is_some() {
                row["java"] = json!(j);
                row["ratio_java"] = json!(over(a, j));
                row["ratio_librdkafka_java"] = json!(over(b, j));
            }
            out.push(row);
        }
    }
    out
}

/// Prints the summary, a table per broker and case (with the Java
/// client's column and the ratios to it where it ran).
pub(crate) fn print_table(summary: &[Value]) {
    let key = |row: &Value| {
        (
            row["broker"].as_str().unwrap().to_owned(),
            row["case"].as_str().unwrap().to_owned(),
        )
    };
    let with_java: Vec<(String, String)> = summary
        .iter()
        .filter(|r| r.get("java").is_some())
        .map(key)
        .collect();
    let mut last = (String::new(), String::new());
    for row in summary {
        let k = key(row);
        let java = with_java.contains(&k);
        if k != last {
            print!(
                "\n{} / {}\n  {:<32} {:>14} {:>14} {:>8}",
                k.0, k.1, "median", "lazykafka", "librdkafka", "ratio"
            );
            if java {
                print!(" {:>14} {:>9} {:>9}", "java", "lk/java", "rd/java");
            }
            println!();
            last = k;
        }
        let f = |v: &Value| match v.as_f64() {
            Some(x) if x.abs() >= 1000.0 => format!("{x:.0}"),
            Some(x) => format!("{x:.2}"),
            None => "-".into(),
        };
        let r = |v: &Value| v.as_f64().map_or("-".into(), |r| format!("{r:.2}"));
        print!(
            "  {:<32} {:>14} {:>14} {:>8}",
            row["label"].as_str().unwrap(),
            f(&row["lazykafka"]),
            f(&row["librdkafka"]),
            r(&row["ratio"])
        );
        if java {
            print!(
                " {:>14} {:>9} {:>9}",
                f(&row["java"]),
                r(&row["ratio_java"]),
                r(&row["ratio_librdkafka_java"])
            );
        }
        println!();
    }
}

/// Each client's median CPU per record with TLS over its median without
/// (the `tls` and `100B` cases of the same run), printed; `null` when
/// either case did not run.
pub(crate) fn tls_vs_plain(summary: &[Value]) -> Value {
    let cpu = |case: &str, client: &str| {
        summary
            .iter()
            .find(|r| {
                r["broker"] == "mock" && r["case"] == case && r["metric"] == "cpu_us_per_record"
            })
            .and_then(|r| r[client].as_f64())
    };
    let mut out = serde_json::Map::new();
    for client in ["lazykafka", "librdkafka"] {
        if let (Some(tls), Some(plain)) = (cpu("tls", client), cpu("100B", client)) {
            println!(
                "\nTLS / plaintext CPU µs/record, {client}: {tls:.3} / {plain:.3} = {:.2}",
                tls / plain
            );
            out.insert(
                client.into(),
                json!({"tls_us": tls, "plain_us": plain, "ratio": tls / plain}),
            );
        }
    }
    if out.is_empty() {
        Value::Null
    } else {
        Value::Object(out)
    }
}
