//! The results as an SVG picture, written by hand (no plotting crate): throughput and resident
//! memory over time as line charts, latency percentiles (log scale) and throughput figures
//! beside their baselines as horizontal bar charts.

use std::fmt::Write;

use crate::report::{Report, Series};

const WIDTH: f64 = 1000.0;
const MARGIN: f64 = 20.0;
const LABEL_WIDTH: f64 = 430.0;
const BAR_HEIGHT: f64 = 9.0;
const COLORS: [&str; 6] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];

/// Renders the report.
pub fn svg(report: &Report) -> String {
    let mut body = String::new();
    let mut y = MARGIN;
    let title = format!("weir-bench: {}", report.command);
    let _ = writeln!(
        body,
        r#"<text x="{MARGIN}" y="{}" font-size="16" font-weight="bold">{}</text>"#,
        y + 12.0,
        esc(&title)
    );
    y += 30.0;
    let throughput: Vec<&Series> = report.series.iter().filter(|s| s.unit == "MB/s").collect();
    if !throughput.is_empty() {
        y += line_chart(&mut body, y, "Client throughput over time", "MB/s", &throughput);
    }
    let memory: Vec<&Series> = report.series.iter().filter(|s| s.unit == "MiB").collect();
    if !memory.is_empty() {
        y += line_chart(
            &mut body,
            y,
            "Resident memory over time (broker + clients)",
            "MiB",
            &memory,
        );
    }
    let mut latency_rows = Vec::new();
    for (prefix, list) in [("", &report.latencies), ("peer: ", &report.peer_latencies)] {
        for l in list.iter() {
            latency_rows.push((
                format!("{prefix}{}", l.name),
                vec![("p50", l.p50_us), ("p99", l.p99_us), ("p99.9", l.p999_us), ("max", l.max_us)],
            ));
        }
    }
    if !latency_rows.is_empty() {
        y += bar_chart(&mut body, y, "Latency percentiles (µs, log scale)", &latency_rows, true);
    }
    let mut throughput_rows = Vec::new();
    for f in report.figures.iter().filter(|f| f.unit == "MB/s" && f.section != "baseline") {
        let mut bars = vec![("value", f.value)];
        if let Some(p) = f.peer {
            bars.push(("peer", p));
        }
        if let Some(b) = f.baseline_value {
            bars.push(("baseline", b));
        }
        throughput_rows.push((format!("{}: {}", f.section, f.name), bars));
    }
    if !throughput_rows.is_empty() {
        y += bar_chart(
            &mut body,
            y,
            "Throughput beside its baseline (MB/s)",
            &throughput_rows,
            false,
        );
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{h}\" \
         viewBox=\"0 0 {WIDTH} {h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{body}</svg>\n",
        h = y + MARGIN
    )
}

/// A line chart; returns the height used.
fn line_chart(out: &mut String, top: f64, title: &str, unit: &str, series: &[&Series]) -> f64 {
    let (height, left, right) = (220.0, MARGIN + 50.0, WIDTH - MARGIN - 150.0);
    let (plot_top, plot_bottom) = (top + 20.0, top + height - 25.0);
    let x_max = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).fold(1.0, f64::max);
    let y_max = nice(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(1.0, f64::max));
    let sx = |x: f64| left + (right - left) * x / x_max;
    let sy = |v: f64| plot_bottom - (plot_bottom - plot_top) * v / y_max;
    let _ = writeln!(
        out,
        r#"<text x="{MARGIN}" y="{}" font-size="13" font-weight="bold">{}</text>"#,
        top + 12.0,
        esc(title)
    );
    axes(out, left, right, plot_top, plot_bottom);
    for i in 0..=4 {
        let v = y_max * f64::from(i) / 4.0;
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" text-anchor="end">{}</text><line x1="{left}" x2="{right}" y1="{y}" y2="{y}" stroke="#eee"/>"##,
            left - 4.0,
            sy(v) + 4.0,
            short(v),
            y = sy(v)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="end">seconds</text>"#,
        right,
        plot_bottom + 16.0
    );
    let _ =
        writeln!(out, r#"<text x="{}" y="{}">{}</text>"#, left - 45.0, plot_top - 6.0, esc(unit));
    for s in 0..=4 {
        let x = x_max * f64::from(s) / 4.0;
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">{:.0}</text>"#,
            sx(x),
            plot_bottom + 14.0,
            x
        );
    }
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<String> =
            s.points.iter().map(|(x, v)| format!("{:.1},{:.1}", sx(*x), sy(*v))).collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.2" points="{}"/>"#,
            points.join(" ")
        );
        let ly = plot_top + 14.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{}" y="{}" width="10" height="10" fill="{color}"/><text x="{}" y="{}">{}</text>"#,
            right + 10.0,
            ly,
            right + 24.0,
            ly + 9.0,
            esc(&s.name)
        );
    }
    height
}

