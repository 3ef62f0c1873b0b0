//! The table of a read-only run on a file system (`--dir` with update % 0): per engine
//! and configuration, read-only transactions per second on the file medium over the
//! same measurement on the DRAM medium (the median of the per-run ratios; the plan
//! measures the `<engine>@dram` control next to each such row). A read-only
//! transaction fences nothing, so it should cost the same on both.

use crate::engines::DRAM_SUFFIX;
use crate::report::table::Table;
use crate::report::tables::{mops, times};
use crate::report::{Results, FILE_MEDIUM};

/// The file / DRAM table, or nothing when no read-only row ran on both media.
pub fn medium_table(res: &Results) -> String {
    let mut t = Table::new(
        [
            "workload",
            "engine",
            "threads",
            "file Mops/s",
            "dram Mops/s",
            "file/dram",
            "file p50 ns",
            "dram p50 ns",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    for w in res.workloads() {
        let engines = res.engines(&w);
        for dram in engines.iter().filter(|e| e.ends_with(DRAM_SUFFIX)) {
            let file = &dram[..dram.len() - DRAM_SUFFIX.len()];
            for k in res.keys(&w).into_iter().filter(|k| k.update_pct == 0) {
                if !res.runs(&w, &k, file).any(|r| r.medium == FILE_MEDIUM) {
                    continue;
                }
                let m = |e: &str, f: fn(&crate::report::Row) -> f64| res.median(&w, &k, e, f);
                let (f, d) = (m(file, |r| r.ops_per_sec), m(dram, |r| r.ops_per_sec));
                if f.is_nan() || d.is_nan() {
                    continue;
                }
                t.push(vec![
                    w.clone(),
                    file.to_string(),
                    k.threads.to_string(),
                    mops(f),
                    mops(d),
                    times(res.ratio(&w, &k, file, dram)),
                    format!("{:.0}", m(file, |r| r.ro_p50_ns)),
                    format!("{:.0}", m(dram, |r| r.ro_p50_ns)),
                ]);
            }
        }
    }
    if t.is_empty() {
        return String::new();
    }
    format!(
        "read-only transactions on the file medium (--dir) and on the DRAM medium \
         (/dev/shm), measured next to each other: transactions per second, medians over \
         runs; file/dram the median of the per-run ratios; p50 the read-only \
         transaction's latency\n{}\n",
        t.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_row;

    #[test]
    fn the_table_pairs_each_read_only_file_row_with_its_dram_control() {
        let mut res = Results::default();
        assert_eq!(medium_table(&res), "");
        for (run, file_ops) in [(1, 95.0), (2, 99.0), (3, 97.0)] {
            let mut f = test_row("pisces", "hash", 1, 0, run, file_ops);
            f.medium = FILE_MEDIUM.into();
            res.rows.push(f);
            res.rows.push(test_row(
                &format!("pisces{DRAM_SUFFIX}"),
                "hash",
                1,
                0,
                run,
                100.0,
            ));
        }
        let t = medium_table(&res);
        assert!(t.contains("0.97x"), "{t}");
        // An engine without its control, or a mix with updates, has no row.
        let mut f = test_row("undo", "hash", 1, 0, 1, 50.0);
        f.medium = FILE_MEDIUM.into();
        res.rows.push(f);
        let mut u = test_row("pisces", "hash", 1, 20, 1, 50.0);
        u.medium = FILE_MEDIUM.into();
        res.rows.push(u);
        res.rows.push(test_row(
            &format!("pisces{DRAM_SUFFIX}"),
            "hash",
            1,
            20,
            1,
            50.0,
        ));
        let t = medium_table(&res);
        assert!(!t.contains("undo") && t.lines().count() == 4, "{t}");
    }
}
