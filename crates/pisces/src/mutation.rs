//! Mutation switches: each removes one protocol step of the Pisces engine, so that
//! tests can show the step is needed (the test that guards it fails without it).
//!
//! Compiled in only with the `mutation` cargo feature, which is for tests: without it,
//! [`active`] is a constant `false` and every check folds away. With it, at most one
//! mutation is active at a time, chosen at run time with [`set`].

/// A protocol step that a mutation removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mutation {
    /// Readers do not wait while a writer is in its commit critical section (line 14).
    InCriticalWait = 1,
    /// Write-back does not wait for older snapshots (lines 52-54).
    GracePeriod = 2,
    /// Log records are accepted without a valid checksum.
    Checksum = 3,
    /// Log space is recycled without first persisting the watermark.
    Watermark = 4,
    /// The log record is not flushed before its persistTS makes it count.
    LogFlush = 5,
    /// timestone: the OLog record is neither flushed nor fenced at commit.
    TsOLogPersist = 6,
    /// timestone: a checkpoint writes home before its CLog record is durable.
    TsCheckpointOrder = 7,
    /// timestone: readers take the newest version whatever its stamp.
    TsVisibility = 8,
    /// timestone: serializable transactions skip read-set validation.
    TsValidation = 9,
    /// heap: a grown pool's new size reaches the superblock only when the first block
    /// of the new region is published (after its transaction committed), not before
    /// the new region is handed out.
    GrowSizeLate = 10,
    /// timestone: a committer's guard is the clock value, not a lower bound of its
    /// timestamp (snapshots fall one below the last completed commit).
    TsCommitGuard = 11,
    /// spht: a committer does not wait for transactions with smaller timestamps to
    /// persist before it advances the durability marker (§3.1's wait).
    SphtWait = 12,
    /// spht: skipCAS delegates the marker to any slot with a larger published
    /// timestamp, not only to an update transaction (a committer still validating may
    /// abort and never advance the marker).
    SphtSkipCas = 20,
    /// spht: a committer does not link itself into its predecessor's forward slot.
    SphtForwardLink = 21,
    /// spht: every replay shard applies every word, not only those of its chunks.
    SphtShardFilter = 22,
    /// spht: backward replay applies every write (no duplicate filter), so the oldest
    /// value of a word wins.
    SphtDuplicateFilter = 23,
    /// spht: scan replay takes the slots' logs one after the other instead of merging
    /// them by timestamp.
    SphtScanMerge = 24,
    /// timestone: a checkpoint's write-back of changed words loses the last changed
    /// span of each object.
    TsCheckpointDiff = 30,
    /// timestone: the blocks a checkpoint writes home outside the CLog (allocated since
    /// the last one) share the CLog record's fence instead of being fenced before the
    /// record is written.
    TsFreshFence = 31,
    /// pisces: the write-back that publishes a free leaves the block's header word
    /// marked live (allocated), so the read fast path still accepts the freed object.
    FreedStaysLive = 40,
    /// sp3 and spht: recovery marks a record only for the replay part of the first
    /// chunk its data entries write, so a parallel replay thread skips the pieces of
    /// its own chunks that a record writes beyond that chunk (`kit::recovery::replay_parts`).
    ReplayPartMask = 50,
    /// sp3 and spht: recovery does not put the slots' logs, parsed in parallel, back
    /// in slot order (a log is then taken for another slot's; `kit::recovery::per_slot`).
    ParseSlotOrder = 51,
    /// redo logs: the parser does not skip the gap after a line-aligned record, so it
    /// stops there and recovery loses the records after it.
    LogLineSkip = 72,
    /// pisces: a writer's check that a block it just locked is still allocated trusts
    /// any unlocked header word the lock replaced (also the freed marker), not only
    /// this run's live marker.
    LockedCheckTrustsAny = 70,
    /// pisces: the group-commit write-back that does not wait (it writes back only the
    /// transactions whose grace period has passed) writes back the whole batch, as if
    /// no reader were older than its transactions.
    DeferredWriteBackIgnoresReaders = 73,
    /// pisces: a write-back of part of a batch clears the slot's `pending_min` as if
    /// the whole batch were written back, so the watermark may pass the persistTS of a
    /// record still waiting in the batch.
    PartialWriteBackClearsPending = 74,
    /// timestone: an operation record's block words name the size class after the
    /// block's own (an encoding error of the compact operation record).
    TsOpBlockCode = 60,
    /// timestone: a checkpoint writes every block whose last change in its window is
    /// an allocation straight home before the CLog record (the fresh-block path),
    /// also one that was live at K_done, freed and handed out again inside the window.
    TsReuseFresh = 61,
    /// timestone: the reuse lists hand a transaction a block that a commit freed
    /// after its snapshot, for which that block is still a live object: reads through
    /// the pointers the snapshot holds then find the transaction's own new object
    /// (an inconsistent snapshot, no crash needed). Shown by the engine's unit test
    /// `a_block_freed_after_the_snapshot_is_not_handed_to_it`, not by the crash
    /// campaigns of [`Mutation::TIMESTONE`].
    TsReuseAfterSnapshot = 65,
    /// timestone: a checkpoint writes the allocator bits of fresh blocks (allocated
    /// since the last one), which have no CLog entry, after the CLog record's fence
    /// with the other home writes instead of before the record.
    TsFreshBits = 62,
    /// timestone: an operation record's run word counts one block fewer than the
    /// consecutive allocations it stands for.
    TsOpBlockRun = 63,
    /// timestone: packing an operation record's arguments takes bytes equal to 1 for
    /// zero bytes (they are re-executed as 0).
    TsArgsPacking = 64,
    /// sp3: recovery replay does not flush the lines it wrote before its fence (they
    /// are then retired without being durable).
    Sp3ReplayFlush = 52,
    /// spht: recovery's validation pass notes no record as holding allocator entries,
    /// so the allocator pass of its replay skips every record.
    SphtRecoveryAllocFlags = 53,
    /// spht: the dense duplicate filter of recovery's replay keeps one bit per cache
    /// line instead of one per word, so the older writes of a line's other words are
    /// taken for duplicates and skipped.
    SphtDenseFilterUnit = 54,
    /// spht: recovery's parse validates only the first entry of each record.
    SphtParseValidation = 55,
}

