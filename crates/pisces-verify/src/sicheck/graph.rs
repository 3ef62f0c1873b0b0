//! The dependency graph and the cycle search.
//!
//! Nodes are numbered `0..n`; an edge carries a bit mask of [`EdgeKind`]s (two
//! transactions can be related in several ways at once). Self-loops are dropped.
//!
//! The search follows Elle: Tarjan's algorithm splits the graph into strongly connected
//! components (iteratively, so deep graphs cannot overflow the stack); every cycle lies
//! inside one component, so each breadth-first search is confined to the component of
//! its start, and its cost is proportional to that component, not to the graph. A
//! shortest cycle through a given edge `a → b` is the edge plus a shortest path
//! `b ⇝ a`, found by BFS over the edge kinds a class allows. For "no two adjacent rw
//! edges" the BFS runs over (node, last edge was rw, an rw edge was taken) states.
//!
//! Every search draws on a shared work budget (node visits); when it runs out, the
//! remaining searches are skipped and the caller reports its counts as lower bounds.

use super::anomaly::EdgeKind;
use super::fasthash::FastMap;
use std::collections::VecDeque;

/// Mask of the ww and wr kinds.
pub const WW_WR: u8 = EdgeKind::Ww.bit() | EdgeKind::Wr.bit();
/// Mask of ww, wr and rw (every kind but real time).
pub const DEPS: u8 = WW_WR | EdgeKind::Rw.bit();
/// Every kind.
pub const ALL: u8 = DEPS | EdgeKind::Rt.bit();

/// Collects edges, merging kinds of parallel edges.
#[derive(Debug, Default)]
pub struct GraphBuilder {
    n: usize,
    edges: FastMap<(u32, u32), u8>,
}

impl GraphBuilder {
    /// A builder for `n` nodes.
    pub fn new(n: usize) -> Self {
        GraphBuilder {
            n,
            edges: FastMap::default(),
        }
    }

    /// Add an edge (self-loops and out-of-range nodes are ignored).
    pub fn add(&mut self, from: usize, to: usize, kind: EdgeKind) {
        if from == to || from >= self.n || to >= self.n {
            return;
        }
        *self.edges.entry((from as u32, to as u32)).or_insert(0) |= kind.bit();
    }

    /// The finished graph.
    pub fn build(self) -> Graph {
        let mut adj: Vec<Vec<(u32, u8)>> = vec![Vec::new(); self.n];
        let mut counts = [0usize; 4];
        for ((f, t), m) in self.edges {
            for (i, k) in [EdgeKind::Ww, EdgeKind::Wr, EdgeKind::Rw, EdgeKind::Rt]
                .iter()
                .enumerate()
            {
                if m & k.bit() != 0 {
                    counts[i] += 1;
                }
            }
            adj[f as usize].push((t, m));
        }
        for a in &mut adj {
            a.sort_unstable();
        }
        Graph { adj, counts }
    }
}

/// A directed graph with kind-masked edges.
#[derive(Debug)]
pub struct Graph {
    adj: Vec<Vec<(u32, u8)>>,
    counts: [usize; 4],
}

/// Result of the component split.
#[derive(Debug)]
pub struct Components {
    /// Component of each node.
    pub of: Vec<u32>,
    /// Size of each component.
    pub size: Vec<u32>,
}

impl Components {
    /// True if `v` lies on some cycle of the graph that was split.
    pub fn cyclic(&self, v: usize) -> bool {
        self.size[self.of[v] as usize] > 1
    }
}

impl Graph {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.adj.len()
    }

    /// True if the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.adj.is_empty()
    }

    /// Edge counts by kind (ww, wr, rw, rt).
    pub fn edge_counts(&self) -> [usize; 4] {
        self.counts
    }

    /// Out-edges of `v`: (target, kind mask), sorted by target.
    pub fn out(&self, v: usize) -> &[(u32, u8)] {
        &self.adj[v]
    }

    /// The kinds of the edge `from → to` (0 if none).
    pub fn mask(&self, from: usize, to: usize) -> u8 {
        let a = &self.adj[from];
        match a.binary_search_by_key(&(to as u32), |e| e.0) {
            Ok(i) => a[i].1,
            Err(_) => 0,
        }
    }

    /// Strongly connected components of the subgraph of edges whose kinds meet
    /// `allowed` (Tarjan, iterative).
    pub fn components(&self, allowed: u8) -> Components {
        const UNSEEN: u32 = u32::MAX;
        let n = self.len();
        let mut index = vec![UNSEEN; n];
        let mut low = vec![0u32; n];
        let mut on_stack = vec![false; n];
        let mut of = vec![0u32; n];
        let mut size: Vec<u32> = Vec::new();
        let mut stack: Vec<u32> = Vec::new();
        let mut call: Vec<(u32, usize)> = Vec::new();
        let mut next = 0u32;
        for root in 0..n {
            if index[root] != UNSEEN {
                continue;
            }
            call.push((root as u32, 0));
            index[root] = next;
            low[root] = next;
            next += 1;
            stack.push(root as u32);
            on_stack[root] = true;
            while let Some(&mut (v, ref mut ei)) = call.last_mut() {
                let v = v as usize;
                let edges = &self.adj[v];
                let mut descended = false;
                while *ei < edges.len() {
                    let (w, m) = edges[*ei];
                    *ei += 1;
                    if m & allowed == 0 {
                        continue;
                    }
                    let w = w as usize;
                    if index[w] == UNSEEN {
                        index[w] = next;
                        low[w] = next;
                        next += 1;
                        stack.push(w as u32);
                        on_stack[w] = true;
                        call.push((w as u32, 0));
                        descended = true;
                        break;
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                }
                if descended {
                    continue;
                }
                call.pop();
                if let Some(&(parent, _)) = call.last() {
                    let p = parent as usize;
                    low[p] = low[p].min(low[v]);
                }
                if low[v] == index[v] {
                    let c = size.len() as u32;
                    let mut count = 0;
                    while let Some(w) = stack.pop() {
                        on_stack[w as usize] = false;
                        of[w as usize] = c;
                        count += 1;
                        if w as usize == v {
                            break;
                        }
                    }
                    size.push(count);
                }
            }
        }
        Components { of, size }
    }
}

