//! A user's first program: pool objects declared with `pisces::pod!`, a hash map and a
//! B+-tree kept in the root object, a second run that finds them again.

use pisces::{BTreeMap, Config, HashMap, PPtr, Pool};

pisces::pod! {
    /// The root object: the handles of the two containers and a run counter.
    struct Root {
        runs: u64,
        by_id: HashMap<u64, Account>,
        by_balance: BTreeMap<u64, u64>,
    }

    /// A value stored in the hash map.
    #[derive(Debug, PartialEq)]
    struct Account {
        balance: u64,
        owner: [u8; 8],
    }
}

fn run(path: &std::path::Path) -> pisces::Result<(u64, Option<Account>, Vec<(u64, u64)>)> {
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
            let r = tx.write(root)?;
            r.by_id = by_id;
            r.by_balance = by_balance;
        }
        tx.write(root)?.runs += 1;
        Ok(())
    })?;
    pool.run(|tx| {
        let r = *tx.read(root)?;
        let account = r.by_id.get(tx, &7)?;
        let mut richest = Vec::new();
        r.by_balance.for_each_in(tx, 1980.., |balance, id| {
            richest.push((*balance, *id));
            true
        })?;
        Ok((r.runs, account, richest))
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("pisces-downstream-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("first-week.pool");
    let want_account = Some(Account {
        balance: 1070,
        owner: *b"someone\0",
    });
    let want_richest = vec![(1980, 98), (1990, 99)];
    for want_runs in 1..=2 {
        let (runs, account, richest) = run(&path)?;
        if (runs, &account, &richest) != (want_runs, &want_account, &want_richest) {
            return Err(
                format!("run {want_runs}: got {runs} runs, {account:?}, {richest:?}").into(),
            );
        }
    }
    std::fs::remove_dir_all(&dir)?;
    println!("downstream: pod!, HashMap and BTreeMap from `pisces` alone: ok");
    Ok(())
}