/// Horizontal grouped bars, one group per row; returns the height used.
fn bar_chart(
    out: &mut String,
    top: f64,
    title: &str,
    rows: &[(String, Vec<(&str, f64)>)],
    log: bool,
) -> f64 {
    let (left, right) = (MARGIN + LABEL_WIDTH, WIDTH - MARGIN - 70.0);
    let _ = writeln!(
        out,
        r#"<text x="{MARGIN}" y="{}" font-size="13" font-weight="bold">{}</text>"#,
        top + 12.0,
        esc(title)
    );
    let max = rows.iter().flat_map(|r| r.1.iter().map(|b| b.1)).fold(1.0, f64::max);
    let scale = |v: f64| {
        let frac = if log {
            (v.max(1.0).log10() / max.max(10.0).log10()).clamp(0.0, 1.0)
        } else {
            (v / nice(max)).clamp(0.0, 1.0)
        };
        left + (right - left) * frac
    };
    // Legend.
    let mut names: Vec<&str> = Vec::new();
    for (_, bars) in rows {
        for (name, _) in bars {
            if !names.contains(name) {
                names.push(name);
            }
        }
    }
    for (i, name) in names.iter().enumerate() {
        let x = left + 80.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            top + 18.0,
            COLORS[i % COLORS.len()],
            x + 14.0,
            top + 27.0,
            esc(name)
        );
    }
    let mut y = top + 36.0;
    for (label, bars) in rows {
        let group = BAR_HEIGHT * bars.len() as f64;
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + group / 2.0 + 4.0,
            esc(label)
        );
        for (name, value) in bars {
            let color = names
                .iter()
                .position(|n| n == name)
                .map_or(COLORS[0], |i| COLORS[i % COLORS.len()]);
            let _ = writeln!(
                out,
                r#"<rect x="{left}" y="{y}" width="{:.1}" height="{}" fill="{color}"/><text x="{}" y="{}" font-size="9">{}</text>"#,
                (scale(*value) - left).max(0.5),
                BAR_HEIGHT - 1.0,
                scale(*value) + 3.0,
                y + BAR_HEIGHT - 2.0,
                short(*value)
            );
            y += BAR_HEIGHT;
        }
        y += 6.0;
    }
    y - top + 10.0
}

fn axes(out: &mut String, left: f64, right: f64, plot_top: f64, plot_bottom: f64) {
    let _ = writeln!(
        out,
        r##"<line x1="{left}" y1="{plot_top}" x2="{left}" y2="{plot_bottom}" stroke="#333"/><line x1="{left}" y1="{plot_bottom}" x2="{right}" y2="{plot_bottom}" stroke="#333"/>"##
    );
}

/// A round number at or above `v`.
fn nice(v: f64) -> f64 {
    let magnitude = 10f64.powf(v.max(1e-9).log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if step * magnitude >= v {
            return step * magnitude;
        }
    }
    10.0 * magnitude
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
