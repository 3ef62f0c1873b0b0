//! The checker: history → dependency graph → cycles, plus the local, order and recovery
//! checks of the sibling modules.
//!
//! # Edges (Adya's direct serialization graph, inferred from list-append reads)
//! With the version order of each key (`versions.rs`), for transactions that took
//! effect (committed or indeterminate; aborted attempts are not nodes):
//! * **ww** `A → B`: B appended the element right after A's in some key's order;
//! * **wr** `A → B`: B's external read of a key ends with A's append;
//! * **rw** `A → B`: A's external read of a key is a prefix of the order and B appended
//!   the element right after it (A did not see B's append);
//! * **rt** (histories spanning crashes): one node per recovery, with an edge from every
//!   transaction of the epoch before it and to every transaction of the epoch after it.
//!
//! # Cycle search and classification
//! As in Elle: components first (`graph.rs`), then, per edge that can start a cycle of a
//! class, a shortest cycle through it, using only the edge kinds the class allows.
//! Classes are searched strongest first and a cycle (as a node sequence) is reported
//! once, under the first class that finds it:
//! 1. **G0** from each ww edge, over ww edges;
//! 2. **G1c** from each wr edge, over ww + wr;
//! 3. from each rw edge (that is not also ww or wr: such a cycle is found above as a
//!    stronger one): **G-single** if a ww + wr path closes it; else **G-nonadjacent** if
//!    a path with no two adjacent rw edges (cyclically) and another rw edge closes it;
//!    else **G2-item** if any path closes it — then two of its rw edges are adjacent:
//!    write skew;
//! 4. **crash order** from each recovery node, over every kind.
//!
//! Counts of cycle classes are distinct cycles found, at most one per starting edge.

use super::anomaly::{Anomaly, EdgeKind, GraphStats, Report, Step};
use super::fasthash::FastSet;
use super::graph::{canonical, CycleEdge, Graph, GraphBuilder, Searcher, ALL, DEPS, WW_WR};
use super::history::{History, Op, Outcome, Value};
use super::index::Index;
use super::versions::{self, Orders};
use super::{local, recovery};
use std::fmt::Write as _;

/// Checker settings.
#[derive(Clone, Copy, Debug)]
pub struct CheckOptions {
    /// State visits each cycle class may spend in breadth-first searches; beyond it the
    /// counts are lower bounds (reported in [`GraphStats::search_truncated`]).
    pub search_budget: u64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            search_budget: 50_000_000,
        }
    }
}

/// Check a history with the default options.
///
/// ```
/// use pisces_verify::sicheck::{check, Anomaly, History, Isolation, Txn};
/// // Write skew: both read x and y, each appends to a different one.
/// let h: History = [
///     Txn::committed(0).r(1, &[]).r(2, &[]).a(1, 10),
///     Txn::committed(1).r(1, &[]).r(2, &[]).a(2, 20),
///     Txn::committed(2).r(1, &[10]).r(2, &[20]),
/// ]
/// .into_iter()
/// .collect();
/// let report = check(&h);
/// assert_eq!(report.count(Anomaly::G2Item), 1);
/// assert_eq!(report.forbidden(Isolation::Snapshot), 0);
/// assert_eq!(report.forbidden(Isolation::Serializable), 1);
/// ```
pub fn check(h: &History) -> Report {
    check_with(h, &CheckOptions::default())
}

/// Check a history.
pub fn check_with(h: &History, opts: &CheckOptions) -> Report {
    let ix = Index::new(h);
    let mut report = Report {
        transactions: h.effective_count(),
        aborted: h.count(Outcome::Aborted),
        indeterminate: h.count(Outcome::Indeterminate),
        keys: ix.keys.len(),
        ..Report::default()
    };
    local::check(&ix, &mut report);
    let orders = versions::infer(&ix, &mut report);
    recovery::check(&ix, &mut report);
    let g = build_graph(&ix, &orders);
    cycles(&ix, &orders, &g, opts, &mut report);
    report
}

fn is_prefix(short: &[Value], long: &[Value]) -> bool {
    short.len() <= long.len() && long[..short.len()] == *short
}

