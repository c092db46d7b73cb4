//! Graceful shutdown under load: SIGTERM while 100 responses of an 8 MiB
//! file are in flight (each client has read 64 KiB through a 16 KiB receive
//! window and paused). After the signal: new connections are refused,
//! `/readyz` says 503, every in-flight response completes with its full and
//! correct body, and the daemon exits 0 within `shutdown_timeout`.
//!
//! ```text
//!  100 threads: connect(rcvbuf 16K) -> GET /big.bin -> read 64K -> [barrier]
//!  main: connections_open == 100 -> SIGTERM -> connect() refused? /readyz 503?
//!  main: release -> threads read the rest (throttled), compare with the file
//!  main: waitpid -> exit 0
//! ```

mod common;
mod reliability_support;

use common::{Daemon, Tree};
use reliability_support::{
    admin_status, connect_small_rcvbuf, pseudo_random_bytes, scrape, summary, wait_until, Client,
};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const CLIENTS: usize = 100;
const BIG_LEN: usize = 8 << 20;
const SHUTDOWN_TIMEOUT_S: u64 = 30;

/// One in-flight client: read the head and 64 KiB, report ready, wait for
/// `go`, then read the rest in throttled chunks and compare with `want`.
fn in_flight_client(
    addr: std::net::SocketAddr,
    want: Arc<Vec<u8>>,
    ready: mpsc::Sender<Result<(), String>>,
    go: Arc<AtomicBool>,
) -> Result<u64, String> {
    let fail = |ready: &mpsc::Sender<Result<(), String>>, e: String| {
        let _ = ready.send(Err(e.clone()));
        Err(e)
    };
    let s = match connect_small_rcvbuf(addr, 16 * 1024) {
        Ok(s) => s,
        Err(e) => return fail(&ready, format!("connect: {e}")),
    };
    let mut c = Client::from_stream(s, Duration::from_secs(60));
    if let Err(e) = c.send(b"GET /big.bin HTTP/1.1\r\nHost: shutdown\r\n\r\n") {
        return fail(&ready, format!("send: {e}"));
    }
    let head = match c.read_head(false) {
        Ok(h) if h.status == 200 && h.body_len == want.len() as u64 => h,
        Ok(h) => return fail(&ready, format!("head: {} len {}", h.status, h.body_len)),
        Err(e) => return fail(&ready, format!("head: {e}")),
    };
    let mut pos = 0usize;
    let mut mismatch = None;
    let mut check = |chunk: &[u8], pos: &mut usize| {
        if mismatch.is_none() && want[*pos..*pos + chunk.len()] != *chunk {
            mismatch = Some(*pos);
        }
        *pos += chunk.len();
    };
    if let Err(e) = c.read_body_with(64 * 1024, |chunk| check(chunk, &mut pos)) {
        return fail(&ready, format!("first 64 KiB: {e}"));
    }
    let _ = ready.send(Ok(()));
    let t0 = Instant::now();
    while !go.load(Ordering::Acquire) {
        if t0.elapsed() > Duration::from_secs(120) {
            return Err("never released".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Throttled reader: 256 KiB, then a short pause.
    while (pos as u64) < head.body_len {
        let n = (head.body_len - pos as u64).min(256 * 1024);
        c.read_body_with(n, |chunk| check(chunk, &mut pos))
            .map_err(|e| format!("body after SIGTERM at byte {pos}: {e}"))?;
        std::thread::sleep(Duration::from_millis(2));
    }
    if let Some(at) = mismatch {
        return Err(format!("body differs from the file at byte {at}"));
    }
    Ok(pos as u64)
}

#[test]
fn shutdown_sigterm_with_100_responses_in_flight() {
    let t = Tree::new();
    let big = Arc::new(pseudo_random_bytes(42, BIG_LEN));
    t.write("big.bin", &big);
    let timeout_arg = format!("shutdown_timeout={SHUTDOWN_TIMEOUT_S}s");
    let mut d = Daemon::start(&t.root, &["--log-level", "warn", "--set", &timeout_arg]);
    let (http, admin) = (d.http, d.admin);

    let (ready_tx, ready_rx) = mpsc::channel();
    let go = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (want, ready, go) = (big.clone(), ready_tx.clone(), go.clone());
            std::thread::spawn(move || in_flight_client(http, want, ready, go))
        })
        .collect();
    drop(ready_tx);
    let mut setup_errors = Vec::new();
    for _ in 0..CLIENTS {
        match ready_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => setup_errors.push(e),
            Err(e) => {
                setup_errors.push(format!("client not ready: {e}"));
                break;
            }
        }
    }
    let open_before = scrape(admin).must("fileserver_connections_open");
    let ready_before = admin_status(admin, "/readyz").unwrap_or(0);

    d.signal(libc::SIGTERM);
    let signalled = Instant::now();
    // New connections are refused once the listeners are closed; after the
    // first refusal, none may succeed again.
    let refused_at = wait_until(Duration::from_secs(5), || {
        matches!(TcpStream::connect(http), Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused)
    })
    .then(|| signalled.elapsed());
    let mut accepted_after_refusal = 0;
    for _ in 0..20 {
        if TcpStream::connect(http).is_ok() {
            accepted_after_refusal += 1;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let readyz_draining = admin_status(admin, "/readyz").ok();

    go.store(true, Ordering::Release);
    let mut completed = 0;
    let mut errors = setup_errors;
    for c in clients {
        match c.join().unwrap() {
            Ok(n) if n == BIG_LEN as u64 => completed += 1,
            Ok(n) => errors.push(format!("short body {n}")),
            Err(e) => errors.push(e),
        }
    }
    let clients_done = signalled.elapsed();
    let status = d.wait_exit(Duration::from_secs(SHUTDOWN_TIMEOUT_S + 10));
    let exited = signalled.elapsed();

    summary(&format!(
        "reliability shutdown: in_flight={open_before} completed={completed}/{CLIENTS} errors={} \
         bytes_each={BIG_LEN} readyz_before={ready_before} readyz_draining={readyz_draining:?} \
         refused_after_ms={:?} accepted_after_refusal={accepted_after_refusal} clients_done_ms={} \
         exit={status:?} exit_after_ms={}",
        errors.len(),
        refused_at.map(|d| d.as_millis()),
        clients_done.as_millis(),
        exited.as_millis()
    ));
    assert!(
        errors.is_empty(),
        "in-flight clients: {:?}",
        &errors[..errors.len().min(10)]
    );
    assert_eq!(
        open_before, CLIENTS as f64,
        "connections_open before SIGTERM"
    );
    assert_eq!(ready_before, 200);
    assert!(
        refused_at.is_some(),
        "new connections still accepted 5 s after SIGTERM"
    );
    assert_eq!(
        accepted_after_refusal, 0,
        "connections accepted after the first refusal"
    );
    assert_eq!(readyz_draining, Some(503), "/readyz while draining");
    let status = status.expect("daemon did not exit within shutdown_timeout + 10 s");
    assert_eq!(
        status.code(),
        Some(0),
        "exit status {status:?}\n{}",
        d.stderr_text()
    );
}
