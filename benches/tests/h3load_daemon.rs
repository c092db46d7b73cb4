//! h3load against the real daemon, started as the harness starts it with
//! HTTP/3 on: several streams per connection, every response a 200 with
//! the whole file, no error. The daemon is the one the same build made
//! for fileserver's own tests (`cargo nextest run --workspace`, the
//! README's test command), else built here by cargo: benches has no way
//! to name another package's binary.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use benches::loadtest::build::cargo_build;
use benches::loadtest::loadgen::{h3load_args, parse_h3load, H3loadErrors, H3loadSummary};
use benches::loadtest::scenario::Scenario;
use benches::loadtest::servers::{start_fileserver, Extra, Features};
use benches::loadtest::tls;
use benches::loadtest::tree::{self, LARGE_PATH, LARGE_SIZE, SMALL_SIZE};

#[test]
fn drives_the_daemon_with_many_streams_per_connection() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let small = tree::write_sample(&root, 20).unwrap();
    let cert = tls::generate(dir.path()).unwrap();
    let daemon = daemon();
    let features = Features {
        tls: Some(&cert),
        http3: true,
        ..Features::default()
    };
    let extra = Extra {
        args: &[],
        config_tail: "",
    };
    let server = start_fileserver(
        &daemon,
        &dir.path().join("fileserver"),
        &root,
        2,
        None,
        extra,
        features,
    )
    .unwrap();

    let h3load = env!("CARGO_BIN_EXE_h3load");
    // (scenario, paths, connections, streams, seconds, body of each)
    let small_paths = small.join("\n");
    let runs = [
        (Scenario::H3Small, small_paths.as_str(), 2, 8, 2, SMALL_SIZE),
        (Scenario::H3Large, LARGE_PATH, 2, 1, 1, LARGE_SIZE),
    ];
    for (scenario, paths, connections, streams, seconds, body_len) in runs {
        let list = dir.path().join(format!("{scenario}.paths"));
        fs::write(&list, paths).unwrap();
        let args = h3load_args(scenario, server.addr, connections, streams, seconds, &list);
        let out = Command::new(h3load).args(&args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{scenario}: {stdout}\n{stderr}");
        let s: H3loadSummary = serde_json::from_str(&stdout).unwrap();
        assert!(s.requests > 0, "{scenario}: {s:?}");
        assert_eq!(s.errors, H3loadErrors::default(), "{scenario}: {stderr}");
        assert_eq!(s.status.success, s.requests, "{scenario}: {s:?}");
        assert_eq!(s.body_bytes, s.requests * body_len as u64, "{scenario}");
        assert_eq!((s.connections, s.streams), (connections, streams));
        assert!(s.duration_us >= seconds * 1_000_000, "{scenario}: {s:?}");
        assert!(s.p50_us <= s.p99_us && s.p99_us <= s.max_us, "{s:?}");
        let r = parse_h3load(&stdout, body_len).unwrap();
        assert_eq!((r.requests, r.errors), (s.requests, 0));
    }
}

/// The daemon next to this test's own directory (`target/debug`), where
/// a workspace test build put it; built when it is not there. A build of
/// `-p fileserver` alone resolves features unlike the workspace's and
/// recompiles most of the dependency graph, minutes on a fresh machine.
fn daemon() -> PathBuf {
    let built = std::env::current_exe()
        .ok()
        .and_then(|exe| {
            Some(
                exe.parent()?
                    .parent()?
                    .join(format!("fileserver{}", std::env::consts::EXE_SUFFIX)),
            )
        })
        .filter(|path| path.is_file());
    built.unwrap_or_else(|| cargo_build("fileserver", "fileserver", "dev").unwrap())
}
