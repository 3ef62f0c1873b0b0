//! Anomaly classes, isolation levels, and the checker's report.
//!
//! Cycle classes follow Adya's phenomena as Elle names them; whether a class is
//! forbidden depends on the isolation level asked for:
//!
//! | class            | what it is                                              | SI  | serializable |
//! |------------------|---------------------------------------------------------|-----|--------------|
//! | G0               | cycle of write-write edges                              | no  | no           |
//! | G1a              | a read saw a value written by an aborted attempt        | no  | no           |
//! | G1b              | a read saw a value its writer later overwrote (appended after) in the same transaction | no | no |
//! | G1c              | cycle of ww and wr edges (at least one wr)              | no  | no           |
//! | G-single         | cycle with exactly one rw edge (read skew)              | no  | no           |
//! | G-nonadjacent    | cycle with ≥ 2 rw edges, no two of them adjacent        | no  | no           |
//! | G2-item          | cycle with ≥ 2 rw edges, two of them adjacent (write skew) | **yes** | no     |
//! | lost update      | two transactions read the same version of a key and both appended to it | no | no |
//! | internal         | a read disagrees with the transaction's own earlier reads and appends | no | no |
//! | garbage read     | a read saw a value nobody appended to that key          | no  | no           |
//! | duplicate        | a value twice in one list, or appended twice            | no  | no           |
//! | incompatible order | two reads of a key (same epoch) where neither list is a prefix of the other | no | no |
//! | lost write       | a committed (acknowledged) append, or one a committed transaction read, missing after a recovery | no | no |
//! | partial recovery | an indeterminate transaction present in part after a recovery | no | no |
//! | crash order      | a cycle through a recovery point (e.g. a transaction after recovery missed a value that survived it) | no | no |
//!
//! Why G-nonadjacent is forbidden under snapshot isolation (Fekete et al., "Making
//! snapshot isolation serializable", 2005): under SI a ww or wr edge A → B means A
//! committed before B started, and an rw edge A → B means B committed after A started.
//! Around a cycle these compose into `start(X) < start(X)` unless the chain breaks, and
//! it breaks only where two rw edges are adjacent.

use super::history::TxnId;
use std::collections::BTreeMap;
use std::fmt;

/// An isolation level to judge a history against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// Snapshot isolation: write skew (G2-item) is allowed.
    Snapshot,
    /// Serializability: every cycle is forbidden.
    Serializable,
}

impl Isolation {
    /// Short name (`si`, `serializable`).
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Snapshot => "si",
            Isolation::Serializable => "serializable",
        }
    }
}

/// An anomaly class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Anomaly {
    /// Cycle of ww edges.
    G0,
    /// Aborted read.
    G1a,
    /// Intermediate read.
    G1b,
    /// Cycle of ww + wr edges.
    G1c,
    /// Cycle with exactly one rw edge (read skew).
    GSingle,
    /// Cycle with ≥ 2 rw edges, none adjacent.
    GNonadjacent,
    /// Cycle with ≥ 2 rw edges, two adjacent: write skew.
    G2Item,
    /// Two transactions read one version of a key and both appended to it.
    LostUpdate,
    /// A read inconsistent with its own transaction's earlier operations.
    Internal,
    /// A value nobody appended to that key.
    GarbageRead,
    /// A value twice in a list, or appended twice.
    Duplicate,
    /// Two reads of one key whose lists are not prefixes of one another.
    IncompatibleOrder,
    /// A durable append missing after a recovery.
    LostWrite,
    /// An indeterminate transaction present in part after a recovery.
    PartialRecovery,
    /// A cycle through a recovery point.
    CrashOrder,
}

