//! SVG plots of a bench run (plotters' SVG backend: no font library needed).
//!
//! * `throughput-<workload>.svg`: throughput against threads, one panel per update mix
//!   (and emulated latency), one line per engine (paper Fig 6, 7; for `tpcc` and
//!   `tatp` Fig 8);
//! * `latency.svg`: read-only and update transaction latency (p50, p99) against the
//!   emulated NVM write latency (paper Fig 9c);
//! * `breakdown.svg`: throughput of flush whole, flush-diff and flush-diff + group
//!   commit (paper Fig 9a).
//!
//! Every value plotted is a median over runs.

use crate::engines::{labels, Engine};
use crate::report::{Key, Results, Row};
use crate::workloads::select::LATENCY_CONTROL;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn e<E: std::fmt::Display>(x: E) -> String {
    format!("plotting: {x}")
}

/// A stable colour per engine label: fixed ones for the engines of most plots, one
/// picked by a hash of the label for the others.
fn color(engine: &str) -> RGBColor {
    let fixed = [
        (Engine::PISCES.name(), RGBColor(31, 119, 180)),
        (Engine::UNDO.name(), RGBColor(214, 39, 40)),
        (Engine::VOLATILE.name(), RGBColor(44, 160, 44)),
        (labels::PISCES_WHOLE, RGBColor(255, 127, 14)),
        (labels::PISCES_DIFF, RGBColor(148, 103, 189)),
    ];
    if let Some(&(_, c)) = fixed.iter().find(|(label, _)| *label == engine) {
        return c;
    }
    let h = engine
        .bytes()
        .fold(7usize, |a, b| a.wrapping_mul(31).wrapping_add(b as usize));
    let c = Palette99::pick(h).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

/// Label integral x values only (thread counts, NVM latencies).
fn integral(x: &f64) -> String {
    let r = x.round();
    if (x - r).abs() < 1e-9 && r >= 0.0 {
        format!("{r:.0}")
    } else {
        String::new()
    }
}

/// Write every plot the results allow into `dir`; returns the files written.
pub fn all(dir: &Path, res: &Results) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for w in res.workloads() {
        let path = match w.as_str() {
            "latency" | "latency-split" => {
                let p = dir.join(format!("{w}.svg"));
                latency(&p, res, &w)?;
                p
            }
            // One latency, beside the sweep's: its table and the target line say it all.
            LATENCY_CONTROL => continue,
            "breakdown" => {
                let p = dir.join("breakdown.svg");
                breakdown(&p, res)?;
                p
            }
            _ => {
                let p = dir.join(format!("throughput-{w}.svg"));
                throughput(&p, res, &w)?;
                p
            }
        };
        files.push(path);
    }
    Ok(files)
}

fn y_max(values: impl Iterator<Item = f64>) -> f64 {
    let m = values.filter(|v| v.is_finite()).fold(0.0, f64::max);
    if m > 0.0 {
        m * 1.15
    } else {
        1.0
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// A metric of a row.
type Metric = fn(&Row) -> f64;
/// A latency series: label, colour, p99 (else p50), points.
type Series = (String, RGBColor, bool, Vec<(f64, f64)>);

/// Throughput against threads for workload `w`.
pub fn throughput(path: &Path, res: &Results, w: &str) -> Result<(), String> {
    let engines = res.engines(w);
    let keys = res.keys(w);
    let panels: Vec<(u32, u64)> = keys
        .iter()
        .map(|k| (k.update_pct, k.nvm_latency_ns))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let threads: Vec<usize> = keys
        .iter()
        .map(|k| k.threads)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let (tmin, tmax) = (
        threads.first().copied().unwrap_or(1) as f64,
        threads.last().copied().unwrap_or(1) as f64,
    );
    let n = panels.len().max(1);
    let root = SVGBackend::new(path, (340 * n as u32 + 20, 380)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let root = root
        .titled(
            &format!("{w}: committed transactions per second vs threads (median of runs)"),
            ("sans-serif", 18),
        )
        .map_err(e)?;
    for (area, &(p, lat)) in root.split_evenly((1, n)).iter().zip(&panels) {
        let series: Vec<(&String, Vec<(f64, f64)>)> = engines
            .iter()
            .map(|en| {
                let pts = keys
                    .iter()
                    .filter(|k| k.update_pct == p && k.nvm_latency_ns == lat)
                    .filter_map(|k| {
                        let v = res.median(w, k, en, |r| r.ops_per_sec);
                        (!v.is_nan()).then_some((k.threads as f64, v / 1e6))
                    })
                    .collect();
                (en, pts)
            })
            .collect();
        let ymax = y_max(series.iter().flat_map(|s| s.1.iter().map(|p| p.1)));
        let mix = match w {
            "tpcc" => "new-order (100% read-write)".to_string(),
            "tatp" => format!("TATP mix ({p}% read-write)"),
            _ => format!("{p}% updates"),
        };
        let caption = if lat == 0 {
            mix
        } else {
            format!("{mix}, NVM {lat} ns")
        };
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 15))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d((tmin - 0.5)..(tmax + 0.5), 0f64..ymax)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("threads")
            .y_desc("Mops/s")
            .x_labels(((tmax - tmin) as usize * 2 + 3).min(40))
            .x_label_formatter(&integral)
            .draw()
            .map_err(e)?;
        for (en, pts) in series {
            if pts.is_empty() {
                continue;
            }
            let c = color(en);
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(e)?
                .label(en.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 4, c.filled())))
                .map_err(e)?;
        }
        legend(&mut chart)?;
    }
    root.present().map_err(e)
}

