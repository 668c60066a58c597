//! The timeline plot of a checked run, as SVG text (the plot seed 003 shows for Chronos;
//! partition-checker.md §8.2).
//!
//! One row per job (per job and node for EveryNode). Targets are thick translucent bars, green
//! when met, red when missed, grey when exempt and missed, outlined only when past the cutoff;
//! runs are thin solid bars at least 1 s wide, green when complete, red when they never
//! finished; nemesis periods are shaded bands with their label. Every bar has a `<title>`
//! tooltip. Written by hand so the output is deterministic and needs no plotting library.

use std::fmt::Write;

use super::{CheckReport, Period, TargetStatus};

const WIDTH: f64 = 1200.0;
const LEFT: f64 = 150.0;
const ROW: f64 = 14.0;
const TOP: f64 = 40.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Renders `report` with `nemesis` periods shaded; `title` goes in the header.
pub fn timeline(report: &CheckReport, nemesis: &[Period], title: &str) -> String {
    let origin = report.test_start;
    let span = (report.read_time - origin).max(1) as f64;
    let x = |t: i64| LEFT + (t - origin) as f64 / span * (WIDTH - LEFT - 10.0);
    // Rows: one per job, or per (job, node) for EveryNode.
    let mut rows: Vec<(String, &str, Option<&str>)> = Vec::new();
    for (name, job) in &report.jobs {
        if job.job.nodes.is_empty() || job.job.policy != crate::job::ClusterPolicy::EveryNode {
            rows.push((name.clone(), name.as_str(), None));
        } else {
            for n in &job.job.nodes {
                rows.push((format!("{name} @{n}"), name.as_str(), Some(n.as_str())));
            }
        }
    }
    let height = TOP + ROW * rows.len() as f64 + 40.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="10">"#
    );
    let s_ = &report.summary;
    let _ = writeln!(
        s,
        r#"<text x="4" y="14" font-size="12">{} — valid: {} — targets {} required, {} met, {} missed; {} double runs ({} exempt); {} stray</text>"#,
        esc(title),
        match report.valid {
            super::Validity::Valid => "true",
            super::Validity::Invalid => "false",
            super::Validity::Unknown => "unknown",
        },
        s_.targets_required,
        s_.met,
        s_.missed,
        s_.double_runs + s_.exempt_double_runs,
        s_.exempt_double_runs,
        s_.stray
    );
    let bottom = TOP + ROW * rows.len() as f64;
    for p in nemesis {
        let (a, b) = (x(p.from), x(p.to.min(report.read_time)));
        let _ = writeln!(
            s,
            r##"<rect x="{a:.1}" y="{TOP}" width="{:.1}" height="{:.1}" fill="black" fill-opacity="0.07"><title>{}</title></rect><text x="{a:.1}" y="{:.1}" fill="#555">{}</text>"##,
            (b - a).max(1.0),
            bottom - TOP,
            esc(&p.label),
            TOP - 4.0,
            esc(&p.label)
        );
    }
    // Ticks every 60 s, labels every 5 min.
    let mut t = 0;
    while (t as f64) <= span {
        let tx = x(origin + t);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.1}" y1="{bottom:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#888"/>"##,
            bottom + 4.0
        );
        if t % 300_000 == 0 {
            let _ = writeln!(
                s,
                r#"<text x="{tx:.1}" y="{:.1}">{}s</text>"#,
                bottom + 16.0,
                t / 1000
            );
        }
        t += 60_000;
    }
    for (i, (label, job, node)) in rows.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        let _ = writeln!(
            s,
            r#"<text x="4" y="{:.1}">{}</text>"#,
            y + ROW * 0.8,
            esc(label)
        );
        let j = &report.jobs[*job];
        for tg in j.targets.iter().filter(|t| t.node.as_deref() == *node) {
            let (fill, extra) = match tg.status {
                TargetStatus::Met => ("#00AB01", ""),
                TargetStatus::Missed => ("#AB0001", ""),
                TargetStatus::ExemptMissed => ("#999999", ""),
                TargetStatus::Unrequired => ("none", r##" stroke="#666" stroke-dasharray="2,2""##),
            };
            let by = tg
                .run
                .as_ref()
                .map(|r| format!(" met by {} at {}", r.node, r.start))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}" fill-opacity="0.3"{extra}><title>{} target #{} [{}, {}] {:?}{}{}</title></rect>"#,
                x(tg.start),
                y + ROW * 0.1,
                (x(tg.end) - x(tg.start)).max(1.0),
                ROW * 0.8,
                esc(job),
                tg.index,
                tg.start,
                tg.end,
                tg.status,
                esc(&by),
                tg.exempt
                    .as_deref()
                    .map(|e| format!(" (exempt: {})", esc(e)))
                    .unwrap_or_default()
            );
        }
        let runs = j
            .targets
            .iter()
            .filter_map(|t| t.run.as_ref())
            .chain(&j.duplicates)
            .chain(&j.stray)
            .chain(&j.unrequired)
            .chain(&j.incomplete)
            .filter(|r| node.is_none_or(|n| r.node == n));
        for r in runs {
            let end = r.end.unwrap_or(report.read_time).max(r.start + 1_000);
            let (fill, outline) = if r.end.is_some() {
                ("#00AB01", "")
            } else {
                ("#AB0001", "")
            };
            let outline = if j.stray.contains(r) {
                r#" stroke="magenta""#
            } else if j.duplicates.contains(r) {
                r#" stroke="orange""#
            } else {
                outline
            };
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}"{outline}><title>{} run on {} {}..{}</title></rect>"#,
                x(r.start),
                y + ROW * 0.4,
                (x(end) - x(r.start)).max(1.0),
                ROW * 0.2,
                esc(job),
                esc(&r.node),
                r.start,
                r.end
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "(never finished)".into())
            );
        }
    }
    s.push_str("</svg>\n");
    s
}
