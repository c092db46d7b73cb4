//! The command line as people type it first: a positional root, `-p`, the
//! listen forms of nginx and Caddy, humantime durations, every config error
//! in one run, one clear line for a missing root, completions and a man page,
//! and the daemon's own log (no colour off a terminal, JSON on request).

mod common;

use common::check_config;

use common::{bin, Daemon, Tree};
use std::process::{Command, Stdio};

/// Starts the daemon with exactly `args` (no `--root`/`--listen` defaults).
fn daemon(args: &[&str]) -> Daemon {
    let mut cmd = Command::new(bin());
    cmd.args(args).args(["--workers", "2"]);
    Daemon::spawn(cmd)
}

/// Serves `root` (positional) on free loopback ports, plus `extra`.
fn serve(root: &str, extra: &[&str]) -> Daemon {
    let mut args = vec![root, "-p", "0", "--admin-listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    daemon(&args)
}

#[test]
fn positional_root_and_port_flag() {
    let tree = Tree::new();
    tree.write("a.txt", b"positional");
    let root = tree.root.to_str().unwrap();
    let d = serve(root, &[]);
    assert_eq!(d.start.root, std::fs::canonicalize(&tree.root).unwrap());
    assert_eq!(
        d.http.ip().to_string(),
        "127.0.0.1",
        "-p keeps the default host"
    );
    assert_eq!(d.get_text("/a.txt"), "positional");
    drop(d);
    // --port keeps the host given in the file or the environment.
    let mut cmd = Command::new(bin());
    cmd.args([root, "--port", "0", "--admin-listen", "127.0.0.1:0"])
        .env("FILESERVER_LISTEN", "[::1]:8080");
    let d = Daemon::spawn(cmd);
    assert_eq!(d.http.ip().to_string(), "::1");
    // A positional root and --root together are refused.
    let out = Command::new(bin())
        .args([root, "--root", root])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
}

#[test]
fn listen_takes_names_ports_and_bracketed_v6() {
    let tree = Tree::new();
    let root = tree.root.to_str().unwrap();
    for (listen, ip) in [
        ("localhost:0", None),
        ("[::1]:0", Some("::1")),
        (":0", Some("0.0.0.0")),
        ("0", Some("127.0.0.1")),
    ] {
        let d = daemon(&[root, "--listen", listen, "--admin-listen", "127.0.0.1:0"]);
        match ip {
            Some(ip) => assert_eq!(d.http.ip().to_string(), ip, "{listen}"),
            None => assert!(d.http.ip().is_loopback(), "{listen}: {}", d.http),
        }
        assert_ne!(d.http.port(), 0);
    }
    let out = Command::new(bin())
        .args([root, "--listen", "localhost:http"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`listen`") && err.contains("not a port"),
        "{err}"
    );
}

#[test]
fn humantime_durations_are_accepted() {
    let tree = Tree::new();
    let root = tree.root.to_str().unwrap();
    let d = serve(
        root,
        &[
            "--set",
            "keepalive_timeout=1m30s",
            "--set",
            "cache.valid=250ms",
        ],
    );
    assert!(d.http.port() != 0);
}

#[test]
fn check_config_reports_every_error_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "wokers = 2\nmax_ranges = 0\nheader_read_timeout = \"soon\"\n[cache]\nmax_entires = 5\n",
    )
    .unwrap();
    let out = Command::new(bin())
        .arg("check-config")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "`wokers`: unknown key (did you mean `workers`?)",
        "`cache.max_entires`: unknown key (did you mean `max_entries`?)",
        "`max_ranges`: 0 is out of range",
        "`header_read_timeout`",
        "4 error(s)",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
}

