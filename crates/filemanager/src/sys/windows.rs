//! Windows: handles in place of descriptors, and the confinement beneath
//! the root by the strictest check the platform allows.
//!
//! Windows has no `openat2` and no `O_NOFOLLOW` walk through std, so a path
//! is confined in three steps:
//!
//! ```text
//! 1. names    every component checked: no `\ : * ? " < > |` or control
//!             characters (`:` would name an alternate data stream), none
//!             ending in `.` or ` ` (Windows drops them: `a.txt.` is
//!             `a.txt`), no device name (`CON`, `NUL`, `COM1`, ...);
//!             `.` skipped, `..` taken back lexically (above the root: an
//!             escape)
//! 2. open     `\\?\` + the root's final path + the components (no Win32
//!             rewriting of the name), shared for read, write and delete
//! 3. verify   GetFinalPathNameByHandleW of the handle just opened, the
//!             path the file really has after every link and junction:
//!             outside the root's final path -> refused (escape);
//!             under `deny`, any difference from the path asked for
//!             (a link, a junction, an 8.3 short name) -> refused
//! ```
//!
//! The check is made on the handle that is then served, so a rename racing
//! the open cannot lead outside: whatever the handle ended up naming is
//! what is judged. `follow` (chroot-like on Linux) is `within_root` here: a
//! link leading out of the root is refused rather than re-rooted.

use std::ffi::{CStr, OsStr, OsString};
use std::io;
use std::mem::{size_of, ManuallyDrop};
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::os::windows::fs::{FileExt, OpenOptionsExt};
use std::os::windows::io::{AsHandle, AsRawHandle, FromRawHandle};
use std::path::{Path, PathBuf};

pub(crate) use std::os::windows::io::{BorrowedHandle as BorrowedFd, OwnedHandle as OwnedFd};

use windows_sys::Win32::Foundation as win;
use windows_sys::Win32::Storage::FileSystem as fs;

use super::{Kind, Stat};
use crate::config::SymlinkPolicy;

/// What the crate calls `as_fd`: the handle, borrowed.
pub(crate) trait AsFd {
    fn as_fd(&self) -> BorrowedFd<'_>;
}

impl<T: AsHandle + ?Sized> AsFd for T {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.as_handle()
    }
}

/// Open flags, as the Unix code passes them; only `DIRECTORY` changes what
/// Windows does (the open must find a directory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OFlags(u32);

impl OFlags {
    pub(crate) const RDONLY: OFlags = OFlags(0);
    pub(crate) const CLOEXEC: OFlags = OFlags(0);
    pub(crate) const NOCTTY: OFlags = OFlags(0);
    pub(crate) const NONBLOCK: OFlags = OFlags(0);
    pub(crate) const DIRECTORY: OFlags = OFlags(1);

    fn contains(self, other: OFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for OFlags {
    type Output = OFlags;
    fn bitor(self, other: OFlags) -> OFlags {
        OFlags(self.0 | other.0)
    }
}

/// A path led out of the root (Unix: `EXDEV`).
pub(crate) const ESCAPE: u32 = win::ERROR_NOT_SAME_DEVICE;
/// A link, junction or short name on the path under `deny` (Unix: `ELOOP`).
pub(crate) const LINK: u32 = win::ERROR_CANT_RESOLVE_FILENAME;

fn error(code: u32) -> io::Error {
    io::Error::from_raw_os_error(code as i32)
}

/// Opens `path` for reading with the flags every open here uses: shared
/// for read, write and delete (a deploy may replace a file being served),
/// and `FILE_FLAG_BACKUP_SEMANTICS`, without which no directory opens.
fn open_path(path: &Path) -> io::Result<OwnedFd> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(fs::FILE_FLAG_BACKUP_SEMANTICS)
        .open(path)?;
    Ok(OwnedFd::from(file))
}

pub(crate) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let dir = open_path(path)?;
    if stat(dir.as_handle())?.kind != Kind::Dir {
        return Err(error(win::ERROR_DIRECTORY));
    }
    Ok(dir)
}