/// One edge of a found cycle: `from --kind--> to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CycleEdge {
    /// Source node.
    pub from: usize,
    /// Kind used.
    pub kind: EdgeKind,
    /// Target node.
    pub to: usize,
}

/// The kind an edge is taken as, out of `mask & allowed`: ww before wr before rt before
/// rw (a path is "as weak as possible", so classification errs towards the stronger,
/// more forbidden class).
fn pick(mask: u8) -> Option<EdgeKind> {
    [EdgeKind::Ww, EdgeKind::Wr, EdgeKind::Rt, EdgeKind::Rw]
        .into_iter()
        .find(|k| mask & k.bit() != 0)
}

/// Breadth-first searches inside components, sharing a work budget.
pub struct Searcher<'g> {
    g: &'g Graph,
    comp: &'g Components,
    /// Per state: search number that last visited it.
    stamp: Vec<u32>,
    /// Per state: (previous state, kind bit of the edge into it).
    parent: Vec<(u32, u8)>,
    search: u32,
    queue: VecDeque<u32>,
    budget: u64,
    truncated: bool,
}

/// States per node in the product search.
const STATES: usize = 4;

impl<'g> Searcher<'g> {
    /// A searcher over `g` confined to the components `comp`, allowed `budget` state
    /// visits in total.
    pub fn new(g: &'g Graph, comp: &'g Components, budget: u64) -> Self {
        Searcher {
            g,
            comp,
            stamp: vec![0; g.len() * STATES],
            parent: vec![(0, 0); g.len() * STATES],
            search: 0,
            queue: VecDeque::new(),
            budget,
            truncated: false,
        }
    }

    /// True once the budget ran out.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    fn begin(&mut self) -> bool {
        if self.budget == 0 {
            self.truncated = true;
            return false;
        }
        self.search = self.search.wrapping_add(1);
        if self.search == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.search = 1;
        }
        self.queue.clear();
        true
    }

    fn visit(&mut self, state: usize, parent: u32, kind: u8) {
        if self.stamp[state] != self.search {
            self.stamp[state] = self.search;
            self.parent[state] = (parent, kind);
            self.queue.push_back(state as u32);
        }
    }

    fn unwind(&self, start: usize, end: usize) -> Vec<CycleEdge> {
        let mut edges = Vec::new();
        let mut s = end;
        while s != start {
            let (p, bit) = self.parent[s];
            let kind = pick(bit).unwrap_or(EdgeKind::Ww);
            edges.push(CycleEdge {
                from: p as usize / STATES,
                kind,
                to: s / STATES,
            });
            s = p as usize;
        }
        edges.reverse();
        edges
    }

    /// A shortest path `from ⇝ to` (`to` may equal `from`: a shortest cycle through
    /// it) over edges whose kinds meet `allowed`, inside the component of `from`. Each
    /// edge is taken as its strongest allowed kind.
    pub fn path(&mut self, from: usize, to: usize, allowed: u8) -> Option<Vec<CycleEdge>> {
        if !self.begin() {
            return None;
        }
        let c = self.comp.of[from];
        if self.comp.of[to] != c {
            return None;
        }
        let g = self.g;
        let start = from * STATES;
        self.visit(start, start as u32, 0);
        while let Some(s) = self.queue.pop_front() {
            let s = s as usize;
            if self.budget == 0 {
                self.truncated = true;
                return None;
            }
            self.budget -= 1;
            let v = s / STATES;
            for &(w, m) in g.out(v) {
                let w = w as usize;
                if self.comp.of[w] != c {
                    continue;
                }
                let Some(k) = pick(m & allowed) else {
                    continue;
                };
                if w == to {
                    return Some(self.close(start, s, k, w));
                }
                self.visit(w * STATES, s as u32, k.bit());
            }
        }
        None
    }

    /// A shortest path `from ⇝ to` over ww, wr and rw edges that, closed by an rw edge
    /// `to → from`, makes a cycle with at least two rw edges and no two of them
    /// adjacent (cyclically): the path starts after an rw edge, so its first edge is
    /// not rw, it never takes two rw edges in a row, it takes at least one, and its
    /// last edge (followed by the closing rw edge) is not rw.
    pub fn nonadjacent_path(&mut self, from: usize, to: usize) -> Option<Vec<CycleEdge>> {
        if !self.begin() {
            return None;
        }
        let c = self.comp.of[from];
        if self.comp.of[to] != c {
            return None;
        }
        let g = self.g;
        // State bits: 1 = the last edge was rw, 2 = an rw edge has been taken.
        let start = from * STATES + 1;
        self.visit(start, start as u32, 0);
        let rw = EdgeKind::Rw.bit();
        while let Some(s) = self.queue.pop_front() {
            let s = s as usize;
            if self.budget == 0 {
                self.truncated = true;
                return None;
            }
            self.budget -= 1;
            let (v, flags) = (s / STATES, s % STATES);
            for &(w, m) in g.out(v) {
                let w = w as usize;
                if self.comp.of[w] != c {
                    continue;
                }
                if let Some(k) = pick(m & WW_WR) {
                    if w == to {
                        if flags & 2 != 0 {
                            return Some(self.close(start, s, k, w));
                        }
                    } else {
                        self.visit(w * STATES + (flags & 2), s as u32, k.bit());
                    }
                }
                if m & rw != 0 && flags & 1 == 0 && w != to {
                    self.visit(w * STATES + 3, s as u32, rw);
                }
            }
        }
        None
    }

    /// The path to state `s` plus its last edge `s --kind--> to`.
    fn close(&self, start: usize, s: usize, kind: EdgeKind, to: usize) -> Vec<CycleEdge> {
        let mut p = self.unwind(start, s);
        p.push(CycleEdge {
            from: s / STATES,
            kind,
            to,
        });
        p
    }
}

