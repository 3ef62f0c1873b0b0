//! TPC-C new-order (the paper's §5.3, Fig 8a), scaled down.
//!
//! Tables are persistent B+-trees with fanout 32 (`BTreeMap<u64, PPtr<Row>, 32>`, as in
//! the paper: "B+trees whose nodes contain at most 32 children"); every row is a
//! separately allocated persistent object, so updating a row writes the row and not
//! the tree, and inserting a row writes a leaf (and, on a split, its parent). Keys pack
//! the row's identifiers into a `u64` (see [`keys`]):
//!
//! | table        | key                          | rows                                  |
//! |--------------|------------------------------|---------------------------------------|
//! | warehouse    | `w`                          | one per worker thread                 |
//! | district     | `w, d`                       | 10 per warehouse                      |
//! | customer     | `w, d, c`                    | `tpcc_customers` per district         |
//! | item         | `i`                          | `tpcc_items`, shared and read-only    |
//! | stock        | `w, i`                       | `tpcc_items` per warehouse            |
//! | order        | `w, d, o`                    | `tpcc_customers` per district preloaded |
//! | new_order    | `w, d, o`                    | the last 30 % of the preloaded orders |
//! | order_line   | `w, d, o, ol`                | 5..=15 per order                      |
//!
//! **Scale.** The specification has 100 000 items and 3 000 customers (and 3 000
//! initial orders) per district; `--full` has those. `--quick` (and `--workloads
//! tpcc` without `--full`) is scaled down to 10 000 items and 300 customers and
//! initial orders per district (a preload a tenth the size). `--tpcc-items` and `--tpcc-customers` override them. The order tables grow
//! by every new-order (there is no delivery transaction), so the pool is sized for
//! [`MAX_RATE`] new-orders per second and worker
//! for the measurement's duration; a faster run fills it and fails with a message
//! saying so. Row layouts keep the specification's fields with
//! shortened text columns (customer data 256 bytes instead of up to 500); money is in
//! cents and rates in basis points (integers).
//!
//! **Warehouses.** As in the paper, every worker thread has its own warehouse
//! (worker `i` runs on warehouse `i + 1`) and every order line is supplied by the home
//! warehouse (the specification's 1 % remote order lines are left out, so threads
//! never write the same rows; they can still conflict on a split of a shared inner
//! node of a table, which the abort rate shows).
//!
//! **The transaction** (TPC-C 2.4.2): read the warehouse's tax, read and increment the
//! district's `next_o_id`, read the customer (NURand), insert the order and new-order
//! rows, then for each of 5..=15 items (NURand): read the item, read and update the
//! stock row (quantity, ytd, order_cnt), insert the order line. 1 % of new-orders name
//! an unused item number as their last item and roll back when they reach it (a user
//! abort, TPC-C 2.4.1.4). Our choice: a rolled-back new-order counts as a completed
//! transaction (it did the work of one, the way TPC-C's tpmC counts new-orders
//! processed): in the throughput, in the update latency histogram and in the
//! per-transaction flush and fence counts; the report shows the fraction rolled back
//! under the tpcc table. Its changed bytes are 0.
//!
//! The new-order is a registered operation ([`NEW_ORDER_OP`], its input as the
//! argument) on every engine: engines that log operations (timestone) persist only the
//! input at commit; the others run it as a closure.
//!
//! **Changed bytes** (the denominator of write amplification) of a committed
//! new-order: 8 (`next_o_id`) + each inserted row's size + 24 per index entry (key,
//! pointer and the leaf's entry count, which every insert changes) for the order,
//! new-order and order-line rows + 16 per stock update (the quantity, ytd and
//! order_cnt fields). Entries shifted inside a leaf and leaf splits are not counted.

use crate::workloads::OpRng;
use crate::workloads::{DataSet, Sizes};
use pisces::{BTreeMap, Error, PPtr, Pod, Pool, ThreadHandle, Tx, Zeroable};
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::mem::size_of;

/// New-orders per second and worker the TPC-C pool has room for (one core of this
/// machine reaches 30 000 to 60 000 with the volatile engine; each new-order costs
/// about 1.5 KB of pool, so a 10-second measurement reserves about 1.5 GB per worker).
pub const MAX_RATE: f64 = 80_000.0;

/// A table: fanout-32 B+-tree from a packed key to a separately allocated row.
pub type Table<R> = BTreeMap<u64, PPtr<R>, 32>;

/// Districts per warehouse (fixed by the specification).
pub const DISTRICTS: u32 = 10;
/// Rows inserted per transaction while preloading.
const PRELOAD_BATCH: usize = 64;
/// Most order lines of an order.
const MAX_OL: usize = 15;