/// The path `fd` really names (`\\?\C:\...`, long names, every link
/// resolved), without a trailing separator.
fn final_path(fd: BorrowedFd<'_>) -> io::Result<Vec<u16>> {
    let mut buf = vec![0u16; 512];
    loop {
        let cap = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        // SAFETY: `buf` is a live, writable buffer of `cap` UTF-16 units.
        let n = unsafe {
            fs::GetFinalPathNameByHandleW(
                fd.as_raw_handle(),
                buf.as_mut_ptr(),
                cap,
                fs::FILE_NAME_NORMALIZED | fs::VOLUME_NAME_DOS,
            )
        } as usize;
        if n == 0 {
            return Err(io::Error::last_os_error());
        }
        if n < buf.len() {
            buf.truncate(n);
            while buf.last() == Some(&u16::from(b'\\')) {
                buf.pop();
            }
            return Ok(buf);
        }
        // Too small: `n` is the size needed, terminator included.
        buf.resize(n + 1, 0);
    }
}

/// Whether `name` is one component Windows would take as it is (see the
/// module docs, step 1).
fn plain_name(name: &str) -> bool {
    const DEVICES: [&str; 4] = ["CON", "PRN", "AUX", "NUL"];
    if name.is_empty()
        || name.ends_with(['.', ' '])
        || name
            .chars()
            .any(|c| c < ' ' || matches!(c, '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|'))
    {
        return false;
    }
    let stem = name.split('.').next().unwrap_or(name).trim_end();
    let device = DEVICES.iter().any(|d| stem.eq_ignore_ascii_case(d))
        || (stem.len() == 4
            && (stem[..3].eq_ignore_ascii_case("COM") || stem[..3].eq_ignore_ascii_case("LPT"))
            && stem.as_bytes()[3].is_ascii_digit());
    !device
}

/// Whether `path` is `root` or beneath it (ASCII case aside, as NTFS
/// compares names).
fn within(path: &[u16], root: &[u16]) -> bool {
    let same = |a: &[u16], b: &[u16]| {
        a.len() == b.len()
            && a.iter().zip(b).all(|(&x, &y)| {
                let lower = |c: u16| {
                    if (u16::from(b'A')..=u16::from(b'Z')).contains(&c) {
                        c + 32
                    } else {
                        c
                    }
                };
                lower(x) == lower(y)
            })
    };
    path.len() >= root.len()
        && same(&path[..root.len()], root)
        && (path.len() == root.len() || path[root.len()] == u16::from(b'\\'))
}

/// Opens `path` beneath `root` under `policy` (module docs).
pub(crate) fn open_beneath(
    root: BorrowedFd<'_>,
    path: &CStr,
    oflags: OFlags,
    policy: SymlinkPolicy,
) -> io::Result<OwnedFd> {
    let path = path.to_str().map_err(|_| error(win::ERROR_INVALID_NAME))?;
    let mut parts: Vec<&str> = Vec::new();
    for name in path.split('/') {
        match name {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() && policy != SymlinkPolicy::Follow {
                    return Err(error(ESCAPE));
                }
            }
            _ if plain_name(name) => parts.push(name),
            _ => return Err(error(win::ERROR_INVALID_NAME)),
        }
    }
    let root_path = final_path(root)?;
    let asked = joined(root_path.clone(), parts);
    let file = open_path(&PathBuf::from(OsString::from_wide(&asked)))?;
    let real = final_path(file.as_handle())?;
    if !within(&real, &root_path) {
        return Err(error(ESCAPE));
    }
    if policy == SymlinkPolicy::Deny && !(real.len() == asked.len() && within(&real, &asked)) {
        return Err(error(LINK));
    }
    if oflags.contains(OFlags::DIRECTORY) && stat(file.as_handle())?.kind != Kind::Dir {
        return Err(error(win::ERROR_DIRECTORY));
    }
    Ok(file)
}

