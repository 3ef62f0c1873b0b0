//! The `timestone` engine's options, typed ([`TimestoneOptions`], whose fields
//! document each key) and as `key=value` text: the checkpoint window's bounds and
//! reuse policy (module docs, *Write amplification*).

use super::Timestone;
use crate::engine::options::{typed_options, BOOL};
use crate::engine::{EngineDef, EngineOptions, OpenCtx};
use crate::heap::layout::{Regions, MAX_LOGS_PER_THREAD};
use crate::Result;

/// The checkpoint's high-water mark, in percent of the CLog budget (default 90). The
/// rest is slack for the commits that run while the checkpoint does (a commit that
/// finds the budget full waits for, or runs, a checkpoint); with the default CLog, a
/// quarter of the pool, a tenth of it is megabytes, and the window is what coalesces.
const OPT_HIGH_WATER: &str = "checkpoint_pct";
/// Size of the CLog area in MiB, chosen when the pool is created (default: a
/// quarter of the pool, at most 63 MiB and at least half a thread log plus 8 KiB,
/// [`default_clog_bytes`]; 0: the smallest, half a thread log plus 8 KiB, which
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

/// The `timestone` engine's options, typed: the keys of its [`EngineOptions`], which
/// this converts into (`From`; a `None` field writes no key) and is parsed from
/// (`TryFrom<&EngineOptions>`, `FromStr`; `Display` writes the same text).
/// `clog_mib` and `olog_regions` are fixed when the pool is created; an open only
/// checks them.
///
/// ```
/// use pisces::{Config, EngineId, TimestoneOptions};
/// let o = TimestoneOptions {
///     clog_mib: Some(63),
///     olog_regions: Some(8),
///     ..TimestoneOptions::default()
/// };
/// assert_eq!(
///     o.to_string(),
///     "checkpoint_pct=90,clog_mib=63,olog_regions=8,eager_reuse=false"
/// );
/// assert_eq!(o.to_string().parse::<TimestoneOptions>().unwrap(), o);
/// assert_eq!("".parse::<TimestoneOptions>().unwrap(), TimestoneOptions::default());
/// let cfg = Config::default().engine(EngineId::Timestone).engine_options(o);
/// assert_eq!(TimestoneOptions::try_from(&cfg.engine_options).unwrap(), o);
/// let e = "clog_mib=64".parse::<TimestoneOptions>().unwrap_err();
/// assert!(e.to_string().contains(
///     "timestone option `clog_mib`: expected a size in MiB 0..=63 (0: the smallest), got `64`"
/// ));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestoneOptions {
    /// `checkpoint_pct` (1..=100; default 90): the checkpoint's high-water mark, in
    /// percent of the CLog budget. The rest is slack for the commits that run while
    /// the checkpoint does (a commit that finds the budget full waits for, or runs, a
    /// checkpoint).
    pub checkpoint_pct: u64,
    /// `clog_mib` (0..=63, in MiB; `None`, the default: a quarter of the pool, at most
    /// 63 MiB and at least half a thread log plus 8 KiB; 0: that smallest size, which
    /// crash campaigns use to checkpoint every few updates): the CLog area, fixed when
    /// the pool is created. It bounds one checkpoint's record, and so how many
    /// distinct dirty bytes the TLog gathers before it checkpoints: the coalescing
    /// window.
    pub clog_mib: Option<usize>,
    /// `olog_regions` (1..=8; `None`, the default: as many as keep every thread's OLog
    /// within an eighth of the pool, at least 1): how many of the pool's per-thread log
    /// regions (`log_bytes_per_thread` each) one thread's OLog spans, fixed when the
    /// pool is created. A full OLog forces a checkpoint, so this bounds the coalescing
    /// window too.
    pub olog_regions: Option<usize>,
    /// `eager_reuse` (`true` or `false`; default `false`): hand out small blocks that
    /// were live at K_done and freed inside the checkpoint window before asking the
    /// allocator (`false`: only when the allocator has no free block left). `true`
    /// keeps the heap smaller; each such block's new contents then take a CLog copy
    /// at the checkpoint.
    pub eager_reuse: bool,
}

impl Default for TimestoneOptions {
    fn default() -> Self {
        TimestoneOptions {
            checkpoint_pct: 90,
            clog_mib: None,
            olog_regions: None,
            eager_reuse: false,
        }
    }
}

/// What `checkpoint_pct` takes.
const PCT_FORM: &str = "a percentage 1..=100";
/// What `clog_mib` takes.
const CLOG_FORM: &str = "a size in MiB 0..=63 (0: the smallest)";
/// What `olog_regions` takes.
const REGIONS_FORM: &str = "an integer 1..=8";

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
    /// regions per thread. Options that do not parse are reported by `open`; here they
    /// count as unset.
    pub(super) fn regions(ctx: &OpenCtx) -> Regions {
        let o = TimestoneOptions::parse(Timestone::NAME, &ctx.options).unwrap_or_default();
        // The CLog: one checkpoint record, bounded by the budget (by default half a
        // thread log: the largest physical record), plus slack.
        let clog = match o.clog_mib {
            Some(0) => smallest_clog_bytes(ctx.log_bytes_per_thread),
            Some(mib) => mib << 20,
            None => default_clog_bytes(ctx.size, ctx.log_bytes_per_thread),
        };
        let regions = o.olog_regions.unwrap_or_else(|| {
            default_olog_regions(ctx.size, ctx.max_threads, ctx.log_bytes_per_thread)
        });
        Regions {
            logs_per_thread: regions,
            engine_area_bytes: 4096 + clog,
        }
    }

    /// Parse and validate `opts` for engine `engine` (unknown keys, forms, ranges).
    pub(crate) fn parse(engine: &str, opts: &EngineOptions) -> Result<TimestoneOptions> {
        opts.only(
            engine,
            &[
                OPT_HIGH_WATER,
                OPT_CLOG_MIB,
                OPT_OLOG_REGIONS,
                OPT_EAGER_REUSE,
            ],
        )?;
        let d = TimestoneOptions::default();
        Ok(TimestoneOptions {
            checkpoint_pct: opts
                .typed(engine, OPT_HIGH_WATER, PCT_FORM, |p| (1..=100).contains(p))?
                .unwrap_or(d.checkpoint_pct),
            clog_mib: opts.typed(engine, OPT_CLOG_MIB, CLOG_FORM, |m| *m <= MAX_CLOG_MIB)?,
            olog_regions: opts.typed(engine, OPT_OLOG_REGIONS, REGIONS_FORM, |n| {
                (1..=MAX_LOGS_PER_THREAD).contains(n)
            })?,
            eager_reuse: opts
                .typed(engine, OPT_EAGER_REUSE, BOOL, |_| true)?
                .unwrap_or(d.eager_reuse),
        })
    }
}

typed_options!(TimestoneOptions, Timestone::NAME);

impl From<TimestoneOptions> for EngineOptions {
    fn from(o: TimestoneOptions) -> EngineOptions {
        let mut e = EngineOptions::new().set(OPT_HIGH_WATER, o.checkpoint_pct);
        if let Some(mib) = o.clog_mib {
            e = e.set(OPT_CLOG_MIB, mib);
        }
        if let Some(n) = o.olog_regions {
            e = e.set(OPT_OLOG_REGIONS, n);
        }
        e.set(OPT_EAGER_REUSE, o.eager_reuse)
    }
}