#[test]
fn a_missing_root_is_one_clear_line() {
    let out = Command::new(bin())
        .args([
            "/nonexistent/site",
            "-p",
            "0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        vec!["fileserver: cannot open root /nonexistent/site: No such file or directory (os error 2)"],
        "{err}"
    );
}

#[test]
fn completions_and_man_page() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(bin())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("fileserver") && text.contains("check-config"),
            "{shell}"
        );
        assert!(text.contains("listen") && text.contains("port"), "{shell}");
    }
    let out = Command::new(bin()).arg("man").output().unwrap();
    assert!(out.status.success());
    let man = String::from_utf8_lossy(&out.stdout);
    assert!(
        man.starts_with(".ie") || man.contains(".TH fileserver"),
        "{man}"
    );
    assert!(man.contains("\\-\\-listen"), "{man}");
}

#[test]
fn completions_into_a_closed_pipe_do_not_panic() {
    let mut child = Command::new(bin())
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn log_has_no_colour_off_a_terminal_and_can_be_json() {
    let tree = Tree::new();
    let root = tree.root.to_str().unwrap();
    // At debug level, so that the log has events besides the start line.
    let d = serve(root, &["--log-level", "debug"]);
    assert!(d.wait_stderr("starting", std::time::Duration::from_secs(5)));
    let text = d.stderr_text();
    assert!(
        !text.contains('\x1b'),
        "ANSI escapes in a piped log:\n{text}"
    );
    drop(d);
    let d = serve(root, &["--set", "log_format=json", "--log-level", "debug"]);
    // The start line comes after the "starting" event: wait for it itself.
    assert!(d.wait_stderr(
        "\"message\":\"listening\"",
        std::time::Duration::from_secs(5)
    ));
    let text = d.stderr_text();
    // Every line, the start line included, is one JSON object (`jq` reads
    // the whole of stderr).
    let mut events = 0;
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert!(
            v["level"].is_string() && v["fields"]["message"].is_string(),
            "{v}"
        );
        events += 1;
    }
    assert!(events >= 3, "{text}");
    assert!(text.contains("\"message\":\"listening\""), "{text}");
    assert_eq!(d.start.http, d.http);
}

#[test]
fn log_level_typos_are_refused_with_the_nearest_level() {
    // tracing reads `warning` as a target name: it passed and silenced
    // every line of the daemon's own log.
    for (level, hint) in [("warning", "warn"), ("verbose", "debug")] {
        let (code, _, err) = check_config(&format!("log_level = \"{level}\"\n"));
        assert_eq!(code, Some(2), "{level}: {err}");
        assert!(
            err.contains("`log_level`") && err.contains(&format!("did you mean `{hint}`?")),
            "{err}"
        );
        let out = Command::new(bin())
            .args([
                "--log-level",
                level,
                "-p",
                "0",
                "--admin-listen",
                "127.0.0.1:0",
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("did you mean `{hint}`?")), "{err}");
    }
    let (code, _, err) = check_config("log_level = \"info,fileserver=debug\"\n");
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn check_config_checks_what_a_start_opens() {
    let tree = Tree::new();
    let file = tree.write("a-file.txt", b"x");
    let dir = tree.dir.path();
    let (code, _, err) = check_config(&format!(
        "root = \"{}\"\ntls_listen = \"127.0.0.1:0\"\ntls_cert = \"{}/no-cert.pem\"\ntls_key = \"{}/no-key.pem\"\naccess_log = \"{}/no-dir/access.log\"\n",
        file.display(),
        dir.display(),
        dir.display(),
        dir.display()
    ));
    assert_eq!(code, Some(2), "{err}");
    for want in [
        "`root`: ",
        "is not a directory",
        "`tls_cert`: cannot read",
        "no-cert.pem",
        "`access_log`: cannot create",
        "no-dir/access.log",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    let (code, _, err) = check_config(&format!("root = \"{}/missing\"\n", dir.display()));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("`root`: cannot open") && err.contains("missing"),
        "{err}"
    );
    // What it cannot check it says on its `ok` line.
    let (code, out, err) = check_config(&format!(
        "root = \"{}\"\naccess_log = \"{}/access.log\"\n",
        tree.root.display(),
        dir.display()
    ));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("ok") && out.contains("not checked: whether listen"),
        "{out}"
    );
    assert!(
        !dir.join("access.log").exists(),
        "check-config created the log"
    );
    // --values-only: for a config checked away from its host.
    let missing = format!("root = \"{}/missing\"\n", dir.display());
    let cfg = dir.join("values.toml");
    std::fs::write(&cfg, missing).unwrap();
    let out = Command::new(bin())
        .args(["check-config", "--values-only"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("values only: not checked"));
}

#[test]
fn an_access_log_that_cannot_open_names_the_key_and_path() {
    let tree = Tree::new();
    let bad = tree.dir.path().join("no-dir/access.log");
    let out = Command::new(bin())
        .args(common::base_args(&tree.root))
        .arg("--access-log")
        .arg(&bad)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("fileserver: access_log: cannot open ")
            && last.contains(&bad.display().to_string())
            && last.contains("No such file or directory"),
        "{err}"
    );
}

