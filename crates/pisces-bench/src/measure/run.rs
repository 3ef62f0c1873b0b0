//! One measurement from its specification: the pool made and preloaded (or a peer
//! store opened), the workers run for the duration (in this process, or in worker
//! processes: [`super::processes`]), the outcome collected.

use super::processes;
use super::{
    pool_dir, process_write_bytes, unique_pool_path, watch, Outcome, RemoveOnDrop, Spec, Workers,
};
use crate::measure::pin::Placement;
use crate::measure::signal::interrupted;
use crate::peers::{Peer, PeerBench};
use crate::workloads::{DataSet, Sizes};
use pisces::tools::counters;
use pisces::tools::shared_counts::{self, SharedCounts};
use pisces::{MediumKind, Pool, ThreadHandle};
use std::path::Path;
use std::time::Duration;

/// What the workers of a measurement run on.
enum Target {
    /// A library engine's pool: the data set and a handle per worker.
    Lib {
        data: Box<dyn DataSet>,
        handles: Vec<ThreadHandle>,
    },
    /// A peer's store with the data set.
    Peer(PeerBench),
}

/// Run `spec` for `seconds` on a fresh pool (a fresh directory for a peer), its
/// workers placed as `placement` says. `tick(elapsed, transactions so far)` is called
/// about every 50 ms from the calling thread while the workers run.
pub fn measure(
    spec: &Spec,
    sizes: &Sizes,
    seconds: f64,
    seed: u64,
    placement: &Placement,
    tick: &mut dyn FnMut(Duration, u64),
) -> Result<Outcome, String> {
    let dir = spec.disk.clone().unwrap_or_else(pool_dir);
    measure_at(
        &unique_pool_path(&dir),
        spec,
        sizes,
        seconds,
        seed,
        placement,
        tick,
    )
}

/// The pool (None for a peer) and what the workers run on, preloaded at `path`.
fn prepare(
    path: &Path,
    spec: &Spec,
    sizes: &Sizes,
    seconds: f64,
    seed: u64,
) -> Result<(Option<Pool>, Target), String> {
    let bytes = spec.data.pool_bytes(sizes, spec.threads, seconds);
    if let Some(peer) = spec.engine.engine.peer() {
        let data = PeerBench::build(
            peer,
            path,
            spec.data,
            sizes,
            seed,
            peer_map_bytes(peer, bytes),
        )
        .map_err(|e| format!("preloading the {}: {e}", spec.workload))?;
        return Ok((None, Target::Peer(data)));
    }
    let medium = match spec.disk {
        // A fence msyncs what its thread flushed: durable on the device.
        Some(_) => MediumKind::File,
        None => MediumKind::Dram {
            write_latency_ns: spec.nvm_latency_ns,
            bandwidth_bytes_per_sec: 0,
        },
    };
    let config = |medium| {
        spec.engine
            .config(bytes, medium, spec.data.thread_slots(spec.threads), 4 << 20)
    };
    // On a file system a durable preload costs a device sync per preload transaction
    // (per logged write for an undo log): minutes for 100K keys. Where the data set
    // can be reopened, the preload runs on the DRAM medium over the same file (stores
    // reach the page cache, nothing is synced), the file is fsynced once and the pool
    // opened again on the file medium for the measured run.
    let reopen =
        spec.disk.is_some() && spec.engine.engine.flushes_through_medium() && spec.data.reopens();
    let preload_medium = if reopen { MediumKind::DRAM } else { medium };
    let pool = Pool::create(path, config(preload_medium))
        .map_err(|e| format!("creating the pool {}: {e}", path.display()))?;
    let data = spec
        .data
        .build(&pool, sizes, spec.threads, seed)
        .map_err(|e| format!("preloading the {}: {e}", spec.workload))?;
    // Nothing of the preload may be left for the measured run to write back (an
    // engine that defers write-back, such as timestone's checkpoints, would otherwise
    // be charged for it): `write_back`, not `sync`, which timestone answers from its
    // operation log.
    pool.write_back()
        .map_err(|e| format!("syncing the preloaded {}: {e}", spec.workload))?;
    let pool = if reopen {
        drop(pool);
        std::fs::File::open(path)
            .and_then(|f| f.sync_all())
            .map_err(|e| format!("syncing the preloaded pool {}: {e}", path.display()))?;
        let pool = Pool::open(path, config(medium))
            .map_err(|e| format!("opening the preloaded pool {}: {e}", path.display()))?;
        data.reopened(&pool)
            .map_err(|e| format!("reopening the {}: {e}", spec.workload))?;
        pool
    } else {
        pool
    };
    let handles = (0..spec.threads)
        .map(|_| pool.handle())
        .collect::<pisces::Result<Vec<_>>>()
        .map_err(|e| format!("taking thread handles: {e}"))?;
    Ok((Some(pool), Target::Lib { data, handles }))
}

