//! The sibling census: which names in a directory end with a precompressed
//! suffix, so that a request for a file with no precompressed forms asks
//! nothing more of the filesystem than the file itself.
//!
//! Without it, a request that accepts a coding (every browser's does) looks
//! up `name.br`, `name.zst` and `name.gz` beside the file: one path-cache
//! lookup each, and, once per `negative_ttl`, one confined `openat2` each to
//! renew the negative entry. With the census it reads one entry per
//! directory, which a busy directory keeps hot. Side by side on 20000 x
//! 4 KiB files with a browser's `Accept-Encoding` (alternated builds):
//! daemon CPU per request at a fixed 30k req/s 23.6-24.4 us -> 18.9-19.3
//! (1.25x), wrk -t1 58-60k -> 79-82k req/s (1.35x).
//!
//! ```text
//! negotiate("d/f.bin", siblings .br .zst .gz)
//!   census cache["d"] ── fresh ──▶ names in d ending with a suffix: []
//!        │                          └─▶ no accepted sibling may exist: serve f.bin
//!        └── absent / stale ──▶ statx(d) unchanged: fresh again
//!                               else, on the blocking pool:
//!                               openat2(root, "d", O_DIRECTORY, policy), fstat, getdents
//! ```
//!
//! A census is kept in a [`PathCache`](pathcache::PathCache) of its own
//! (loaded by `loader.rs`'s `CensusLoader`, which calls [`take`]),
//! keyed by the directory's path: bounded, shared by every worker, taken
//! once by concurrent misses. It is revalidated like a negative entry, by
//! the same bound: after `negative_ttl`, one `statx` of the directory,
//! whose modification and change times move whenever a name in it is
//! added, removed or renamed. A census taken within [`RACY`] of the
//! directory's last change is listed again at its revalidation instead:
//! a name added in the same timestamp tick as the change before it can
//! leave both times as they were (where the filesystem has coarse times).
//!
//! The census only ever spares lookups: a name it lists is looked up as
//! before (it may be refused, a directory, a dangling link), and a
//! directory it cannot describe within its bounds, a name that is not
//! ASCII (a case-folding directory may match it to another spelling), or a
//! suffix list other than the one it was taken for, are looked up name by
//! name. Names are compared without ASCII case, so a case-folding directory
//! can only make it look up more.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pathcache::{Loaded, Negative};

use crate::resolve::{c_path, is_exhausted, map_open_error, open_beneath, Rules};
use crate::sys::{self, AsFd, OFlags, OwnedFd};
use crate::types::{OpenError, Sibling};

/// Directories the census cache keeps.
pub(crate) const DIRS: usize = 1024;
/// Directory entries read at most; a larger directory is looked up name by
/// name. Listing 100000 names takes a few milliseconds of a blocking-pool
/// thread, at most once per directory per `negative_ttl`.
const MAX_SCANNED: usize = 100_000;
/// Bytes of kept names at most per directory (a directory with more
/// precompressed files is looked up name by name): with [`DIRS`], at most
/// 16 MiB of names, a few KiB in a tree without precompressed files.
const MAX_NAME_BYTES: usize = 16 * 1024;
/// The longest name a census looks up (`NAME_MAX` is 255); a longer
/// one's siblings may exist.
const KEY_MAX: usize = 256;
/// How far from the directory's last change a census must be taken to be
/// trusted by its revalidation: above the coarsest timestamp tick of the
/// filesystems a server serves from (FAT's 2 s).
const RACY: Duration = Duration::from_secs(3);

/// A name less one of a census's suffixes, and the bits of the suffixes
/// it was listed with.
type Stem = (Box<str>, u32);

/// What one listing of a directory found.
#[derive(Debug)]
pub(crate) struct Census {
    /// The suffixes it was taken for, in the query's order.
    suffixes: Box<[Box<str>]>,
    /// The stems of the names ending with one of them (a name less the
    /// suffix), ASCII-lowercased and sorted, each with bit `i` set when
    /// the stem with `suffixes[i]` is there; `None` when the directory was
    /// too large to tell.
    stems: Option<Box<[Stem]>>,
    /// Taken within [`RACY`] of the directory's last change.
    pub(crate) racy: bool,
}

