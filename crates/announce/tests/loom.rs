//! Loom models of the registry itself: a reader that takes its word,
//! announces a key and uses the value while it is live, against a releaser
//! that ends the value with a SeqCst RMW and releases it unless
//! [`announce::covered`] finds the key (else once the borrow is over).
//! Every execution starts with a fresh registry, so each reader also races
//! its first `mine` (the lease and the raise of `high`) with the releaser.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release -p fdwarden-announce --test loom`
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A value read by borrowers and released (written) once by a releaser:
/// loom reports a release that races a use.
struct Value {
    live: AtomicBool,
    released: AtomicBool,
    data: UnsafeCell<u64>,
}

impl Value {
    fn new() -> Value {
        Value {
            live: AtomicBool::new(true),
            released: AtomicBool::new(false),
            data: UnsafeCell::new(7),
        }
    }

    /// The reader: announce `key`, check, use, clear. Whether it used it.
    fn borrow(&self, key: u64) -> bool {
        let word = announce::mine().expect("a word per modeled thread");
        word.announce(key);
        if !self.live.load(Ordering::SeqCst) {
            return false;
        }
        let seen = self.data.with(|d| {
            // SAFETY: the cell lives as long as `self`; loom reports the
            // read if it races the release's write.
            unsafe { *d }
        });
        assert_eq!(seen, 7, "read a released value");
        drop(word);
        true
    }

    /// The releaser: end the value, release it unless a borrow covers it.
    /// Whether it released.
    fn end(&self, key: u64) -> bool {
        assert!(self.live.swap(false, Ordering::SeqCst));
        self.release_unless_covered(key)
    }

    fn release_unless_covered(&self, key: u64) -> bool {
        if announce::covered(key) {
            return false;
        }
        assert!(
            !self.released.swap(true, Ordering::Relaxed),
            "released twice"
        );
        self.data.with_mut(|d| {
            // SAFETY: the cell lives as long as `self`; loom reports the
            // write if it races a borrower's read.
            unsafe { *d = 0 }
        });
        true
    }
}

/// One reader against one releaser: the reader sees the value intact or
/// backs off; a deferred release happens at the next check, after the
/// borrow.
#[test]
fn borrow_races_release() {
    loom::model(|| {
        let value = Arc::new(Value::new());
        let reader = {
            let value = value.clone();
            thread::spawn(move || value.borrow(1))
        };
        let released = value.end(1);
        reader.join().unwrap();
        if !released {
            assert!(value.release_unless_covered(1), "no borrow is left");
        }
    });
}

/// Two readers take their words while a release of the first reader's
/// value checks them: the reader of that key is never released under, the
/// other (a key of a live value) always gets to use its value.
#[test]
fn two_readers_take_words_while_a_release_checks() {
    loom::model(|| {
        let first = Arc::new(Value::new());
        let second = Arc::new(Value::new());
        let reader_first = {
            let first = first.clone();
            thread::spawn(move || first.borrow(1))
        };
        let reader_second = {
            let second = second.clone();
            thread::spawn(move || second.borrow(2))
        };
        let released = first.end(1);
        reader_first.join().unwrap();
        assert!(reader_second.join().unwrap());
        if !released {
            assert!(first.release_unless_covered(1), "no borrow is left");
        }
    });
}

/// A borrow inside a borrow gets no word; the outer word still covers its
/// key and clears on drop.
#[test]
fn nested_borrow_gets_no_word() {
    loom::model(|| {
        let word = announce::mine().expect("a word");
        word.announce(5);
        assert!(announce::mine().is_none());
        assert!(announce::covered(5));
        drop(word);
        assert!(!announce::covered(5));
        assert!(announce::mine().is_some());
    });
}
