//! The `timestone` engine's options: the checkpoint window's bounds and reuse policy
//! (module docs, *Write amplification*).

use super::Timestone;
use crate::engine::{EngineDef, EngineOptions, OpenCtx};
use crate::heap::layout::{Regions, MAX_LOGS_PER_THREAD};
use crate::{Error, Result};

/// The checkpoint's high-water mark, in percent of the CLog budget (default 90). The
/// rest is slack for the commits that run while the checkpoint does (a commit that
/// finds the budget full waits for, or runs, a checkpoint); with the default CLog, a
/// quarter of the pool, a tenth of it is megabytes, and the window is what coalesces.
const OPT_HIGH_WATER: &str = "checkpoint_pct";
/// Size of the CLog area in MiB, chosen when the pool is created (default: a
/// quarter of the pool, at most 63 MiB and at least half a thread log plus 12 KiB,
/// [`default_clog_bytes`]; 0: the smallest, half a thread log plus 12 KiB, which
/// crash campaigns use to checkpoint every few updates). It bounds one checkpoint's record, and so how many
/// distinct dirty bytes the TLog gathers before it checkpoints (`checkpoint_pct` of
/// it): the coalescing window (see the module docs on write amplification).
const OPT_CLOG_MIB: &str = "clog_mib";
/// How many of the pool's per-thread log regions (1..=8, `log_bytes_per_thread`
/// each) one thread's OLog spans, chosen when the pool is created (default: as many
/// as keep every thread's OLog within an eighth of the pool, at least 1,
/// [`default_olog_regions`]). A full OLog forces a checkpoint, so this bounds the
/// coalescing window too.
const OPT_OLOG_REGIONS: &str = "olog_regions";

/// Hand out small blocks that were live at K_done and freed inside the checkpoint
/// window before asking the allocator (default false: only when the allocator has no
/// free block left). True keeps the heap smaller; each such block's new contents
/// then take a CLog copy at the checkpoint (`clog`, *Reuse inside a window*).
const OPT_EAGER_REUSE: &str = "eager_reuse";

/// Largest `clog_mib` (the engine area is at most 64 MiB).
const MAX_CLOG_MIB: usize = 63;

/// The default CLog area of a pool of `pool_bytes` with thread logs of `log_bytes`:
/// a quarter of the pool (whole pages, at most 63 MiB), and never less than half a
/// thread log plus 8 KiB (the largest physical OLog record must fit one checkpoint).
///
/// Why a share of the pool: the window must hold a run's distinct dirty bytes for the
/// checkpoint to coalesce anything (module docs, *Write amplification*), and a pool's
/// size is the one measure of its data an engine is given at creation. The cost is
/// pool space (the heap is smaller by it), not DRAM: the DRAM a window holds grows
/// with the updates it spans, whatever the area's size.
pub(super) fn default_clog_bytes(pool_bytes: u64, log_bytes: usize) -> usize {
    let share = usize::try_from(pool_bytes / 4).unwrap_or(usize::MAX) & !4095;
    share
        .min(MAX_CLOG_MIB << 20)
        .max(smallest_clog_bytes(log_bytes))
}

/// The smallest CLog area (`clog_mib=0`): one checkpoint must hold the largest
/// physical OLog record, half a thread log, plus slack.
fn smallest_clog_bytes(log_bytes: usize) -> usize {
    log_bytes / 2 + 8192
}

/// The default `olog_regions` of a pool of `pool_bytes` with `max_threads` thread
/// logs of `log_bytes`: the most regions (up to 8) that keep every thread's OLog
/// within an eighth of the pool, at least 1. A full OLog forces a checkpoint, so the
/// OLog bounds how many updates one window spans; its cost is pool space.
pub(super) fn default_olog_regions(pool_bytes: u64, max_threads: usize, log_bytes: usize) -> usize {
    let per_region = (max_threads.max(1) as u64).saturating_mul(log_bytes.max(1) as u64);
    usize::try_from(pool_bytes / 8 / per_region)
        .unwrap_or(MAX_LOGS_PER_THREAD)
        .clamp(1, MAX_LOGS_PER_THREAD)
}