/// Key packing. Warehouses and districts fit in 8 bits each after the first level;
/// order ids and customer/item ids in 32 bits; order-line numbers in 4 bits.
pub mod keys {
    /// District `(w, d)`.
    pub fn district(w: u32, d: u32) -> u64 {
        u64::from(w) << 8 | u64::from(d)
    }
    /// Customer `(w, d, c)`.
    pub fn customer(w: u32, d: u32, c: u32) -> u64 {
        district(w, d) << 32 | u64::from(c)
    }
    /// Order and new-order `(w, d, o)`.
    pub fn order(w: u32, d: u32, o: u32) -> u64 {
        district(w, d) << 32 | u64::from(o)
    }
    /// Order line `(w, d, o, ol)`, `ol` in `1..=15`.
    pub fn order_line(w: u32, d: u32, o: u32, ol: u32) -> u64 {
        order(w, d, o) << 4 | u64::from(ol)
    }
    /// Stock `(w, i)`.
    pub fn stock(w: u32, i: u32) -> u64 {
        u64::from(w) << 32 | u64::from(i)
    }
}

/// WAREHOUSE.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct Warehouse {
    pub id: u64,
    /// Basis points.
    pub tax: u64,
    /// Cents.
    pub ytd: u64,
    pub name: [u8; 16],
    pub address: [u8; 80],
}

/// DISTRICT.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct District {
    pub id: u32,
    pub w_id: u32,
    /// Basis points.
    pub tax: u64,
    pub ytd: u64,
    pub next_o_id: u64,
    pub name: [u8; 16],
    pub address: [u8; 80],
}

/// CUSTOMER.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct Customer {
    pub id: u32,
    pub d_id: u32,
    pub w_id: u32,
    /// Basis points.
    pub discount: u32,
    pub credit_lim: u64,
    pub balance: i64,
    pub ytd_payment: u64,
    pub payment_cnt: u32,
    pub delivery_cnt: u32,
    pub since: u64,
    /// `GC` or `BC`.
    pub credit: [u8; 8],
    pub last: [u8; 16],
    pub first: [u8; 16],
    pub phone: [u8; 16],
    pub address: [u8; 80],
    pub data: [u8; 256],
}

/// ITEM.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct Item {
    pub id: u32,
    pub im_id: u32,
    /// Cents.
    pub price: u64,
    pub name: [u8; 24],
    pub data: [u8; 56],
}

/// STOCK.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct Stock {
    pub i_id: u32,
    pub w_id: u32,
    pub quantity: u32,
    pub order_cnt: u32,
    pub remote_cnt: u32,
    pub _pad: u32,
    pub ytd: u64,
    pub dist: [[u8; 24]; 10],
    pub data: [u8; 56],
}

/// ORDER.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct Order {
    pub id: u32,
    pub d_id: u32,
    pub w_id: u32,
    pub c_id: u32,
    pub entry_d: u64,
    /// 0: not delivered.
    pub carrier_id: u32,
    pub ol_cnt: u32,
    pub all_local: u32,
    pub _pad: u32,
}

/// NEW-ORDER.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct NewOrder {
    pub o_id: u32,
    pub d_id: u32,
    pub w_id: u32,
    pub _pad: u32,
}

/// ORDER-LINE.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct OrderLine {
    pub o_id: u32,
    pub d_id: u32,
    pub w_id: u32,
    pub number: u32,
    pub i_id: u32,
    pub supply_w_id: u32,
    pub quantity: u32,
    pub _pad: u32,
    /// Cents.
    pub amount: u64,
    /// 0: not delivered.
    pub delivery_d: u64,
    pub dist_info: [u8; 24],
}

/// The TPC-C data set (see the module docs).
#[derive(Clone, Copy)]
pub struct TpccBench {
    /// Warehouses `1..=warehouses`.
    pub warehouses: u32,
    /// Items `1..=items` (and stock rows per warehouse).
    pub items: u32,
    /// Customers (and preloaded orders) per district.
    pub customers: u32,
    /// NURand constants (A, C) of customer and item ids.
    c_nurand: (u32, u32),
    i_nurand: (u32, u32),
    pub warehouse: Table<Warehouse>,
    pub district: Table<District>,
    pub customer: Table<Customer>,
    pub item: Table<Item>,
    pub stock: Table<Stock>,
    pub order: Table<Order>,
    pub new_order: Table<NewOrder>,
    pub order_line: Table<OrderLine>,
}