#[test]
fn keys_show_each_default_and_meaning() {
    let out = Command::new(bin()).arg("keys").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "listen = \"127.0.0.1:8080\"  (FILESERVER_LISTEN)\n    HTTP listener",
        "cache.max_entries = 65536  (FILESERVER_CACHE_MAX_ENTRIES)\n    Paths kept",
        "compression.levels.gzip = ",
        // The tables only a file sets, field by field, read from the
        // parser's own types (a new field without a meaning fails below).
        "rules[].path = \"/**\"  (config file only)\n    A glob",
        "rules[].always = false  (config file only)",
        "rules[].cors.max_age = 600  (config file only)",
        "rules[].basic_auth.users = {}  (config file only)",
        "sites[].hosts = []  (config file only)",
        "acme.domains = []  (config file only)",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // Every key has a line and a meaning under it.
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() % 2, 0);
    for pair in lines.chunks(2) {
        assert!(
            pair[0].contains(" = ") && pair[0].ends_with(')'),
            "{pair:?}"
        );
        assert!(pair[1].trim().len() > 10, "no meaning: {pair:?}");
    }
}

#[test]
fn the_man_page_documents_keys_environment_signals_files_and_exits() {
    let out = Command::new(bin()).arg("man").output().unwrap();
    assert!(out.status.success());
    let man = String::from_utf8_lossy(&out.stdout);
    for section in [
        ".SH COMMANDS",
        ".SH CONFIGURATION",
        ".SH ENVIRONMENT",
        ".SH SIGNALS",
        ".SH FILES",
        ".SH EXIT STATUS",
        ".SH ADMIN ENDPOINTS",
        ".SH EXAMPLES",
    ] {
        assert!(man.contains(section), "no {section}");
    }
    for key in [
        "shutdown_timeout = \"30s\"",
        "cache.watch = true",
        "http2.h2c = true",
    ] {
        assert!(man.contains(&key.replace('-', "\\-")), "{key}");
    }
    for topic in [
        "SIGHUP",
        "NOTIFY_SOCKET",
        "FILESERVER_CONFIG",
        "/readyz",
        "/etc/fileserver",
    ] {
        assert!(man.contains(topic), "{topic}");
    }
    // It points at no page that does not exist.
    assert!(!man.contains("fileserver\\-keys(1)"), "{man}");
    // groff reads it without a warning.
    let mut groff = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("groff");
    use std::io::Write;
    groff.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let g = groff.wait_with_output().unwrap();
    let warnings = String::from_utf8_lossy(&g.stderr);
    assert!(g.status.success() && warnings.is_empty(), "{warnings}");
}