impl Census {
    /// The census of a directory holding `names` (those ending with one of
    /// `suffixes`, or any others, which it leaves out).
    fn of_names<'a>(
        suffixes: Box<[Box<str>]>,
        names: Option<impl IntoIterator<Item = &'a str>>,
        racy: bool,
    ) -> Census {
        let stems = names.map(|names| {
            let mut stems: Vec<Stem> = Vec::new();
            for name in names {
                for (i, suffix) in suffixes.iter().enumerate().take(32) {
                    if ends_with_ignore_case(name, suffix) {
                        let stem = &name[..name.len() - suffix.len()];
                        stems.push((stem.to_ascii_lowercase().into_boxed_str(), 1 << i));
                    }
                }
            }
            stems.sort_unstable();
            stems.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    kept.1 |= later.1;
                }
                same
            });
            stems.into_boxed_slice()
        });
        Census {
            suffixes,
            stems,
            racy,
        }
    }

    /// Bit `i` set: `siblings[i]` may exist beside `name` (every bit when
    /// this census cannot tell).
    pub(crate) fn may_exist(&self, name: &str, siblings: &[Sibling<'_>]) -> u32 {
        let Some(stems) = self.stems.as_deref() else {
            return u32::MAX;
        };
        let same_suffixes = self.suffixes.len() == siblings.len()
            && self
                .suffixes
                .iter()
                .zip(siblings)
                .all(|(a, b)| **a == *b.suffix);
        if !same_suffixes || !name.is_ascii() {
            return u32::MAX;
        }
        if stems.is_empty() {
            return 0;
        }
        // One lookup of the name, lowercased on the stack, for all the
        // siblings: looked up once per sibling, name + suffix compared
        // byte by byte through iterators, this was 15% of the daemon's
        // instructions per request on HttpArena's files (arena_h1_64,
        // callgrind: 2291 of 14858); with byte slices and memcmp, 9.7%; as
        // one lookup of the stem, 3.6% (467 of 13047).
        let mut key = [0u8; KEY_MAX];
        let Some(key) = key.get_mut(..name.len()) else {
            return u32::MAX;
        };
        key.copy_from_slice(name.as_bytes());
        key.make_ascii_lowercase();
        match stems.binary_search_by(|(stem, _)| stem.as_bytes().cmp(key)) {
            Ok(i) => stems[i].1,
            Err(_) => 0,
        }
    }
}

/// The path-cache settings of the census: revalidated and expired like the
/// file cache's negative entries.
pub(crate) fn cache_config(files: &pathcache::Config) -> pathcache::Config {
    pathcache::Config {
        shards: files.shards,
        max_entries: DIRS,
        max_open: DIRS,
        valid: files.negative_ttl,
        negative_ttl: files.negative_ttl,
        small_file_max: 0,
        small_bytes_budget: 0,
        min_uses: 1,
        variant_budget: 0,
    }
}

/// Lists `dir` beneath `root` under `policy`, synchronously: the census of
/// the names ending with one of `suffixes`, with the directory's metadata
/// taken before the listing (a name added during it moves the times).
pub(crate) fn take(
    root: &OwnedFd,
    dir: &str,
    rules: Rules,
    suffixes: Box<[Box<str>]>,
) -> Result<Loaded<Census>, OpenError> {
    let path = c_path(dir)?;
    let oflags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = match open_beneath(root.as_fd(), &path, oflags, rules) {
        Ok(fd) => fd,
        Err(e) if is_exhausted(&e) => return Err(OpenError::Exhausted),
        Err(e) => {
            return match map_open_error(e) {
                OpenError::NotFound => Ok(Loaded::Negative(Negative::NotFound)),
                OpenError::Forbidden => Ok(Loaded::Negative(Negative::Forbidden)),
                other => Err(other),
            }
        }
    };
    let meta = sys::stat_fd(&fd).map_err(OpenError::Io)?.meta;
    let names = read_names(&fd, &suffixes).map_err(OpenError::Io)?;
    let changed_ns = meta.mtime_ns.max(meta.ctime_ns);
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    let racy = now_ns.saturating_sub(changed_ns) < RACY.as_nanos() as i64;
    Ok(Loaded::File {
        meta,
        label: "",
        handle: Some(Census::of_names(
            suffixes,
            names.as_ref().map(|n| n.iter().map(String::as_str)),
            racy,
        )),
        bytes: None,
    })
}

