//! `--plot FILE.svg`: throughput over time (left) and the latency distribution as a
//! cumulative curve on a logarithmic latency axis (right), one colour per run.
//! Written by hand: two line charts do not justify a plotting library's build time.

use std::fmt::Write as _;

use crate::report::RunResult;

const W: f64 = 1100.0;
const H: f64 = 460.0;
const PANEL_W: f64 = 460.0;
const PANEL_H: f64 = 320.0;
const TOP: f64 = 60.0;
const COLOURS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Round axis maximum: 1, 2, 2.5 or 5 times a power of ten.
fn nice_max(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&m| m >= v)
        .unwrap_or(10.0 * p)
}

fn human(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{:.1}M", v / 1e6),
        v if v >= 1e3 => format!("{:.0}k", v / 1e3),
        v => format!("{v:.0}"),
    }
}

fn axes(out: &mut String, x0: f64, title: &str, xlabel: &str, ylabel: &str) {
    let _ = write!(
        out,
        r##"<text x="{cx}" y="{ty}" text-anchor="middle" font-size="15">{t}</text>
<rect x="{x0}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#333"/>
<text x="{cx}" y="{xl}" text-anchor="middle" font-size="12">{xlabel}</text>
<text x="{yx}" y="{cy}" text-anchor="middle" font-size="12" transform="rotate(-90 {yx} {cy})">{ylabel}</text>
"##,
        cx = x0 + PANEL_W / 2.0,
        ty = TOP - 15.0,
        t = esc(title),
        xl = TOP + PANEL_H + 38.0,
        yx = x0 - 48.0,
        cy = TOP + PANEL_H / 2.0,
    );
}

fn tick(out: &mut String, x: f64, y: f64, label: &str, vertical_axis: bool) {
    let (anchor, tx, ty) = if vertical_axis {
        ("end", x - 6.0, y + 4.0)
    } else {
        ("middle", x, y + 16.0)
    };
    let _ = writeln!(
        out,
        r#"<text x="{tx:.1}" y="{ty:.1}" text-anchor="{anchor}" font-size="11">{}</text>"#,
        esc(label)
    );
}

fn polyline(out: &mut String, pts: &[(f64, f64)], colour: &str) {
    if pts.is_empty() {
        return;
    }
    let p: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
    let _ = writeln!(
        out,
        r#"<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{}"/>"#,
        p.join(" ")
    );
}

