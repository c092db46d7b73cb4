//! The table against a reference model (`BTreeSet` of free slots), driven by
//! random operation sequences on one thread.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Ledger, Tracked};
use fdtable::{CloseError, Config, Error, Fd, FdTable, Guard, InsertError};
use proptest::prelude::*;

const MAX_SLOTS: u32 = 70;

#[derive(Debug, Clone)]
enum Op {
    Insert,
    Close(usize),
    Get(usize),
    DropGuard(usize),
    CloseStale(usize),
    GetStale(usize),
    Reap,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => Just(Op::Insert),
        3 => any::<usize>().prop_map(Op::Close),
        2 => any::<usize>().prop_map(Op::Get),
        2 => any::<usize>().prop_map(Op::DropGuard),
        1 => any::<usize>().prop_map(Op::CloseStale),
        1 => any::<usize>().prop_map(Op::GetStale),
        1 => Just(Op::Reap),
    ]
}

/// What the model knows about an occupied slot.
struct Entry {
    fd: Fd,
    id: u64,
    open: bool,
    guards: usize,
}

struct Model {
    free: BTreeSet<u32>,
    entries: BTreeMap<u32, Entry>,
    /// Closed with no reference left, waiting for the next drain.
    pending: BTreeSet<u32>,
}

impl Model {
    fn drain(&mut self) {
        for slot in std::mem::take(&mut self.pending) {
            self.entries.remove(&slot);
            self.free.insert(slot);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn table_matches_reference_model(ops in proptest::collection::vec(op(), 1..400)) {
        let ledger = Ledger::new(ops.len());
        let table: FdTable<Tracked> = FdTable::new(Config { shards: 1, initial_slots: 4, max_slots: MAX_SLOTS as usize });
        let mut model = Model { free: (0..MAX_SLOTS).collect(), entries: BTreeMap::new(), pending: BTreeSet::new() };
        let mut guards: Vec<(u32, Guard<'_, Tracked>)> = Vec::new();
        let mut dead: Vec<Fd> = Vec::new();
        let mut next_id = 0u64;
        let mut released_model = 0u64;
        let mut handed_back = 0u64;

        for op in ops {
            match op {
                Op::Insert => {
                    let id = next_id;
                    next_id += 1;
                    // An insert drains the deferred list first.
                    released_model += model.pending.len() as u64;
                    model.drain();
                    match table.insert(ledger.value(id)) {
                        Ok(fd) => {
                            let expected = model.free.pop_first();
                            prop_assert_eq!(Some(fd.slot()), expected, "lowest free slot");
                            model.entries.insert(fd.slot(), Entry { fd, id, open: true, guards: 0 });
                        }
                        Err(InsertError::Full(value)) => {
                            prop_assert!(model.free.is_empty(), "Full with free slots {:?}", model.free);
                            prop_assert_eq!(value.id, id);
                            value.forget();
                            handed_back += 1;
                        }
                    }
                }
                Op::Close(pick) => {
                    let open: Vec<u32> = model.entries.iter().filter(|(_, e)| e.open).map(|(s, _)| *s).collect();
                    if open.is_empty() { continue; }
                    let slot = open[pick % open.len()];
                    let entry = model.entries.get_mut(&slot).unwrap();
                    prop_assert!(table.close(entry.fd).is_ok());
                    entry.open = false;
                    dead.push(entry.fd);
                    if entry.guards == 0 {
                        prop_assert_eq!(ledger.releases(entry.id), 1, "released in close");
                        released_model += 1;
                        model.entries.remove(&slot);
                        model.free.insert(slot);
                    } else {
                        prop_assert_eq!(ledger.releases(entry.id), 0);
                    }
                }
                Op::Get(pick) => {
                    let open: Vec<u32> = model.entries.iter().filter(|(_, e)| e.open).map(|(s, _)| *s).collect();
                    if open.is_empty() { continue; }
                    let slot = open[pick % open.len()];
                    let entry = model.entries.get_mut(&slot).unwrap();
                    let guard = table.get(entry.fd).unwrap();
                    prop_assert_eq!(guard.id, entry.id);
                    entry.guards += 1;
                    guards.push((slot, guard));
                }
                Op::DropGuard(pick) => {
                    if guards.is_empty() { continue; }
                    let (slot, guard) = guards.swap_remove(pick % guards.len());
                    drop(guard);
                    let entry = model.entries.get_mut(&slot).unwrap();
                    entry.guards -= 1;
                    if !entry.open && entry.guards == 0 {
                        prop_assert_eq!(ledger.releases(entry.id), 0, "guard drop defers");
                        model.pending.insert(slot);
                    }
                }
                Op::CloseStale(pick) => {
                    if dead.is_empty() { continue; }
                    let fd = dead[pick % dead.len()];
                    prop_assert!(matches!(table.close(fd), Err(CloseError::Stale)));
                }
                Op::GetStale(pick) => {
                    if dead.is_empty() { continue; }
                    let fd = dead[pick % dead.len()];
                    prop_assert_eq!(table.get(fd).err(), Some(Error::Stale));
                }
                Op::Reap => {
                    let expected = model.pending.len();
                    released_model += expected as u64;
                    model.drain();
                    prop_assert_eq!(table.reap(), expected);
                }
            }
            let stats = table.stats();
            prop_assert_eq!(stats.live, model.entries.len() as u64);
            prop_assert_eq!(stats.deferred_queue_depth, model.pending.len() as u64);
            prop_assert_eq!(ledger.total_released(), released_model);
        }
        drop(guards);
        drop(table);
        prop_assert_eq!(ledger.leaks(), 0);
        // Dropping the table released everything still in it.
        prop_assert_eq!(ledger.total_released(), next_id - handed_back);
    }
}
