//! Shared session-ticket keys (`tls_ticket_keys`): a TLS session begun on
//! one replica resumes on another reading the same key file (openssl
//! s_client, `-sess_out` then `-sess_in`), not on one without it; a
//! rotation (`fileserver ticket-key`, then SIGHUP) still resumes what the
//! previous key sealed; a file that is not keys is refused at start and
//! at reload.

mod common;

use common::tls::{s_client, TestCa};
use common::{bin, Daemon, Tree};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn replica(tree: &Tree, ca: &TestCa, keys: Option<&Path>) -> (Daemon, SocketAddr) {
    let mut extra = Vec::new();
    if let Some(k) = keys {
        extra = vec![
            "--set".to_string(),
            format!("tls_ticket_keys={}", k.display()),
        ];
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    ca.https_daemon(&tree.root, &extra)
}

fn ticket_key(file: &Path) {
    let out = Command::new(bin())
        .arg("ticket-key")
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_session_resumes_on_any_replica_with_the_key_file() {
    let tree = Tree::new();
    tree.write("a.txt", b"hello");
    let ca = TestCa::new();
    let ca_file = ca.ca_file();
    let keys = tree.dir.path().join("ticket.keys");
    ticket_key(&keys);
    let (a, a_addr) = replica(&tree, &ca, Some(&keys));
    let (_b, b_addr) = replica(&tree, &ca, Some(&keys));
    let (_c, c_addr) = replica(&tree, &ca, None);
    let sess = tree.dir.path().join("sess.pem");
    assert!(!s_client(a_addr, &ca_file, None, Some(&sess)));
    assert!(
        s_client(b_addr, &ca_file, Some(&sess), None),
        "not resumed on replica B"
    );
    assert!(
        !s_client(c_addr, &ca_file, Some(&sess), None),
        "resumed without the keys"
    );

    // A rotation: replica A seals with the new key; B, not yet reloaded,
    // still opens the old key's ticket, and A opens it too.
    ticket_key(&keys);
    a.reload();
    assert!(
        s_client(a_addr, &ca_file, Some(&sess), None),
        "the old key no longer opens"
    );
    let fresh = tree.dir.path().join("fresh.pem");
    s_client(a_addr, &ca_file, None, Some(&fresh));
    // B picks the new file up by itself (checked every 5 s).
    let deadline = std::time::Instant::now() + Duration::from_secs(12);
    while !s_client(b_addr, &ca_file, Some(&fresh), None) {
        assert!(
            std::time::Instant::now() < deadline,
            "B never read the rotated file"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn a_file_that_is_not_keys_is_refused() {
    let tree = Tree::new();
    tree.write("a.txt", b"hello");
    let ca = TestCa::new();
    let keys = tree.dir.path().join("ticket.keys");
    std::fs::write(&keys, b"not a key").unwrap();
    let mut args = ca.args();
    args.extend([
        "--set".to_string(),
        format!("tls_ticket_keys={}", keys.display()),
    ]);
    let out = Command::new(bin())
        .args(common::base_args(&tree.root))
        .args(&args)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("9 octets is not one or more 80-octet keys"),
        "{err}"
    );
    // At a reload: rejected, the keys in force kept.
    std::fs::remove_file(&keys).unwrap();
    ticket_key(&keys);
    let (d, addr) = replica(&tree, &ca, Some(&keys));
    std::fs::write(&keys, b"broken").unwrap();
    d.signal(libc::SIGHUP);
    assert!(
        d.wait_stderr("reload rejected", Duration::from_secs(5)),
        "{}",
        d.stderr_text()
    );
    let ca_file = ca.ca_file();
    let sess = tree.dir.path().join("sess.pem");
    s_client(addr, &ca_file, None, Some(&sess));
    assert!(s_client(addr, &ca_file, Some(&sess), None));
}