/// Renders the SVG document for `results`.
pub fn svg(results: &[RunResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let workload = results.first().map(|r| r.workload.as_str()).unwrap_or("");

    // Left: throughput over time.
    let x0 = 80.0;
    axes(
        &mut out,
        x0,
        &format!("{workload}: throughput over time"),
        "seconds",
        "documents / s",
    );
    let tmax = nice_max(
        results
            .iter()
            .flat_map(|r| r.timeline.iter().map(|p| p.0))
            .fold(0.0, f64::max),
    );
    let rmax = nice_max(
        results
            .iter()
            .flat_map(|r| r.timeline.iter().map(|p| p.1))
            .fold(0.0, f64::max),
    );
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        tick(
            &mut out,
            x0 + f * PANEL_W,
            TOP + PANEL_H,
            &format!("{:.1}", f * tmax),
            false,
        );
        tick(
            &mut out,
            x0,
            TOP + PANEL_H - f * PANEL_H,
            &human(f * rmax),
            true,
        );
    }
    for (i, r) in results.iter().enumerate() {
        let pts: Vec<(f64, f64)> = r
            .timeline
            .iter()
            .map(|&(t, v)| (x0 + t / tmax * PANEL_W, TOP + PANEL_H - v / rmax * PANEL_H))
            .collect();
        polyline(&mut out, &pts, COLOURS[i % COLOURS.len()]);
    }

    // Right: cumulative latency distribution on a log10 latency axis.
    let x1 = 80.0 + PANEL_W + 100.0;
    axes(
        &mut out,
        x1,
        "latency distribution (cumulative)",
        "latency per command, µs (log scale)",
        "fraction of commands",
    );
    let lmax = results
        .iter()
        .flat_map(|r| r.latency_counts.iter().map(|p| p.0))
        .max()
        .unwrap_or(1)
        .max(10);
    let lmin = results
        .iter()
        .flat_map(|r| r.latency_counts.iter().map(|p| p.0))
        .min()
        .unwrap_or(1)
        .max(1);
    let (lo, hi) = (
        (lmin as f64).log10().floor(),
        (lmax as f64)
            .log10()
            .ceil()
            .max((lmin as f64).log10().floor() + 1.0),
    );
    let xpos = |us: u64| x1 + ((us.max(1) as f64).log10() - lo) / (hi - lo) * PANEL_W;
    let mut d = lo;
    while d <= hi {
        tick(
            &mut out,
            xpos(10f64.powf(d) as u64),
            TOP + PANEL_H,
            &human(10f64.powf(d)),
            false,
        );
        d += 1.0;
    }
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        tick(
            &mut out,
            x1,
            TOP + PANEL_H - f * PANEL_H,
            &format!("{f:.2}"),
            true,
        );
    }
    for (i, r) in results.iter().enumerate() {
        let total: u64 = r.latency_counts.iter().map(|p| p.1).sum();
        if total == 0 {
            continue;
        }
        let mut acc = 0u64;
        let mut pts = vec![(
            xpos(r.latency_counts.first().map(|p| p.0).unwrap_or(1)),
            TOP + PANEL_H,
        )];
        for &(v, n) in &r.latency_counts {
            acc += n;
            pts.push((xpos(v), TOP + PANEL_H - acc as f64 / total as f64 * PANEL_H));
        }
        polyline(&mut out, &pts, COLOURS[i % COLOURS.len()]);
    }

    // Legend.
    for (i, r) in results.iter().enumerate() {
        let y = H - 22.0 + 0.0 * i as f64;
        let x = 80.0 + (i as f64) * 170.0;
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{y0}" width="12" height="12" fill="{c}"/><text x="{tx}" y="{ty}" font-size="11">run {n}: {t}</text>"#,
            y0 = y - 10.0,
            c = COLOURS[i % COLOURS.len()],
            tx = x + 16.0,
            ty = y,
            n = i + 1,
            t = esc(&short(&r.target)),
        );
    }
    out.push_str("</svg>\n");
    out
}

fn short(t: &str) -> String {
    let t = t.strip_prefix("mongodb://").unwrap_or(t);
    if t.chars().count() > 24 {
        let tail: String = t
            .chars()
            .rev()
            .take(22)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    } else {
        t.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Latency, RunResult};

    #[test]
    fn nice_maxima() {
        for (v, m) in [
            (0.0, 1.0),
            (-3.0, 1.0),
            (0.7, 1.0),
            (3.0, 5.0),
            (12.0, 20.0),
            (1000.0, 1000.0),
        ] {
            assert_eq!(nice_max(v), m, "{v}");
        }
    }

    #[test]
    fn renders_runs_and_escapes() {
        let r = RunResult {
            client: crate::args::ClientKind::Rust,
            client_cpu_us_per_doc: None,
            server_cpu_us_per_doc: None,
            workload: "profile-single".into(),
            target: "a<b>&\"c\"".into(),
            docs: 3,
            ops: 3,
            clients: 1,
            processes: 1,
            seconds: 1.0,
            docs_per_sec: 3.0,
            latency: Latency::default(),
            bytes_per_doc: None,
            storage_size: None,
            objects: None,
            queries: vec![],
            timeline: vec![(0.25, 10.0), (0.5, 20.0)],
            latency_counts: vec![(5, 1), (50, 2)],
        };
        let s = svg(&[r.clone(), r]);
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 4);
        assert!(s.contains("a&lt;b&gt;&amp;&quot;c&quot;"));
        assert!(!s.contains("NaN") && !s.contains("inf"));
        // Empty input still yields a well-formed document.
        let e = svg(&[]);
        assert!(e.contains("<svg") && !e.contains("NaN"));
    }
}