/// `dir` (UTF-16) with each of `parts` appended behind a `\\`.
fn joined<'p>(mut dir: Vec<u16>, parts: impl IntoIterator<Item = &'p str>) -> Vec<u16> {
    for part in parts {
        dir.push(u16::from(b'\\'));
        dir.extend(OsStr::new(part).encode_wide());
    }
    dir
}

/// The metadata of `root`'s real path joined with `path`: one open for
/// attributes only (no read access, so no sharing conflict), one query.
pub(crate) fn stat_unconfined(root: BorrowedFd<'_>, path: &str) -> io::Result<Stat> {
    let full = joined(final_path(root)?, path.split('/').filter(|p| !p.is_empty()));
    let file = std::fs::OpenOptions::new()
        .access_mode(fs::FILE_READ_ATTRIBUTES)
        .custom_flags(fs::FILE_FLAG_BACKUP_SEMANTICS)
        .open(PathBuf::from(OsString::from_wide(&full)))?;
    stat(file.as_handle())
}

/// The path of `file` relative to `root`, `/`-separated, where both really
/// are (links resolved); `None` when it is not beneath the root or not
/// UTF-8.
pub(crate) fn real_path(root: BorrowedFd<'_>, file: BorrowedFd<'_>) -> Option<String> {
    let root = final_path(root).ok()?;
    let real = final_path(file).ok()?;
    if !within(&real, &root) {
        return None;
    }
    let rel = real.get(root.len() + 1..).unwrap_or_default();
    let rel = String::from_utf16(rel).ok()?;
    Some(rel.replace('\\', "/"))
}

/// 100 ns ticks since 1601 as nanoseconds since 1970.
fn unix_ns(filetime: i64) -> i64 {
    const EPOCH_DIFF_TICKS: i64 = 116_444_736_000_000_000;
    filetime
        .saturating_sub(EPOCH_DIFF_TICKS)
        .saturating_mul(100)
}

/// Type, size, times, volume and file index of an open handle.
pub(crate) fn stat(fd: BorrowedFd<'_>) -> io::Result<Stat> {
    let mut info = fs::BY_HANDLE_FILE_INFORMATION::default();
    let mut basic = fs::FILE_BASIC_INFO::default();
    // SAFETY: `info` and `basic` are live out-pointers of the sizes given.
    let ok = unsafe {
        fs::GetFileInformationByHandle(fd.as_raw_handle(), &mut info) != 0
            && fs::GetFileInformationByHandleEx(
                fd.as_raw_handle(),
                fs::FileBasicInfo,
                (&raw mut basic).cast(),
                size_of::<fs::FILE_BASIC_INFO>() as u32,
            ) != 0
    };
    if !ok {
        return Err(io::Error::last_os_error());
    }
    // Every open follows links, so a reparse point here is the file's own
    // (deduplicated, cloud placeholder): its contents read as any file's.
    // SAFETY: GetFileType only queries the handle.
    let disk = unsafe { fs::GetFileType(fd.as_raw_handle()) } == fs::FILE_TYPE_DISK;
    let kind = if !disk {
        Kind::Other
    } else if info.dwFileAttributes & fs::FILE_ATTRIBUTE_DIRECTORY != 0 {
        Kind::Dir
    } else {
        Kind::Regular
    };
    Ok(Stat {
        kind,
        meta: pathcache::FileMeta {
            size: u64::from(info.nFileSizeHigh) << 32 | u64::from(info.nFileSizeLow),
            mtime_ns: unix_ns(basic.LastWriteTime),
            ctime_ns: unix_ns(basic.ChangeTime),
            dev: u64::from(info.dwVolumeSerialNumber),
            ino: u64::from(info.nFileIndexHigh) << 32 | u64::from(info.nFileIndexLow),
        },
        nlink: info.nNumberOfLinks,
    })
}

