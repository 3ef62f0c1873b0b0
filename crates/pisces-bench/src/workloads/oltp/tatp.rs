//! TATP (Telecom Application Transaction Processing; the paper's §5.3, Fig 8b), scaled
//! down in quick mode.
//!
//! Tables are persistent B+-trees with fanout 32 (`BTreeMap<u64, PPtr<Row>, 32>`, the
//! same tables as TPC-C), every row a separately allocated persistent object:
//!
//! | table            | key                        | rows per subscriber            |
//! |------------------|----------------------------|--------------------------------|
//! | subscriber       | `s_id`                     | 1                              |
//! | access_info      | `s_id, ai_type`            | 1..=4 (distinct types 1..=4)   |
//! | special_facility | `s_id, sf_type`            | 1..=4 (distinct types 1..=4)   |
//! | call_forwarding  | `s_id, sf_type, start_time`| 0..=3 per special facility     |
//!
//! **Scale.** The paper (and the TATP default) has 200 000 subscribers: `--full` has
//! them; `--quick` (and `--workloads tatp` without `--full`) has 20 000.
//! `--tatp-subscribers` overrides it. Subscriber ids are TATP's non-uniform
//! `(rand(0, A) | rand(1, P)) % P + 1` with `A = 65535`. `sub_nbr` is the subscriber id
//! as a 15-digit decimal string (as TATP populates it), so the transactions that name
//! a subscriber by `sub_nbr` find its `s_id` by parsing it (the identity index).
//!
//! **The mix** (TATP's standard one): read-only 80 % — GET_SUBSCRIBER_DATA 35 %,
//! GET_NEW_DESTINATION 10 %, GET_ACCESS_DATA 35 %; read-write 20 % —
//! UPDATE_SUBSCRIBER_DATA 2 %, UPDATE_LOCATION 14 %, INSERT_CALL_FORWARDING 2 %,
//! DELETE_CALL_FORWARDING 2 %. The worker's `update` draw (the plan's `update_pct`
//! of 20) picks the group, and [`TatpBench`] the transaction within it, with the
//! group's relative weights; so read-only and read-write latencies land in their own
//! histograms.
//!
//! **Failures.** As in TATP, some transactions find nothing to do (no such access-info
//! or special-facility row, an inactive facility, a call-forwarding row that already
//! exists or does not exist). They check before they write, so they commit having
//! written nothing instead of rolling back (same final state); every transaction
//! counts in the throughput, as in the paper's Mops/s. Changed bytes (the write
//! amplification denominator): UPDATE_SUBSCRIBER_DATA 2 (`bit_1`, `data_a`),
//! UPDATE_LOCATION 4 (`vlr_location`), INSERT_CALL_FORWARDING the row (32) + 16 for the
//! index entry, DELETE_CALL_FORWARDING 16 (the index entry); 0 when nothing was done.

use crate::workloads::OpRng;
use crate::workloads::{DataSet, Sizes};
use pisces::{BTreeMap, Error, PPtr, Pod, Pool, ThreadHandle, Zeroable};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::mem::size_of;
use std::sync::atomic::{AtomicU64, Ordering};

/// A table: fanout-32 B+-tree from a packed key to a separately allocated row.
pub type Table<R> = BTreeMap<u64, PPtr<R>, 32>;

/// Subscribers loaded per preload transaction (with their other rows).
const PRELOAD_BATCH: usize = 16;
/// TATP's `A` for populations up to 1 000 000.
const NURAND_A: u64 = 65_535;

/// Key packing.
pub mod keys {
    /// Access info `(s_id, ai_type)`, type in `1..=4`.
    pub fn access_info(s: u64, ai_type: u8) -> u64 {
        s << 2 | u64::from(ai_type - 1)
    }
    /// Special facility `(s_id, sf_type)`, type in `1..=4`.
    pub fn special_facility(s: u64, sf_type: u8) -> u64 {
        s << 2 | u64::from(sf_type - 1)
    }
    /// Call forwarding `(s_id, sf_type, start_time)`, start time 0, 8 or 16.
    pub fn call_forwarding(s: u64, sf_type: u8, start_time: u8) -> u64 {
        special_facility(s, sf_type) << 2 | u64::from(start_time / 8)
    }
}