impl Anomaly {
    /// Every class, in report order.
    pub const ALL: [Anomaly; 15] = [
        Anomaly::G0,
        Anomaly::G1a,
        Anomaly::G1b,
        Anomaly::G1c,
        Anomaly::GSingle,
        Anomaly::GNonadjacent,
        Anomaly::G2Item,
        Anomaly::LostUpdate,
        Anomaly::Internal,
        Anomaly::GarbageRead,
        Anomaly::Duplicate,
        Anomaly::IncompatibleOrder,
        Anomaly::LostWrite,
        Anomaly::PartialRecovery,
        Anomaly::CrashOrder,
    ];

    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            Anomaly::G0 => "G0",
            Anomaly::G1a => "G1a",
            Anomaly::G1b => "G1b",
            Anomaly::G1c => "G1c",
            Anomaly::GSingle => "G-single",
            Anomaly::GNonadjacent => "G-nonadjacent",
            Anomaly::G2Item => "G2-item",
            Anomaly::LostUpdate => "lost-update",
            Anomaly::Internal => "internal",
            Anomaly::GarbageRead => "garbage-read",
            Anomaly::Duplicate => "duplicate",
            Anomaly::IncompatibleOrder => "incompatible-order",
            Anomaly::LostWrite => "lost-write",
            Anomaly::PartialRecovery => "partial-recovery",
            Anomaly::CrashOrder => "crash-order",
        }
    }

    /// One-line description.
    pub fn description(self) -> &'static str {
        match self {
            Anomaly::G0 => "write cycle (ww edges only)",
            Anomaly::G1a => "aborted read",
            Anomaly::G1b => "intermediate read",
            Anomaly::G1c => "circular information flow (ww + wr)",
            Anomaly::GSingle => "read skew (one rw edge)",
            Anomaly::GNonadjacent => "cycle with non-adjacent rw edges",
            Anomaly::G2Item => "write skew (adjacent rw edges)",
            Anomaly::LostUpdate => "lost update",
            Anomaly::Internal => "internal inconsistency",
            Anomaly::GarbageRead => "value never appended",
            Anomaly::Duplicate => "duplicate element",
            Anomaly::IncompatibleOrder => "incompatible orders of one key",
            Anomaly::LostWrite => "durable append missing after recovery",
            Anomaly::PartialRecovery => "transaction recovered in part",
            Anomaly::CrashOrder => "cycle through a recovery point",
        }
    }

    /// Whether `iso` forbids this class.
    pub fn forbidden_under(self, iso: Isolation) -> bool {
        match self {
            Anomaly::G2Item => iso == Isolation::Serializable,
            _ => true,
        }
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Kinds of dependency edges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeKind {
    /// Write-write: the target appended the next element after the source's.
    Ww,
    /// Write-read: the target read the source's append (as the last element).
    Wr,
    /// Read-write (anti-dependency): the source read a list the target extended.
    Rw,
    /// Real time across a recovery: everything after a recovery follows everything
    /// before it.
    Rt,
}

impl EdgeKind {
    /// Bit of this kind in an edge mask.
    pub const fn bit(self) -> u8 {
        match self {
            EdgeKind::Ww => 1,
            EdgeKind::Wr => 2,
            EdgeKind::Rw => 4,
            EdgeKind::Rt => 8,
        }
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
            EdgeKind::Rt => "rt",
        }
    }
}

/// One step of a cycle: a node and the edge from it to the next step's node. Nodes are
/// transactions (`Some(id)`) or recovery points (`None`, with the epoch it ends).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The transaction, or `None` for a recovery point.
    pub txn: Option<TxnId>,
    /// For a recovery point: the epoch it ends.
    pub recovery_after_epoch: u32,
    /// The edge to the next step.
    pub edge: EdgeKind,
    /// Why the edge exists (key and values), when known.
    pub why: String,
}

/// One example of an anomaly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Example {
    /// Its class.
    pub anomaly: Anomaly,
    /// A readable explanation (several lines for cycles).
    pub text: String,
    /// The cycle, for cycle classes.
    pub cycle: Vec<Step>,
}

/// Size of the dependency graph.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphStats {
    /// Transactions in the graph (committed and indeterminate).
    pub nodes: usize,
    /// Edges by kind: ww, wr, rw, rt.
    pub edges: [usize; 4],
    /// Strongly connected components with more than one node.
    pub cyclic_components: usize,
    /// Nodes in the largest component.
    pub largest_component: usize,
    /// True if the cycle search hit its work limit somewhere (counts are then lower
    /// bounds).
    pub search_truncated: bool,
}

