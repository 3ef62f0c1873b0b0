//! The report of a run as Markdown: `summary.md` in every report directory, and the
//! file `--markdown FILE` writes (the repository's `BENCHMARKS.md` is that file for the
//! main job and the peers' comparison).
//!
//! A section is made from the rows and the facts of the run ([`RunInfo`]: command,
//! date, build, machine, medium, load) and nothing else, so the same rows and facts give
//! the same bytes. The tables are the terminal's (`summary.txt`'s) text tables in
//! fenced blocks: one layout for every output.

use crate::report::{tables, targets, Results};
use std::path::{Component, Path, PathBuf};

/// The opening of a Markdown file made of run sections: what wrote it, so that nobody
/// edits it by hand.
pub const PREFACE: &str = "\
# Benchmarks

Written by `pisces-bench --markdown FILE` (each run below names its exact command; \
`--markdown-append` adds a run to the file): regenerate it rather than edit it. How the \
harness measures, what each workload does and what each column means: \
`crates/pisces-bench/README.md`. The figures are from the emulated PM medium on DRAM \
described in each run, not from NVM. Older results, each with its date, command and \
load, are in `docs/bench/`; each engine's figures against its paper's ablations are in \
`docs/engines/`.
";

/// What is known about a run besides its rows: the facts its report states.
#[derive(Clone, Debug, PartialEq)]
pub struct RunInfo {
    /// The heading of the run (`pisces-bench`, the main job, ...).
    pub title: String,
    /// The command line, as a user would type it (`pisces-bench --engines ...`).
    pub command: String,
    /// Start time, UTC (`2026-11-27 11:40:02 UTC`).
    pub started: String,
    /// The build: commit of the source tree the binary was built from, and whether
    /// that tree had uncommitted changes.
    pub build: String,
    /// CPU model, cores, memory, operating system and kernel.
    pub machine: String,
    /// Where the pools live and what their medium does.
    pub medium: String,
    /// Load averages (1, 5, 15 minutes) at the start and at the end.
    pub load_start: String,
    /// See [`RunInfo::load_start`].
    pub load_end: String,
    /// Wall-clock seconds of the run (measurements, preloads, recovery workloads).
    pub elapsed_s: f64,
    /// The settings the run printed before measuring (engines, workloads, data sets).
    pub settings: String,
}

/// A plot of the run: its file name and the link the Markdown uses for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlotLink {
    /// File name (`throughput-hash.svg`).
    pub name: String,
    /// Link target, relative to the Markdown file (`throughput-hash.svg` in
    /// `summary.md`; e.g. `docs/bench/plots/main/throughput-hash.svg` in a file at the
    /// workspace root).
    pub link: String,
}

/// One run as a Markdown section: the facts, the settings, the tables (with `extra`,
/// the text of the `recovery` and `replay` workloads, which are not rows), the targets,
/// the failures and the plots.
pub fn section(
    info: &RunInfo,
    res: &Results,
    extra: &str,
    failures: &[String],
    interrupted: bool,
    plots: &[PlotLink],
) -> String {
    let mut s = format!("\n## {}\n\n", info.title);
    s += "| | |\n|---|---|\n";
    let facts = [
        ("command", format!("`{}`", info.command)),
        ("date", info.started.clone()),
        ("build", info.build.clone()),
        ("machine", info.machine.clone()),
        ("medium", info.medium.clone()),
        (
            "load average (1, 5, 15 min)",
            format!(
                "{} at the start, {} at the end",
                info.load_start, info.load_end
            ),
        ),
        (
            "duration",
            format!("{:.0} s; {} rows", info.elapsed_s, res.rows.len()),
        ),
    ];
    for (k, v) in facts {
        s += &format!("| {k} | {} |\n", v.replace('|', "\\|"));
    }
    s += "\n### What ran\n\n";
    s += &fenced(&info.settings);
    let text = tables_text(res, extra);
    if !text.trim().is_empty() {
        s += "\n### Tables\n\n";
        s += &fenced(&text);
    }
    let t = targets::targets(res);
    if !t.trim().is_empty() {
        s += "\n### Targets\n\n";
        s += &fenced(&t);
    }
    if !failures.is_empty() {
        s += &format!("\n### {} measurement(s) failed\n\n", failures.len());
        for f in failures {
            s += &format!("- {f}\n");
        }
    }
    if interrupted {
        s += "\n**Interrupted**: the tables show the measurements finished before the signal.\n";
    }
    if !plots.is_empty() {
        s += "\n### Plots\n\n";
        for p in plots {
            let alt = p.name.trim_end_matches(".svg");
            s += &format!("![{alt}]({})\n", p.link);
        }
    }
    s
}

/// The tables of a run as text, as the terminal and `summary.txt` show them: the
/// tables made from the rows, with `extra` (the recovery and replay text) in the place
/// of those workloads.
pub fn tables_text(res: &Results, extra: &str) -> String {
    let mut s = String::new();
    s += &tables::disk_table(res);
    s += &crate::report::medium_table::medium_table(res);
    s += &tables::throughput_tables(res);
    s += &tables::latency_table(res);
    s += &tables::breakdown_table(res);
    s += &crate::report::hot_table::early_visibility_table(res);
    s += &crate::report::domain_table::domain_table(res);
    s += &crate::report::processes_table::processes_table(res);
    s += extra;
    s += &tables::capi_table(res);
    s += &tables::markers_table(res);
    s += &tables::detail_table(res);
    s
}