/// The address space LMDB maps for a data set of a pool of `pool_bytes`: room for
/// its copy-on-write pages and free lists (the map is sparse: only pages written take
/// memory). redb and canopydb grow their files themselves.
fn peer_map_bytes(peer: Peer, pool_bytes: u64) -> u64 {
    match peer {
        Peer::Lmdb => 4 * pool_bytes,
        Peer::Redb | Peer::Canopy => pool_bytes,
    }
}

/// [`measure`] with the pool at `path` (which must not exist; removed at the end).
pub(super) fn measure_at(
    path: &Path,
    spec: &Spec,
    sizes: &Sizes,
    seconds: f64,
    seed: u64,
    placement: &Placement,
    tick: &mut dyn FnMut(Duration, u64),
) -> Result<Outcome, String> {
    let _guard = RemoveOnDrop(path.to_path_buf());
    if spec.processes > 1 {
        let exe = std::env::current_exe()
            .map_err(|e| format!("finding the running program to start as workers: {e}"))?;
        return processes::measure_processes_at(
            path, spec, sizes, seconds, seed, placement, &exe, tick,
        );
    }
    let (pool, target) = prepare(path, spec, sizes, seconds, seed)?;
    let duration = Duration::from_secs_f64(seconds);
    let mut shared_before = SharedCounts::default();
    let (mut msyncs_before, mut written_before) = (0, None);
    let (handles, data, peer) = match target {
        Target::Lib { data, handles } => (handles, Some(data), None),
        Target::Peer(p) => (Vec::new(), None, Some(p)),
    };
    let workers = Workers {
        spec,
        seed,
        first: 0,
        placement,
    };
    let outs = workers.run(
        handles,
        data.as_deref(),
        peer.as_ref(),
        &mut || {
            shared_before = shared_counts::totals();
            msyncs_before = counters::msync_calls();
            written_before = process_write_bytes();
        },
        &mut |done| watch(duration, done, tick),
    );
    // What the engine must still write when the workers stop is made durable at
    // close (`sync` writes what a close writes), on this thread: it counts as the
    // run's. (timestone's close writes nothing: its window stays in its operation log
    // for the next open to re-execute.)
    // The pool's own record of a clean close (its superblock), written when the pool
    // is dropped, is not the engine's work: it is left out.
    let peer_conflicts = peer.as_ref().map_or(0, PeerBench::conflicts);
    // Read-only, before the close's counters are taken: what it reads is not the
    // run's work, and it writes nothing.
    let checked = match (&pool, data.as_deref(), peer.as_ref()) {
        (Some(pool), Some(data), _) => data.final_check(pool),
        (_, _, Some(peer)) => peer.final_check(),
        _ => Ok(()),
    };
    let before_close = counters::snapshot();
    drop(data);
    drop(peer);
    let synced = pool.as_ref().map_or(Ok(()), |p| p.sync());
    let at_close = counters::snapshot() - before_close;
    drop(pool);
    let shared = shared_counts::totals() - shared_before;
    let msyncs = counters::msync_calls() - msyncs_before;
    let device_write_bytes = process_write_bytes()
        .zip(written_before)
        .map(|(after, before)| after.saturating_sub(before));
    synced.map_err(|e| format!("closing the pool: {e}"))?;
    checked.map_err(|e| format!("checking the {} after the run: {e}", spec.workload))?;
    if interrupted() {
        return Err("interrupted".into());
    }
    let mut o = Outcome::empty(shared, msyncs, device_write_bytes)?;
    for w in outs {
        o.add_worker(&w?)?;
    }
    o.counters.add(at_close);
    o.conflicts += peer_conflicts;
    Ok(o)
}
