//! Two replicas behind a real TCP load balancer (HAProxy from Debian,
//! `mode tcp`, round robin, PROXY protocol v2 to one replica and v1 to the
//! other), as a fleet runs them: the client's address reaches both
//! replicas' logs, a TLS session begun on one resumes on the other (shared
//! `tls_ticket_keys`), both give one ETag for one file whose copies differ
//! in time (`etag = "content"`), and a release switched by its symlink on
//! both is served at once.
#![cfg(target_os = "linux")]

mod common;

use common::tls::{s_client, TestCa};
use common::{free_port, Daemon};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// A replica's files: `releases/r1` with `current` pointing at it.
struct Release {
    dir: tempfile::TempDir,
}

impl Release {
    fn new(mtime: SystemTime) -> Release {
        let dir = tempfile::tempdir().unwrap();
        let r1 = dir.path().join("releases/r1");
        std::fs::create_dir_all(&r1).unwrap();
        for (name, text) in [
            ("index.html", "release one"),
            ("app.js", "console.log(1)"),
            ("a.txt", "hello"),
        ] {
            let p = r1.join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
        }
        std::os::unix::fs::symlink("releases/r1", dir.path().join("current")).unwrap();
        Release { dir }
    }

    fn current(&self) -> PathBuf {
        self.dir.path().join("current")
    }

    /// Writes `releases/r2` and points `current` at it in one rename.
    fn switch(&self) {
        let r2 = self.dir.path().join("releases/r2");
        std::fs::create_dir_all(&r2).unwrap();
        std::fs::write(r2.join("index.html"), "release two").unwrap();
        let next = self.dir.path().join("current.next");
        std::os::unix::fs::symlink("releases/r2", &next).unwrap();
        std::fs::rename(next, self.current()).unwrap();
    }
}

struct Haproxy(Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// HAProxy in front of the replicas' plain and HTTPS listeners.
fn haproxy(
    dir: &Path,
    http: SocketAddr,
    https: SocketAddr,
    a: &Daemon,
    b: &Daemon,
    tls: (SocketAddr, SocketAddr),
) -> Haproxy {
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n  maxconn 256\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 20s\n  timeout server 20s\n\
             frontend http\n  bind {http}\n  default_backend replicas_http\n\
             frontend https\n  bind {https}\n  default_backend replicas_https\n\
             backend replicas_http\n  balance roundrobin\n  server a {} send-proxy-v2\n  server b {} send-proxy\n\
             backend replicas_https\n  balance roundrobin\n  server a {} send-proxy-v2\n  server b {} send-proxy-v2\n",
            a.http, b.http, tls.0, tls.1
        ),
    )
    .unwrap();
    // Debian puts it in /usr/sbin, which a user's PATH may leave out.
    let bin = ["/usr/sbin/haproxy", "/usr/local/sbin/haproxy"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("haproxy");
    let child = Command::new(bin)
        .arg("-db")
        .arg("-f")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy (scripts/install-deps.sh installs it)");
    let h = Haproxy(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(http).is_err() {
        assert!(
            Instant::now() < deadline,
            "haproxy did not listen on {http}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    h
}

#[test]
fn two_replicas_behind_haproxy_act_as_one_site() {
    let ca = TestCa::new();
    let ca_file = ca.ca_file();
    let shared = tempfile::tempdir().unwrap();
    let keys = shared.path().join("ticket.keys");
    let out = Command::new(common::bin())
        .arg("ticket-key")
        .arg(&keys)
        .output()
        .unwrap();
    assert!(out.status.success());
    let epoch = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let (ra, rb) = (
        Release::new(epoch),
        Release::new(epoch + Duration::from_secs(7200)),
    );
    let replica = |r: &Release| {
        let keys = format!("tls_ticket_keys={}", keys.display());
        ca.https_daemon(
            &r.current(),
            &[
                "--set",
                "proxy_protocol=127.0.0.1",
                "--set",
                "etag=content",
                "--set",
                &keys,
            ],
        )
    };
    let ((a, a_tls), (b, b_tls)) = (replica(&ra), replica(&rb));
    let (http, https) = (
        SocketAddr::from(([127, 0, 0, 1], free_port())),
        SocketAddr::from(([127, 0, 0, 1], free_port())),
    );
    let _lb = haproxy(shared.path(), http, https, &a, &b, (a_tls, b_tls));

    // From 127.0.0.2: HAProxy names it in the PROXY header; each replica's
    // own peer is HAProxy at 127.0.0.1.
    let client = reqwest::blocking::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))
        .no_proxy()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let url = format!("http://{http}/app.js");
    let tags: Vec<String> = (0..4)
        .map(|_| {
            let r = client.get(&url).send().unwrap();
            assert_eq!(r.status(), 200);
            r.headers()["etag"].to_str().unwrap().to_string()
        })
        .collect();
    for d in [&a, &b] {
        let line = d.json_log_line("remote", &serde_json::json!("127.0.0.2"));
        assert_eq!(line["status"], 200, "{line}");
    }
    assert!(
        tags.iter().all(|t| *t == tags[0]),
        "the replicas' tags differ: {tags:?}"
    );

    // A session from one replica resumes on the other (round robin).
    let sess = shared.path().join("sess.pem");
    assert!(!s_client(https, &ca_file, None, Some(&sess)));
    assert!(
        s_client(https, &ca_file, Some(&sess), None),
        "no resumption on the other replica"
    );

    // A release switch on both: the next answers of both are the new one.
    ra.switch();
    rb.switch();
    let deadline = Instant::now() + Duration::from_secs(5);
    let root = format!("http://{http}/");
    loop {
        let bodies: Vec<String> = (0..4)
            .map(|_| client.get(&root).send().unwrap().text().unwrap())
            .collect();
        if bodies.iter().all(|b| b == "release two") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the switch was not seen: {bodies:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