/// The names in `dir` that end with one of `suffixes` (ASCII case aside);
/// `None` past the census's bounds.
fn read_names(dir: &OwnedFd, suffixes: &[Box<str>]) -> std::io::Result<Option<Vec<String>>> {
    let mut names = Vec::new();
    let mut bytes = 0;
    let mut scanned = 0;
    let mut within_bounds = true;
    sys::read_dir(dir, |name| {
        scanned += 1;
        if suffixes.iter().any(|s| ends_with_ignore_case(name, s)) {
            bytes += name.len();
            names.push(name.to_owned());
        }
        within_bounds = scanned <= MAX_SCANNED && bytes <= MAX_NAME_BYTES;
        within_bounds
    })?;
    if !within_bounds {
        return Ok(None);
    }
    Ok(Some(names))
}

fn ends_with_ignore_case(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len()
        && name.as_bytes()[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}

/// The directory and name of a cache key (`"."` for the root's files).
pub(crate) fn split(path: &str) -> (&str, &str) {
    // A byte scan from the end, over the name only: `rsplit_once('/')`'s
    // char searcher cost 212 instructions a request on HttpArena's paths,
    // and the daemon's total fell by 122 without it (callgrind,
    // arena_h1_64). `/` is ASCII, so both halves are `str`s.
    match path.bytes().rposition(|b| b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (".", path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn census(names: Option<&[&str]>) -> Census {
        let suffixes = [".br", ".zst", ".gz"].map(Box::from).into();
        Census::of_names(suffixes, names.map(|n| n.iter().copied()), false)
    }

    const SIBLINGS: [Sibling<'static>; 3] = [
        Sibling {
            suffix: ".br",
            accepted: true,
        },
        Sibling {
            suffix: ".zst",
            accepted: true,
        },
        Sibling {
            suffix: ".gz",
            accepted: true,
        },
    ];

    #[test]
    fn a_listed_sibling_is_a_candidate_and_an_unlisted_one_is_not() {
        let c = census(Some(&[
            "a.css.br", "a.css", "a.css.gz", "b.js.zst", "B.JS.GZ",
        ]));
        assert_eq!(c.may_exist("a.css", &SIBLINGS), 0b101);
        assert_eq!(c.may_exist("A.CSS", &SIBLINGS), 0b101, "ASCII case aside");
        assert_eq!(c.may_exist("b.js", &SIBLINGS), 0b110);
        assert_eq!(c.may_exist("a", &SIBLINGS), 0, "a stem's prefix");
        assert_eq!(c.may_exist("c.js", &SIBLINGS), 0);
        assert_eq!(census(Some(&[])).may_exist("a.css", &SIBLINGS), 0);
    }

    #[test]
    fn what_a_census_cannot_tell_is_looked_up() {
        assert_eq!(census(None).may_exist("a.css", &SIBLINGS), u32::MAX);
        let c = census(Some(&[]));
        assert_eq!(c.may_exist("é.css", &SIBLINGS), u32::MAX, "not ASCII");
        assert_eq!(
            c.may_exist("a.css", &SIBLINGS[..2]),
            u32::MAX,
            "other suffixes"
        );
        let c = census(Some(&["a.css.br"]));
        let long = format!("{}.css", "x".repeat(KEY_MAX));
        assert_eq!(c.may_exist(&long, &SIBLINGS), u32::MAX, "a long name");
        let longest = "x".repeat(KEY_MAX);
        assert_eq!(c.may_exist(&longest, &SIBLINGS), 0, "looked up");
    }

    #[test]
    fn suffixes_match_without_ascii_case_and_need_a_stem() {
        assert!(ends_with_ignore_case("a.CSS.GZ", ".gz"));
        assert!(!ends_with_ignore_case(".gz", ".gz"));
        assert!(!ends_with_ignore_case("a.gzip", ".gz"));
        assert_eq!(split("d/e/f.bin"), ("d/e", "f.bin"));
        assert_eq!(split("f.bin"), (".", "f.bin"));
        assert_eq!(split("dé/ü/ß.bin"), ("dé/ü", "ß.bin"));
    }
}