/// Rotate a cycle (as a node list) so that its smallest node comes first: equal cycles
/// found from different start edges compare equal.
pub fn canonical(nodes: &[usize]) -> Vec<usize> {
    let Some((i, _)) = nodes.iter().enumerate().min_by_key(|(_, v)| **v) else {
        return Vec::new();
    };
    nodes[i..].iter().chain(&nodes[..i]).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(n: usize, edges: &[(usize, usize, EdgeKind)]) -> Graph {
        let mut b = GraphBuilder::new(n);
        for &(f, t, k) in edges {
            b.add(f, t, k);
        }
        b.build()
    }

    #[test]
    fn components_split_cycles() {
        use EdgeKind::*;
        let g = graph(5, &[(0, 1, Ww), (1, 2, Wr), (2, 0, Rw), (3, 4, Ww)]);
        let c = g.components(ALL);
        assert_eq!(c.of[0], c.of[1]);
        assert_eq!(c.of[1], c.of[2]);
        assert!(c.cyclic(0));
        assert!(!c.cyclic(3));
        assert_ne!(c.of[3], c.of[4]);
        // Without rw edges there is no cycle.
        let c = g.components(WW_WR);
        assert!(!c.cyclic(0));
    }

    #[test]
    fn deep_chain_does_not_overflow() {
        let n = 200_000;
        let mut b = GraphBuilder::new(n);
        for i in 0..n {
            b.add(i, (i + 1) % n, EdgeKind::Ww);
        }
        let g = b.build();
        let c = g.components(ALL);
        assert_eq!(c.size.len(), 1);
        assert_eq!(c.size[0] as usize, n);
    }

    #[test]
    fn shortest_path_and_nonadjacent() {
        use EdgeKind::*;
        // 0 -rw-> 1 -wr-> 2 -rw-> 3 -wr-> 0, plus a shortcut 1 -rw-> 0.
        let g = graph(
            4,
            &[(0, 1, Rw), (1, 2, Wr), (2, 3, Rw), (3, 0, Wr), (1, 0, Rw)],
        );
        let c = g.components(ALL);
        let mut s = Searcher::new(&g, &c, 1_000);
        let p = s.path(1, 0, DEPS).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].kind, Rw);
        // No ww/wr-only way back from 1 to 0.
        assert!(s.path(1, 0, WW_WR).is_none());
        let p = s.nonadjacent_path(1, 0).unwrap();
        let kinds: Vec<EdgeKind> = p.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, vec![Wr, Rw, Wr]);
        assert_eq!(canonical(&[2, 3, 0, 1]), vec![0, 1, 2, 3]);
    }

    #[test]
    fn budget_truncates() {
        use EdgeKind::*;
        let g = graph(3, &[(0, 1, Ww), (1, 2, Ww), (2, 0, Ww)]);
        let c = g.components(ALL);
        let mut s = Searcher::new(&g, &c, 1);
        assert!(s.path(0, 2, ALL).is_none() || s.truncated());
        assert!(s.path(0, 2, ALL).is_none());
        assert!(s.truncated());
    }
}
