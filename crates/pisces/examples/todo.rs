//! A to-do list that survives `kill -9`: strings in a persistent hash map, an index by
//! due date in a B+-tree, two threads.
//!
//! ```text
//! cargo run --release -p pisces --example todo -- /dev/shm/todo.pool [seconds]
//! ```
//! Items live in a `HashMap<u64, Item>` keyed by id; an `Item` is a `pod!` struct whose
//! title is a [`PString`] of any length. A `BTreeMap<[u64; 2], u64>` indexes the items
//! by (due date, id). One thread adds items with titles of varying length; the other
//! completes the item due first and retitles another (a longer or shorter title moves
//! to a new block, the old one is freed in the same transaction). Every start audits
//! the pool: the index and the items agree exactly, each title is the one its id
//! gives, the counters add up, the last acknowledged addition is there, and the pool's
//! allocated blocks are exactly the ones the list reaches (no title, node or item
//! leaked by a crash). `examples/todo_crash_loop.sh` kills it in a loop.

use pisces::{BTreeMap, Config, HashMap, Owned, PPtr, PString, Pool, Result, Tx};
use std::collections::BTreeSet;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pisces::pod! {
    /// A to-do item: its title is a string of any length owned by the item.
    struct Item {
        id: u64,
        due: u64,
        /// Times the item was retitled.
        edits: u64,
        title: PString,
    }

    struct Root {
        items: HashMap<u64, Item>,
        by_due: BTreeMap<[u64; 2], u64>,
        /// Items added so far (the last id).
        added: u64,
        /// Items completed (removed) so far.
        completed: u64,
    }
}

/// The item owns its title: the map frees it with the entry (`remove_and_free`).
impl Owned for Item {
    fn for_each_owned(&self, tx: &Tx<'_>, f: &mut dyn FnMut(u64)) -> Result<()> {
        self.title.for_each_owned(tx, f)
    }
}

/// The title of item `id` after `edits` retitlings: its length varies with both.
fn title(id: u64, edits: u64) -> String {
    let words = [
        "buy milk",
        "call Ada",
        "fix the roof",
        "write the report",
        "é✓",
    ];
    let mut t = format!("#{id}.{edits}:");
    for i in 0..(id + edits) % 7 {
        t.push(' ');
        t.push_str(words[((id + i) % words.len() as u64) as usize]);
    }
    t
}

fn setup(pool: &Pool, root: PPtr<Root>) -> Result<()> {
    pool.run(|tx| {
        if !tx.read(root)?.items.is_null() {
            return Ok(());
        }
        let items = HashMap::new(tx)?;
        let by_due = BTreeMap::new(tx)?;
        let r = tx.write(root)?;
        (r.items, r.by_due) = (items, by_due);
        Ok(())
    })
}

/// Check every invariant; returns (added, completed, open items).
fn audit(pool: &Pool, root: PPtr<Root>) -> std::result::Result<(u64, u64, usize), String> {
    let (r, reachable, open) = pool
        .run(|tx| {
            let r = *tx.read(root)?;
            let mut index = BTreeSet::new();
            for e in r.by_due.iter(tx) {
                let (k, id) = e?;
                if k[1] != *id {
                    return Err(tx.abort(format!("index entry {k:?} names item {id}")));
                }
                index.insert((k[0], k[1]));
            }
            let mut items = BTreeSet::new();
            let mut bad = None;
            r.items.for_each(tx, |id, it| {
                match it.title.get(tx) {
                    Ok(t) if *id == it.id && t == title(it.id, it.edits) => {}
                    Ok(t) => bad = Some(format!("item {id}: id {} title {t:?}", it.id)),
                    Err(e) => bad = Some(format!("item {id}: {e}")),
                }
                items.insert((it.due, it.id));
                bad.is_none()
            })?;
            if let Some(b) = bad {
                return Err(tx.abort(b));
            }
            if index != items {
                return Err(tx.abort(format!(
                    "the index and the items disagree ({} index entries, {} items)",
                    index.len(),
                    items.len()
                )));
            }
            let mut reachable = BTreeSet::from([root.offset()]);
            r.items.for_each_object_with_values(tx, |o| {
                reachable.insert(o);
            })?;
            r.by_due.for_each_object(tx, |o| {
                reachable.insert(o);
            })?;
            Ok((r, reachable, items.len()))
        })
        .map_err(|e| e.to_string())?;
    if r.added - r.completed != open as u64 {
        return Err(format!(
            "{} added - {} completed != {open} open items",
            r.added, r.completed
        ));
    }
    let allocated: BTreeSet<u64> = pool
        .allocated_objects()
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect();
    if allocated != reachable {
        return Err(format!(
            "{} blocks allocated but not reachable (leaked), {} reachable but not allocated",
            allocated.difference(&reachable).count(),
            reachable.difference(&allocated).count()
        ));
    }
    Ok((r.added, r.completed, open))
}