/// SUBSCRIBER.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct Subscriber {
    pub s_id: u64,
    /// `s_id` as 15 decimal digits.
    pub sub_nbr: [u8; 16],
    /// `bit_1 ..= bit_10` (0 or 1).
    pub bit: [u8; 10],
    /// `hex_1 ..= hex_10` (0..=15).
    pub hex: [u8; 10],
    /// `byte2_1 ..= byte2_10`.
    pub byte2: [u8; 10],
    pub _pad: [u8; 2],
    pub msc_location: u32,
    pub vlr_location: u32,
}

/// ACCESS_INFO.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct AccessInfo {
    pub s_id: u64,
    pub ai_type: u8,
    pub data1: u8,
    pub data2: u8,
    pub data3: [u8; 3],
    pub data4: [u8; 5],
    pub _pad: [u8; 5],
}

/// SPECIAL_FACILITY.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct SpecialFacility {
    pub s_id: u64,
    pub sf_type: u8,
    pub is_active: u8,
    pub error_cntrl: u8,
    pub data_a: u8,
    pub data_b: [u8; 5],
    pub _pad: [u8; 7],
}

/// CALL_FORWARDING.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct CallForwarding {
    pub s_id: u64,
    pub sf_type: u8,
    pub start_time: u8,
    pub end_time: u8,
    pub _pad: [u8; 5],
    pub numberx: [u8; 16],
}

/// Successful changes of the call-forwarding table since the preload.
#[derive(Debug, Default)]
pub struct Changes {
    /// Rows INSERT_CALL_FORWARDING inserted.
    pub inserted: AtomicU64,
    /// Rows DELETE_CALL_FORWARDING deleted.
    pub deleted: AtomicU64,
}

/// The TATP data set (see the module docs).
pub struct TatpBench {
    /// Subscribers `1..=subscribers`.
    pub subscribers: u64,
    pub subscriber: Table<Subscriber>,
    pub access_info: Table<AccessInfo>,
    pub special_facility: Table<SpecialFacility>,
    pub call_forwarding: Table<CallForwarding>,
    /// Call-forwarding rows inserted and deleted by the workers.
    pub changes: Changes,
}

/// The transactions of TATP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxKind {
    GetSubscriberData,
    GetNewDestination,
    GetAccessData,
    UpdateSubscriberData,
    UpdateLocation,
    InsertCallForwarding,
    DeleteCallForwarding,
}

impl TxKind {
    /// A read-only transaction with TATP's weights (35 : 10 : 35).
    fn read_only(rng: &mut OpRng) -> TxKind {
        match rng.gen_range(0..80) {
            0..=34 => TxKind::GetSubscriberData,
            35..=44 => TxKind::GetNewDestination,
            _ => TxKind::GetAccessData,
        }
    }
    /// A read-write transaction with TATP's weights (2 : 14 : 2 : 2).
    fn read_write(rng: &mut OpRng) -> TxKind {
        match rng.gen_range(0..20) {
            0..=1 => TxKind::UpdateSubscriberData,
            2..=15 => TxKind::UpdateLocation,
            16..=17 => TxKind::InsertCallForwarding,
            _ => TxKind::DeleteCallForwarding,
        }
    }
}

fn digits<const N: usize>(rng: &mut OpRng) -> [u8; N] {
    let mut s = [0u8; N];
    for b in &mut s[..N.min(15)] {
        *b = b'0' + rng.gen_range(0..10);
    }
    s
}

fn upper<const N: usize>(rng: &mut OpRng) -> [u8; N] {
    let mut s = [0u8; N];
    for b in &mut s {
        *b = b'A' + rng.gen_range(0..26);
    }
    s
}