/// Nodes: one per transaction that took effect, then one per recovery.
fn build_graph(ix: &Index<'_>, orders: &Orders) -> Graph {
    let n = ix.txn_of.len();
    let recoveries = ix.max_epoch as usize;
    let mut b = GraphBuilder::new(n + recoveries);
    let node = |v: Value, key| ix.writer_on(key, v).and_then(|w| ix.node_of[w.txn]);
    for (key, _, order) in orders.iter() {
        for pair in order.windows(2) {
            if let (Some(a), Some(c)) = (node(pair[0], key), node(pair[1], key)) {
                b.add(a, c, EdgeKind::Ww);
            }
        }
    }
    for r in &ix.ext_reads {
        let Some(reader) = ix.node_of[r.txn] else {
            continue;
        };
        if let Some(w) = r.list.last().and_then(|v| node(*v, r.key)) {
            b.add(w, reader, EdgeKind::Wr);
        }
        let order = orders.get(r.key, ix.epoch(r.txn));
        if is_prefix(&r.list, order) {
            if let Some(next) = order.get(r.list.len()).and_then(|v| node(*v, r.key)) {
                b.add(reader, next, EdgeKind::Rw);
            }
        }
    }
    for (v, &t) in ix.txn_of.iter().enumerate() {
        let e = ix.epoch(t) as usize;
        if e < recoveries {
            b.add(v, n + e, EdgeKind::Rt);
        }
        if e > 0 {
            b.add(n + e - 1, v, EdgeKind::Rt);
        }
    }
    for r in 1..recoveries {
        b.add(n + r - 1, n + r, EdgeKind::Rt);
    }
    b.build()
}

struct Found<'a> {
    ix: &'a Index<'a>,
    orders: &'a Orders,
    seen: FastSet<Vec<usize>>,
}

impl Found<'_> {
    fn record(&mut self, report: &mut Report, class: Anomaly, cycle: Vec<CycleEdge>) {
        let nodes: Vec<usize> = cycle.iter().map(|e| e.from).collect();
        if !self.seen.insert(canonical(&nodes)) {
            return;
        }
        report.add_cycle(class, || {
            let steps: Vec<Step> = cycle.iter().map(|e| self.step(e)).collect();
            let text = self.describe(class, &steps);
            (steps, text)
        });
    }

    fn txn(&self, node: usize) -> Option<usize> {
        self.ix.txn_of.get(node).copied()
    }

    fn step(&self, e: &CycleEdge) -> Step {
        let n = self.ix.txn_of.len();
        Step {
            txn: self.txn(e.from),
            recovery_after_epoch: e.from.saturating_sub(n) as u32,
            edge: e.kind,
            why: self.why(e),
        }
    }

    /// Why `e` exists: the key and values behind it.
    fn why(&self, e: &CycleEdge) -> String {
        let (ix, orders) = (self.ix, self.orders);
        let (Some(a), Some(b)) = (self.txn(e.from), self.txn(e.to)) else {
            return "recovery".into();
        };
        let h = ix.h;
        match e.kind {
            EdgeKind::Ww => {
                for (key, v) in h.txns[a].appends() {
                    for ep in ix.epoch(a)..=ix.max_epoch {
                        let o = orders.get(key, ep);
                        if let Some(p) = o.iter().position(|x| *x == v) {
                            if let Some(next) = o.get(p + 1) {
                                if ix.writer_on(key, *next).is_some_and(|w| w.txn == b) {
                                    return format!("key {key}: {v} then {next}");
                                }
                            }
                        }
                    }
                }
                "ww".into()
            }
            EdgeKind::Wr => ix
                .ext_reads_of(b)
                .iter()
                .find(|r| {
                    r.txn == b
                        && r.list
                            .last()
                            .is_some_and(|v| ix.writer_on(r.key, *v).is_some_and(|w| w.txn == a))
                })
                .map_or("wr".into(), |r| {
                    format!(
                        "key {}: read {} ending with its append",
                        r.key,
                        short(&r.list)
                    )
                }),
            EdgeKind::Rw => ix
                .ext_reads_of(a)
                .iter()
                .find_map(|r| {
                    let o = orders.get(r.key, ix.epoch(a));
                    let next = o.get(r.list.len())?;
                    let w = ix.writer_on(r.key, *next)?;
                    (w.txn == b && is_prefix(&r.list, o)).then(|| {
                        format!(
                            "key {}: read {} without its next append {next}",
                            r.key,
                            short(&r.list)
                        )
                    })
                })
                .unwrap_or_else(|| "rw".into()),
            EdgeKind::Rt => "recovery".into(),
        }
    }

    fn describe(&self, class: Anomaly, steps: &[Step]) -> String {
        let mut s = format!("{}-cycle of {} transactions:", class.name(), steps.len());
        for st in steps {
            match st.txn {
                Some(t) => {
                    let _ = write!(s, "\n  T{t} {}", brief(&self.ix.h.txns[t]));
                }
                None => {
                    let _ = write!(s, "\n  recovery after epoch {}", st.recovery_after_epoch);
                }
            }
            let _ = write!(s, "\n    --{}--> ({})", st.edge.name(), st.why);
        }
        s
    }
}