/// Every name in the directory `dir`, read from the handle itself (so a
/// directory renamed meanwhile is still the one listed).
pub(crate) fn read_dir(dir: &OwnedFd, mut each: impl FnMut(&str) -> bool) -> io::Result<()> {
    // u64s: the entries are 8-byte aligned.
    let mut buf = vec![0u64; 8192];
    let mut class = fs::FileIdBothDirectoryRestartInfo;
    loop {
        // SAFETY: `buf` is a live, writable buffer of the size given.
        let ok = unsafe {
            fs::GetFileInformationByHandleEx(
                dir.as_raw_handle(),
                class,
                buf.as_mut_ptr().cast(),
                (buf.len() * 8) as u32,
            )
        };
        if ok == 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error().map(|c| c as u32) {
                Some(win::ERROR_NO_MORE_FILES) => Ok(()),
                _ => Err(e),
            };
        }
        class = fs::FileIdBothDirectoryInfo;
        let bytes = buf.as_ptr().cast::<u8>();
        let mut offset = 0usize;
        loop {
            // SAFETY: the system wrote a chain of FILE_ID_BOTH_DIR_INFO
            // records into `buf`, each at an 8-aligned offset inside it;
            // `offset` follows that chain.
            let entry = unsafe { &*bytes.add(offset).cast::<fs::FILE_ID_BOTH_DIR_INFO>() };
            let len = entry.FileNameLength as usize / 2;
            // SAFETY: the record's name is `len` UTF-16 units long, inside
            // the buffer, starting at its `FileName` field.
            let name = unsafe { std::slice::from_raw_parts(entry.FileName.as_ptr(), len) };
            if let Ok(name) = String::from_utf16(name) {
                if !each(&name) {
                    return Ok(());
                }
            }
            if entry.NextEntryOffset == 0 {
                break;
            }
            offset += entry.NextEntryOffset as usize;
        }
    }
}

pub(crate) fn pread_append(
    fd: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    want: usize,
    offset: u64,
) -> io::Result<usize> {
    // SAFETY: a File over the borrowed handle, never dropped (ManuallyDrop),
    // so the handle is not closed here; it lives as long as `fd`.
    let file = ManuallyDrop::new(unsafe { std::fs::File::from_raw_handle(fd.as_raw_handle()) });
    // `seek_read` takes initialised bytes: zeroed here, unlike on Unix.
    let at = buf.len();
    buf.resize(at + want, 0);
    let read = match file.seek_read(&mut buf[at..], offset) {
        Err(e) if e.raw_os_error() == Some(win::ERROR_HANDLE_EOF as i32) => Ok(0),
        done => done,
    };
    buf.truncate(at + *read.as_ref().unwrap_or(&0));
    read
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_windows_would_rewrite_are_refused() {
        for ok in [
            "a.txt",
            "index.html",
            ".well-known",
            "console",
            "COM10",
            "LPT",
            "a b",
        ] {
            assert!(plain_name(ok), "{ok}");
        }
        for bad in [
            "a.txt.",
            "a.txt ",
            "a:b",
            "a.txt::$DATA",
            "CON",
            "con.d",
            "nul.txt",
            "Com1",
            "lpt9.log",
            "a\\b",
            "a*",
            "a?",
            "a|b",
            "a<b",
            "a\"b",
            "a\u{1}",
        ] {
            assert!(!plain_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn within_compares_whole_components() {
        let w = |s: &str| OsStr::new(s).encode_wide().collect::<Vec<u16>>();
        assert!(within(&w(r"\\?\C:\srv\a"), &w(r"\\?\C:\srv")));
        assert!(within(&w(r"\\?\c:\SRV\a"), &w(r"\\?\C:\srv")));
        assert!(within(&w(r"\\?\C:\srv"), &w(r"\\?\C:\srv")));
        assert!(!within(&w(r"\\?\C:\srv2\a"), &w(r"\\?\C:\srv")));
        assert!(!within(&w(r"\\?\C:\sr"), &w(r"\\?\C:\srv")));
    }
}