/// `s_id` as 15 decimal digits.
pub fn sub_nbr(s_id: u64) -> [u8; 16] {
    let mut s = [0u8; 16];
    let mut v = s_id;
    for b in s[..15].iter_mut().rev() {
        *b = b'0' + (v % 10) as u8;
        v /= 10;
    }
    s
}

/// The subscriber id of a `sub_nbr` (the identity index, see the module docs).
fn s_id_of(nbr: &[u8; 16]) -> u64 {
    nbr[..15]
        .iter()
        .fold(0u64, |a, &b| a * 10 + u64::from(b.wrapping_sub(b'0')))
}

fn missing(key: u64) -> Error {
    Error::Corrupt(format!("tatp: subscriber {key} is missing").into())
}

fn row_bytes<R>() -> u64 {
    (size_of::<R>() as u64 + 8).next_multiple_of(16) + 48
}

/// Bytes to reserve for the tables at `sizes` (rows, their size class and header,
/// about 48 bytes of index per row; call-forwarding rows at the most TATP loads).
pub fn pool_bytes(sizes: &Sizes) -> u64 {
    sizes.tatp_subscribers as u64
        * (row_bytes::<Subscriber>()
            + 4 * row_bytes::<AccessInfo>()
            + 4 * row_bytes::<SpecialFacility>()
            + 6 * row_bytes::<CallForwarding>())
}

/// The rows of one subscriber.
struct Population {
    sub: Subscriber,
    ai: Vec<AccessInfo>,
    sf: Vec<SpecialFacility>,
    cf: Vec<CallForwarding>,
}

fn populate(s_id: u64, rng: &mut OpRng) -> Population {
    let mut bit = [0u8; 10];
    let mut hex = [0u8; 10];
    let mut byte2 = [0u8; 10];
    for i in 0..10 {
        bit[i] = rng.gen_range(0..=1);
        hex[i] = rng.gen_range(0..=15);
        byte2[i] = rng.gen();
    }
    let sub = Subscriber {
        s_id,
        sub_nbr: sub_nbr(s_id),
        bit,
        hex,
        byte2,
        _pad: [0; 2],
        msc_location: rng.gen(),
        vlr_location: rng.gen(),
    };
    let mut types = [1u8, 2, 3, 4];
    types.shuffle(rng);
    let n = rng.gen_range(1..=4);
    let ai = types[..n]
        .iter()
        .map(|&t| AccessInfo {
            s_id,
            ai_type: t,
            data1: rng.gen(),
            data2: rng.gen(),
            data3: upper(rng),
            data4: upper(rng),
            _pad: [0; 5],
        })
        .collect();
    types.shuffle(rng);
    let n = rng.gen_range(1..=4);
    let mut cf = Vec::new();
    let sf = types[..n]
        .iter()
        .map(|&t| {
            let mut starts = [0u8, 8, 16];
            starts.shuffle(rng);
            for &st in &starts[..rng.gen_range(0..=3)] {
                cf.push(CallForwarding {
                    s_id,
                    sf_type: t,
                    start_time: st,
                    end_time: st + rng.gen_range(1..=8),
                    _pad: [0; 5],
                    numberx: digits(rng),
                });
            }
            SpecialFacility {
                s_id,
                sf_type: t,
                is_active: u8::from(rng.gen_range(0..100) < 85),
                error_cntrl: rng.gen(),
                data_a: rng.gen(),
                data_b: upper(rng),
                _pad: [0; 7],
            }
        })
        .collect();
    Population { sub, ai, sf, cf }
}