/// A list, abbreviated to its last few values.
fn short(list: &[Value]) -> String {
    const SHOW: usize = 4;
    if list.len() <= SHOW {
        return format!("{list:?}");
    }
    let tail: Vec<String> = list[list.len() - SHOW..]
        .iter()
        .map(|v| v.to_string())
        .collect();
    format!("[({} more) {}]", list.len() - SHOW, tail.join(", "))
}

/// A transaction on one line, reads abbreviated.
fn brief(t: &super::history::Txn) -> String {
    let ops: Vec<String> = t
        .ops
        .iter()
        .map(|op| match op {
            Op::Read { key, list } => format!("r({key})={}", short(list)),
            Op::Append { key, value } => format!("append({key}, {value})"),
        })
        .collect();
    format!(
        "(thread {}, epoch {}): {}",
        t.thread,
        t.epoch,
        ops.join(" ")
    )
}

fn cycles(ix: &Index<'_>, orders: &Orders, g: &Graph, opts: &CheckOptions, report: &mut Report) {
    let n = ix.txn_of.len();
    let (ww, wr, rw) = (EdgeKind::Ww.bit(), EdgeKind::Wr.bit(), EdgeKind::Rw.bit());
    let mut found = Found {
        ix,
        orders,
        seen: FastSet::default(),
    };
    let mut stats = GraphStats {
        nodes: n,
        edges: g.edge_counts(),
        ..GraphStats::default()
    };
    let close = |e: (usize, EdgeKind, usize), path: Vec<CycleEdge>| {
        let mut c = vec![CycleEdge {
            from: e.0,
            kind: e.1,
            to: e.2,
        }];
        c.extend(path);
        c
    };

    // 1. G0 over ww; 2. G1c over ww + wr, from wr edges.
    for (class, allowed, start) in [(Anomaly::G0, ww, ww), (Anomaly::G1c, WW_WR, wr)] {
        let comps = g.components(allowed);
        let mut s = Searcher::new(g, &comps, opts.search_budget);
        for a in (0..n).filter(|&a| comps.cyclic(a)) {
            for &(b, m) in g.out(a) {
                let b = b as usize;
                // G1c starts only from pure wr edges: an edge that is also ww is taken
                // as ww, and a cycle of those alone is G0.
                let pure = m & allowed == start;
                if m & start == 0 || (class == Anomaly::G1c && !pure) {
                    continue;
                }
                if comps.of[b] != comps.of[a] {
                    continue;
                }
                let kind = if class == Anomaly::G0 {
                    EdgeKind::Ww
                } else {
                    EdgeKind::Wr
                };
                if let Some(p) = s.path(b, a, allowed) {
                    found.record(report, class, close((a, kind, b), p));
                }
            }
        }
        stats.search_truncated |= s.truncated();
    }

    // 3. Cycles through rw edges.
    let comps = g.components(DEPS);
    stats.cyclic_components = comps.size.iter().filter(|s| **s > 1).count();
    stats.largest_component = comps.size.iter().copied().max().unwrap_or(0) as usize;
    let mut s = Searcher::new(g, &comps, opts.search_budget);
    for a in (0..n).filter(|&a| comps.cyclic(a)) {
        for &(b, m) in g.out(a) {
            let b = b as usize;
            if m & rw == 0 || m & WW_WR != 0 || comps.of[b] != comps.of[a] {
                continue;
            }
            let e = (a, EdgeKind::Rw, b);
            if let Some(p) = s.path(b, a, WW_WR) {
                found.record(report, Anomaly::GSingle, close(e, p));
            } else if let Some(p) = s.nonadjacent_path(b, a) {
                found.record(report, Anomaly::GNonadjacent, close(e, p));
            } else if let Some(p) = s.path(b, a, DEPS) {
                found.record(report, Anomaly::G2Item, close(e, p));
            }
        }
    }
    stats.search_truncated |= s.truncated();

    // 4. Cycles through recovery points.
    if g.len() > n {
        let comps = g.components(ALL);
        let mut s = Searcher::new(g, &comps, opts.search_budget);
        for x in n..g.len() {
            if comps.cyclic(x) {
                if let Some(p) = s.path(x, x, ALL) {
                    found.record(report, Anomaly::CrashOrder, p);
                }
            }
        }
        stats.search_truncated |= s.truncated();
    }
    report.graph = stats;
}
