//! How the table is built, and why (documentation only).
//!
//! # Layout
//!
//! ```text
//! FdTable<T>
//! ├── id / tag ........ process-unique id; its low 12 bits are stamped into every Fd
//! ├── cache_key ....... id << 9, compared with the thread's claim cache (below)
//! ├── tag_key ......... tag << 8: Fd bits 20..40 minus this = shard index iff the tag matches
//! ├── claims: Arc<[CachePadded<AtomicU32>; shards + 1]>   0 = free, 1 = claimed/locked
//! └── shards: [Shard<T>; shards + 1]        (the last one is the shared, locked shard)
//!
//! Shard<T>
//! ├── bitmap (UnsafeCell, written only by the claim holder)
//! │     open: [u64]   one bit per slot             1 = taken
//! │                   then one all-ones sentinel word (no bound check on the hint)
//! │     full: [u64]   one bit per `open` word      1 = that word is all ones
//! │     next_free     every slot below it is taken (lowest-free lower bound)
//! │     capacity      bits past it, inside the last word, are kept set
//! ├── fd_base ......... tag << 28 | shard << 20: an insert's Fd is this | gen bits | slot
//! ├── slots: Slots<T>
//! │     published: AtomicU32   slots usable so far (Release by the grower)
//! │     three pointers into one reservation of max_slots slots per array:
//! │     states ──► [AtomicU64; max_slots]   state word per slot  (written by every lookup)
//! │     links  ──► [AtomicU32; max_slots]   deferred-list link   (written on release only)
//! │     values ──► [MaybeUninit<T>; max_slots]                   (written once per insert)
//! │     slot s is states + s: no directory, nothing loaded on the way;
//! │     the reservation is PROT_NONE address space, and growth makes the
//! │     next range (initial, then doubling) readable and writable before
//! │     it raises `published`
//! ├── local: CachePadded<Counters>   claim holder only: relaxed load + store, no RMW
//! └── remote: CachePadded<Remote>    what other threads hand to the owner
//!       deferred_head: AtomicU32     Treiber stack of slots whose value awaits release
//!       freed_head:    AtomicU32     Treiber stack of slots already released elsewhere
//!       deferred_pushed, counters    fetch_add, rare paths only
//!
//! state word (u64)                                   Fd (u64)
//!  63        40 39  34  33   32   31          0       63        40 39    28 27    20 19     0
//! +------------+------+----+-----+-------------+     +------------+--------+-------+--------+
//! | generation | 0    |OPEN|ALLOC|    refs     |     | generation | table  | shard |  slot  |
//! +------------+------+----+-----+-------------+     +------------+--------+-------+--------+
//! ```
//!
//! # Who writes what
//!
//! * **Bitmap**: only the thread holding the shard's claim flag. A thread
//!   claims a shard on its first operation on the table (CAS 0 -> 1 on a
//!   free flag) and keeps it until it exits (a thread-local destructor
//!   stores 0). A thread that finds every owner shard taken uses the shared
//!   shard, taking its flag as a spin-then-yield lock per insert. `reap()`
//!   takes the flag of unowned shards the same way. So an owner and a
//!   locked user can never both write one bitmap: both need the same flag.
//! * **Claim cache**: which shard the thread owns is found in a
//!   thread-local registry (a `Vec` with a destructor), fronted by `LAST`:
//!   one `u64`, `table id << 9 | shard` (511 = owns none), in a `const`
//!   thread-local without a destructor, so reading it is one
//!   `%fs`-relative load with no lazy-init or liveness check. `insert`
//!   tests `LAST ^ cache_key < 511`; `close` asks "do I own `fd.shard()`"
//!   as `LAST ^ cache_key == shard` (a cache entry for the table answers
//!   for every shard: a thread owns at most one per table; 9 bits so "none"
//!   never equals an 8-bit shard). `LAST` names a shard only while the
//!   registry holds its claim: the registry's destructor clears `LAST`
//!   before it releases the flags (and leaves both alone when it leaks the
//!   claims for a live `LocalShard` token). Any miss goes to the registry.
//! * **Slot memory**: made usable (`mprotect`) by the claim holder that
//!   grows the shard, before the Release store of `published` that makes
//!   the slots exist; touched for a descriptor's slot only after an
//!   Acquire load of `published` saw the slot below it (`find`, or the
//!   owner's close comparing with its own shard), or by the claim holder
//!   itself. A slot at or past `published` is address space with no
//!   access: touching it would fault, which is why every path that starts
//!   from a descriptor checks the count first (the test
//!   `forged_descriptor_past_the_published_slots_of_the_owners_shard_is_stale`
//!   faults without that check). Under loom the arrays are model cells
//!   built up front, and the model `lookup_races_with_growth` checks that a
//!   lookup racing with growth never reads a value before its publication.
//! * **State word**: any thread, atomically. `insert` stores
//!   `gen | ALLOC | OPEN | refs` (a plain store, see below); `get` adds 1
//!   and checks `OPEN` and the generation; on a mismatch it gives the
//!   reference back if the slot holds a value (`ALLOC`: counts are exact
//!   there) and keeps it if the slot is free (the reference bits of a free
//!   slot are junk that the next insert overwrites, as in Linux's
//!   `file_ref_t`; 2^31 of them start being shed so they never carry);
//!   `close` clears `OPEN` and drops the table's reference in one CAS; the
//!   thread that takes the count of a closed entry to zero performs the one
//!   final CAS `(gen, ALLOC, 0) -> (gen + 1, free)` and thereby owns the
//!   value. Only one thread can win that CAS per generation.
//! * **Value**: written by the inserting claim holder before the state
//!   store that publishes it (Release); read through guards while they hold
//!   a reference; moved out only by the winner of the final CAS, or by the
//!   thread that popped it from the deferred list.
//!
//! # Release paths
//!
//! ```text
//! close(fd) ── refs == 1 ── CAS to (gen+1, free) ── release() in caller ──┬─ owner: clear bit now
//!          │                                                               └─ other: push freed list
//!          └─ refs > 1 ── CAS clears OPEN, drops table ref ── Ok(())
//! last Guard / Owned drop ── final CAS ── push deferred list (no syscall, no lock)
//! owner's next insert, or reap() ── swap list head ── release() each ── clear bits
//! ```
//!
//! Every path that takes a value out (close's final CAS, `release_now`,
//! the drains) first checks the `get_with` announcements (below): a slot a
//! borrow still reads goes (back) on the deferred list instead, and `close`
//! returns `Ok(())` as when a guard is out.
//!
//! # Scoped lookups: `get_with`
//!
//! ```text
//!  get_with(fd, f)                           close / drain (releasers)
//!  ----------------------------------------  ------------------------------------
//!  find(fd): tag, shard, published          the ending CAS (SeqCst), or the
//!  word = fd's slot key (xchg: one locked      SeqCst swap of the deferred list
//!         instruction, the store-load fence) load the words below `high`:
//!  state load: OPEN, this generation?          one == slot key: (re)queue
//!  f(&value)                                   none: release now
//!  word = 0 (plain Release store)
//! ```
//!
//! A borrow that ends before the call returns needs no reference: the
//! thread announces the slot (tag, shard, slot; not the generation) in a
//! word of its own (the `announce` crate, whose registry pathcache's
//! borrows share: 128 per process, one line each, taken on first use,
//! given back at thread exit; the key has bit 63 set, which no entry
//! address of pathcache's has), and every releaser checks the
//! words after the SeqCst RMW that ends the entry or takes it off the
//! deferred list. A reader that saw OPEN did its load before the close's
//! CAS in the SeqCst order, so its announcement is before the releaser's
//! loads; one that announced later sees the entry closed. The clear is a
//! plain store, so a covered value waits for the owner's next insert or
//! `reap` after the borrow (the bound of its release), like a value whose
//! last guard dropped elsewhere. Nested `get_with`s (also inside a
//! pathcache `get_with`), and threads without a word, take a guard. The
//! releasers' check is one load and compare while no thread ever
//! announced, and one load per word ever taken after that.
//! Measured side by side (`FDTABLE_INTERLEAVED=200`, `benches/README.md`):
//! `get_with` 2.05-2.06x sharded-slab (`get` + guard drop 1.49-1.50x); the
//! pair 4.12x with no word taken, 4.04-4.08x with this thread's word taken
//! (before: 4.04-4.11x). The loom model `get_with_races_with_close_and_reap`
//! reports a causality violation if the releasers skip the check.
//!
//! # Allocation
//!
//! `take_fast` reads the `open` word holding `next_free`; if it has a zero
//! bit it sets the lowest one (`word | (word + 1)`) and returns its index
//! (`trailing_ones`): the fast path, one load and one store and no bound
//! check (when `next_free` equals the capacity its word is the all-ones
//! sentinel after the last one), since every slot below `next_free` is
//! taken, so the first zero in that word is the lowest free slot. Otherwise (cold) `find_lowest` scans
//! `full` from the next word for a zero bit, and if there is none the shard
//! grows by making the next range of slots usable (the first `initial`,
//! then as many again as it has: doubling) and extending the bitmap, up to
//! `max_slots`, after which insert returns `Full(value)` (also when the
//! kernel will not commit the memory). Release clears the
//! `open` bit and lowers `next_free`; it clears the `full` bit only if the
//! word was all ones before (the bit is set exactly then), so the summary
//! word is not even read otherwise; its index is not bound-checked either
//! (every slot it is given is below the capacity: one the bitmap handed
//! out, or a descriptor's slot checked against `published`, which the
//! owner keeps equal to the capacity). The kept bound checks are the ones
//! correctness needs (summary bits past the last word, a descriptor's shard
//! and slot); there is no "slot must be empty" sanity check on the
//! allocation path (it is a `debug_assert`).
//!
//! # The owner's pair, instruction by instruction
//!
//! `insert` then `close` of the same entry on the shard's owner thread is
//! 107 instructions (through `local()`: 94; the floor contender: 61), all
//! inline, with no call on the path. `insert`: one load and compare of
//! `LAST`; two loads of the deferred and freed list heads; `take_fast`;
//! one counter bump; the value write; the state load and the Release store
//! (both at `base + slot`); the Fd from `fd_base`. `close`: `LAST` again,
//! which names the caller's shard before the descriptor is looked at; the
//! descriptor's tag and shard bits against that shard's `fd_base` and its
//! slot against `published` (predicted branches, off the CAS's chain); one
//! CAS at that shard's `states + slot` from the guessed state (open, only
//! the table's reference, the descriptor's generation) straight to the next
//! generation, free (`(state & GEN_BITS) + GEN_ONE`, which wraps the 24-bit
//! generation with no mask); the announcement check; `release()`; one
//! counter bump; the bit clear. Everything else (wrong guess, guards out,
//! stale, another shard's or table's descriptor, drains, growth) is a
//! `#[cold]` function.
//!
//! # Memory per slot
//!
//! Beyond the value itself (`MaybeUninit<T>`, no padding added):
//! state 8 B + link 4 B + one `open` bit (1/8 B) + 1/64 of a `full` bit
//! (1/512 B) = **12.13 bytes** per slot, within the 16-byte budget, for the
//! slots the shard has grown to (committed a page at a time as it grows).
//! Per shard there is a fixed ~0.9 KiB: the shard itself, 512 B (padded
//! counters, bitmap headers, the three array pointers; 1 KiB with the page
//! directory it replaced), its padded claim flag, the bitmap's sentinel
//! words. A unit test computes
//! the figure from the `size_of`s. Address space, not memory: each shard
//! reserves `max_slots * (12 + size_of::<T>())` bytes with no access (with
//! the defaults and a 16-byte value, 28 MiB per shard), which the kernel
//! counts in the process's virtual size but not as committed memory under
//! any overcommit policy (test `reserved_slots_cost_no_memory_until_used`).
//!
//! # Choices and their measurements
//!
//! ## Where the remaining nanoseconds go (fifth pass, 2 Dec 2026)
//!
//! The fourth pass (below) found both the pair and the lookup bound by the
//! chain from a descriptor to its state word, not by their instruction
//! counts, and named what would cut it: a state word reachable with no
//! dependent load. This pass did that, in two parts that only pay
//! together:
//! * one array per kind per shard at a fixed address (`slots.rs`): slot
//!   `s` is `states + s`, with no `bsr` and no page-pointer load on the
//!   way. The arrays are reserved for `max_slots` as address space with no
//!   access and made usable as the shard grows, so memory use is what the
//!   doubling pages had.
//! * the owner's close starts from the shard the caller owns (`LAST`, or
//!   the `local()` token), known before the descriptor is read, and only
//!   compares the descriptor with it: the CAS's address no longer waits
//!   for a shard index decoded from the descriptor and a load through it.
//!
//! Measured on the 2-vCPU AMD EPYC VM (`FDTABLE_INTERLEAVED=200 cargo
//! bench -p benches --bench fdtable`, before and after binaries alternated,
//! two runs each; medians of 200 rounds of 20000, thread CPU time;
//! instruction counts by `scripts/callgrind-fdtable.sh 100000`):
//!
//! | per op                  | instructions | ns before -> after | ratio before -> after |
//! |-------------------------|--------------|--------------------|-----------------------|
//! | pair, `insert` + `close` | 109 -> 107  | 10.5 -> 8.3        | 0.84-0.94x -> 1.07x `Mutex<Slab>`; 1.91-2.72x -> 2.40-2.44x sharded-slab |
//! | pair through `local()`  | 100 -> 94    | 10.3-10.6 -> 8.2-8.7 | 0.84-0.98x -> 1.01-1.09x `Mutex<Slab>` |
//! | pair, floor             | 61           | 4.8-5.8            | 1.74-1.82x `Mutex<Slab>`, 4.1-5.0x sharded-slab |
//! | lookup, `get` + drop    | 53 -> 50     | 5.1-6.6 -> 4.5     | 2.97-3.31x -> 3.43-3.45x sharded-slab (floor: 3.46-3.48x) |
//! | lookup, `get_with`      | 70 -> 66     | 4.5-5.9 -> 3.9     | 3.34-3.73x -> 3.93-3.94x sharded-slab |
//! | two threads             |              | 5.6-5.8 per pair   | 1.95-1.96x the one-thread rate; 11.8-12.4x a shared `Mutex<Slab>` |
//!
//! Each part alone, measured with the other hacked in or out in the same
//! session: the address from the caller's shard alone left `local()` at
//! 10.3 ns (the page directory still sat on the chain); a flat array
//! alone (the directory entry forced to 0 in a table of one page) left it
//! at 9.1-9.2 ns; both together 7.4-8.3 ns. Dropping instructions did not
//! move it: without the counters, the list-head checks and the
//! announcement check the pair stayed at 9.2-9.3 ns before this pass and
//! at 8.3-9.3 after it (the floor at 4.8-5.8 in the same runs), and
//! without the descriptor's validation in close it stayed at 8.3-8.5.
//!
//! The lookup is now at its floor (`get` + guard 1.01x the floor's time:
//! the `lock xadd` address comes from the descriptor with one load, the
//! shard's array pointer, as the floor's does).
//!
//! The pair is still 1.6-1.7x the floor's time, and issue #18's 1.5x
//! `Mutex<Slab>` asks for 1.2x on this CPU, where the floor itself is only
//! 1.8x the mutex. What the floor does not have, each measured away above
//! without a change: the counters, the list checks, the announcement
//! check, the descriptor checks, the claim lookup (`local()` is no
//! faster). Nor is it the floor's advantage of holding its table by
//! `&mut`: `floor_shared`, the same floor behind `&self` through a leaked
//! `&'static` (so nothing stays in a register across the CAS), measures
//! the same as the floor (4.81 against 4.82 ns). Not explained: with no
//! PMU in this VM, which of the remaining ~35 instructions (the state
//! layout's packing, the value's move out and `release()`, the `full`
//! summary test, the `Result` plumbing) or which store-to-load forward
//! carries the last 3 ns.
//!
//! ## Fourth pass (1 Dec 2026)
//!
//! On an AMD EPYC VM, where an uncontended mutex costs less, the same
//! pair measures 0.74-0.95x `Mutex<Slab>` against the floor's 1.7-1.8x:
//! `benches/README.md`, "The same groups on an AMD EPYC host".
//!
//! Measured on a 2-vCPU Intel Xeon VM shared with other work, two ways:
//! instruction counts, the same on any machine and under any load
//! (`scripts/callgrind-fdtable.sh 100000`; for the annotated hot loop,
//! `FDTABLE_CALLGRIND=fdtable:200000 valgrind --tool=callgrind
//! --dump-instr=yes <the fdtable bench binary>`, then `callgrind_annotate
//! --auto=yes`), and thread CPU time of interleaved batches
//! (`FDTABLE_INTERLEAVED=200 cargo bench -p benches --bench fdtable`:
//! medians of 200 rounds of 20000 per contender; the two-thread part is
//! wall time, 50 rounds of 200000 pairs per thread). 1000 live entries, a
//! no-op `release`. Ranges are over 3 runs; "before" is main at 58989fe.
//!
//! | per op                     | instructions before -> after | ns after    | ratio before -> after |
//! |----------------------------|------------------------------|-------------|-----------------------|
//! | pair, `insert` + `close`   | 120 -> 107                   | 13.6-13.9   | 3.77-3.81x -> 4.04-4.11x sharded-slab; 1.72-1.76x -> 1.84-1.85x `Mutex<Slab>` |
//! | pair through `local()`     | 109 -> 105                   | 13.3-13.7   | 3.79-3.83x -> 4.12-4.19x sharded-slab; 1.74x -> 1.87-1.88x `Mutex<Slab>` |
//! | pair, floor                | 61                           | 10.3-10.6   | 5.3-5.4x sharded-slab, 2.41-2.42x `Mutex<Slab>` |
//! | pair, `Mutex<Slab>`        | 78                           | 25.5        | |
//! | pair, sharded-slab         | 273                          | 55.8-56.7   | |
//! | lookup, `get` + drop       | 56 -> 52                     | 14.2-14.5   | 1.43-1.44x -> 1.46-1.49x sharded-slab |
//! | lookup, floor              | 29                           | 10.7-11.1   | 1.93-1.96x sharded-slab |
//! | lookup, sharded-slab       | 130                          | 20.8-21.7   | |
//! | two threads, pair          |                              | 7.1-7.3 aggregate | 1.97-1.98x -> 1.96-1.97x the one-thread rate; 9.4-13.5x -> 5.3-12.4x one shared `Mutex<Slab>` on two threads |
//!
//! Since then (`scripts/callgrind-fdtable.sh 100000`, 2 Dec 2026, the same
//! before and after the announcement words moved to the `announce`
//! crate): pair 109, through `local()` 100, lookup (`get` + drop) 53, and
//! the scoped lookup `get_with` 70 against its floor's 29 (an `xchg`
//! announcement, a plain load, a plain clear). `get_with`'s extra
//! instructions over `get` (the thread-local word pointer and the check
//! that the word is free, the generation compare after the announcement)
//! are not what its time follows: it has one locked instruction where
//! `get` + drop has two (`benches/README.md`, "Announced lookups").
//!
//! The two-thread targets (1.8x the one-thread rate, 4x a shared
//! `Mutex<Slab>`) were already met on main: each thread owns its shard, so
//! nothing is shared on the pair's path; the mutex's two-thread figure
//! (39-102 ns per pair) swings with whatever else the machine runs, the
//! table's does not.
//!
//! What this pass cut, each step measured against the one before
//! (interleaved, 3 alternated runs):
//! * the bitmap's bound checks (a sentinel word after the last one, an
//!   unchecked release index): 120 -> 115 instructions, 3.78-3.81x ->
//!   3.83-3.89x sharded-slab;
//! * page pointers indexed by the slot's bit length instead of its page
//!   number (no load of the page 0 size, no shift): 115 -> 109, lookup 56
//!   -> 54; through `local()` 3.82-3.88x -> 3.97-4.01x;
//! * one array of page pointers per kind instead of a 24-byte struct per
//!   page (no multiply by 3 on the way to the state word): 109 -> 107,
//!   lookup 54 -> 52; 3.88-3.89x -> 4.03-4.07x sharded-slab.
//!
//! Tried and dropped, because they did not measure better:
//! * testing "the cache names me as the owner" first in `close`, the rest
//!   in a cold call: 109 -> 107 instructions, but 3.86-3.93x -> 3.89-3.93x
//!   sharded-slab and through `local()` 3.95-4.02x -> 3.94-3.98x;
//! * both remote list heads in one `AtomicU64` (one load and compare per
//!   insert instead of two, `fetch_or`/`swap` to take a list): 107 -> 105
//!   instructions, through `local()` 105 -> 95, but 4.04-4.05x ->
//!   4.05-4.11x, and through `local()` 4.11-4.13x -> 4.07-4.10x (13.5 ->
//!   13.7 ns). The two loads are off the dependent chain and their
//!   branches are predicted.
//! * the lookup's "open, and this generation" as one compare of
//!   `(state ^ fd) & (GEN_BITS | OPEN)` against a per-table key (bit 33 of
//!   a descriptor is a tag bit): 52 -> 51 instructions, 1.47-1.50x ->
//!   1.47-1.48x sharded-slab. Those tests are predicted branches after the
//!   `lock xadd`, not on its chain.
//!
//! Where the rest goes. Both paths are bound by a chain of dependent
//! operations, not by their instruction count. The pair is 3.3 ns (~10
//! cycles) above the floor: from a slot number to its state word the table
//! does `lea`, `bsr`, and the load of the page pointer before the state
//! access, where the floor indexes one flat array; the pair does that
//! twice (insert's state store, close's CAS), and the close also checks the
//! descriptor's tag, shard and `published` (off the chain: predicted
//! branches). The other 46 instructions above the floor (`LAST`, the two
//! list checks, the counters, the Fd packing, the ownership test) cost
//! little time: dropping 10 of them from the `local()` pair (the list-head
//! merge above) measured nothing.
//!
//! The lookup is ~3.6 ns above the floor, and that is the same chain: the
//! floor's `fetch_add` address comes straight from the key, fdtable's
//! waits for `lea`, `bsr` and the page-pointer load (~11 cycles: the
//! locked RMW before it blocks later loads from starting early). The floor
//! itself, the two locked read-modify-writes and nothing else, is
//! 1.93-1.96x sharded-slab: the 2x target is below a counted guard on this
//! CPU, and reaching even the floor needs a state word reachable with no
//! dependent load, i.e. one flat array per shard at a fixed address
//! (reserving `max_slots` of address space per shard up front instead of
//! growing by pages): the fifth pass, above.
//!
//! One run of the first step's build (of 21) had the non-local pair at
//! 22-25 ns for the whole process, also with ASLR off, while the other
//! contenders were normal; it did not recur after the later steps (0 of
//! 11, 8 processes of 20M pairs each measured 278-282 ms). Without a PMU
//! in this VM the cause was not found; a run far off the others is worth
//! repeating before it is believed.
//!
//! ## Third pass (1 Dec 2026): the instructions
//!
//! Measured with instruction counts, which are the same on any machine and
//! under any load (`scripts/callgrind-fdtable.sh 100000`), and with thread
//! CPU time of interleaved batches (`FDTABLE_INTERLEAVED=200 cargo bench -p
//! benches --bench fdtable`, medians of 200 rounds of 20000; 2-vCPU AMD
//! EPYC VM). 1000 live entries, one thread, a no-op `release`.
//!
//! | per op                     | instructions before -> after | CPU ns after | ratio after |
//! |----------------------------|------------------------------|--------------|-------------|
//! | pair, `insert` + `close`   | 262 -> 120                   | 14.4-14.5    | 1.72-1.75x `Mutex<Slab>`, 3.8-3.9x sharded-slab (3 runs) |
//! | pair through `local()`     | 237 -> 109                   | 14.4         | 1.76x `Mutex<Slab>` |
//! | pair, floor                | 61                           | 10.5         | 2.40x `Mutex<Slab>` |
//! | pair, `Mutex<Slab>`        | 78                           | 25.2         | 1.00x |
//! | pair, sharded-slab         | 273                          | 54.7         | 0.46x `Mutex<Slab>` |
//! | lookup, `get` + drop       | 100 -> 56                    | 14.6         | 1.42x sharded-slab |
//! | lookup, floor              | 29                           | 10.7         | 1.93x sharded-slab |
//! | lookup, sharded-slab       | 130                          | 20.7         | 1.00x |
//!
//! Where the pair's ~200 instructions above the floor went (callgrind
//! annotate of the pair benchmark), and what replaced them:
//! * `insert_claimed` and `close_as` were out-of-line calls, ~30 in
//!   register saves and restores: now everything on the path is inline and
//!   every uncommon branch is a `#[cold]` function.
//! * every slot access ran `Geometry::locate` (a `max_slots` check, a
//!   branch for page 0, the page start to subtract), a null check and three
//!   pointer loads, ~47 per pair: now biased page pointers, `published` as
//!   the one existence check (it also bounds `max_slots`), and a branch-free
//!   `page_of`.
//! * the bitmap found and then took the bit (two bound checks) and read
//!   the summary word on every release, ~35: now `take_fast` and the
//!   "was the word full" test.
//! * Fd packing and unpacking, ~20: `fd_base`, the shared generation bits,
//!   one compare for tag and shard.
//! * two lazy thread-local lookups with a liveness check, ~15: `LAST`.
//!
//! What is left above the floor is what the guarantees cost: validating a
//! descriptor that may be forged or from another table (tag, shard,
//! `published`), the reference and generation bits, the deferred and freed
//! list checks that make foreign drops cheap, the ownership test that
//! decides between clearing the bit and handing it to the owner, the
//! summary bit, two counters. In time, fdtable's pair was then 4 ns above
//! the floor, 0.8 ns from the 4x-sharded-slab target (met by the fourth
//! pass, above).
//!
//! The lookup is bound by its two locked read-modify-writes, not by its
//! instructions: cutting 100 to 56 instructions left it at 14.6 ns, and
//! the floor, which does nothing but the `fetch_add`, the generation check,
//! the value read and the `fetch_sub`, takes 10.7 ns = 1.93x sharded-slab:
//! the 2x target is below a reference-counted guard on this CPU. fdtable's
//! path is the floor's plus one dependent load (the page pointer), the
//! `bsr` of the page, and the descriptor checks.
//!
//! ## First and second passes
//!
//! Machine: 2-vCPU AMD EPYC VM, shared with other builds (load average
//! 14-16 during the runs), so the figures below are thread CPU time from the
//! `_cpu` groups of `benches/benches/fdtable.rs` (`--quick`, one run), at
//! the first pass:
//!
//! | per op (CPU ns)        | fdtable | sharded_slab | mutex_slab | dup+close |
//! |------------------------|---------|--------------|------------|-----------|
//! | alloc+release pair     | 32.1    | 37.7         | 12.8       | 537       |
//! | lookup (get hit)       | 10.2    | 19.1         |            |           |
//!
//! So: lookups are 1.9x faster than sharded-slab; the alloc+release pair is
//! 1.2x faster than sharded-slab and 17x faster than dup+close, but 2.5x
//! SLOWER than an uncontended `Mutex<Slab>`, which on this CPU costs only
//! two ~6 ns lock/unlock pairs. The targets (10x / 1.5x / 20x) are not met.
//!
//! Where the pair's time goes (second pass, 2026-11-30, on a quiet
//! machine): not the atomics. A stripped-down pair in a scratch program
//! (one `Vec<u64>` bitmap word scan + `next_free` hint, a value store, the
//! state store, then the state CAS and the bit clear; no table, no
//! counters) costs 10.6 ns with the CAS and 9.0 ns with two plain stores
//! instead, against 10.5-12 ns for `Mutex<Slab>` in the same session. The
//! floor is the loop-carried chain through memory: close stores
//! `next_free` and the bitmap word, the next insert loads both back
//! (store-to-load forwarding, ~7 cycles each here), derives the slot from
//! them, and close reads what insert stored. Lowest-free allocation cannot
//! avoid that chain, so "1.5x faster than an uncontended mutex" (7 ns per
//! pair here) is below this design's floor on this CPU; the issue's figure
//! assumed a 50 ns mutex pair. The full table adds ~10-20 ns over the
//! floor (thread-local claim, deferred-list checks, page lookup, counters,
//! generation packing), and that part swings between ~20 and ~35 ns with
//! the machine's phase (the same binary and addresses, CPU time; other
//! tenants' activity), which is larger than any one change below.
//!
//! Two threads (`fdtable_2threads`, wall time, three runs at load average
//! 1.6-1.8): fdtable 28.8-31.6 ns per pair on one thread and 14.7-17.5 ns
//! aggregate on two, a 1.81-1.97x scaling (each thread owns its shard, so
//! nothing is shared on the pair's path). The same pairs on one shared
//! `Mutex<Slab>`: 10.6-12.8 ns on one thread, 64-75 ns aggregate on two
//! (the lock's line bounces), so with two workers allocating at once the
//! table does 4.3-5x the mutex's throughput.
//!
//! Changes of this pass, each kept because it removes work, none of them
//! separable from the noise on its own (interleaved A/B against the
//! previous commit: 28-30 vs 29-31 ns CPU, min of 30 rounds):
//! * insert publishes with a plain store instead of `fetch_add` (one RMW
//!   fewer), made sound by failed lookups keeping their junk +1 on free
//!   slots (above). Loom 0.7 cannot check a plain store racing an RMW
//!   (tokio-rs/loom#254), so under loom the store is a `swap`
//!   (`sync::store_against_rmw`); two models cover the race, and one of
//!   them crashes if lookups undo their +1 on free slots.
//! * close tries one CAS from the state it expects (open, one reference,
//!   the descriptor's generation) instead of a load first.
//! * one counter bump per insert and per owner close (allocations and
//!   occupied slots are derived in `stats()`), down from five per pair.
//! * a page's three pointers share a cache line.
//!
//! * Owner token (`FdTable::local` -> `LocalShard`, `!Send`): resolves the
//!   claimed shard once, so `insert`/`close` skip the thread-local claim
//!   lookup (since the third pass that lookup is one load and compare of
//!   `LAST`, and the token saves 11 of 120 instructions per pair). A
//!   thread-local destructor keeps (leaks) the thread's claims while a
//!   token is still alive, so a token can never outlive its claim.
//!   Measured side by side (`--quick`, `_cpu` groups, load average 6-12,
//!   three runs): `fdtable` 20.8 / 35.3 / 20.4 ns, `fdtable_local`
//!   29.3 / 19.6 / 30.5 ns, `mutex_slab` 10.4 / 10.4 / 11.2 ns. Both
//!   fdtable variants jump between ~20 and ~30-35 ns from run to run
//!   independently of the path, so the saving from the skipped lookup
//!   (a few ns at most) is below this machine's noise; it is kept because
//!   it removes work from the pair and lets the 2-thread bench prove that
//!   each thread owns its own shard (`local()` is `None` otherwise).
//! * An uncontended atomic RMW costs ~1.5-3 ns here and a `std` mutex
//!   lock+unlock ~6 ns. An alloc+release pair does one RMW (the CAS in
//!   close) and no lock.
//! * A first version reached a slot through `Box<[AtomicPtr<Page>]>` and a
//!   page struct of boxed slices; the profile showed the chained loads in
//!   `close`, so the page pointers now sit inline in the shard.
//! * Lookups use `fetch_add` (never a CAS loop), as Linux's `file_ref_t`
//!   does, so concurrent lookups of one hot descriptor never retry.
//!
//! # Limits
//!
//! * Generations are 24 bits: a descriptor held across 2^24 reuses of its
//!   slot would resolve again (Linux has no generation at all).
//! * The table tag is 12 bits: a descriptor from a table created 4096 tables
//!   later could pass the table check (it still needs a live matching slot
//!   and generation).
//! * `Release` impls must not call back into the same table.
//! * Dropping the table releases values still in it inline, ignoring errors.