impl TatpBench {
    /// Preload `sizes.tatp_subscribers` subscribers, with `loaders` threads.
    pub fn build(
        pool: &Pool,
        sizes: &Sizes,
        loaders: usize,
        seed: u64,
    ) -> pisces::Result<TatpBench> {
        if !(1..=1 << 40).contains(&sizes.tatp_subscribers) {
            return Err(Error::InvalidConfig(
                "tatp: 1 to 2^40 subscribers".to_string().into(),
            ));
        }
        let t = pool.run(|tx| {
            Ok(TatpBench {
                subscribers: sizes.tatp_subscribers as u64,
                subscriber: Table::new(tx)?,
                access_info: Table::new(tx)?,
                special_facility: Table::new(tx)?,
                call_forwarding: Table::new(tx)?,
                changes: Changes::default(),
            })
        })?;
        let loaders = loaders.clamp(1, 64) as u64;
        let per = t.subscribers.div_ceil(loaders);
        std::thread::scope(|s| {
            let jobs: Vec<_> = (0..loaders)
                .map(|l| {
                    let t = &t;
                    let ids = (l * per + 1)..=((l + 1) * per).min(t.subscribers);
                    s.spawn(move || t.load(pool, ids, seed ^ l.wrapping_mul(0x9e37)))
                })
                .collect();
            jobs.into_iter().try_for_each(|j| {
                j.join().unwrap_or_else(|_| {
                    Err(Error::Corrupt(
                        "tatp: a preload thread panicked".to_string().into(),
                    ))
                })
            })
        })?;
        Ok(t)
    }

