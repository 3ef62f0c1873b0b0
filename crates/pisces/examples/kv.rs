//! A small persistent key-value store for arbitrary byte strings.
//!
//! ```text
//! cargo run -p pisces --example kv -- [--pool PATH] put KEY VALUE
//! cargo run -p pisces --example kv -- [--pool PATH] get KEY
//! cargo run -p pisces --example kv -- [--pool PATH] del KEY
//! cargo run -p pisces --example kv -- [--pool PATH] list [PREFIX]
//! ```
//! The pool (default `kv.pool` in the current directory) is created on first use. Keys
//! and values are byte strings of any length ([`PBytes`]); the map is a
//! `BTreeMap<PBytes, PBytes>` in the root object, so `list` prints keys in byte order.
//! `put` replaces a value and frees the old one in the same transaction; `del` frees
//! the key and the value. Exit status: 0, or 1 when `get`/`del` find no such key, or 2
//! on a usage error.

use pisces::{BTreeMap, Config, PBytes, PPtr, Pool};
use std::io::Write;
use std::ops::Bound;
use std::os::unix::ffi::OsStrExt;

type Store = BTreeMap<PBytes, PBytes>;

fn usage() -> ! {
    eprintln!("usage: kv [--pool PATH] (put KEY VALUE | get KEY | del KEY | list [PREFIX])");
    std::process::exit(2)
}

/// The first key after every key that starts with `prefix` (none if every byte of the
/// prefix is 0xff).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mut path = std::path::PathBuf::from("kv.pool");
    if args.first().is_some_and(|a| a == "--pool") {
        if args.len() < 2 {
            usage();
        }
        path = args.remove(1).into();
        args.remove(0);
    }
    let arg = |i: usize| args.get(i).map(|a| a.as_bytes().to_vec());
    let cmd = arg(0).unwrap_or_else(|| usage());
    let pool = Pool::open_or_create(&path, Config::default().size(32 << 20))?;
    let root: PPtr<Store> = pool.root()?;
    let store = pool.run(|tx| {
        let mut s = *tx.read(root)?;
        if s.is_null() {
            s = Store::new(tx)?;
            *tx.write(root)? = s;
        }
        Ok(s)
    })?;
    let mut out = std::io::stdout().lock();
    match (cmd.as_slice(), args.len()) {
        (b"put", 3) => {
            let (k, v) = (arg(1).unwrap(), arg(2).unwrap());
            pool.run(|tx| {
                let v = PBytes::new(tx, &v)?;
                if let Some(old) = store.insert_bytes(tx, &k, v)? {
                    old.free(tx)?; // the map hands the replaced value back: free it
                }
                Ok(())
            })?;
        }
        (b"get", 2) => {
            let k = arg(1).unwrap();
            let v = pool.run(|tx| store.get(tx, &k)?.map(|v| v.to_vec(tx)).transpose())?;
            match v {
                Some(v) => {
                    out.write_all(&v)?;
                    out.write_all(b"\n")?;
                }
                None => std::process::exit(1),
            }
        }
        (b"del", 2) => {
            let k = arg(1).unwrap();
            if !pool.run(|tx| store.remove_and_free(tx, &k))? {
                std::process::exit(1);
            }
        }
        (b"list", 1 | 2) => {
            let prefix = arg(1).unwrap_or_default();
            let end = prefix_end(&prefix);
            let bounds = (
                Bound::Included(&prefix[..]),
                end.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
            );
            let lines = pool.run(|tx| {
                let mut lines = Vec::new();
                let mut err = Ok(());
                store.for_each_in(tx, bounds, |k, v| {
                    match (k.get(tx), v.get(tx)) {
                        (Ok(k), Ok(v)) => {
                            let mut line = k.to_vec();
                            line.push(b'\t');
                            line.extend_from_slice(v);
                            lines.push(line);
                        }
                        (Err(e), _) | (_, Err(e)) => err = Err(e),
                    }
                    err.is_ok()
                })?;
                err.map(|()| lines)
            })?;
            for l in lines {
                out.write_all(&l)?;
                out.write_all(b"\n")?;
            }
        }
        _ => usage(),
    }
    Ok(())
}
