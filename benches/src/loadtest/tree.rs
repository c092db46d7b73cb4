//! The test trees: file names, sizes and deterministic contents.
//!
//! Contents come from a seeded xorshift generator, so the harness can check
//! a response byte for byte without keeping the files in memory, and two
//! runs serve identical bytes.

use std::fs;
use std::io::Write;
use std::path::Path;

/// Number of 1 KiB files under `small/`.
pub const SMALL_COUNT: usize = 1000;
/// Size of each file under `small/`.
pub const SMALL_SIZE: usize = 1024;
/// Size of `large.bin`.
pub const LARGE_SIZE: usize = 1 << 20;
/// Number of 4 KiB files under `pressure/`.
pub const PRESSURE_COUNT: usize = 10_000;
/// Size of each file under `pressure/`.
pub const PRESSURE_SIZE: usize = 4096;
/// Number of 4 KiB files under `many/` (the `many_files` scenario).
pub const MANY_COUNT: usize = 20_000;
/// Size of each file under `many/`.
pub const MANY_SIZE: usize = 4096;
/// Number of large files under `cold/` (the `cold` scenario); `--quick` uses
/// [`COLD_COUNT_QUICK`].
pub const COLD_COUNT: usize = 8;
/// Number of large files under `cold/` in a `--quick` run.
pub const COLD_COUNT_QUICK: usize = 2;
/// Size of each file under `cold/`.
pub const COLD_SIZE: usize = 64 << 20;

/// URL path of small file `i` (`/small/000.bin` ..= `/small/999.bin`).
pub fn small_path(i: usize) -> String {
    format!("/small/{i:03}.bin")
}

/// URL path of the 1 MiB file.
pub const LARGE_PATH: &str = "/large.bin";

/// URL path of cache-pressure file `i` (`/pressure/0000.bin` ..= `/pressure/9999.bin`).
pub fn pressure_path(i: usize) -> String {
    format!("/pressure/{i:04}.bin")
}

/// URL path of many-files file `i` (`/many/00000.bin` ..= `/many/19999.bin`).
pub fn many_path(i: usize) -> String {
    format!("/many/{i:05}.bin")
}

/// URL path of cold large file `i` (`/cold/0.bin`, `/cold/1.bin`, ...).
pub fn cold_path(i: usize) -> String {
    format!("/cold/{i}.bin")
}

/// Which optional parts of the tree a run needs (they are big or many, so
/// they are written only for the scenarios that read them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extras {
    /// Write `many/` (20000 files, 80 MiB).
    pub many: bool,
    /// Number of [`COLD_SIZE`] files to write under `cold/` (0: none).
    pub cold_files: usize,
}

/// The bytes of the file at URL path `path` of length `len`.
///
/// The seed is derived from the path, so every file differs and a server
/// that mixed two files up fails verification.
pub fn contents(path: &str, len: usize) -> Vec<u8> {
    // FNV-1a of the path as the seed; `| 1` keeps xorshift away from zero.
    let mut state = path.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Writes the tree under `root` (which must exist): always `small/`,
/// `large.bin` and `pressure/`, plus the [`Extras`] asked for.
///
/// Directories are 0755 and files 0644 so nginx and h2o workers, which drop
/// privileges to `nobody` when the harness runs as root, can read them.
pub fn generate(root: &Path, extras: Extras) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(root, fs::Permissions::from_mode(0o755))?;
    for dir in ["small", "pressure", "many", "cold"] {
        fs::create_dir_all(root.join(dir))?;
        fs::set_permissions(root.join(dir), fs::Permissions::from_mode(0o755))?;
    }
    let write = |path: &str, len: usize| -> std::io::Result<()> {
        let file_path = root.join(path.trim_start_matches('/'));
        let mut file = fs::File::create(&file_path)?;
        file.write_all(&contents(path, len))?;
        fs::set_permissions(&file_path, fs::Permissions::from_mode(0o644))
    };
    for i in 0..SMALL_COUNT {
        write(&small_path(i), SMALL_SIZE)?;
    }
    write(LARGE_PATH, LARGE_SIZE)?;
    for i in 0..PRESSURE_COUNT {
        write(&pressure_path(i), PRESSURE_SIZE)?;
    }
    if extras.many {
        for i in 0..MANY_COUNT {
            write(&many_path(i), MANY_SIZE)?;
        }
    }
    for i in 0..extras.cold_files {
        write(&cold_path(i), COLD_SIZE)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_are_deterministic_and_distinct_per_path() {
        let a = contents("/small/000.bin", SMALL_SIZE);
        assert_eq!(a.len(), SMALL_SIZE);
        assert_eq!(a, contents("/small/000.bin", SMALL_SIZE));
        assert_ne!(a, contents("/small/001.bin", SMALL_SIZE));
        // A prefix of a longer file is the shorter file: ranges can be checked
        // by slicing.
        assert_eq!(
            &contents(LARGE_PATH, LARGE_SIZE)[..100],
            &contents(LARGE_PATH, 100)[..]
        );
    }

    #[test]
    fn paths_cover_the_regexes_oha_uses() {
        assert_eq!(small_path(0), "/small/000.bin");
        assert_eq!(small_path(SMALL_COUNT - 1), "/small/999.bin");
        assert_eq!(pressure_path(PRESSURE_COUNT - 1), "/pressure/9999.bin");
        // `many_files` asks oha for /many/[01][0-9]{4}.bin: 00000..=19999.
        assert_eq!(many_path(0), "/many/00000.bin");
        assert_eq!(many_path(MANY_COUNT - 1), "/many/19999.bin");
        assert_eq!(cold_path(COLD_COUNT - 1), "/cold/7.bin");
    }
}