    fn load(
        &self,
        pool: &Pool,
        ids: std::ops::RangeInclusive<u64>,
        seed: u64,
    ) -> pisces::Result<()> {
        let mut rng = OpRng::seed_from_u64(seed ^ 0x7a79_0000);
        let mut h = pool.handle()?;
        let ids: Vec<u64> = ids.collect();
        for batch in ids.chunks(PRELOAD_BATCH) {
            let rows: Vec<Population> = batch.iter().map(|&s| populate(s, &mut rng)).collect();
            h.run(|tx| {
                for r in &rows {
                    let s = r.sub.s_id;
                    let p = tx.alloc(r.sub)?;
                    self.subscriber.insert(tx, s, p)?;
                    for a in &r.ai {
                        let p = tx.alloc(*a)?;
                        self.access_info
                            .insert(tx, keys::access_info(s, a.ai_type), p)?;
                    }
                    for f in &r.sf {
                        let p = tx.alloc(*f)?;
                        self.special_facility.insert(
                            tx,
                            keys::special_facility(s, f.sf_type),
                            p,
                        )?;
                    }
                    for c in &r.cf {
                        let p = tx.alloc(*c)?;
                        let k = keys::call_forwarding(s, c.sf_type, c.start_time);
                        self.call_forwarding.insert(tx, k, p)?;
                    }
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// TATP's non-uniform subscriber id.
    fn s_id(&self, rng: &mut OpRng) -> u64 {
        let p = self.subscribers;
        (rng.gen_range(0..=NURAND_A) | rng.gen_range(1..=p)) % p + 1
    }

    /// Run one transaction of `kind`; returns the bytes it changed.
    pub fn run(&self, kind: TxKind, h: &mut ThreadHandle, rng: &mut OpRng) -> pisces::Result<u64> {
        let s = self.s_id(rng);
        let sf_type: u8 = rng.gen_range(1..=4);
        let start_time: u8 = 8 * rng.gen_range(0..=2);
        match kind {
            TxKind::GetSubscriberData => {
                let row = h.run(|tx| {
                    let p = self.subscriber.get(tx, &s)?.ok_or_else(|| missing(s))?;
                    Ok(*tx.read(p)?)
                })?;
                black_box(row);
                Ok(0)
            }
            TxKind::GetNewDestination => {
                let end_time: u8 = rng.gen_range(1..=24);
                let found = h.run(|tx| {
                    let mut out = Vec::new();
                    let sk = keys::special_facility(s, sf_type);
                    let Some(fp) = self.special_facility.get(tx, &sk)? else {
                        return Ok(out);
                    };
                    if tx.read(fp)?.is_active != 1 {
                        return Ok(out);
                    }
                    let lo = keys::call_forwarding(s, sf_type, 0);
                    let mut rows = Vec::new();
                    self.call_forwarding.for_each_in(tx, lo..=lo + 2, |_, p| {
                        rows.push(*p);
                        true
                    })?;
                    for p in rows {
                        let c = tx.read(p)?;
                        if c.start_time <= start_time && end_time < c.end_time {
                            out.push(c.numberx);
                        }
                    }
                    Ok(out)
                })?;
                black_box(found);
                Ok(0)
            }
            TxKind::GetAccessData => {
                let ai_type: u8 = rng.gen_range(1..=4);
                let row = h.run(|tx| {
                    match self.access_info.get(tx, &keys::access_info(s, ai_type))? {
                        Some(p) => {
                            let a = tx.read(p)?;
                            Ok(Some((a.data1, a.data2, a.data3, a.data4)))
                        }
                        None => Ok(None),
                    }
                })?;
                black_box(row);
                Ok(0)
            }
            TxKind::UpdateSubscriberData => {
                let (bit_1, data_a): (u8, u8) = (rng.gen_range(0..=1), rng.gen());
                h.run(|tx| {
                    let sk = keys::special_facility(s, sf_type);
                    let Some(fp) = self.special_facility.get(tx, &sk)? else {
                        return Ok(0);
                    };
                    let p = self.subscriber.get(tx, &s)?.ok_or_else(|| missing(s))?;
                    tx.write(p)?.bit[0] = bit_1;
                    tx.write(fp)?.data_a = data_a;
                    Ok(2)
                })
            }
            TxKind::UpdateLocation => {
                let nbr = sub_nbr(s);
                let vlr: u32 = rng.gen();
                h.run(|tx| {
                    let s = s_id_of(&nbr);
                    let p = self.subscriber.get(tx, &s)?.ok_or_else(|| missing(s))?;
                    let row = tx.write(p)?;
                    debug_assert_eq!(row.sub_nbr, nbr);
                    row.vlr_location = vlr;
                    Ok(4)
                })
            }
            TxKind::InsertCallForwarding => {
                let nbr = sub_nbr(s);
                let end_time = rng.gen_range(1..=24);
                let numberx = digits(rng);
                let done = h.run(|tx| {
                    let s = s_id_of(&nbr);
                    let p = self.subscriber.get(tx, &s)?.ok_or_else(|| missing(s))?;
                    black_box(tx.read(p)?.s_id);
                    let mut types = [false; 4];
                    let lo = keys::special_facility(s, 1);
                    self.special_facility.for_each_in(tx, lo..=lo + 3, |k, _| {
                        types[(*k & 3) as usize] = true;
                        true
                    })?;
                    let k = keys::call_forwarding(s, sf_type, start_time);
                    if !types[sf_type as usize - 1] || self.call_forwarding.contains_key(tx, &k)? {
                        return Ok(false);
                    }
                    let row = tx.alloc(CallForwarding {
                        s_id: s,
                        sf_type,
                        start_time,
                        end_time,
                        _pad: [0; 5],
                        numberx,
                    })?;
                    self.call_forwarding.insert(tx, k, row)?;
                    Ok(true)
                })?;
                if done {
                    // Relaxed: a statistic read after the workers are joined.
                    self.changes.inserted.fetch_add(1, Ordering::Relaxed);
                    Ok(size_of::<CallForwarding>() as u64 + 16)
                } else {
                    Ok(0)
                }
            }
            TxKind::DeleteCallForwarding => {
                let nbr = sub_nbr(s);
                let done = h.run(|tx| {
                    let s = s_id_of(&nbr);
                    let k = keys::call_forwarding(s, sf_type, start_time);
                    match self.call_forwarding.remove(tx, &k)? {
                        Some(p) => {
                            tx.free(p)?;
                            Ok(true)
                        }
                        None => Ok(false),
                    }
                })?;
                if done {
                    // Relaxed: a statistic read after the workers are joined.
                    self.changes.deleted.fetch_add(1, Ordering::Relaxed);
                    Ok(16)
                } else {
                    Ok(0)
                }
            }
        }
    }
}

impl DataSet for TatpBench {
    fn op(
        &self,
        _worker: usize,
        h: &mut ThreadHandle,
        rng: &mut OpRng,
        update: bool,
    ) -> pisces::Result<u64> {
        let kind = if update {
            TxKind::read_write(rng)
        } else {
            TxKind::read_only(rng)
        };
        self.run(kind, h, rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::Engine;
    use crate::testutil::memory_pool;

    const SMALL: Sizes = Sizes {
        tatp_subscribers: 3000,
        ..Sizes::QUICK
    };

    #[test]
    fn sub_nbr_round_trips_and_the_mix_has_tatp_weights() {
        for s in [1, 42, 200_000, 999_999_999_999_999] {
            assert_eq!(s_id_of(&sub_nbr(s)), s);
        }
        assert_eq!(&sub_nbr(42)[..15], b"000000000000042");
        let mut rng = OpRng::seed_from_u64(1);
        let mut n = [0u32; 7];
        for _ in 0..100_000 {
            n[TxKind::read_only(&mut rng) as usize] += 1;
            n[TxKind::read_write(&mut rng) as usize] += 1;
        }
        // Read-only 35:10:35 of 80, read-write 2:14:2:2 of 20.
        let want = [43_750, 12_500, 43_750, 10_000, 70_000, 10_000, 10_000];
        for (got, want) in n.iter().zip(want) {
            assert!(got.abs_diff(want) < want / 20, "{n:?}");
        }
    }

    /// Every call-forwarding row matches its key and belongs to an existing subscriber
    /// and special facility; returns the number of rows.
    fn check(t: &TatpBench, p: &Pool) -> u64 {
        p.run(|tx| {
            let mut rows = Vec::new();
            t.call_forwarding.for_each(tx, |k, v| {
                rows.push((*k, *v));
                true
            })?;
            for &(k, cp) in &rows {
                let c = *tx.read(cp)?;
                assert_eq!(keys::call_forwarding(c.s_id, c.sf_type, c.start_time), k);
                assert!((1..=24).contains(&c.end_time));
                let sp = t
                    .subscriber
                    .get(tx, &c.s_id)?
                    .expect("orphan call forwarding");
                assert_eq!(tx.read(sp)?.s_id, c.s_id);
                assert!(t
                    .special_facility
                    .contains_key(tx, &keys::special_facility(c.s_id, c.sf_type))?);
            }
            assert_eq!(t.subscriber.len(tx)? as u64, t.subscribers);
            Ok(rows.len() as u64)
        })
        .unwrap()
    }

    fn run_two_threads(engine: Engine) {
        let p = memory_pool(engine, pool_bytes(&SMALL));
        let t = TatpBench::build(&p, &SMALL, 2, 3).unwrap();
        let before = check(&t, &p);
        assert!(before > SMALL.tatp_subscribers as u64, "{before} rows");
        let kinds: Vec<[u64; 7]> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..2)
                .map(|i| {
                    let (t, p) = (&t, &p);
                    s.spawn(move || {
                        let mut h = p.handle().unwrap();
                        let mut rng = OpRng::seed_from_u64(10 + i);
                        let mut changed = [0u64; 7];
                        for _ in 0..20_000 {
                            let update = rng.gen_range(0..100) < 20;
                            let bytes = t.op(i as usize, &mut h, &mut rng, update).unwrap();
                            assert!(update || bytes == 0);
                            changed[(bytes as usize).min(6)] += 1;
                        }
                        changed
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let after = check(&t, &p);
        let ins = t.changes.inserted.load(Ordering::Relaxed);
        let del = t.changes.deleted.load(Ordering::Relaxed);
        assert!(
            ins > 50 && del > 50,
            "{}: {ins} inserts {del} deletes",
            engine.name()
        );
        assert_eq!(after + del, before + ins, "{}", engine.name());
        // Updates of the subscriber happened (UPDATE_LOCATION changes 4 bytes).
        assert!(kinds.iter().map(|k| k[4]).sum::<u64>() > 1000, "{kinds:?}");
    }

    #[test]
    fn call_forwarding_stays_consistent_pisces() {
        run_two_threads(Engine::PISCES);
    }

    #[test]
    fn call_forwarding_stays_consistent_undo() {
        run_two_threads(Engine::UNDO);
    }
}