/// The options an open uses (`clog_mib` and `olog_regions` are the pool's, fixed at
/// its creation by [`TimestoneOptions::regions`]; an open only checks them).
#[derive(Clone, Copy, Debug)]
pub(super) struct TimestoneOptions {
    /// `checkpoint_pct`: 1..=100.
    pub(super) high_water_pct: u64,
}

impl TimestoneOptions {
    /// The option sets test campaigns cycle through.
    pub(super) fn option_sets() -> Vec<EngineOptions> {
        vec![
            EngineOptions::new(),
            // Checkpoint after almost every update (1 % of the smallest CLog), with
            // the narrowest OLog: crash
            // campaigns hit checkpoints and full OLogs (the default window, sized by
            // the pool, rarely fills in a campaign).
            EngineOptions::new()
                .set(OPT_HIGH_WATER, 1)
                .set(OPT_CLOG_MIB, 0)
                .set(OPT_OLOG_REGIONS, 1),
            // Windows of a few updates (5 % of the smallest CLog): checkpoints
            // that write several objects and fresh blocks at once, as the close's
            // checkpoint of a campaign's run does.
            EngineOptions::new()
                .set(OPT_HIGH_WATER, 5)
                .set(OPT_CLOG_MIB, 0),
        ]
    }

    /// The regions of a new pool: the CLog in the engine area and the OLog's log
    /// regions per thread.
    pub(super) fn regions(ctx: &OpenCtx) -> Regions {
        // The CLog: one checkpoint record, bounded by the budget (by default half a
        // thread log: the largest physical record), plus slack. A bad `clog_mib` is
        // reported by `open`.
        let clog = match ctx
            .options
            .parse_or(Timestone::NAME, OPT_CLOG_MIB, usize::MAX)
        {
            Ok(0) => smallest_clog_bytes(ctx.log_bytes_per_thread),
            Ok(mib @ 1..=MAX_CLOG_MIB) => mib << 20,
            _ => default_clog_bytes(ctx.size, ctx.log_bytes_per_thread),
        };
        let default_regions =
            default_olog_regions(ctx.size, ctx.max_threads, ctx.log_bytes_per_thread);
        let regions = ctx
            .options
            .parse_or(Timestone::NAME, OPT_OLOG_REGIONS, default_regions)
            .ok()
            .filter(|n| (1..=MAX_LOGS_PER_THREAD).contains(n))
            .unwrap_or(default_regions);
        Regions {
            logs_per_thread: regions,
            engine_area_bytes: 4096 + clog,
        }
    }

    /// Check `opts` (unknown keys, ranges) and take what an open needs.
    pub(super) fn parse(opts: &EngineOptions) -> Result<TimestoneOptions> {
        let name = Timestone::NAME;
        opts.only(
            name,
            &[
                OPT_HIGH_WATER,
                OPT_CLOG_MIB,
                OPT_OLOG_REGIONS,
                OPT_EAGER_REUSE,
            ],
        )?;
        let regions: usize = opts.parse_or(name, OPT_OLOG_REGIONS, 1)?;
        if !(1..=MAX_LOGS_PER_THREAD).contains(&regions) {
            return Err(Error::InvalidConfig(format!(
                "{OPT_OLOG_REGIONS} must be 1..={MAX_LOGS_PER_THREAD}, not {regions}"
            )));
        }
        let mib: usize = opts.parse_or(name, OPT_CLOG_MIB, 1)?;
        if mib > MAX_CLOG_MIB {
            return Err(Error::InvalidConfig(format!(
                "{OPT_CLOG_MIB} must be 0..={MAX_CLOG_MIB}, not {mib}"
            )));
        }
        let pct: u64 = opts.parse_or(name, OPT_HIGH_WATER, 90)?;
        if !(1..=100).contains(&pct) {
            return Err(Error::InvalidConfig(format!(
                "{OPT_HIGH_WATER} must be 1..=100, not {pct}"
            )));
        }
        Ok(TimestoneOptions {
            high_water_pct: pct,
        })
    }

    /// `eager_reuse` (the open reads it once recovery is done).
    pub(super) fn eager_reuse(opts: &EngineOptions) -> Result<bool> {
        opts.parse_or(Timestone::NAME, OPT_EAGER_REUSE, false)
    }
}
