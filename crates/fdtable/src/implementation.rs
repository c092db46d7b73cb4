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
//! │     17 cache lines between the arrays, so a slot's three parts never
//! │     share their offset in a page (4K aliasing, below);
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
//!   claims a shard on its first insert into the table (CAS 0 -> 1 on a
//!   free flag) and keeps it until it exits (a thread-local destructor
//!   stores 0). Closes, releases and `reap()` only look the claim up: a
//!   thread that never inserts (a reaper) takes no owner shard from the
//!   threads that do. A thread that finds every owner shard taken uses
//!   the shared shard, taking its flag as a spin-then-yield lock per
//!   insert. `reap()` takes the flag of unowned shards the same way. So
//!   an owner and a locked user can never both write one bitmap: both
//!   need the same flag.
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
//! `get_with` is the faster lookup (one locked instruction where `get`
//! and its guard have two), and the releasers' check costs the owner's
//! pair nothing above the noise (numbers: `benches/HISTORY.md`,
//! "Announced lookups"). The loom model
//! `get_with_races_with_close_and_reap` reports a causality violation if
//! the releasers skip the check.
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
//! What each choice measured, pass by pass, with the commands that
//! reproduce it, is in `benches/HISTORY.md` (the fdtable sections, "The
//! passes that got the pair here" for the history; the current figures
//! are in `benches/README.md`); this section keeps what those
//! measurements concluded.
//!
//! Standing choices, each kept because it removed work from the owner's
//! path or a locked instruction from a lookup:
//! * `insert` publishes with a plain Release store, not a `fetch_add`,
//!   made sound by failed lookups keeping their junk +1 on free slots (see
//!   "Who writes what"); under loom the store is a `swap`
//!   (`sync::store_against_rmw`, tokio-rs/loom#254).
//! * `close` tries one CAS from the state it expects (open, one reference,
//!   the descriptor's generation) straight to the next generation, with
//!   no load first.
//! * One counter bump per insert and per owner close; allocations and
//!   occupied slots are derived in `stats()`.
//! * Lookups pin with `fetch_add` (never a CAS loop), as Linux's
//!   `file_ref_t` does, so lookups of one hot descriptor never retry;
//!   `get_with` has one locked instruction (the announcement's `xchg`)
//!   where `get` + guard has two.
//! * The bitmap keeps only the bound checks correctness needs (a sentinel
//!   word, an unchecked release index; see "Allocation").
//! * Every path but the common one is a `#[cold]` function, so the pair
//!   is one straight line with no call.
//! * The owner token (`FdTable::local`) skips the claim lookup: 107 -> 94
//!   instructions per pair, no measurable time (the `LAST` load is off the
//!   chain).
//!
//! Tried and dropped, because they measured no better: testing "the cache
//! names me as the owner" first in `close` with the rest in a cold call;
//! both remote list heads in one `AtomicU64`; the lookup's "open, and this
//! generation" as one compare against a per-table key. Each removed
//! instructions that were not on the chain below.
//!
//! ## Where the remaining nanoseconds go
//!
//! Both the pair and the lookup are bound by the chain of dependent
//! operations from a descriptor to its state word, not by their
//! instruction counts, so the layout keeps that chain short:
//! * one array per kind per shard at a fixed address (`slots.rs`): slot
//!   `s` is `states + s`, with no page pointer loaded on the way;
//! * the owner's close starts from the shard the caller owns (`LAST`, or
//!   the `local()` token), known before the descriptor is read, and only
//!   compares the descriptor with it (these two only pay together);
//! * 17 cache lines between the three arrays (`SLOT_ARRAY_GAP`), so a
//!   slot's state word and value never share their offset in a page:
//!   `insert` stores the value and then loads the state word, which the
//!   CPU held back as if it depended on the store (4K aliasing). The unit
//!   test `a_slots_three_parts_sit_at_different_page_offsets` fails
//!   without the gaps.
//!
//! The lookup is at its floor. What is left between the pair and the
//! floor contender is the guarantees the floor does not give (counters,
//! list-head and announcement checks, the descriptor's validation, the
//! release), taken together: none of them alone measures above the
//! noise. Numbers, and the commands that reproduce them:
//! `benches/HISTORY.md` ("fdtable: where the remaining nanoseconds go").
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
