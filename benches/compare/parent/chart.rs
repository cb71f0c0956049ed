//! The many-partitions chart: client CPU per second in the steady window
//! of the `sessions` cases against the partition count, drawn as SVG
//! (`bench-many-partitions.svg` beside the JSON).

use super::report::median;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One panel's curves: (client, phase) to (partitions, median CPU ms/s)
/// points.
type Series = BTreeMap<(String, String), Vec<(f64, f64)>>;

/// A panel's width and height, and the margin round its plot.
const W: f64 = 420.0;
const H: f64 = 320.0;
const PAD: f64 = 55.0;

/// Draws the many-partitions curve: client CPU per second against the
/// partition count (both axes logarithmic), one panel per broker, a
/// line per client and phase (medians of the rounds). Written as SVG
/// beside the JSON when the cases ran for two partition counts or more.
pub(crate) fn many_partitions_chart(runs: &[Value], out: &std::path::Path) {
    let panels = curves(runs);
    let counts: BTreeSet<i64> = panels
        .values()
        .flat_map(|s| s.values().flatten().map(|(p, _)| *p as i64))
        .collect();
    if counts.len() < 2 {
        return;
    }
    let axes = Axes::of(&panels);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        W * panels.len() as f64,
        H + 40.0
    );
    for (i, (broker, series)) in panels.iter().enumerate() {
        svg += &panel(&axes, W * i as f64, broker, series, &counts);
    }
    svg += "</svg>\n";
    let path = out.with_file_name("bench-many-partitions.svg");
    match std::fs::write(&path, svg) {
        Ok(()) => println!("chart: {}", path.display()),
        Err(e) => eprintln!("chart: {}: {e}", path.display()),
    }
}

/// The points of every curve, by broker: the median steady CPU ms/s of
/// the `sessions` runs per client (lazykafka without sessions left out),
/// phase and partition count.
fn curves(runs: &[Value]) -> BTreeMap<String, Series> {
    let mut panels: BTreeMap<String, Series> = BTreeMap::new();
    let mut groups: BTreeMap<(String, String, String, i64), Vec<f64>> = BTreeMap::new();
    for r in runs
        .iter()
        .filter(|r| r["case"] == "sessions" || r["case"] == "sessions-rdmock")
    {
        let (Some(b), Some(c), Some(ph), Some(p), Some(cpu)) = (
            r["broker"].as_str(),
            r["client"].as_str(),
            r["phase"].as_str(),
            r["partitions"].as_i64(),
            r["steady_cpu_ms_per_s"].as_f64(),
        ) else {
            continue;
        };
        if c == "lazykafka-nosessions" {
            continue;
        }
        groups
            .entry((b.into(), c.into(), ph.into(), p))
            .or_default()
            .push(cpu);
    }
    for ((b, c, ph, p), v) in groups {
        if let Some(m) = median(v) {
            panels
                .entry(b)
                .or_default()
                .entry((c, ph))
                .or_default()
                .push((p as f64, m));
        }
    }
    panels
}

/// The axes every panel shares, as decimal logarithms: partitions from
/// `x0` to `x1`, CPU ms/s (at least 0.1) from `y0` to `y1`, whole
/// decades.
struct Axes {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Axes {
    fn of(panels: &BTreeMap<String, Series>) -> Axes {
        let all = || panels.values().flat_map(|s| s.values().flatten());
        let (x0, x1) = (
            all().map(|(p, _)| p.log10()).fold(f64::INFINITY, f64::min),
            all()
                .map(|(p, _)| p.log10())
                .fold(f64::NEG_INFINITY, f64::max),
        );
        let y0 = all()
            .map(|(_, c)| c.max(0.1).log10())
            .fold(f64::INFINITY, f64::min)
            .floor();
        let y1 = all()
            .map(|(_, c)| c.max(0.1).log10())
            .fold(f64::NEG_INFINITY, f64::max)
            .ceil();
        Axes { x0, x1, y0, y1 }
    }

    /// The abscissa of `p` partitions in the panel starting at `ox`.
    fn x(&self, ox: f64, p: f64) -> f64 {
        ox + PAD + (p.log10() - self.x0) / (self.x1 - self.x0).max(1e-9) * (W - 2.0 * PAD)
    }

    /// The ordinate of `c` ms/s.
    fn y(&self, c: f64) -> f64 {
        H - PAD + 20.0
            - (c.max(0.1).log10() - self.y0) / (self.y1 - self.y0).max(1e-9) * (H - 2.0 * PAD)
    }
}

/// One broker's panel, starting at `ox`: title, axes, ticks and curves.
fn panel(axes: &Axes, ox: f64, broker: &str, series: &Series, counts: &BTreeSet<i64>) -> String {
    let mut svg = format!(
        "<text x=\"{}\" y=\"16\" font-size=\"13\">{broker}: client CPU ms/s by partitions</text>\n",
        ox + PAD
    );
    svg += &format!(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\
         <line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{3}\" stroke=\"black\"/>\n",
        ox + PAD,
        H - PAD + 20.0,
        ox + W - PAD,
        PAD - 10.0
    );
    for p in counts {
        let px = axes.x(ox, *p as f64);
        svg += &format!(
            "<text x=\"{px}\" y=\"{}\" text-anchor=\"middle\">{p}</text>\n",
            H - PAD + 36.0
        );
    }
    let mut e = axes.y0 as i32;
    while e <= axes.y1 as i32 {
        let v = 10f64.powi(e);
        let py = axes.y(v);
        svg += &format!(
            "<text x=\"{}\" y=\"{py}\" text-anchor=\"end\">{v}</text>\
             <line x1=\"{}\" y1=\"{py}\" x2=\"{}\" y2=\"{py}\" stroke=\"#ddd\"/>\n",
            ox + PAD - 4.0,
            ox + PAD,
            ox + W - PAD
        );
        e += 1;
    }
    for (k, ((client, phase), points)) in series.iter().enumerate() {
        svg += &curve(axes, ox, k, client, phase, points);
    }
    svg
}

/// One client's curve in one phase (lazykafka blue, librdkafka red; idle
/// dashed), and its line of the legend, the `k`th.
fn curve(
    axes: &Axes,
    ox: f64,
    k: usize,
    client: &str,
    phase: &str,
    points: &[(f64, f64)],
) -> String {
    let colour = if client == "lazykafka" {
        "#1f77b4"
    } else {
        "#d62728"
    };
    let dash = if phase == "idle" {
        " stroke-dasharray=\"5,4\""
    } else {
        ""
    };
    let path: Vec<String> = points
        .iter()
        .map(|(p, c)| format!("{:.1},{:.1}", axes.x(ox, *p), axes.y(*c)))
        .collect();
    let mut svg = format!(
        "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash} points=\"{}\"/>\n",
        path.join(" ")
    );
    svg += &format!(
        "<text x=\"{}\" y=\"{}\" fill=\"{colour}\">{client} {phase}{}</text>\n",
        ox + PAD + 8.0,
        PAD + 4.0 + 14.0 * k as f64,
        if phase == "idle" { " (dashed)" } else { "" }
    );
    svg
}
