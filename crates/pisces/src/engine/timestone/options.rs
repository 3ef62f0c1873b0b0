//! The `timestone` engine's options: the checkpoint window's bounds and reuse policy
//! (module docs, *Write amplification*).

use super::Timestone;
use crate::engine::{EngineDef, EngineOptions, OpenCtx};
use crate::heap::layout::{Regions, MAX_LOGS_PER_THREAD};
use crate::{Error, Result};

/// The checkpoint's high-water mark, in percent of the CLog budget (default 50).
const OPT_HIGH_WATER: &str = "checkpoint_pct";
/// Size of the CLog area in MiB, chosen when the pool is created (default: half a
/// thread log plus 12 KiB). It bounds one checkpoint's record, and so how many
/// distinct dirty bytes the TLog gathers before it checkpoints (`checkpoint_pct` of
/// it): the coalescing window (see the module docs on write amplification).
const OPT_CLOG_MIB: &str = "clog_mib";
/// How many of the pool's per-thread log regions (1..=8, `log_bytes_per_thread`
/// each) one thread's OLog spans, chosen when the pool is created (default 1). A
/// full OLog forces a checkpoint, so this bounds the coalescing window too.
const OPT_OLOG_REGIONS: &str = "olog_regions";

/// Hand out small blocks that were live at K_done and freed inside the checkpoint
/// window before asking the allocator (default false: only when the allocator has no
/// free block left). True keeps the heap smaller; each such block's new contents
/// then take a CLog copy at the checkpoint (`clog`, *Reuse inside a window*).
const OPT_EAGER_REUSE: &str = "eager_reuse";

/// Largest `clog_mib` (the engine area is at most 64 MiB).
const MAX_CLOG_MIB: usize = 63;

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
            // Checkpoint after almost every update: crash campaigns hit checkpoints.
            EngineOptions::new().set(OPT_HIGH_WATER, 1),
        ]
    }

    /// The regions of a new pool: the CLog in the engine area and the OLog's log
    /// regions per thread.
    pub(super) fn regions(ctx: &OpenCtx) -> Regions {
        // The CLog: one checkpoint record, bounded by the budget (by default half a
        // thread log: the largest physical record), plus slack. A bad `clog_mib` is
        // reported by `open`.
        let clog = match ctx.options.parse_or(Timestone::NAME, OPT_CLOG_MIB, 0usize) {
            Ok(mib @ 1..=MAX_CLOG_MIB) => mib << 20,
            _ => ctx.log_bytes_per_thread / 2 + 8192,
        };
        let regions = ctx
            .options
            .parse_or(Timestone::NAME, OPT_OLOG_REGIONS, 1usize)
            .ok()
            .filter(|n| (1..=MAX_LOGS_PER_THREAD).contains(n))
            .unwrap_or(1);
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
        if !(1..=MAX_CLOG_MIB).contains(&mib) {
            return Err(Error::InvalidConfig(format!(
                "{OPT_CLOG_MIB} must be 1..={MAX_CLOG_MIB}, not {mib}"
            )));
        }
        let pct: u64 = opts.parse_or(name, OPT_HIGH_WATER, 50)?;
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
