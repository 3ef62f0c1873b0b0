//! Recovery's parse of the thread slots' logs, on several threads.
//!
//! Each slot's log is parsed independently of the others', so with `threads > 1` slot
//! `s` is parsed by thread `s mod threads` (scoped threads; the caller's thread is
//! thread 0). The results come back **in slot order** whatever thread produced them:
//! the caller indexes them by slot. (The mutation `ParseSlotOrder` leaves them in the
//! threads' order, and the parallel-recovery tests catch it.)

crate::mutation::point! {
    /// Recovery does not put the slots' logs, parsed in parallel, back in slot order (a
    /// log is then taken for another slot's).
    pub(crate) static PARSE_SLOT_ORDER = "parse-slot-order";
}

/// `parse(slot)` for every slot `0..slots`, on up to `threads` threads; the results
/// in slot order.
pub(crate) fn per_slot<T: Send>(
    threads: usize,
    slots: usize,
    parse: impl Fn(usize) -> T + Sync,
) -> Vec<T> {
    let workers = threads.clamp(1, slots.max(1));
    let share = |w: usize| -> Vec<(usize, T)> {
        (w..slots)
            .step_by(workers)
            .map(|slot| (slot, parse(slot)))
            .collect()
    };
    let mut parsed = if workers == 1 {
        share(0)
    } else {
        std::thread::scope(|sc| {
            let share = &share;
            let others: Vec<_> = (1..workers).map(|w| sc.spawn(move || share(w))).collect();
            let mut all = share(0);
            for o in others {
                all.extend(o.join().expect("a recovery parse thread panicked"));
            }
            all
        })
    };
    if !crate::mutation::active!(PARSE_SLOT_ORDER) {
        parsed.sort_by_key(|(slot, _)| *slot);
    }
    parsed.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_slot_order() {
        for threads in 1..5 {
            let got = per_slot(threads, 7, |s| (s, std::thread::current().id()));
            assert_eq!(
                got.iter().map(|r| r.0).collect::<Vec<_>>(),
                (0..7).collect::<Vec<_>>()
            );
        }
        assert!(per_slot(3, 0, |s| s).is_empty());
    }
}
