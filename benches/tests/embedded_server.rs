//! The embedded group's axum app, started as the harness starts it: both
//! implementations serve the tree's bytes, ranges and 404s.

use std::fs;

use benches::loadtest::http;
use benches::loadtest::servers::{start_embedded, Embedded};
use benches::loadtest::tree::{self, LARGE_PATH, LARGE_SIZE, SMALL_SIZE};

#[test]
fn both_implementations_serve_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir_all(root.join("small")).unwrap();
    let small = tree::small_path(7);
    for (path, len) in [(small.as_str(), SMALL_SIZE), (LARGE_PATH, LARGE_SIZE)] {
        let file = root.join(path.trim_start_matches('/'));
        fs::write(file, tree::contents(path, len)).unwrap();
    }
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_embedded-server"));
    for imp in Embedded::ALL {
        let server = start_embedded(imp, bin, &dir.path().join(imp.name()), &root, 2).unwrap();
        assert_eq!(server.name, imp.name());

        let r = http::get(server.addr, &small, &[]).unwrap();
        assert_eq!(r.status, 200, "{imp}");
        assert_eq!(r.body, tree::contents(&small, SMALL_SIZE), "{imp}");

        let r = http::get(server.addr, LARGE_PATH, &[]).unwrap();
        assert_eq!(r.status, 200, "{imp}");
        assert!(r.body == tree::contents(LARGE_PATH, LARGE_SIZE), "{imp}");

        let r = http::get(server.addr, LARGE_PATH, &[("Range", "bytes=4096-8191")]).unwrap();
        assert_eq!(r.status, 206, "{imp}");
        assert_eq!(
            r.header("content-range"),
            Some("bytes 4096-8191/1048576"),
            "{imp}"
        );
        assert!(
            r.body == tree::contents(LARGE_PATH, LARGE_SIZE)[4096..8192],
            "{imp}"
        );

        let r = http::get(server.addr, "/small/missing.bin", &[]).unwrap();
        assert_eq!(r.status, 404, "{imp}");
    }
}
