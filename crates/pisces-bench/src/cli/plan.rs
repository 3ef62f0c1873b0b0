//! The plan of a bench run: the measurements [`Settings`] expand to, in order, and
//! notes on the choices the plan made (engines or mixes a workload skips).
//!
//! Engines of one configuration are measured back to back, so that the ratios of a
//! run compare measurements taken close together.

use crate::cli::args::Settings;
use crate::engines::{Engine, EngineSpec, DRAM_SUFFIX};
use crate::measure::{processes, Spec};
use crate::workloads::bulk::{BULK_KEYS, BULK_UPDATE_PCT};
use crate::workloads::kinds::DataKind;
use crate::workloads::select::{
    WorkloadKind, C_SUFFIX, HOT_UPDATE_PCT, LATENCY_CONTROL, TATP_UPDATE_PCT, TPCC_UPDATE_PCT,
};
use crate::workloads::strmap::STRMAP_KEYS;
use crate::workloads::ycsb::YCSB_KEYS;
use pisces::PersistenceDomain;

/// One workload's share of the plan before it is expanded.
struct Part {
    /// Report name of the workload.
    name: String,
    data: DataKind,
    engines: Vec<EngineSpec>,
    mixes: Vec<u32>,
    latencies: Vec<u64>,
    threads: Vec<usize>,
}

fn plain(engines: &[Engine]) -> Vec<EngineSpec> {
    engines.iter().map(|&e| EngineSpec::plain(e)).collect()
}

/// The latency sweeps: engines that persist through the medium, on at least 2 threads.
fn latency_part(s: &Settings, w: WorkloadKind, notes: &mut Vec<String>) -> Part {
    let swept: Vec<Engine> = s
        .engines
        .iter()
        .copied()
        .filter(|e| e.persists() && e.flushes_through_medium())
        .collect();
    let engines = if swept.is_empty() {
        plain(&s.engines)
    } else {
        for &e in s.engines.iter().filter(|e| !swept.contains(e)) {
            let why = if e.persists() {
                "it flushes by itself; NVM latency cannot be emulated for it"
            } else {
                "it flushes nothing, so the emulated NVM latency cannot change it"
            };
            notes.push(format!("{}: {} skipped ({why})", w.name(), e.name()));
        }
        plain(&swept)
    };
    let mut threads: Vec<usize> = s.threads.iter().copied().filter(|&t| t >= 2).collect();
    if threads.is_empty() {
        threads = vec![2];
        notes.push(format!(
            "{}: needs concurrent writers, so it runs on 2 threads",
            w.name()
        ));
    }
    Part {
        name: w.name().into(),
        data: DataKind::Hash,
        engines,
        mixes: if w == WorkloadKind::LatencySplit {
            vec![100]
        } else {
            s.sweep_mixes.clone()
        },
        latencies: s.sweep_latencies.clone(),
        threads,
    }
}

/// The conflict-heavy mix: every engine (sp3 with and without early visibility) over
/// the latency sweep on at least 2 threads.
fn hot_part(s: &Settings, notes: &mut Vec<String>) -> Part {
    let mut engines = Vec::new();
    for &e in &s.engines {
        if e == Engine::SP3 {
            engines.extend(EngineSpec::sp3_visibility());
        } else {
            engines.push(EngineSpec::plain(e));
        }
    }
    let mut threads: Vec<usize> = s.threads.iter().copied().filter(|&t| t >= 2).collect();
    if threads.is_empty() {
        threads = vec![2];
        notes.push("hot: needs concurrent writers, so it runs on 2 threads".into());
    }
    Part {
        name: WorkloadKind::Hot.name().into(),
        data: DataKind::Hot,
        engines,
        mixes: vec![HOT_UPDATE_PCT],
        latencies: s.sweep_latencies.clone(),
        threads,
    }
}

/// The parts of workload `w` (the set workloads have one per size).
fn parts(s: &Settings, w: WorkloadKind, notes: &mut Vec<String>) -> Vec<Part> {
    let part = |data, mixes: &[u32]| Part {
        name: w.name().into(),
        data,
        engines: plain(&s.engines),
        mixes: mixes.to_vec(),
        latencies: s.latencies.clone(),
        threads: s.threads.clone(),
    };
    match w {
        WorkloadKind::Hash => vec![part(DataKind::Hash, &s.mixes)],
        WorkloadKind::Btree => vec![part(DataKind::Tree, &s.btree_mixes)],
        WorkloadKind::Latency | WorkloadKind::LatencySplit => vec![latency_part(s, w, notes)],
        WorkloadKind::Breakdown => vec![Part {
            engines: EngineSpec::breakdown().to_vec(),
            ..part(DataKind::Hash, &s.sweep_mixes)
        }],
        WorkloadKind::Markers => vec![Part {
            engines: EngineSpec::markers().to_vec(),
            latencies: s.marker_latencies.clone(),
            ..part(DataKind::Hash, &s.sweep_mixes)
        }],
        WorkloadKind::Tpcc => vec![part(DataKind::Tpcc, &[TPCC_UPDATE_PCT])],
        WorkloadKind::Tatp => vec![part(DataKind::Tatp, &[TATP_UPDATE_PCT])],
        WorkloadKind::Set => s
            .set_keys
            .iter()
            .map(|&n| Part {
                name: w.sized_name(n),
                engines: plain(&s.set_engines),
                threads: s.set_threads.clone(),
                ..part(DataKind::Set(n), &s.set_mixes)
            })
            .collect(),
        WorkloadKind::Hot => vec![hot_part(s, notes)],
        // Not a throughput measurement: `crate::recovery` runs it.
        WorkloadKind::Recovery => Vec::new(),
        // Not a throughput measurement: `crate::recovery::replay` runs it.
        WorkloadKind::Replay => Vec::new(),
        WorkloadKind::Capi => vec![part(DataKind::CapiHash { via_c: false }, &s.mixes)],
        WorkloadKind::TreeSet => s
            .tree_set_keys
            .iter()
            .map(|&n| Part {
                name: w.sized_name(n),
                engines: plain(&s.set_engines),
                threads: s.set_threads.clone(),
                ..part(DataKind::TreeSet(n), &s.set_mixes)
            })
            .collect(),
        WorkloadKind::Ycsb => vec![part(DataKind::Ycsb(YCSB_KEYS), &s.ycsb_mixes)],
        WorkloadKind::Strmap => vec![part(DataKind::StrMap(STRMAP_KEYS), &s.strmap_mixes)],
        WorkloadKind::Bulk => {
            if s.threads.iter().any(|&t| t != 1) {
                notes.push("bulk: one writer, so it runs on 1 thread".into());
            }
            vec![Part {
                threads: vec![1],
                ..part(DataKind::Bulk(BULK_KEYS), &[BULK_UPDATE_PCT])
            }]
        }
    }
}

