//! A user's first program: pool objects declared with `pisces::pod!`, a hash map and a
//! B+-tree kept in the root object, a string-keyed string-valued map and a
//! vector-valued map, and a second run that finds them all again.

use pisces::{BTreeMap, Config, HashMap, PPtr, PString, PVec, Pool};

pisces::pod! {
    /// The root object: the handles of the two containers and a run counter.
    struct Root {
        runs: u64,
        by_id: HashMap<u64, Account>,
        by_balance: BTreeMap<u64, u64>,
        /// Names by login: strings of any length as keys and values.
        names: BTreeMap<PString, PString>,
        /// Every run's number, appended to the vector under key 1.
        runs_seen: HashMap<u64, PVec<u64>>,
    }

    /// A value stored in the hash map.
    #[derive(Debug, PartialEq)]
    struct Account {
        balance: u64,
        owner: [u8; 8],
    }
}

/// What one run reads back.
#[derive(Debug, PartialEq)]
struct Seen {
    runs: u64,
    account: Option<Account>,
    richest: Vec<(u64, u64)>,
    names: Vec<(String, String)>,
    runs_seen: Vec<u64>,
}

fn run(path: &std::path::Path) -> pisces::Result<Seen> {
    let pool = Pool::open_or_create(path, Config::new().size(16 << 20))?;
    let root: PPtr<Root> = pool.root()?;
    pool.run(|tx| {
        if tx.read(root)?.runs == 0 {
            let by_id = HashMap::new(tx)?;
            let by_balance = BTreeMap::new(tx)?;
            for id in 0..100u64 {
                let balance = 1000 + id * 10;
                by_id.insert(
                    tx,
                    id,
                    Account {
                        balance,
                        owner: *b"someone\0",
                    },
                )?;
                by_balance.insert(tx, balance, id)?;
            }
            let names = BTreeMap::<PString, PString>::new(tx)?;
            for (login, name) in [("alice", "Alice Liddell"), ("zoë", "Zoë Ã")] {
                let name = PString::new(tx, name)?;
                names.insert_str(tx, login, name)?;
            }
            let runs_seen = HashMap::<u64, PVec<u64>>::new(tx)?;
            let empty = PVec::new(tx)?;
            runs_seen.insert(tx, 1, empty)?;
            let r = tx.write(root)?;
            r.by_id = by_id;
            r.by_balance = by_balance;
            r.names = names;
            r.runs_seen = runs_seen;
        }
        let r = tx.write(root)?;
        r.runs += 1;
        let Root {
            runs,
            names,
            runs_seen,
            ..
        } = *r;
        // The last run's name for "bob", replacing (and freeing) the one before.
        let bob = PString::new(tx, &format!("Bob, run {runs}"))?;
        if let Some(old) = names.insert_str(tx, "bob", bob)? {
            old.free(tx)?;
        }
        let seen = runs_seen.get(tx, &1)?.expect("the vector of key 1");
        seen.push(tx, runs)?;
        Ok(())
    })?;
    // Reading everything back: a read-only transaction (`&Tx`: nothing can be written).
    pool.read(|tx| {
        let r = *tx.read(root)?;
        let account = r.by_id.get(tx, &7)?;
        let mut richest = Vec::new();
        r.by_balance.for_each_in(tx, 1980.., |balance, id| {
            richest.push((*balance, *id));
            true
        })?;
        let mut names = Vec::new();
        for kv in r.names.iter(tx) {
            let (login, name) = kv?;
            names.push((login.get(tx)?.to_owned(), name.get(tx)?.to_owned()));
        }
        let runs_seen = match r.runs_seen.get(tx, &1)? {
            Some(v) => v.to_vec(tx)?,
            None => Vec::new(),
        };
        Ok(Seen {
            runs: r.runs,
            account,
            richest,
            names,
            runs_seen,
        })
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("pisces-downstream-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("first-week.pool");
    for run_no in 1..=3u64 {
        let want = Seen {
            runs: run_no,
            account: Some(Account {
                balance: 1070,
                owner: *b"someone\0",
            }),
            richest: vec![(1980, 98), (1990, 99)],
            names: vec![
                ("alice".to_owned(), "Alice Liddell".to_owned()),
                ("bob".to_owned(), format!("Bob, run {run_no}")),
                ("zoë".to_owned(), "Zoë Ã".to_owned()),
            ],
            runs_seen: (1..=run_no).collect(),
        };
        let seen = run(&path)?;
        if seen != want {
            return Err(format!("run {run_no}: got {seen:?}, want {want:?}").into());
        }
    }
    std::fs::remove_dir_all(&dir)?;
    println!(
        "downstream: pod!, HashMap, BTreeMap, a string-keyed string map and a \
         vector-valued map from `pisces` alone: ok"
    );
    Ok(())
}