/// The largest power of two at most `x` (at least 1), minus 1: NURand's `A` scaled to a
/// smaller table (`A = 8191` for 100 000 items, `1023` for 3 000 customers).
fn nurand_a(n: u32, spec_a: u64, spec_n: u64) -> u32 {
    let x = (u64::from(n) * (spec_a + 1) / spec_n).max(1);
    (1u64 << (63 - x.leading_zeros())) as u32 - 1
}

/// TPC-C's non-uniform random number in `x..=y` (2.1.6).
fn nurand(rng: &mut OpRng, (a, c): (u32, u32), x: u32, y: u32) -> u32 {
    (((rng.gen_range(0..=a) | rng.gen_range(x..=y)) + c) % (y - x + 1)) + x
}

/// A random alphanumeric string of `len` in `min..=N` bytes, zero-padded.
fn astring<const N: usize>(rng: &mut OpRng, min: usize) -> [u8; N] {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut s = [0u8; N];
    let len = rng.gen_range(min.min(N)..=N);
    for b in &mut s[..len] {
        *b = CHARS[rng.gen_range(0..CHARS.len())];
    }
    s
}

/// Item and stock data: 10 % contain "ORIGINAL" (2.1.5, 4.3.3.1).
fn data_field(rng: &mut OpRng) -> [u8; 56] {
    let mut d = astring::<56>(rng, 26);
    if rng.gen_range(0..10) == 0 {
        let at = rng.gen_range(0..=56 - 8);
        d[at..at + 8].copy_from_slice(b"ORIGINAL");
    }
    d
}

fn is_original(d: &[u8]) -> bool {
    d.windows(8).any(|w| w == b"ORIGINAL")
}

/// The customer last name of number `n` in `0..=999` (4.3.2.3).
fn last_name(n: u32) -> [u8; 16] {
    const SYL: [&[u8]; 10] = [
        b"BAR", b"OUGHT", b"ABLE", b"PRI", b"PRES", b"ESE", b"ANTI", b"CALLY", b"ATION", b"EING",
    ];
    let mut s = [0u8; 16];
    let mut at = 0;
    for digit in [n / 100, n / 10 % 10, n % 10] {
        let syl = SYL[digit as usize];
        s[at..at + syl.len()].copy_from_slice(syl);
        at += syl.len();
    }
    s
}

fn missing(what: &str, key: u64) -> Error {
    Error::Corrupt(format!("tpcc: {what} row {key:#x} is missing").into())
}

/// Bytes the program changes in a committed new-order with `ol_cnt` lines.
pub fn changed_bytes(ol_cnt: usize) -> u64 {
    // Key, pointer, and the leaf's entry count.
    let entry = 24;
    (8 + size_of::<Order>()
        + entry
        + size_of::<NewOrder>()
        + entry
        + ol_cnt * (16 + size_of::<OrderLine>() + entry)) as u64
}

/// Bytes of an allocated row of type `R` (its size class, header included) plus its
/// index entry (a 16-byte key and pointer in leaves that are about half full).
fn row_bytes<R>() -> u64 {
    let b = size_of::<R>() as u64 + 8;
    let step = (b.next_power_of_two() / 8).max(16);
    b.next_multiple_of(step) + 40
}

/// Bytes to reserve for the tables of `warehouses` warehouses at `sizes`, with room
/// for `new_orders` new-orders per warehouse during the run (orders have 10 lines on
/// average, 5..=15 uniformly; 11 are reserved).
pub fn pool_bytes(sizes: &Sizes, warehouses: usize, new_orders: u64) -> u64 {
    let w = warehouses as u64;
    let items = sizes.tpcc_items as u64;
    let cust = u64::from(DISTRICTS) * sizes.tpcc_customers as u64;
    let order = row_bytes::<Order>() + row_bytes::<NewOrder>() + 11 * row_bytes::<OrderLine>();
    items * row_bytes::<Item>()
        + w * (row_bytes::<Warehouse>()
            + u64::from(DISTRICTS) * row_bytes::<District>()
            + items * row_bytes::<Stock>()
            + cust * row_bytes::<Customer>()
            + (cust + new_orders) * order)
}

/// Inputs of one new-order, drawn before the transaction so that a retry repeats it;
/// the arguments of the registered operation [`NEW_ORDER_OP`].
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct NewOrderInput {
    w: u32,
    d: u32,
    c: u32,
    /// Lines used (5 ..= `MAX_OL`).
    ol_cnt: u32,
    entry_d: u64,
    /// [item id, quantity] per line.
    lines: [[u32; 2]; MAX_OL],
}