/// `text` in a fenced block, its blank edges trimmed.
fn fenced(text: &str) -> String {
    format!("```text\n{}\n```\n", text.trim_matches('\n'))
}

/// `path` relative to the directory `base` (both made absolute against the current
/// directory first); `path` itself if they share no root.
pub fn relative_to(path: &Path, base: &Path) -> PathBuf {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (path, base) = (abs(path), abs(base));
    let (p, b) = (normal(&path), normal(&base));
    if p.first() != b.first() {
        return path;
    }
    let common = p.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &p[common..] {
        out.push(c.as_os_str());
    }
    out
}

fn normal(p: &Path) -> Vec<Component<'_>> {
    p.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// A link in Markdown: `/`-separated whatever the platform.
pub fn link(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{test_row, Row};

    fn info() -> RunInfo {
        RunInfo {
            title: "pisces-bench".into(),
            command: "pisces-bench --engines pisces,undo --workloads hash --runs 2".into(),
            started: "2026-11-27 11:40:02 UTC".into(),
            build: "commit 0123456789ab".into(),
            machine: "Example CPU | 2 cores, 4 GiB, Linux 6.1.0".into(),
            medium: "DRAM under /dev/shm".into(),
            load_start: "0.10 0.20 0.30".into(),
            load_end: "1.50 0.60 0.40".into(),
            elapsed_s: 3.2,
            settings: "mode quick: engines pisces,undo\n".into(),
        }
    }

    fn rows() -> Vec<Row> {
        let mut v = Vec::new();
        for run in 1..=2 {
            let k = f64::from(run);
            v.push(test_row("pisces", "hash", 1, 0, run, 3.0e6 + k * 1e5));
            v.push(test_row("undo", "hash", 1, 0, run, 1.0e6 + k * 1e5));
        }
        v
    }

    /// The section of a fixed set of rows and facts, byte for byte: a change of the
    /// layout shows here (and in the next BENCHMARKS.md).
    #[test]
    fn a_section_is_a_function_of_the_rows_and_the_facts() {
        let res = Results { rows: rows() };
        let plots = [PlotLink {
            name: "throughput-hash.svg".into(),
            link: "plots/throughput-hash.svg".into(),
        }];
        let md = section(&info(), &res, "", &["x failed".into()], false, &plots);
        let want = "
## pisces-bench

| | |
|---|---|
| command | `pisces-bench --engines pisces,undo --workloads hash --runs 2` |
| date | 2026-11-27 11:40:02 UTC |
| build | commit 0123456789ab |
| machine | Example CPU \\| 2 cores, 4 GiB, Linux 6.1.0 |
| medium | DRAM under /dev/shm |
| load average (1, 5, 15 min) | 0.10 0.20 0.30 at the start, 1.50 0.60 0.40 at the end |
| duration | 3 s; 4 rows |

### What ran

```text
mode quick: engines pisces,undo
```

### Tables

```text
hash: committed transactions per second, median over runs; pisces/X is the median of the per-run ratios
upd%  nvm ns  threads  pisces Mops/s  undo Mops/s  pisces/undo
0          0        1          3.150        1.150        2.74x

All metrics (median over runs; latencies in ns per transaction, retries included; lines and fences per committed transaction; write amp = bytes made durable (logs, write-back, allocator metadata, write-back at close) / bytes the program changed)
workload  engine  upd%  nvm ns  thr  Mops/s  abort  ro p50  ro p99  upd p50  upd p99  lines/tx  fences/tx  write amp
hash      pisces     0       0    1   3.150  0.00%     500     900        -        -      0.00       0.00          -
hash        undo     0       0    1   1.150  0.00%     500     900        -        -      0.00       0.00          -
```

### Targets

```text
Targets (measured in this run, not asserted; ratios are medians of per-run ratios):
  [n/a]    hash 2% updates: not measured
  [n/a]    hash 20% updates: not measured
  [n/a]    btree 20% updates: not measured
  [n/a]    read-only p99 at 1000 ns vs 0 ns: not measured (latency workload)
  Baselines of the 2x target: undo, mvcc and pmdk (those measured); the paper engines sp3, spht and timestone are shown as [info], outside the target.
```

### 1 measurement(s) failed

- x failed

### Plots

![throughput-hash](plots/throughput-hash.svg)
";
        assert_eq!(md, want);
        // The same inputs, the same bytes.
        assert_eq!(
            md,
            section(&info(), &res, "", &["x failed".into()], false, &plots)
        );
    }

    #[test]
    fn plot_links_are_relative_to_the_markdown_file() {
        let p = relative_to(Path::new("/w/docs/bench/plots/a.svg"), Path::new("/w"));
        assert_eq!(link(&p), "docs/bench/plots/a.svg");
        let p = relative_to(Path::new("/w/target/bench/x/a.svg"), Path::new("/w/docs"));
        assert_eq!(link(&p), "../target/bench/x/a.svg");
        let p = relative_to(Path::new("/w/./a.svg"), Path::new("/w"));
        assert_eq!(link(&p), "a.svg");
    }
}