/// What the checker found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Transactions that committed (including indeterminate ones).
    pub transactions: usize,
    /// Aborted attempts in the history.
    pub aborted: usize,
    /// Indeterminate transactions.
    pub indeterminate: usize,
    /// Keys seen.
    pub keys: usize,
    /// Occurrences per class (cycles: distinct cycles found; others: offending reads,
    /// keys or transactions).
    pub counts: BTreeMap<Anomaly, usize>,
    /// The first few examples of each class.
    pub examples: Vec<Example>,
    /// Graph size.
    pub graph: GraphStats,
}

/// Examples kept per class.
pub const EXAMPLES_PER_CLASS: usize = 3;

impl Report {
    /// Occurrences of `a`.
    pub fn count(&self, a: Anomaly) -> usize {
        self.counts.get(&a).copied().unwrap_or(0)
    }

    /// Record one occurrence, keeping its example if fewer than
    /// [`EXAMPLES_PER_CLASS`] are kept; `text` is only built when kept.
    pub fn add(&mut self, a: Anomaly, text: impl FnOnce() -> String) {
        self.add_cycle(a, || (Vec::new(), text()));
    }

    /// Record one occurrence with its cycle; `example` (the cycle and its text) is only
    /// built when kept.
    pub fn add_cycle(&mut self, a: Anomaly, example: impl FnOnce() -> (Vec<Step>, String)) {
        let n = self.counts.entry(a).or_insert(0);
        *n += 1;
        if *n <= EXAMPLES_PER_CLASS {
            let (cycle, text) = example();
            self.examples.push(Example {
                anomaly: a,
                text,
                cycle,
            });
        }
    }

    /// Occurrences of classes forbidden under `iso`.
    pub fn forbidden(&self, iso: Isolation) -> usize {
        self.counts
            .iter()
            .filter(|(a, _)| a.forbidden_under(iso))
            .map(|(_, n)| n)
            .sum()
    }

    /// Write-skew (G2-item) cycles found.
    pub fn write_skew(&self) -> usize {
        self.count(Anomaly::G2Item)
    }

    /// Classes with at least one occurrence.
    pub fn found(&self) -> Vec<Anomaly> {
        self.counts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(a, _)| *a)
            .collect()
    }

    /// The summary line: `transactions: <N>, forbidden anomalies: <F>, write skew: <W>`.
    pub fn summary_line(&self, iso: Isolation) -> String {
        format!(
            "transactions: {}, forbidden anomalies: {}, write skew: {}",
            self.transactions,
            self.forbidden(iso),
            self.write_skew()
        )
    }

    /// A readable multi-line report (without the summary line).
    pub fn render(&self, iso: Isolation) -> String {
        let mut s = String::new();
        let g = &self.graph;
        s.push_str(&format!(
            "history: {} committed ({} indeterminate), {} aborted attempts, {} keys\n",
            self.transactions, self.indeterminate, self.aborted, self.keys
        ));
        s.push_str(&format!(
            "graph: {} nodes, edges ww {} wr {} rw {} rt {}, {} cyclic components (largest {} nodes){}\n",
            g.nodes,
            g.edges[0],
            g.edges[1],
            g.edges[2],
            g.edges[3],
            g.cyclic_components,
            g.largest_component,
            if g.search_truncated {
                ", search truncated: counts are lower bounds"
            } else {
                ""
            }
        ));
        s.push_str(&format!("anomalies (isolation {}):\n", iso.name()));
        for a in Anomaly::ALL {
            let n = self.count(a);
            let verdict = if n == 0 {
                ""
            } else if a.forbidden_under(iso) {
                "  FORBIDDEN"
            } else {
                "  allowed"
            };
            s.push_str(&format!(
                "  {:<19} {:>8}  {}{verdict}\n",
                a.name(),
                n,
                a.description()
            ));
        }
        for a in Anomaly::ALL {
            let ex: Vec<&Example> = self.examples.iter().filter(|e| e.anomaly == a).collect();
            if ex.is_empty() {
                continue;
            }
            s.push_str(&format!("examples of {}:\n", a.name()));
            for e in ex {
                for (i, line) in e.text.lines().enumerate() {
                    s.push_str(if i == 0 { "  - " } else { "    " });
                    s.push_str(line);
                    s.push('\n');
                }
            }
        }
        s
    }
}