/// Why workload `w` does not run in a `--dir` run (durable commits on a file
/// system), if it does not.
/// Why workload `w` does not run with `--durability deferred`, if it does not: only the
/// key-value data sets commit their updates with the durability the run asks for.
fn not_deferred(w: WorkloadKind) -> Option<&'static str> {
    match w {
        WorkloadKind::Hash
        | WorkloadKind::Btree
        | WorkloadKind::Set
        | WorkloadKind::TreeSet
        | WorkloadKind::Ycsb
        | WorkloadKind::Strmap
        | WorkloadKind::Bulk
        | WorkloadKind::Hot => None,
        _ => Some("its transactions commit durable on return"),
    }
}

fn not_on_disk(w: WorkloadKind) -> Option<&'static str> {
    match w {
        WorkloadKind::Latency | WorkloadKind::LatencySplit | WorkloadKind::Markers => Some(
            "it sweeps emulated NVM latency, which only the DRAM medium emulates; a file \
             system has its own",
        ),
        WorkloadKind::Recovery | WorkloadKind::Replay => {
            Some("its crash images are made under /dev/shm only")
        }
        _ => None,
    }
}

/// `p` without the engines that make nothing durable, when the run is on a file system
/// (`--dir`), with a note for each.
fn durable_only(s: &Settings, mut p: Part, notes: &mut Vec<String>) -> Part {
    if s.disk.is_none() {
        return p;
    }
    let (keep, skip): (Vec<EngineSpec>, Vec<EngineSpec>) =
        p.engines.into_iter().partition(|e| e.engine.persists());
    for e in skip {
        notes.push(format!(
            "{}: {} skipped (--dir measures durable commits; it makes nothing durable)",
            p.name, e.label
        ));
    }
    p.engines = keep;
    p
}

/// The measurements of engine `e` on `data`: one, except on the `capi` data set, where
/// each engine is measured twice back to back, from Rust (labelled with the engine's
/// name) and through the C interface (labelled `<engine>-c`).
fn variants(e: &EngineSpec, data: DataKind) -> Vec<(EngineSpec, DataKind)> {
    match data {
        DataKind::CapiHash { .. } => vec![
            (e.clone(), DataKind::CapiHash { via_c: false }),
            (
                e.relabelled(format!("{}{C_SUFFIX}", e.label)),
                DataKind::CapiHash { via_c: true },
            ),
        ],
        _ => vec![(e.clone(), data)],
    }
}

/// `p` without the engines that cannot run its data set (the peers on the data sets
/// that are not key-value tables), with a note for each.
fn runnable(mut p: Part, notes: &mut Vec<String>) -> Part {
    let (keep, skip): (Vec<EngineSpec>, Vec<EngineSpec>) =
        p.engines.into_iter().partition(|e| e.engine.runs(p.data));
    for e in skip {
        notes.push(format!(
            "{}: {} skipped (a key-value store: it runs hash, set, ycsb, strmap and bulk only)",
            p.name, e.label
        ));
    }
    p.engines = keep;
    p
}

/// `e` with the `--engine-options` of its engine, unless the plan gave it options.
fn with_engine_options(s: &Settings, e: EngineSpec) -> EngineSpec {
    match s.engine_options.iter().rev().find(|(x, _)| *x == e.engine) {
        Some((_, o)) if e.options().is_empty() => {
            let domain = e.domain;
            let mut x = EngineSpec::with_options(e.engine, e.label, o.clone());
            x.domain = domain;
            x
        }
        _ => e,
    }
}

/// True for the workloads measured with several processes too (`--processes`): their
/// data sets are found again from the pool's root.
fn shares(w: WorkloadKind) -> bool {
    matches!(
        w,
        WorkloadKind::Hash | WorkloadKind::Set | WorkloadKind::TreeSet
    )
}

/// `specs` without the measurements of several processes whose engine cannot share a
/// pool, with a note for each such engine configuration: `refusal` says why (the
/// library's reason, [`processes::sharing_refusal`]); it is asked once per
/// configuration.
pub fn without_refused(
    specs: Vec<Spec>,
    notes: &mut Vec<String>,
    refusal: impl Fn(&EngineSpec) -> Option<String>,
) -> Vec<Spec> {
    let mut asked: Vec<(String, Option<String>)> = Vec::new();
    specs
        .into_iter()
        .filter(|spec| {
            if spec.processes < 2 {
                return true;
            }
            let label = &spec.engine.label;
            if let Some((_, why)) = asked.iter().find(|(l, _)| l == label) {
                return why.is_none();
            }
            let why = refusal(&spec.engine);
            if let Some(w) = &why {
                notes.push(format!(
                    "{label} skipped (several processes on one pool: {w})"
                ));
            }
            asked.push((label.clone(), why.clone()));
            why.is_none()
        })
        .collect()
}