/// Add item `added + 1`, due `due`.
fn add(tx: &mut Tx<'_>, root: PPtr<Root>, due: u64) -> Result<u64> {
    let r = tx.write(root)?;
    r.added += 1;
    let (id, items, by_due) = (r.added, r.items, r.by_due);
    let title = PString::new(tx, &title(id, 0))?;
    items.insert(
        tx,
        id,
        Item {
            id,
            due,
            edits: 0,
            title,
        },
    )?;
    by_due.insert(tx, [due, id], id)?;
    Ok(id)
}

/// Complete the item due first, if any, and retitle the item `pick` picks among
/// the next ones.
fn complete_and_edit(tx: &mut Tx<'_>, root: PPtr<Root>, pick: u64) -> Result<Option<u64>> {
    let r = *tx.read(root)?;
    let Some((key, id)) = r.by_due.first_key_value(tx)?.map(|(k, v)| (*k, *v)) else {
        return Ok(None);
    };
    r.by_due.remove(tx, &key)?;
    if !r.items.remove_and_free(tx, &id)? {
        return Err(tx.abort(format!("item {id} is indexed but missing")));
    }
    tx.write(root)?.completed += 1;
    let mut next = None;
    let mut seen = 0;
    r.by_due.for_each_in(tx, key.., |_, id| {
        next = Some(*id);
        seen += 1;
        seen <= pick % 8
    })?;
    if let Some(other) = next {
        let mut it = r.items.get(tx, &other)?.expect("indexed items exist");
        it.edits += 1;
        it.title.set(tx, &title(it.id, it.edits))?; // frees the old title if it moves
        r.items.insert(tx, other, it)?;
    }
    Ok(Some(id))
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .unwrap_or_else(|| "/dev/shm/pisces-todo.pool".into());
    let seconds: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);
    let pool = Pool::open_or_create(&path, Config::default().size(64 << 20).max_threads(4))?;
    let root: PPtr<Root> = pool.root()?;
    setup(&pool, root)?;
    let (added, completed, open) =
        audit(&pool, root).map_err(|e| format!("INVARIANT BROKEN: {e}"))?;
    eprintln!("opened {path}: {added} added, {completed} completed, {open} open");
    // The caller checks the last acknowledged addition against this (todo_crash_loop.sh).
    println!("recovered {added} audit ok");

    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let out = std::sync::Mutex::new(std::io::stdout());
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (pool, stop, out) = (pool.clone(), &stop, &out);
            s.spawn(move || -> Result<()> {
                let mut h = pool.handle()?;
                let mut x = t.wrapping_add(0x9E37_79B9_7F4A_7C15) | 1;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if t == 0 {
                        // Keep the list short: add only while few items are open.
                        let id = h.run(|tx| {
                            let r = *tx.read(root)?;
                            if r.added - r.completed > 200 {
                                return Ok(None);
                            }
                            add(tx, root, x % 10_000).map(Some)
                        })?;
                        match id {
                            // Acknowledged: the commit returned, so the item is durable.
                            Some(id) => drop(writeln!(out.lock().unwrap(), "ack {id}")),
                            None => std::thread::yield_now(),
                        }
                    } else if h.run(|tx| complete_and_edit(tx, root, x))?.is_none() {
                        std::thread::yield_now();
                    }
                }
                Ok(())
            });
        }
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let (added, completed, open) =
        audit(&pool, root).map_err(|e| format!("INVARIANT BROKEN: {e}"))?;
    eprintln!("stopped: {added} added, {completed} completed, {open} open");
    Ok(())
}