#[test]
fn booleans_take_any_case_and_no_color_is_honoured() {
    let tree = Tree::new();
    tree.write("d/a.txt", b"a");
    let root = tree.root.to_str().unwrap();
    // `TRUE` as `true`, `yes`, `on` and `1` are.
    let d = serve(root, &["--set", "directory_listing=TRUE"]);
    assert!(d.get_text("/d/").contains("a.txt"));
    drop(d);
    // On a terminal (script(1) gives one) the text log is coloured unless
    // NO_COLOR is set.
    let run = |no_color: bool| -> String {
        let cmd = format!(
            "{} {root} -p 0 --admin-listen 127.0.0.1:0 --workers 1 --log-level debug",
            bin().display()
        );
        let mut c = Command::new("timeout");
        c.args(["-s", "INT", "2", "script", "-qfec", &cmd, "/dev/null"]);
        c.env_remove("NO_COLOR");
        if no_color {
            c.env("NO_COLOR", "1");
        }
        let out = c
            .stdin(Stdio::null())
            .output()
            .expect("script (util-linux)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let coloured = run(false);
    assert!(coloured.contains("starting"), "{coloured}");
    assert!(
        coloured.contains('\x1b'),
        "no colour on a terminal: {coloured:?}"
    );
    let plain = run(true);
    assert!(plain.contains("starting"), "{plain}");
    assert!(
        !plain.contains('\x1b'),
        "colour despite NO_COLOR: {plain:?}"
    );
}

/// `--spa` on a directory without `index.html` says so at start (every
/// deep link would be a 404), and a finished shutdown is logged.
#[test]
fn spa_without_an_index_warns_and_shutdown_says_it_finished() {
    let tree = Tree::new();
    tree.write("src/main.js", b"not a build");
    let mut d = Daemon::start(&tree.root, &["--spa"]);
    assert!(
        d.wait_stderr("has no index.html", std::time::Duration::from_secs(5)),
        "{}",
        d.stderr_text()
    );
    d.signal(libc::SIGTERM);
    assert!(d.wait_exit(std::time::Duration::from_secs(10)).is_some());
    assert!(
        d.wait_stderr("shutdown complete", std::time::Duration::from_secs(5)),
        "{}",
        d.stderr_text()
    );
    let tree = Tree::new();
    tree.write("index.html", b"app");
    let d = Daemon::start(&tree.root, &["--spa"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !d.stderr_text().contains("has no index.html"),
        "{}",
        d.stderr_text()
    );
}

/// On a terminal (a pty from util-linux's `script`), `hash-password`
/// prompts and does not echo the password; the hash it prints checks.
#[test]
fn hash_password_does_not_echo_on_a_terminal() {
    use std::io::Write as _;
    let cmd = format!("{} hash-password --cost 4", bin().display());
    let mut child = Command::new("script")
        .args(["-qc", &cmd, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("script (util-linux)");
    // After the prompt has turned echo off.
    std::thread::sleep(std::time::Duration::from_millis(500));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hunter22\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Password:"), "{text}");
    assert!(!text.contains("hunter22"), "echoed: {text}");
    let hash = text
        .split_whitespace()
        .find(|w| w.starts_with("$2b$04$"))
        .unwrap_or_else(|| panic!("no hash in {text}"));
    assert!(bcrypt::verify("hunter22", hash).unwrap());
}

/// `check-config` reports a misspelled key, a rule's unknown field, a bad
/// value in another rule and an error page that is not a file in one run
/// (before: three runs, one kind of error at a time).
#[test]
fn check_config_reports_every_kind_of_error_in_one_run() {
    let tree = Tree::new();
    let conf = tree.dir.path().join("c.toml");
    std::fs::write(
        &conf,
        format!(
            "root = {:?}\nwokers = 2\n\
             [[rules]]\npath = \"/x/**\"\nredirect = \"/y\"\nstatus = 999\n\
             [[rules]]\npth = \"/**\"\n\
             [[rules]]\nerror_pages = {{ \"404\" = \"/missing.html\" }}\n",
            tree.root
        ),
    )
    .unwrap();
    let out = Command::new(bin())
        .arg("check-config")
        .arg(&conf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for key in [
        "`wokers`",
        "`rules[1].status`",
        "`rules[2]`",
        "`rules[3].error_pages`",
    ] {
        assert!(err.contains(key), "{key} missing: {err}");
    }
    assert!(err.contains("4 error(s)"), "{err}");
}