/// Operation id of the new-order transaction.
pub const NEW_ORDER_OP: u32 = 0x5450_4343; // "TPCC"

thread_local! {
    /// Bytes the last committed new-order on this thread changed (operations return
    /// no value: the operation leaves it here for the caller).
    static CHANGED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl TpccBench {
    /// Preload `warehouses` warehouses at `sizes` (one preload thread per warehouse).
    pub fn build(
        pool: &Pool,
        sizes: &Sizes,
        warehouses: usize,
        seed: u64,
    ) -> pisces::Result<TpccBench> {
        let bad = |what: &str| Error::InvalidConfig(format!("tpcc: {what}").into());
        if !(1..=255).contains(&warehouses) {
            return Err(bad("1 to 255 warehouses (worker threads)"));
        }
        if !(1..=1 << 24).contains(&sizes.tpcc_items) {
            return Err(bad("1 to 16777216 items"));
        }
        if !(1..=1 << 24).contains(&sizes.tpcc_customers) {
            return Err(bad("1 to 16777216 customers per district"));
        }
        let mut rng = OpRng::seed_from_u64(seed ^ 0x7bcc_0000);
        let items = sizes.tpcc_items as u32;
        let customers = sizes.tpcc_customers as u32;
        let c_a = nurand_a(customers, 1023, 3000);
        let i_a = nurand_a(items, 8191, 100_000);
        let mut h = pool.handle()?;
        let t = h.run(|tx| {
            Ok(TpccBench {
                warehouses: warehouses as u32,
                items,
                customers,
                c_nurand: (c_a, 0),
                i_nurand: (i_a, 0),
                warehouse: Table::new(tx)?,
                district: Table::new(tx)?,
                customer: Table::new(tx)?,
                item: Table::new(tx)?,
                stock: Table::new(tx)?,
                order: Table::new(tx)?,
                new_order: Table::new(tx)?,
                order_line: Table::new(tx)?,
            })
        })?;
        let t = TpccBench {
            c_nurand: (c_a, rng.gen_range(0..=c_a)),
            i_nurand: (i_a, rng.gen_range(0..=i_a)),
            ..t
        };
        let ids: Vec<u32> = (1..=items).collect();
        for batch in ids.chunks(PRELOAD_BATCH) {
            let rows: Vec<Item> = batch
                .iter()
                .map(|&i| Item {
                    id: i,
                    im_id: rng.gen_range(1..=10_000),
                    price: rng.gen_range(100..=10_000),
                    name: astring(&mut rng, 14),
                    data: data_field(&mut rng),
                })
                .collect();
            h.run(|tx| {
                for r in &rows {
                    let p = tx.alloc(*r)?;
                    t.item.insert(tx, u64::from(r.id), p)?;
                }
                Ok(())
            })?;
        }
        drop(h);
        std::thread::scope(|s| {
            let loaders: Vec<_> = (1..=warehouses as u32)
                .map(|w| {
                    let (seed, t) = (rng.gen(), &t);
                    s.spawn(move || t.load_warehouse(pool, w, seed))
                })
                .collect();
            loaders.into_iter().try_for_each(|l| {
                l.join().unwrap_or_else(|_| {
                    Err(Error::Corrupt(
                        "tpcc: a preload thread panicked".to_string().into(),
                    ))
                })
            })
        })?;
        // The new-order as a registered operation (every engine runs it; timestone logs
        // only its id and input at commit). The tables are fixed for the pool's life.
        pool.register_op(NEW_ORDER_OP, move |tx, inp: &NewOrderInput| {
            let (changed, total) = t.new_order_tx(tx, inp)?;
            black_box(total);
            CHANGED.with(|c| c.set(changed));
            Ok(())
        })?;
        Ok(t)
    }

    /// Preload warehouse `w`: its row, districts, customers, stock, orders.
    fn load_warehouse(&self, pool: &Pool, w: u32, seed: u64) -> pisces::Result<()> {
        let mut rng = OpRng::seed_from_u64(seed);
        let mut h = pool.handle()?;
        let wh = Warehouse {
            id: u64::from(w),
            tax: rng.gen_range(0..=2000),
            ytd: 30_000_000,
            name: astring(&mut rng, 6),
            address: astring(&mut rng, 40),
        };
        let dists: Vec<District> = (1..=DISTRICTS)
            .map(|d| District {
                id: d,
                w_id: w,
                tax: rng.gen_range(0..=2000),
                ytd: 3_000_000,
                next_o_id: u64::from(self.customers) + 1,
                name: astring(&mut rng, 6),
                address: astring(&mut rng, 40),
            })
            .collect();
        h.run(|tx| {
            let p = tx.alloc(wh)?;
            self.warehouse.insert(tx, u64::from(w), p)?;
            for r in &dists {
                let p = tx.alloc(*r)?;
                self.district.insert(tx, keys::district(w, r.id), p)?;
            }
            Ok(())
        })?;
        let ids: Vec<u32> = (1..=self.items).collect();
        for batch in ids.chunks(PRELOAD_BATCH) {
            let rows: Vec<Stock> = batch
                .iter()
                .map(|&i| {
                    let mut dist = [[0u8; 24]; 10];
                    for x in &mut dist {
                        *x = astring(&mut rng, 24);
                    }
                    Stock {
                        i_id: i,
                        w_id: w,
                        quantity: rng.gen_range(10..=100),
                        order_cnt: 0,
                        remote_cnt: 0,
                        _pad: 0,
                        ytd: 0,
                        dist,
                        data: data_field(&mut rng),
                    }
                })
                .collect();
            h.run(|tx| {
                for r in &rows {
                    let p = tx.alloc(*r)?;
                    self.stock.insert(tx, keys::stock(w, r.i_id), p)?;
                }
                Ok(())
            })?;
        }
        let n = self.customers;
        let cust_ids: Vec<u32> = (1..=n).collect();
        let first_new = n - n * 3 / 10 + 1; // the last 30 % of the orders are new
        for d in 1..=DISTRICTS {
            for batch in cust_ids.chunks(PRELOAD_BATCH) {
                let rows: Vec<Customer> = batch
                    .iter()
                    .map(|&c| Customer {
                        id: c,
                        d_id: d,
                        w_id: w,
                        discount: rng.gen_range(0..=5000),
                        credit_lim: 5_000_000,
                        balance: -1000,
                        ytd_payment: 1000,
                        payment_cnt: 1,
                        delivery_cnt: 0,
                        since: 0,
                        credit: if rng.gen_range(0..10) == 0 {
                            *b"BC\0\0\0\0\0\0"
                        } else {
                            *b"GC\0\0\0\0\0\0"
                        },
                        last: last_name(if c <= 1000 {
                            c - 1
                        } else {
                            nurand(&mut rng, (255, 0), 0, 999)
                        }),
                        first: astring(&mut rng, 8),
                        phone: astring(&mut rng, 16),
                        address: astring(&mut rng, 40),
                        data: astring(&mut rng, 150),
                    })
                    .collect();
                h.run(|tx| {
                    for r in &rows {
                        let p = tx.alloc(*r)?;
                        self.customer.insert(tx, keys::customer(w, d, r.id), p)?;
                    }
                    Ok(())
                })?;
            }
            // Orders 1..=n for a permutation of the customers.
            let mut perm = cust_ids.clone();
            rand::seq::SliceRandom::shuffle(&mut perm[..], &mut rng);
            for batch in cust_ids.chunks(PRELOAD_BATCH / 8) {
                let orders: Vec<(Order, Vec<OrderLine>)> = batch
                    .iter()
                    .map(|&o| {
                        let ol_cnt = rng.gen_range(5..=MAX_OL as u32);
                        let delivered = o < first_new;
                        let lines = (1..=ol_cnt)
                            .map(|ol| OrderLine {
                                o_id: o,
                                d_id: d,
                                w_id: w,
                                number: ol,
                                i_id: rng.gen_range(1..=self.items),
                                supply_w_id: w,
                                quantity: 5,
                                _pad: 0,
                                amount: if delivered {
                                    0
                                } else {
                                    rng.gen_range(1..=999_999)
                                },
                                delivery_d: u64::from(delivered),
                                dist_info: astring(&mut rng, 24),
                            })
                            .collect();
                        let order = Order {
                            id: o,
                            d_id: d,
                            w_id: w,
                            c_id: perm[o as usize - 1],
                            entry_d: 0,
                            carrier_id: if delivered { rng.gen_range(1..=10) } else { 0 },
                            ol_cnt,
                            all_local: 1,
                            _pad: 0,
                        };
                        (order, lines)
                    })
                    .collect();
                h.run(|tx| {
                    for (o, lines) in &orders {
                        let p = tx.alloc(*o)?;
                        self.order.insert(tx, keys::order(w, d, o.id), p)?;
                        if o.id >= first_new {
                            let p = tx.alloc(NewOrder {
                                o_id: o.id,
                                d_id: d,
                                w_id: w,
                                _pad: 0,
                            })?;
                            self.new_order.insert(tx, keys::order(w, d, o.id), p)?;
                        }
                        for l in lines {
                            let p = tx.alloc(*l)?;
                            self.order_line.insert(
                                tx,
                                keys::order_line(w, d, o.id, l.number),
                                p,
                            )?;
                        }
                    }
                    Ok(())
                })?;
            }
        }
        Ok(())
    }

    fn input(&self, worker: usize, rng: &mut OpRng) -> NewOrderInput {
        let ol_cnt = rng.gen_range(5..=MAX_OL);
        let mut lines = [[0u32; 2]; MAX_OL];
        for l in &mut lines[..ol_cnt] {
            *l = [
                nurand(rng, self.i_nurand, 1, self.items),
                rng.gen_range(1..=10),
            ];
        }
        if rng.gen_range(0..100) == 0 {
            lines[ol_cnt - 1][0] = self.items + 1; // unused: the order rolls back
        }
        NewOrderInput {
            w: (worker % self.warehouses as usize) as u32 + 1,
            d: rng.gen_range(1..=DISTRICTS),
            c: nurand(rng, self.c_nurand, 1, self.customers),
            entry_d: rng.gen(),
            lines,
            ol_cnt: ol_cnt as u32,
        }
    }

    /// The new-order transaction body; `Err(UserAbort)` for an unused item number.
    /// Returns the bytes changed and the order's total (cents).
    fn new_order_tx(&self, tx: &mut Tx<'_>, inp: &NewOrderInput) -> pisces::Result<(u64, u64)> {
        let (w, d) = (inp.w, inp.d);
        let wk = u64::from(w);
        let wp = self
            .warehouse
            .get(tx, &wk)?
            .ok_or_else(|| missing("warehouse", wk))?;
        let w_tax = tx.read(wp)?.tax;
        let dk = keys::district(w, d);
        let dp = self
            .district
            .get(tx, &dk)?
            .ok_or_else(|| missing("district", dk))?;
        let (d_tax, o_id) = {
            let dr = tx.write(dp)?;
            let o = dr.next_o_id;
            dr.next_o_id += 1;
            (dr.tax, o as u32)
        };
        let ck = keys::customer(w, d, inp.c);
        let cp = self
            .customer
            .get(tx, &ck)?
            .ok_or_else(|| missing("customer", ck))?;
        let (discount, bad_credit) = {
            let c = tx.read(cp)?;
            black_box(&c.last);
            (u64::from(c.discount), c.credit[0] == b'B')
        };
        let ol_cnt = (inp.ol_cnt as usize).min(MAX_OL);
        let lines = &inp.lines[..ol_cnt];
        let ok = keys::order(w, d, o_id);
        let op = tx.alloc(Order {
            id: o_id,
            d_id: d,
            w_id: w,
            c_id: inp.c,
            entry_d: inp.entry_d,
            carrier_id: 0,
            ol_cnt: ol_cnt as u32,
            all_local: 1,
            _pad: 0,
        })?;
        self.order.insert(tx, ok, op)?;
        let np = tx.alloc(NewOrder {
            o_id,
            d_id: d,
            w_id: w,
            _pad: 0,
        })?;
        self.new_order.insert(tx, ok, np)?;
        let mut total = 0u64;
        for (n, &[i_id, qty]) in lines.iter().enumerate() {
            let Some(ip) = self.item.get(tx, &u64::from(i_id))? else {
                return Err(tx.abort("tpcc: item number is not valid"));
            };
            let (price, item_original) = {
                let it = tx.read(ip)?;
                black_box(&it.name);
                (it.price, is_original(&it.data))
            };
            let sk = keys::stock(w, i_id);
            let sp = self
                .stock
                .get(tx, &sk)?
                .ok_or_else(|| missing("stock", sk))?;
            let (dist_info, stock_original) = {
                let s = tx.write(sp)?;
                s.quantity = if s.quantity >= qty + 10 {
                    s.quantity - qty
                } else {
                    s.quantity + 91 - qty
                };
                s.ytd += u64::from(qty);
                s.order_cnt += 1;
                (s.dist[d as usize - 1], is_original(&s.data))
            };
            black_box(item_original && stock_original); // brand-generic
            let amount = u64::from(qty) * price;
            total += amount;
            let number = n as u32 + 1;
            let lp = tx.alloc(OrderLine {
                o_id,
                d_id: d,
                w_id: w,
                number,
                i_id,
                supply_w_id: w,
                quantity: qty,
                _pad: 0,
                amount,
                delivery_d: 0,
                dist_info,
            })?;
            self.order_line
                .insert(tx, keys::order_line(w, d, o_id, number), lp)?;
        }
        // total * (1 - discount) * (1 + w_tax + d_tax), in basis points.
        let total = total * (10_000 - discount) / 10_000 * (10_000 + w_tax + d_tax) / 10_000;
        black_box(bad_credit);
        Ok((changed_bytes(ol_cnt), total))
    }

    /// One new-order on worker `worker`'s warehouse: `Ok(Some(bytes changed))` when it
    /// committed, `Ok(None)` when it rolled back on the unused item number.
    pub fn new_order(
        &self,
        worker: usize,
        h: &mut ThreadHandle,
        rng: &mut OpRng,
    ) -> pisces::Result<Option<u64>> {
        let inp = self.input(worker, rng);
        match h.run_op(NEW_ORDER_OP, &inp) {
            Ok(()) => Ok(Some(CHANGED.with(std::cell::Cell::get))),
            Err(Error::UserAbort(_)) => Ok(None),
            Err(Error::OutOfSpace { requested }) => Err(Error::InvalidConfig(
                format!(
                    "tpcc: the pool is full (an allocation of {requested} bytes failed): the \
                     order tables outgrew the room reserved for {} new-orders per second and \
                     thread; use fewer --seconds",
                    MAX_RATE
                )
                .into(),
            )),
            Err(e) => Err(e),
        }
    }
}

impl DataSet for TpccBench {
    /// Always a new-order (read-write), whatever `update` says: the plan runs TPC-C
    /// with `update_pct` 100.
    fn op(
        &self,
        worker: usize,
        h: &mut ThreadHandle,
        rng: &mut OpRng,
        _update: bool,
    ) -> pisces::Result<u64> {
        Ok(self.new_order(worker, h, rng)?.unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::Engine;
    use crate::testutil::memory_pool;

    const SMALL: Sizes = Sizes {
        tpcc_items: 2000,
        tpcc_customers: 30,
        ..Sizes::QUICK
    };

    #[test]
    fn keys_nest_and_nurand_stays_in_range() {
        assert!(keys::order_line(1, 10, u32::MAX, 15) < keys::order_line(2, 1, 1, 1));
        assert!(keys::order(1, 10, u32::MAX) < keys::order(2, 1, 0));
        assert_eq!(keys::order_line(3, 4, 5, 6) >> 4, keys::order(3, 4, 5));
        assert_eq!(nurand_a(100_000, 8191, 100_000), 8191);
        assert_eq!(nurand_a(3000, 1023, 3000), 1023);
        assert_eq!(nurand_a(300, 1023, 3000), 63);
        assert_eq!(nurand_a(1, 1023, 3000), 0);
        let mut rng = OpRng::seed_from_u64(1);
        for _ in 0..10_000 {
            let v = nurand(&mut rng, (63, 17), 1, 300);
            assert!((1..=300).contains(&v));
        }
        assert_eq!(&last_name(371)[..11], b"PRICALLYOUG");
    }

    /// Per-district results of a run: what each worker committed.
    #[derive(Default)]
    struct Counts {
        committed: u64,
        rolled_back: u64,
    }

    /// TPC-C consistency conditions 2, 3 and 4 (3.3.2) plus stock bookkeeping: for every
    /// district `next_o_id - 1 == max(o_id) == max(no_o_id)`, the orders are exactly
    /// `1..next_o_id`, the new-orders are contiguous, every order has `ol_cnt` lines; per
    /// warehouse the stock `order_cnt` sum is the number of order lines inserted by the
    /// run and `ytd` sums their quantities; every stock quantity is in `10..=100`.
    fn check(t: &TpccBench, p: &Pool, committed: &[u64]) {
        p.run(|tx| {
            for w in 1..=t.warehouses {
                let mut new_lines = 0u64;
                let mut new_qty = 0u64;
                let mut orders_added = 0u64;
                for d in 1..=DISTRICTS {
                    let dp = t.district.get(tx, &keys::district(w, d))?.unwrap();
                    let next = tx.read(dp)?.next_o_id;
                    let lo = keys::order(w, d, 0);
                    let hi = keys::order(w, d, u32::MAX);
                    let mut ids = Vec::new();
                    t.order.for_each_in(tx, lo..=hi, |k, _| {
                        ids.push((*k & 0xffff_ffff) as u32);
                        true
                    })?;
                    assert_eq!(
                        ids,
                        (1..next as u32).collect::<Vec<_>>(),
                        "w{w} d{d}: orders are not 1..next_o_id"
                    );
                    let mut nos = Vec::new();
                    t.new_order.for_each_in(tx, lo..=hi, |k, _| {
                        nos.push((*k & 0xffff_ffff) as u32);
                        true
                    })?;
                    assert_eq!(*nos.last().unwrap() as u64, next - 1, "w{w} d{d}");
                    assert_eq!(
                        nos.len() as u32,
                        nos.last().unwrap() - nos[0] + 1,
                        "w{w} d{d}: new-orders not contiguous"
                    );
                    orders_added += next - 1 - u64::from(t.customers);
                    for &o in &ids {
                        let op = t.order.get(tx, &keys::order(w, d, o))?.unwrap();
                        let ord = *tx.read(op)?;
                        assert_eq!((ord.id, ord.d_id, ord.w_id), (o, d, w));
                        let mut n = 0;
                        t.order_line.for_each_in(
                            tx,
                            keys::order_line(w, d, o, 0)..=keys::order_line(w, d, o, 15),
                            |_, lp| {
                                n += 1;
                                if o > t.customers {
                                    let l = *tx.read(*lp).unwrap();
                                    assert_eq!((l.o_id, l.number), (o, n));
                                    new_lines += 1;
                                    new_qty += u64::from(l.quantity);
                                }
                                true
                            },
                        )?;
                        assert_eq!(n, ord.ol_cnt, "w{w} d{d} o{o}: ol_cnt");
                    }
                }
                assert_eq!(orders_added, committed[w as usize - 1], "w{w}");
                let (mut cnt, mut ytd) = (0u64, 0u64);
                t.stock.for_each_in(
                    tx,
                    keys::stock(w, 0)..=keys::stock(w, u32::MAX),
                    |_, sp| {
                        let s = tx.read(*sp).unwrap();
                        assert!((10..=100).contains(&s.quantity), "quantity {}", s.quantity);
                        cnt += u64::from(s.order_cnt);
                        ytd += s.ytd;
                        true
                    },
                )?;
                assert_eq!(cnt, new_lines, "w{w}: stock order_cnt vs order lines");
                assert_eq!(ytd, new_qty, "w{w}: stock ytd vs order-line quantities");
            }
            Ok(())
        })
        .unwrap();
    }

    fn run_two_threads(engine: Engine) {
        let bytes = pool_bytes(&SMALL, 2, 2000);
        let p = memory_pool(engine, bytes);
        let t = TpccBench::build(&p, &SMALL, 2, 5).unwrap();
        check(&t, &p, &[0, 0]);
        let counts: Vec<Counts> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..2)
                .map(|i| {
                    let (t, p) = (&t, &p);
                    s.spawn(move || {
                        let mut h = p.handle().unwrap();
                        let mut rng = OpRng::seed_from_u64(100 + i as u64);
                        let mut c = Counts::default();
                        for _ in 0..1500 {
                            match t.new_order(i, &mut h, &mut rng).unwrap() {
                                Some(b) => {
                                    assert!(b >= changed_bytes(5));
                                    c.committed += 1;
                                }
                                None => c.rolled_back += 1,
                            }
                        }
                        assert_eq!(h.stats().failed, c.rolled_back);
                        c
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let rolled: u64 = counts.iter().map(|c| c.rolled_back).sum();
        assert!(
            (5..=80).contains(&rolled),
            "{}: {rolled} rollbacks of 3000",
            engine.name()
        );
        let committed: Vec<u64> = counts.iter().map(|c| c.committed).collect();
        check(&t, &p, &committed);
    }

    #[test]
    fn new_orders_keep_the_consistency_conditions_pisces() {
        run_two_threads(Engine::PISCES);
    }

    #[test]
    fn new_orders_keep_the_consistency_conditions_undo() {
        run_two_threads(Engine::UNDO);
    }

    #[test]
    fn the_pool_estimate_covers_the_tables() {
        // A pool of exactly the estimate (plus the fixed logs and slack the bench adds
        // too) holds the preload and the new-orders it was sized for.
        let bytes = pool_bytes(&SMALL, 1, 3000);
        let p = memory_pool(Engine::PISCES, bytes);
        let t = TpccBench::build(&p, &SMALL, 1, 5).unwrap();
        let mut h = p.handle().unwrap();
        let mut rng = OpRng::seed_from_u64(7);
        for _ in 0..3000 {
            t.new_order(0, &mut h, &mut rng).unwrap();
        }
    }

    #[test]
    fn bad_sizes_are_errors() {
        let p = memory_pool(Engine::PISCES, 0);
        let bad = Sizes {
            tpcc_items: 0,
            ..SMALL
        };
        assert!(matches!(
            TpccBench::build(&p, &bad, 1, 1),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            TpccBench::build(&p, &SMALL, 0, 1),
            Err(Error::InvalidConfig(_))
        ));
    }
}