fn legend<'a, 'b: 'a>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)
}

/// Read-only and update latency against the emulated NVM write latency.
pub fn latency(path: &Path, res: &Results, w: &str) -> Result<(), String> {
    let keys = res.keys(w);
    let combos: Vec<(usize, u32)> = keys
        .iter()
        .map(|k| (k.threads, k.update_pct))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let xmax = keys.iter().map(|k| k.nvm_latency_ns).max().unwrap_or(0) as f64;
    let engines = res.engines(w);
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let root = root
        .titled(
            &format!(
                "{w}: transaction latency vs emulated NVM write latency (hash table, median \
                 of runs)"
            ),
            ("sans-serif", 18),
        )
        .map_err(e)?;
    let panels: [(&str, Metric, Metric); 2] = [
        ("read-only transactions", |r| r.ro_p50_ns, |r| r.ro_p99_ns),
        ("update transactions", |r| r.upd_p50_ns, |r| r.upd_p99_ns),
    ];
    for (area, (title, p50, p99)) in root.split_evenly((1, 2)).iter().zip(panels) {
        let mut series: Vec<Series> = Vec::new();
        for en in &engines {
            for &(t, p) in &combos {
                let suffix = if combos.len() > 1 {
                    format!(" {t}t {p}%")
                } else {
                    String::new()
                };
                for (name, f, is99) in [("p50", p50, false), ("p99", p99, true)] {
                    let pts: Vec<(f64, f64)> = keys
                        .iter()
                        .filter(|k| k.threads == t && k.update_pct == p)
                        .filter_map(|k| {
                            let v = res.median(w, k, en, f);
                            (!v.is_nan()).then_some((k.nvm_latency_ns as f64, v))
                        })
                        .collect();
                    if !pts.is_empty() {
                        series.push((format!("{en} {name}{suffix}"), color(en), is99, pts));
                    }
                }
            }
        }
        let ymax = y_max(series.iter().flat_map(|s| s.3.iter().map(|p| p.1)));
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 15))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(65)
            .build_cartesian_2d(-(xmax * 0.04 + 1.0)..(xmax * 1.04 + 1.0), 0f64..ymax)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("emulated NVM write latency (ns per flushed line)")
            .y_desc("latency (ns)")
            .x_label_formatter(&integral)
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(e)?;
        for (label, c, is99, pts) in series {
            let width = if is99 { 1 } else { 2 };
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(width)))
                .map_err(e)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(width))
                });
            if is99 {
                chart
                    .draw_series(
                        pts.iter()
                            .map(|&(x, y)| TriangleMarker::new((x, y), 5, c.filled())),
                    )
                    .map_err(e)?;
            } else {
                chart
                    .draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 4, c.filled())))
                    .map_err(e)?;
            }
        }
        legend(&mut chart)?;
    }
    root.present().map_err(e)
}