impl Mutation {
    /// All mutations.
    pub const ALL: [Mutation; 5] = [
        Mutation::InCriticalWait,
        Mutation::GracePeriod,
        Mutation::Checksum,
        Mutation::Watermark,
        Mutation::LogFlush,
    ];
    /// The timestone engine's mutations (not in [`Mutation::ALL`], which the Pisces
    /// mutation suite iterates).
    pub const TIMESTONE: [Mutation; 12] = [
        Mutation::TsOLogPersist,
        Mutation::TsCheckpointOrder,
        Mutation::TsVisibility,
        Mutation::TsValidation,
        Mutation::TsCommitGuard,
        Mutation::TsCheckpointDiff,
        Mutation::TsFreshFence,
        Mutation::TsOpBlockCode,
        Mutation::TsReuseFresh,
        Mutation::TsFreshBits,
        Mutation::TsOpBlockRun,
        Mutation::TsArgsPacking,
    ];
    /// The spht engine's mutations (their tests are the engine's unit tests).
    pub const SPHT: [Mutation; 9] = [
        Mutation::SphtWait,
        Mutation::SphtSkipCas,
        Mutation::SphtForwardLink,
        Mutation::SphtShardFilter,
        Mutation::SphtDuplicateFilter,
        Mutation::SphtScanMerge,
        Mutation::SphtRecoveryAllocFlags,
        Mutation::SphtDenseFilterUnit,
        Mutation::SphtParseValidation,
    ];
}

#[cfg(feature = "mutation")]
static ACTIVE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// True if mutation `m` is active.
#[inline(always)]
pub fn active(m: Mutation) -> bool {
    #[cfg(feature = "mutation")]
    {
        ACTIVE.load(std::sync::atomic::Ordering::Relaxed) == m as u8
    }
    #[cfg(not(feature = "mutation"))]
    {
        let _ = m;
        false
    }
}

/// Activate mutation `m`, or none (`None`, the same as [`clear`]). Panics without the
/// `mutation` feature when `m` is `Some`.
///
/// # Safety
/// A mutation removes a step of an engine's protocol on purpose, so that a test can
/// show the step matters. Without it the engine may let a reader use memory that is
/// being freed or overwritten, or two threads write the same memory without order:
/// undefined behaviour in the running program, not only a wrong result. Activate a
/// mutation only in mutation tests, whose outcome is read as evidence about the
/// protocol, never in a program whose data matters. Switch it while no pool is in
/// use: the switch is process-wide and takes effect in the middle of a protocol step.
pub unsafe fn set(m: Option<Mutation>) {
    #[cfg(feature = "mutation")]
    ACTIVE.store(
        m.map_or(0, |m| m as u8),
        std::sync::atomic::Ordering::Relaxed,
    );
    #[cfg(not(feature = "mutation"))]
    assert!(m.is_none(), "built without the `mutation` feature");
}

/// Deactivate any mutation: every protocol step runs again.
pub fn clear() {
    // SAFETY: with no mutation active no protocol step is removed (see `set`).
    unsafe { set(None) }
}