/// The measurements of one run, in order, and notes on choices the plan made.
pub fn plan(s: &Settings) -> (Vec<Spec>, Vec<String>) {
    let mut specs = Vec::new();
    let mut notes: Vec<String> = Engine::missing_note().into_iter().collect();
    for (e, o) in &s.engine_options {
        notes.push(format!("{} runs with the options `{o}`", e.name()));
    }
    if s.deferred {
        notes.push(
            "durability deferred: update transactions return once visible; each worker \
             waits for its commits' durability at its end, inside its measured time"
                .into(),
        );
    }
    let mut unemulated_skipped = Vec::new();
    let mut eadr_skipped = Vec::new();
    let multi: Vec<usize> = s.processes.iter().copied().filter(|&n| n > 1).collect();
    let mut one_process_noted: Vec<WorkloadKind> = Vec::new();
    for &w in &s.workloads {
        let needs_writers = matches!(
            w,
            WorkloadKind::Latency
                | WorkloadKind::LatencySplit
                | WorkloadKind::Breakdown
                | WorkloadKind::Markers
        );
        if s.disk.is_some() {
            if let Some(why) = not_on_disk(w) {
                notes.push(format!("{}: skipped with --dir ({why})", w.name()));
                continue;
            }
        }
        if s.deferred {
            if let Some(why) = not_deferred(w) {
                notes.push(format!(
                    "{}: skipped with --durability deferred ({why})",
                    w.name()
                ));
                continue;
            }
        }
        for p in parts(s, w, &mut notes) {
            let mut p = durable_only(s, runnable(p, &mut notes), &mut notes);
            if s.deferred {
                let (keep, skip): (Vec<EngineSpec>, Vec<EngineSpec>) = p
                    .engines
                    .into_iter()
                    .partition(|e| e.engine.peer().is_none());
                for e in skip {
                    notes.push(format!(
                        "{}: {} skipped (--durability deferred applies to the library's \
                         engines; the peers commit at their durable setting)",
                        p.name, e.label
                    ));
                }
                p.engines = keep;
            }
            if p.mixes.is_empty() && needs_writers {
                notes.push(format!(
                    "{}: skipped (it needs an update percentage above 0)",
                    p.name
                ));
            }
            // The measurements with several processes of this part, if any.
            let shared_part = !multi.is_empty() && shares(w);
            let in_process = !shared_part || s.processes.contains(&1);
            if !multi.is_empty() && !shares(w) && !one_process_noted.contains(&w) {
                one_process_noted.push(w);
                notes.push(format!(
                    "{}: runs in one process only (--processes applies to hash, set and \
                     tree-set)",
                    w.name()
                ));
            }
            for &update_pct in &p.mixes {
                for &nvm_latency_ns in &p.latencies {
                    // This configuration's measurements, in the order of their worker
                    // counts (each measurement with several processes right after the
                    // one of as many threads in one process).
                    let mut group: Vec<Spec> = Vec::new();
                    for &t in &p.threads {
                        for e in &p.engines {
                            if s.disk.is_some() && nvm_latency_ns > 0 {
                                // No latency is emulated on a file system (`hot`'s
                                // sweep runs at 0 ns only).
                                continue;
                            }
                            if !e.engine.flushes_through_medium() && nvm_latency_ns > 0 {
                                if !unemulated_skipped.contains(&e.engine) {
                                    unemulated_skipped.push(e.engine);
                                }
                                continue;
                            }
                            for &domain in &s.domains {
                                if domain == PersistenceDomain::Eadr
                                    && !e.engine.flushes_through_medium()
                                {
                                    if !eadr_skipped.contains(&e.engine) {
                                        eadr_skipped.push(e.engine);
                                    }
                                    continue;
                                }
                                for (engine, data) in variants(&e.under(domain), p.data) {
                                    let engine = with_engine_options(s, engine);
                                    let spec = Spec {
                                        engine,
                                        workload: p.name.clone(),
                                        data,
                                        threads: t,
                                        update_pct,
                                        dedicated_reader: w == WorkloadKind::LatencySplit,
                                        nvm_latency_ns,
                                        waits_outside: false,
                                        disk: s.disk.clone(),
                                        deferred: s.deferred,
                                        processes: 1,
                                    };
                                    // The sweep's control, next to the measurement it
                                    // controls (same load on the machine).
                                    let control = (w == WorkloadKind::Latency
                                        && nvm_latency_ns > 0
                                        && Some(&nvm_latency_ns) == p.latencies.iter().max())
                                    .then(|| Spec {
                                        workload: LATENCY_CONTROL.into(),
                                        waits_outside: true,
                                        ..spec.clone()
                                    });
                                    // Read-only on a file system: the same measurement
                                    // on the DRAM medium next to it, since reads should
                                    // cost the same on both (`medium_table`).
                                    let dram = (s.disk.is_some()
                                        && update_pct == 0
                                        && spec.engine.engine.peer().is_none())
                                    .then(|| Spec {
                                        engine: spec.engine.relabelled(format!(
                                            "{}{DRAM_SUFFIX}",
                                            spec.engine.label
                                        )),
                                        disk: None,
                                        ..spec.clone()
                                    });
                                    if shared_part {
                                        for &n in &multi {
                                            if spec.engine.engine.peer().is_some() {
                                                let note = format!(
                                                    "{}: {} runs in one process only (a \
                                                     key-value store on its own files)",
                                                    p.name, spec.engine.label
                                                );
                                                if !notes.contains(&note) {
                                                    notes.push(note);
                                                }
                                                continue;
                                            }
                                            group.push(Spec {
                                                engine: spec.engine.relabelled(processes::label(
                                                    &spec.engine.label,
                                                    n,
                                                )),
                                                processes: n,
                                                ..spec.clone()
                                            });
                                        }
                                    }
                                    if in_process {
                                        group.push(spec);
                                        group.extend(control);
                                        group.extend(dram);
                                    }
                                }
                            }
                        }
                    }
                    // Stable: engines, then one process before several.
                    group.sort_by_key(|x| (x.threads * x.processes, x.processes > 1));
                    specs.extend(group);
                }
            }
        }
    }
    for e in eadr_skipped {
        notes.push(format!(
            "{} runs only under adr (it does not flush through the medium, so the \
             domain does not reach it)",
            e.name()
        ));
    }
    for e in unemulated_skipped {
        notes.push(format!(
            "{} runs only at 0 ns emulated latency (it flushes by itself, so no latency \
             can be added to it)",
            e.name()
        ));
    }
    (specs, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::tests::parse;
    use crate::workloads::Sizes;

    /// `--processes 1,2`: the workloads that share get a measurement of 2 processes
    /// of each thread count, labelled apart and placed right after the measurement of
    /// as many threads in one process; the others run in one process with a note, as
    /// do the peers; without 1 only the measurements of several processes run there.
    #[test]
    fn processes_are_measured_beside_as_many_threads() {
        let s = parse(&[
            "--engines",
            "pisces,undo,redb",
            "--workloads",
            "hash,btree",
            "--update-pct",
            "20",
            "--threads",
            "1,2",
            "--processes",
            "2,1",
        ])
        .unwrap()
        .settings();
        assert_eq!(s.processes, [1, 2]);
        let (specs, notes) = plan(&s);
        let hash: Vec<(String, usize, usize)> = specs
            .iter()
            .filter(|x| x.workload == "hash")
            .map(|x| (x.engine.label.clone(), x.threads, x.processes))
            .collect();
        let want: Vec<(String, usize, usize)> = [
            ("pisces", 1, 1),
            ("undo", 1, 1),
            ("redb", 1, 1),
            ("pisces", 2, 1),
            ("undo", 2, 1),
            ("redb", 2, 1),
            ("pisces@2proc", 1, 2),
            ("undo@2proc", 1, 2),
            ("pisces@2proc", 2, 2),
            ("undo@2proc", 2, 2),
        ]
        .iter()
        .map(|&(e, t, p)| (e.to_string(), t, p))
        .collect();
        assert_eq!(hash, want);
        assert!(specs
            .iter()
            .filter(|x| x.workload == "btree")
            .all(|x| x.processes == 1));
        let notes = plan_notes(notes);
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("btree: runs in one process only")),
            "{notes:?}"
        );
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("hash: redb runs in one process only")),
            "{notes:?}"
        );
        // Without 1: only the measurements of several processes, where they apply.
        let s = parse(&[
            "--engines",
            "pisces",
            "--workloads",
            "hash,btree",
            "--processes",
            "2",
        ])
        .unwrap()
        .settings();
        let (specs, _) = plan(&s);
        assert!(specs
            .iter()
            .all(|x| (x.workload == "hash") == (x.processes == 2)));
        assert!(parse(&["--processes", "0"]).is_err());
        assert!(parse(&["--processes", "2", "--dir", "d"]).is_err());
    }

    /// An engine that cannot share a pool loses its measurements of several processes
    /// (asked once per configuration), with the reason in a note; the rest stay.
    #[test]
    fn refused_engines_are_skipped_with_their_reason() {
        let s = parse(&[
            "--engines",
            "pisces,undo",
            "--workloads",
            "hash",
            "--processes",
            "1,2",
        ])
        .unwrap()
        .settings();
        let (specs, _) = plan(&s);
        let n = specs.len();
        let mut notes = Vec::new();
        let asked = std::cell::Cell::new(0);
        let kept = without_refused(specs, &mut notes, |e| {
            asked.set(asked.get() + 1);
            (e.engine == Engine::UNDO).then(|| "no sharing here".to_string())
        });
        assert_eq!(asked.get(), 2, "once per configuration");
        assert!(kept.iter().all(|x| x.engine.label != "undo@2proc"));
        assert!(kept.iter().any(|x| x.engine.label == "undo"));
        assert!(kept.iter().any(|x| x.engine.label == "pisces@2proc"));
        // 3 mixes x 2 thread counts of undo@2proc.
        assert_eq!(kept.len(), n - 6);
        assert_eq!(
            notes,
            ["undo@2proc skipped (several processes on one pool: no sharing here)"]
        );
    }

    /// `notes` without the note that this build lacks an engine (present exactly when
    /// it does).
    fn plan_notes(notes: Vec<String>) -> Vec<String> {
        let (missing, rest): (Vec<String>, Vec<String>) = notes
            .into_iter()
            .partition(|n| n.starts_with("pmdk skipped: this build"));
        assert_eq!(missing.len(), usize::from(!Engine::PMDK.in_build()));
        rest
    }

    #[test]
    fn quick_defaults_plan_every_engine_workload_and_mix() {
        let s = parse(&[]).unwrap().settings();
        assert_eq!(s.mode, "quick");
        assert_eq!(s.sizes, Sizes::QUICK);
        assert_eq!((s.seconds, s.runs), (0.4, 3));
        let (specs, notes) = plan(&s);
        let notes = plan_notes(notes);
        let count = |w: &str| specs.iter().filter(|x| x.workload == w).count();
        // Every engine of the build x 2 thread counts x 3 mixes (B+-tree: 2).
        let engines = Engine::available().len();
        assert_eq!(
            engines,
            pisces::EngineId::ALL
                .iter()
                .filter(|e| e.available())
                .count()
        );
        assert_eq!(count("hash"), engines * 6);
        assert_eq!(count("btree"), engines * 4);
        // The durable engines that flush through the medium (pisces, undo, mvcc, sp3,
        // ...; not volatile, bare or pmdk) x 5 latencies on 2 threads.
        let persisting = Engine::available()
            .into_iter()
            .filter(|e| e.persists() && e.flushes_through_medium())
            .count();
        assert!(persisting >= 3);
        assert_eq!(count("latency"), persisting * 5);
        assert!(specs
            .iter()
            .filter(|x| x.workload == "latency")
            .all(|x| x.threads == 2
                && x.update_pct == 20
                && x.engine.label != "volatile"
                && x.engine.label != "pmdk"));
        // The control: each of them once more at the largest latency, waits outside,
        // measured right after the sweep's measurement it controls.
        assert_eq!(count(LATENCY_CONTROL), persisting);
        for (i, c) in specs.iter().enumerate() {
            assert_eq!(c.waits_outside, c.workload == LATENCY_CONTROL);
            if c.waits_outside {
                let sweep = &specs[i - 1];
                assert_eq!(sweep.workload, "latency");
                assert_eq!(
                    (
                        &sweep.engine.label,
                        sweep.threads,
                        sweep.update_pct,
                        sweep.nvm_latency_ns
                    ),
                    (&c.engine.label, c.threads, c.update_pct, 1000)
                );
                assert_eq!(c.nvm_latency_ns, 1000);
            }
        }
        // 3 Pisces variants x 2 thread counts.
        assert_eq!(count("breakdown"), 6);
        let labels: Vec<_> = specs
            .iter()
            .filter(|x| x.workload == "breakdown")
            .map(|x| x.engine.label.as_str())
            .collect();
        assert_eq!(labels[..3], ["pisces-whole", "pisces-diff", "pisces"]);
        assert!(notes.iter().any(|n| n.contains("volatile skipped")));
        assert_eq!(
            notes
                .iter()
                .any(|n| n.contains("pmdk skipped (it flushes by itself")),
            Engine::PMDK.in_build()
        );
        // Engines of one configuration are measured back to back.
        let first: Vec<_> = specs[..engines]
            .iter()
            .map(|x| x.engine.label.as_str())
            .collect();
        let want: Vec<_> = Engine::available().iter().map(|e| e.name()).collect();
        assert_eq!(first, want);
        // The sets run in the main job in a reduced form: pisces, undo, bare and the
        // peers (not on the tree), 1 thread, 1 and 10 % updates, 0 ns.
        for (w, engines) in [
            (
                "set-1k",
                &["pisces", "undo", "bare", "redb", "lmdb", "canopydb"][..],
            ),
            (
                "set-100k",
                &["pisces", "undo", "bare", "redb", "lmdb", "canopydb"][..],
            ),
            ("tree-set-1k", &["pisces", "undo", "bare"][..]),
            ("tree-set-100k", &["pisces", "undo", "bare"][..]),
        ] {
            let of: Vec<&Spec> = specs.iter().filter(|x| x.workload == w).collect();
            let labels: Vec<&str> = of[..engines.len()]
                .iter()
                .map(|x| x.engine.label.as_str())
                .collect();
            assert_eq!(labels, engines, "{w}");
            assert_eq!(of.len(), engines.len() * 2, "{w}");
            assert!(of.iter().all(|x| x.threads == 1
                && x.nvm_latency_ns == 0
                && [1, 10].contains(&x.update_pct)));
        }
        assert!(notes.iter().any(|n| n
            == "tree-set-1k: redb skipped (a key-value store: it runs hash, set, ycsb, strmap and bulk only)"));
        // Named, the sets run with the engines, threads and mixes of the run.
        let s = parse(&["--workloads", "set", "--set-keys", "1000"])
            .unwrap()
            .settings();
        let (specs, _) = plan(&s);
        assert_eq!(specs.len(), engines * 2 * 3);
        let s = parse(&["--engines", "pisces", "--threads", "2"])
            .unwrap()
            .settings();
        assert_eq!(
            (s.set_engines.as_slice(), s.set_threads.as_slice()),
            (&[Engine::PISCES][..], &[2][..])
        );
    }

    #[test]
    fn marker_ablation_runs_both_schemes_at_0_and_1000_ns() {
        let s = parse(&["--workloads", "markers"]).unwrap().settings();
        let (specs, _) = plan(&s);
        // 2 schemes x 2 latencies x 2 thread counts, 20 % updates.
        assert_eq!(specs.len(), 8);
        assert!(specs
            .iter()
            .all(|x| x.workload == "markers" && x.update_pct == 20 && x.data == DataKind::Hash));
        let got: Vec<(&str, u64, usize)> = specs
            .iter()
            .map(|x| (x.engine.label.as_str(), x.nvm_latency_ns, x.threads))
            .collect();
        assert_eq!(got[..2], [("spht-nvhtm", 0, 1), ("spht", 0, 1)]);
        assert!(got.contains(&("spht", 1000, 2)));
        let s = parse(&["--workloads", "markers", "--nvm-latency-ns", "300"])
            .unwrap()
            .settings();
        assert!(plan(&s).0.iter().all(|x| x.nvm_latency_ns == 300));
    }

    #[test]
    fn pmdk_runs_only_where_latency_is_not_emulated() {
        if !Engine::PMDK.in_build() {
            println!("skipped: pmdk not in this build");
            return;
        }
        let s = parse(&["--engines", "pisces,pmdk", "--nvm-latency-ns", "0,300"])
            .unwrap()
            .settings();
        let (specs, notes) = plan(&s);
        assert!(specs.iter().any(|x| x.engine.engine == Engine::PMDK));
        assert!(specs
            .iter()
            .all(|x| x.engine.engine != Engine::PMDK || x.nvm_latency_ns == 0));
        assert!(specs
            .iter()
            .any(|x| x.engine.engine == Engine::PISCES && x.nvm_latency_ns == 300));
        assert!(notes.iter().any(|n| n.contains("pmdk runs only at 0 ns")));
    }

    #[test]
    fn explicit_lists_apply_to_every_workload() {
        let s = parse(&[
            "--engines",
            "undo,pisces,undo",
            "--threads",
            "2,1,2",
            "--update-pct",
            "20,0",
            "--nvm-latency-ns",
            "300",
            "--workloads",
            "latency,hash",
            "--seconds",
            "0.5",
            "--runs",
            "1",
        ])
        .unwrap()
        .settings();
        let (specs, _) = plan(&s);
        assert_eq!(specs[0].workload, "latency");
        // The latency sweep's control at its largest (only) latency, per engine.
        assert_eq!(specs[1].workload, LATENCY_CONTROL);
        assert_eq!(specs.len(), 2 * 2 + 2 * 2 * 2);
        assert!(specs.iter().all(|x| x.nvm_latency_ns == 300));
    }

    #[test]
    fn workloads_needing_writers_skip_zero_percent() {
        let s = parse(&["--update-pct", "0", "--workloads", "breakdown"])
            .unwrap()
            .settings();
        let (specs, notes) = plan(&s);
        let notes = plan_notes(notes);
        assert!(specs.is_empty());
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("breakdown: skipped"), "{notes:?}");
        let s = parse(&["--threads", "1", "--workloads", "latency"])
            .unwrap()
            .settings();
        let (specs, notes) = plan(&s);
        assert!(specs.iter().all(|x| x.threads == 2));
        assert!(notes.iter().any(|n| n.contains("2 threads")), "{notes:?}");
    }

    #[test]
    fn tpcc_and_tatp_run_their_own_mix_in_full_mode_or_when_named() {
        let s = parse(&[]).unwrap().settings();
        assert!(!s.workloads.contains(&WorkloadKind::Tpcc));
        assert!(!s.workloads.contains(&WorkloadKind::Tatp));
        let s = parse(&["--full"]).unwrap().settings();
        assert!(s
            .workloads
            .ends_with(&[WorkloadKind::Tpcc, WorkloadKind::Tatp]));
        let s = parse(&[
            "--workloads",
            "tpcc,tatp",
            "--engines",
            "pisces,undo",
            "--update-pct",
            "0,40",
            "--tatp-subscribers",
            "1000",
        ])
        .unwrap()
        .settings();
        assert_eq!(s.sizes.tatp_subscribers, 1000);
        assert_eq!(s.sizes.tpcc_items, Sizes::QUICK.tpcc_items);
        let (specs, notes) = plan(&s);
        let notes = plan_notes(notes);
        assert!(notes.is_empty(), "{notes:?}");
        // 2 engines x 2 thread counts each, one mix each.
        assert_eq!(specs.len(), 8);
        for x in &specs {
            match x.workload.as_str() {
                "tpcc" => assert_eq!((x.data, x.update_pct), (DataKind::Tpcc, 100)),
                "tatp" => assert_eq!((x.data, x.update_pct), (DataKind::Tatp, 20)),
                w => panic!("{w}"),
            }
        }
    }

    #[test]
    fn hot_runs_sp3_with_and_without_early_visibility_on_two_threads() {
        let s = parse(&["--workloads", "hot,recovery", "--engines", "undo,sp3"])
            .unwrap()
            .settings();
        let (specs, notes) = plan(&s);
        assert!(plan_notes(notes).is_empty());
        // 3 configurations x 5 latencies, 2 threads only (the default 1 is dropped),
        // every transaction an update; recovery adds no throughput measurement.
        assert_eq!(specs.len(), 15);
        assert!(specs.iter().all(|x| x.workload == "hot"
            && x.data == DataKind::Hot
            && x.threads == 2
            && x.update_pct == 100));
        let labels: Vec<&str> = specs[..3].iter().map(|x| x.engine.label.as_str()).collect();
        assert_eq!(labels, ["undo", "sp3", "sp3-no-ev"]);
        let lat: Vec<u64> = specs.iter().step_by(3).map(|x| x.nvm_latency_ns).collect();
        assert_eq!(lat, [0, 100, 300, 600, 1000]);
        let s = parse(&[
            "--workloads",
            "hot",
            "--threads",
            "1",
            "--nvm-latency-ns",
            "0,300,1000",
        ])
        .unwrap()
        .settings();
        let (specs, notes) = plan(&s);
        assert!(notes
            .iter()
            .any(|n| n.contains("hot: needs concurrent writers")));
        assert!(specs.iter().all(|x| x.threads == 2));
        assert_eq!(
            specs
                .iter()
                .filter(|x| x.engine.label == "sp3-no-ev")
                .count(),
            3
        );
    }

    #[test]
    fn capi_measures_each_engine_from_rust_then_from_c() {
        let s = parse(&[]).unwrap().settings();
        assert!(!s.workloads.contains(&WorkloadKind::Capi));
        let s = parse(&[
            "--workloads",
            "capi",
            "--engines",
            "pisces,undo",
            "--threads",
            "1",
            "--update-pct",
            "0,20",
        ])
        .unwrap()
        .settings();
        let (specs, _) = plan(&s);
        let got: Vec<(&str, DataKind, u32)> = specs
            .iter()
            .map(|x| (x.engine.label.as_str(), x.data, x.update_pct))
            .collect();
        let rust = DataKind::CapiHash { via_c: false };
        let c = DataKind::CapiHash { via_c: true };
        assert_eq!(
            got,
            [
                ("pisces", rust, 0),
                ("pisces-c", c, 0),
                ("undo", rust, 0),
                ("undo-c", c, 0),
                ("pisces", rust, 20),
                ("pisces-c", c, 20),
                ("undo", rust, 20),
                ("undo-c", c, 20),
            ]
        );
        assert!(specs.iter().all(|x| x.workload == "capi"
            && x.engine.engine
                == if x.engine.label.starts_with("undo") {
                    Engine::UNDO
                } else {
                    Engine::PISCES
                }));
        // A C handle per worker besides the Rust ones.
        assert_eq!(c.thread_slots(2), 5);
        assert_eq!(DataKind::Hash.thread_slots(2), 3);
    }

    #[test]
    fn sets_run_once_per_size_with_their_own_mixes() {
        let s = parse(&["--workloads", "set,tree-set", "--engines", "pisces,undo"])
            .unwrap()
            .settings();
        let (specs, notes) = plan(&s);
        assert!(plan_notes(notes).is_empty());
        let names: Vec<&str> = specs.iter().map(|x| x.workload.as_str()).collect();
        for (w, data) in [
            ("set-1k", DataKind::Set(1000)),
            ("set-100k", DataKind::Set(100_000)),
            ("tree-set-1k", DataKind::TreeSet(1000)),
            ("tree-set-100k", DataKind::TreeSet(100_000)),
        ] {
            let of: Vec<&Spec> = specs.iter().filter(|x| x.workload == w).collect();
            // 2 engines x 2 thread counts x mixes 1, 10, 100 %.
            assert_eq!(of.len(), 12, "{w}: {names:?}");
            assert!(of.iter().all(|x| x.data == data));
            let mut mixes: Vec<u32> = of.iter().map(|x| x.update_pct).collect();
            mixes.dedup();
            assert_eq!(mixes, [1, 10, 100], "{w}");
        }
        assert_eq!(specs.len(), 48);
        let s = parse(&[
            "--full",
            "--workloads",
            "tree-set",
            "--engines",
            "pisces",
            "--update-pct",
            "0",
            "--threads",
            "1",
        ])
        .unwrap()
        .settings();
        let (specs, _) = plan(&s);
        let got: Vec<(&str, u32)> = specs
            .iter()
            .map(|x| (x.workload.as_str(), x.update_pct))
            .collect();
        assert_eq!(got, [("tree-set-1k", 0), ("tree-set-1m", 0)]);
        let s = parse(&["--workloads", "set", "--set-keys", "500,500,200"])
            .unwrap()
            .settings();
        assert_eq!(s.set_keys, [200, 500]);
    }

    /// `--durability deferred`: the key-value workloads of the library's engines, each
    /// measurement deferred, the peers and the other workloads left out with a note.
    #[test]
    fn a_deferred_run_plans_the_library_on_the_key_value_workloads() {
        let s = parse(&[
            "--dir",
            "/d",
            "--durability",
            "deferred",
            "--engines",
            "pisces,redb",
            "--workloads",
            "hash,tpcc",
        ])
        .unwrap()
        .settings();
        assert!(s.deferred);
        let (specs, notes) = plan(&s);
        assert!(!specs.is_empty());
        assert!(specs
            .iter()
            .all(|x| x.deferred && x.engine.engine == Engine::PISCES && x.workload == "hash"));
        assert!(
            notes.iter().any(|n| n.starts_with("hash: redb skipped")),
            "{notes:?}"
        );
        assert!(
            notes.iter().any(|n| n.starts_with("tpcc: skipped")),
            "{notes:?}"
        );
        let on_return = parse(&["--dir", "/d"]).unwrap().settings();
        assert!(!on_return.deferred && plan(&on_return).0.iter().all(|x| !x.deferred));
        let e = parse(&["--durability", "later"]).err().unwrap();
        assert!(e.contains("on-return, deferred"), "{e}");
    }

    /// `--dir`: its defaults (the durable engines and the peers; hash at 20 %, ycsb A,
    /// the bulk load on one writer), every measurement on the directory, the engines
    /// that make nothing durable and the emulated-latency workloads left out with a
    /// reason, and the emulated-PM options refused.
    #[test]
    fn a_dir_run_plans_durable_engines_on_the_directory() {
        let s = parse(&["--dir", "/some/where"]).unwrap().settings();
        assert_eq!(s.runs, 1);
        let (specs, _) = plan(&s);
        let mut engines: Vec<Engine> = Vec::new();
        for sp in &specs {
            assert_eq!(
                sp.disk.as_deref(),
                Some(std::path::Path::new("/some/where"))
            );
            assert_eq!(sp.nvm_latency_ns, 0);
            if !engines.contains(&sp.engine.engine) {
                engines.push(sp.engine.engine);
            }
        }
        assert_eq!(engines, Engine::disk_defaults());
        assert!(engines.iter().all(|e| e.persists()));
        assert!(engines.contains(&Engine::REDB) && !engines.contains(&Engine::VOLATILE));
        let shape = |w: &str| {
            let mut v: Vec<(u32, usize)> = specs
                .iter()
                .filter(|x| x.workload == w)
                .map(|x| (x.update_pct, x.threads))
                .collect();
            v.dedup();
            v.sort_unstable();
            v.dedup();
            v
        };
        assert_eq!(shape("hash"), [(20, 1), (20, 2)]);
        assert_eq!(shape("ycsb"), [(50, 1), (50, 2)]);
        assert_eq!(shape("bulk"), [(100, 1)]);
        assert_eq!(specs.len(), engines.len() * 5);
        assert!(specs
            .iter()
            .filter(|x| x.workload == "bulk")
            .all(|x| x.data == DataKind::Bulk(BULK_KEYS)));

        let s = parse(&[
            "--dir",
            "/d",
            "--engines",
            "pisces,volatile,bare",
            "--workloads",
            "latency,btree,recovery",
            "--threads",
            "2",
        ])
        .unwrap()
        .settings();
        let (specs, notes) = plan(&s);
        let notes = plan_notes(notes);
        assert!(specs
            .iter()
            .all(|x| x.workload == "btree" && x.engine.engine == Engine::PISCES));
        for want in [
            "latency: skipped with --dir (it sweeps emulated NVM latency",
            "recovery: skipped with --dir",
            "btree: volatile skipped (--dir measures durable commits",
            "btree: bare skipped (--dir measures durable commits",
        ] {
            assert!(
                notes.iter().any(|n| n.starts_with(want)),
                "{want}: {notes:?}"
            );
        }
        // Without --dir nothing of this applies.
        let (specs, _) = plan(&parse(&["--workloads", "bulk"]).unwrap().settings());
        assert!(specs.iter().all(|x| x.disk.is_none() && x.threads == 1));
        for bad in [
            vec!["--dir", "/d", "--nvm-latency-ns", "100"],
            vec!["--dir", "/d", "--domain", "eadr"],
        ] {
            let e = parse(&bad).err().unwrap();
            assert!(e.contains("cannot be used with"), "{bad:?}: {e}");
        }
        assert!(!parse(&["--dir", "/d"]).unwrap().is_main_job());
    }

    #[test]
    fn each_engine_runs_under_each_domain_that_reaches_it() {
        let s = parse(&[
            "--engines",
            "pisces,undo,redb",
            "--workloads",
            "hash",
            "--update-pct",
            "20",
            "--threads",
            "1",
            "--domain",
            "adr,eadr",
        ])
        .unwrap()
        .settings();
        let (specs, notes) = plan(&s);
        let got: Vec<(&str, PersistenceDomain)> = specs
            .iter()
            .map(|x| (x.engine.label.as_str(), x.engine.domain))
            .collect();
        use PersistenceDomain::{Adr, Eadr};
        assert_eq!(
            got,
            [
                ("pisces", Adr),
                ("pisces@eadr", Eadr),
                ("undo", Adr),
                ("undo@eadr", Eadr),
                ("redb", Adr)
            ]
        );
        assert!(notes
            .iter()
            .any(|n| n.starts_with("redb runs only under adr")));
        let cfg = specs[1]
            .engine
            .config(1 << 24, pisces::MediumKind::DRAM, 2, 1 << 16);
        assert_eq!(cfg.persistence_domain, Some(Eadr));
        assert!(parse(&["--domain", "page-cache"]).is_err());
    }

    #[test]
    fn peers_run_the_key_value_workloads_at_zero_latency_only() {
        let s = parse(&[
            "--engines",
            "pisces,redb,lmdb",
            "--workloads",
            "ycsb,set,btree,latency",
            "--set-keys",
            "1000",
            "--nvm-latency-ns",
            "0,300",
        ])
        .unwrap()
        .settings();
        let (specs, notes) = plan(&s);
        let notes = plan_notes(notes);
        let of = |w: &str, e: &str| {
            specs
                .iter()
                .filter(|x| x.workload == w && x.engine.label == e)
                .count()
        };
        // ycsb: A, B, C x 2 thread counts; the peers only at 0 ns.
        assert_eq!(of("ycsb", "pisces"), 3 * 2 * 2);
        assert_eq!(of("ycsb", "redb"), 3 * 2);
        assert_eq!(of("ycsb", "lmdb"), 3 * 2);
        assert!(specs
            .iter()
            .filter(|x| x.workload == "ycsb")
            .all(|x| x.data == DataKind::Ycsb(YCSB_KEYS)));
        let mut mixes: Vec<u32> = specs
            .iter()
            .filter(|x| x.workload == "ycsb")
            .map(|x| x.update_pct)
            .collect();
        mixes.dedup();
        assert_eq!(mixes, [50, 5, 0], "A, B, C: {mixes:?}");
        assert_eq!(of("set-1k", "lmdb"), 3 * 2);
        // Not on the tree or the latency sweep, with a note saying why.
        for e in ["redb", "lmdb"] {
            assert_eq!(of("btree", e) + of("latency", e), 0);
            assert!(notes.iter().any(|n| n
                == &format!(
                    "btree: {e} skipped (a key-value store: it runs hash, set, ycsb, strmap and bulk only)"
                )));
            assert!(notes
                .iter()
                .any(|n| n.starts_with(&format!("{e} runs only at 0 ns"))));
        }
        assert!(of("btree", "pisces") > 0);
        let s = parse(&["--workloads", "ycsb", "--engines", "bare"])
            .unwrap()
            .settings();
        let (specs, _) = plan(&s);
        let got: Vec<u32> = specs.iter().map(|x| x.update_pct).collect();
        assert_eq!(got, [50, 50, 5, 5, 0, 0], "A, B, C by default");
    }
}
