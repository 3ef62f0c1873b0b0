//! [`HashMap::entry`]: a key's place found once, for insert-or-update (see the
//! `entry` module). Apart from the parent module, so that the parent names none of
//! its layouts' files (the grouped layout's spot is only named here).

use super::grouped::Spot;
use super::{Found, HashMap, GROWABLE, H_COUNT, H_GROW};
use crate::containers::entry::{sealed::EntryMap, Entry};
use crate::containers::words;
use crate::{Pod, Result, Tx, TxAccess};

impl<K: Pod + Eq, V: Pod> HashMap<K, V> {
    /// `k`'s place for insert-or-update with one search (see [`Entry`]). An update of
    /// a present key writes only its node (or group); an insert of an absent key writes
    /// what [`insert`](Self::insert) writes (a grouped map then finds the new slot once
    /// more, since the insert may have split the chain).
    pub fn entry<'t, 'h: 't>(
        &self,
        tx: &'t mut impl TxAccess<'h>,
        k: K,
    ) -> Result<Entry<'t, 'h, Self>> {
        let tx = tx.tx_mut();
        let (h, grouped) = self.header_layout(tx)?;
        let counts = h[H_COUNT];
        let at = if grouped {
            MapSpot::Grouped(self.spot(tx, h, &k)?, counts)
        } else {
            MapSpot::Chained(Self::find(tx, h, &k)?, h[H_GROW] == GROWABLE, counts)
        };
        Ok(Entry::new(tx, *self, k, at))
    }
}

/// A key's place in a map, for [`Entry`]: its search in a chained map (with whether
/// the map grows and its count table), or its spot in a grouped one.
pub enum MapSpot {
    Chained(Found, bool, u64),
    Grouped(Spot, u64),
}

impl<K: Pod + Eq, V: Pod> EntryMap for HashMap<K, V> {
    type Key = K;
    type Value = V;
    type At = MapSpot;

    fn occupied(at: &MapSpot) -> bool {
        match at {
            MapSpot::Chained(f, ..) => f.node != 0,
            MapSpot::Grouped(s, _) => s.is_found(),
        }
    }

    fn value_mut<'t>(self, tx: &'t mut Tx<'_>, at: &MapSpot) -> Result<&'t mut V> {
        let v = match at {
            MapSpot::Chained(f, ..) => {
                words::elem_mut(words::write(tx, f.node, Self::NODE)?, Self::VAL).map(Some)?
            }
            MapSpot::Grouped(s, _) => self.grouped_slot_mut(tx, s)?,
        };
        v.ok_or_else(|| self.corrupt("an entry's key is missing".into()))
    }

    fn insert_vacant<'t>(self, tx: &'t mut Tx<'_>, at: MapSpot, k: K, v: V) -> Result<&'t mut V> {
        match at {
            MapSpot::Chained(f, growable, counts) => {
                // A split moves nodes between chains but never moves a node.
                let node = self.chained_insert_new(tx, growable, counts, &f, k, v)?;
                words::elem_mut(words::write(tx, node, Self::NODE)?, Self::VAL)
            }
            MapSpot::Grouped(s, counts) => {
                self.grouped_insert(tx, s, k, v)?;
                Self::add_count(tx, counts, 1)?;
                self.get_mut(tx, &k)?
                    .ok_or_else(|| self.corrupt("an inserted key is missing".into()))
            }
        }
    }
}