/// Bars of the breakdown configurations, grouped by configuration.
pub fn breakdown(path: &Path, res: &Results) -> Result<(), String> {
    let w = "breakdown";
    let keys: Vec<Key> = res.keys(w);
    let engines = res.engines(w);
    let labels: Vec<String> = keys
        .iter()
        .map(|k| {
            let mut s = format!(
                "{} thread{}, {}%",
                k.threads,
                if k.threads == 1 { "" } else { "s" },
                k.update_pct
            );
            if k.nvm_latency_ns != 0 {
                s += &format!(", {} ns", k.nvm_latency_ns);
            }
            s
        })
        .collect();
    let g = keys.len().max(1);
    let values: Vec<Vec<f64>> = engines
        .iter()
        .map(|en| {
            keys.iter()
                .map(|k| res.median(w, k, en, |r| r.ops_per_sec) / 1e6)
                .collect()
        })
        .collect();
    // Headroom above the bars for the legend and the value labels.
    let ymax = y_max(values.iter().flatten().copied()) * 1.25;
    let root = SVGBackend::new(path, (240 * g as u32 + 200, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    draw_breakdown(&root, &labels, &engines, &values, ymax)?;
    root.present().map_err(e)
}

fn draw_breakdown(
    root: &Area<'_>,
    labels: &[String],
    engines: &[String],
    values: &[Vec<f64>],
    ymax: f64,
) -> Result<(), String> {
    let g = labels.len().max(1);
    let mut chart = ChartBuilder::on(root)
        .caption(
            "Pisces optimisations on the hash table (median of runs)",
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(g as f64 - 0.5), 0f64..ymax)
        .map_err(e)?;
    let fmt = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-9 && i >= 0.0 && (i as usize) < labels.len() {
            labels[i as usize].clone()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(g * 2 + 1)
        .x_label_formatter(&fmt)
        .y_desc("Mops/s")
        .draw()
        .map_err(e)?;
    let width = 0.8 / engines.len().max(1) as f64;
    for (j, (en, vals)) in engines.iter().zip(values).enumerate() {
        let c = color(en);
        let bars: Vec<(f64, f64)> = vals
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(i, &v)| (i as f64 - 0.4 + j as f64 * width, v))
            .collect();
        chart
            .draw_series(
                bars.iter()
                    .map(|&(x0, v)| Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], c.filled())),
            )
            .map_err(e)?
            .label(en.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        chart
            .draw_series(bars.iter().map(|&(x0, v)| {
                Text::new(
                    format!("{v:.2}"),
                    (x0 + width * 0.1, v + ymax * 0.04),
                    ("sans-serif", 11).into_font(),
                )
            }))
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(engine: &str, workload: &str, threads: usize, lat: u64, ops: f64) -> Row {
        Row {
            engine: engine.into(),
            workload: workload.into(),
            threads,
            update_pct: 20,
            nvm_latency_ns: lat,
            run: 1,
            ops_per_sec: ops,
            abort_rate: 0.0,
            ro_p50_ns: 400.0 + lat as f64,
            ro_p99_ns: 900.0,
            upd_p50_ns: 2000.0,
            upd_p99_ns: 5000.0 + lat as f64,
            flushes_per_tx: 1.0,
            fences_per_tx: 1.0,
            write_amp: 3.0,
            ro_locked_reads_per_ro_tx: 0.0,
            shared_rmw_per_tx: f64::NAN,
            shared_lines_per_tx: f64::NAN,
            user_abort_rate: 0.0,
            ..crate::report::test_row(engine, workload, threads, 20, 1, ops)
        }
    }

    #[test]
    fn every_workload_gets_an_svg_with_its_series() {
        let mut res = Results::default();
        for t in [1, 2] {
            for (e, ops) in [("pisces", 2e6), ("undo", 1e6), ("volatile", 3e6)] {
                res.rows.push(row(e, "hash", t, 0, ops * t as f64));
            }
            for (e, ops) in [
                ("pisces-whole", 1e6),
                ("pisces-diff", 1.2e6),
                ("pisces", 1.5e6),
            ] {
                res.rows.push(row(e, "breakdown", t, 0, ops));
            }
        }
        for lat in [0, 100, 1000] {
            for e in ["pisces", "undo"] {
                res.rows.push(row(e, "latency", 2, lat, 1e6));
            }
        }
        for t in [1, 2] {
            for e in ["pisces", "undo"] {
                res.rows.push(Row {
                    update_pct: 100,
                    ..row(e, "tpcc", t, 0, 1e5 * t as f64)
                });
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let files = all(dir.path(), &res).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "throughput-hash.svg",
                "breakdown.svg",
                "latency.svg",
                "throughput-tpcc.svg"
            ]
        );
        for f in &files {
            let s = std::fs::read_to_string(f).unwrap();
            assert!(
                s.starts_with("<svg") && s.trim_end().ends_with("</svg>"),
                "{f:?}"
            );
        }
        let hash = std::fs::read_to_string(&files[0]).unwrap();
        for want in ["pisces", "undo", "volatile", "20% updates", "threads"] {
            assert!(hash.contains(want), "missing {want}");
        }
        let lat = std::fs::read_to_string(&files[2]).unwrap();
        assert!(lat.contains("pisces p99") && lat.contains("undo p50"));
        let bd = std::fs::read_to_string(&files[1]).unwrap();
        assert!(bd.contains("pisces-whole") && bd.contains("2 threads, 20%"));
        let tpcc = std::fs::read_to_string(&files[3]).unwrap();
        assert!(tpcc.contains("new-order") && tpcc.contains("undo"));
    }
}
