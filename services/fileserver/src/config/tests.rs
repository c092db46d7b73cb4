//! The configuration as a user writes it: sources, errors, defaults.
use super::listen::with_port;
use super::sources::unknown_key_message;
use super::values::edit_distance;
use super::*;
use httpfile::mime::ContentCoding;

#[test]
fn precedence_flags_over_env_over_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.toml");
    std::fs::write(
        &f,
        "workers = 3\nmax_ranges = 5\n[cache]\nmax_entries = 7\n",
    )
    .unwrap();
    let (c, _) = load(&Sources {
        file: Some(f),
        env: vec![
            ("FILESERVER_WORKERS".into(), "4".into()),
            ("FILESERVER_CACHE_MAX_ENTRIES".into(), "9".into()),
        ],
        flags: vec![("workers".into(), "6".into())],
        ..Sources::default()
    })
    .unwrap();
    assert_eq!(c.net.workers, 6);
    assert_eq!(c.serve.max_ranges, 5);
    assert_eq!(c.cache.max_entries, 9);
}

/// Concurrent HTTP/2 streams are capped at 1000 (each held answer is
/// memory and a look per round); the new connection bounds are keys.
#[test]
fn http2_bounds_are_checked_and_set() {
    let load_flags = |flags: &[(&str, &str)]| {
        load(&Sources {
            flags: flags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Sources::default()
        })
    };
    let errs = load_flags(&[("http2.max_concurrent_streams", "10000")]).unwrap_err();
    assert_eq!(errs[0].key, "http2.max_concurrent_streams", "{errs:?}");
    let (_, s) = load_flags(&[
        ("http2.max_concurrent_streams", "1000"),
        ("http2.max_requests_per_connection", "5"),
        ("http2.max_connection_age", "10m"),
    ])
    .unwrap();
    assert_eq!(s.http2.wire.max_concurrent_streams, 1000);
    assert_eq!(s.http2.wire.max_requests, 5);
    assert_eq!(s.http2.wire.max_age, Duration::from_secs(600));
    let (_, s) = load_flags(&[]).unwrap();
    assert_eq!(
        (s.http2.wire.max_requests, s.http2.wire.max_age),
        (0, Duration::from_secs(3600))
    );
}

/// `check-config` in one run: key errors, a rule's bad field and a
/// bad value in another rule, all together, and the settings to check
/// the files with (before: three runs, one kind at a time).
#[test]
fn check_file_reports_keys_rules_and_files_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.toml");
    let text = format!(
        "root = {:?}\nwokers = 2\n\
         [[rules]]\npath = \"/x/**\"\nredirect = \"/y\"\nstatus = 999\n\
         [[rules]]\npth = \"/**\"\n\
         [[rules]]\nerror_pages = {{ \"404\" = \"/missing.html\" }}\n",
        dir.path()
    );
    std::fs::write(&f, text).unwrap();
    let (settings, errors) = check_file(&f);
    let mut keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    keys.sort();
    assert_eq!(
        keys,
        ["rules[1].status", "rules[2]", "wokers"],
        "{errors:?}"
    );
    // The settings are still made, for the file checks of the same run
    // (`check-config`; tests/cli.rs), with rules[3] in its place.
    let s = settings.expect("settings");
    assert_eq!(s.serve.rules.len(), 3);
}

/// `--listen :9000` moves the admin port along as `-p 9000` does
/// (before: it stayed on 8081, and a second instance collided there),
/// unless admin_listen is set.
#[test]
fn a_listen_port_moves_the_admin_port_unless_it_is_set() {
    let flags = |f: &[(&str, &str)]| {
        load(&Sources {
            flags: f
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Sources::default()
        })
        .unwrap()
        .1
    };
    let s = flags(&[("listen", ":9000")]);
    assert_eq!(s.admin_listen.port(), 9001);
    let s = flags(&[("listen", "127.0.0.1:0")]);
    assert_eq!(s.admin_listen.port(), 0);
    let s = flags(&[("listen", ":9000"), ("admin_listen", "127.0.0.1:7000")]);
    assert_eq!(s.admin_listen.port(), 7000);
    let s = flags(&[]);
    assert_eq!(
        (s.listen.unwrap().port(), s.admin_listen.port()),
        (8080, 8081)
    );
}

/// `-p PORT` replaces the port of `listen`'s TCP addresses and leaves its
/// Unix sockets as they are (it once made `unix:/run/x.sock` a socket
/// named `9000` in the working directory).
#[test]
fn a_port_flag_leaves_unix_sockets_alone() {
    let s = load(&Sources {
        flags: vec![("listen".into(), "127.0.0.1:8080,unix:/run/x.sock".into())],
        port: Some(9000),
        ..Sources::default()
    })
    .unwrap()
    .1;
    assert_eq!(s.listen.unwrap().port(), 9000);
    assert_eq!(
        s.listen_unix.paths,
        [std::path::PathBuf::from("/run/x.sock")]
    );
}

#[test]
fn reports_every_error_with_its_key() {
    let errs = parse_file_text(
        "wokers = 2\nlisten = \"nope\"\nmax_ranges = \"x\"\n[cache]\nvalid = \"3 parsecs\"\nbogus = 1\n",
    )
    .unwrap_err();
    let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
    assert!(keys.contains(&"wokers"), "{errs:?}");
    assert!(keys.contains(&"max_ranges"), "{errs:?}");
    assert!(keys.contains(&"cache.bogus"), "{errs:?}");
    // One run: unknown keys and type errors together with bad values.
    assert!(keys.contains(&"listen"), "{errs:?}");
    assert!(keys.contains(&"cache.valid"), "{errs:?}");
    let wokers = errs.iter().find(|e| e.key == "wokers").unwrap();
    assert!(
        wokers.to_string().contains("did you mean `workers`?"),
        "{wokers}"
    );
    let bogus = errs.iter().find(|e| e.key == "cache.bogus").unwrap();
    assert!(bogus.to_string().contains("known keys here"), "{bogus}");
}

#[test]
fn shipped_default_file_equals_builtin_defaults() {
    let text = include_str!("../../../../config/fileserver.toml");
    assert_eq!(parse_file_text(text).unwrap(), Config::default());
    // Every key is documented (present, possibly commented out).
    for key in all_keys() {
        let leaf = key.rsplit('.').next().unwrap();
        assert!(
            text.lines().any(|l| l
                .trim_start_matches(['#', ' '])
                .starts_with(&format!("{leaf} ="))),
            "key {key} is not documented in config/fileserver.toml"
        );
    }
}

#[test]
fn compression_keys_are_checked_and_typed() {
    let errs = parse_file_text(
        "[compression]\nenabled = true\ncodings = [\"br\", \"lz4\", \"br\"]\ntypes = [\"text\", \"*/x\"]\nmax_file_size = 0\n[compression.levels]\nzstd = 23\nbr = 12\n",
    )
    .unwrap_err();
    let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
    for key in [
        "compression.codings",
        "compression.types",
        "compression.max_file_size",
        "compression.levels.zstd",
        "compression.levels.br",
    ] {
        assert!(keys.contains(&key), "{key}: {errs:?}");
    }
    assert_eq!(
        keys.iter().filter(|k| **k == "compression.codings").count(),
        2
    );
    assert_eq!(
        keys.iter().filter(|k| **k == "compression.types").count(),
        2
    );
    let c = parse_file_text(
        "[compression]\nenabled = true\ncodings = [\"zstd\", \"gzip\"]\nbudget = 1000\n[compression.levels]\nzstd = 3\n",
    )
    .unwrap();
    let s = c.validate().unwrap();
    let o = s.serve.compression.unwrap();
    assert_eq!(o.codings, [ContentCoding::Zstd, ContentCoding::Gzip]);
    assert_eq!(o.level(ContentCoding::Zstd), 3);
    assert_eq!(s.cache.variant_budget, 1000);
    // Off: no options, no budget.
    let s = Config::default().validate().unwrap();
    assert_eq!((s.serve.compression, s.cache.variant_budget), (None, 0));
}

#[test]
fn a_toml_syntax_error_names_the_line_and_no_key() {
    let errs = parse_file_text("workers = 2\ncache = [\n").unwrap_err();
    assert_eq!(errs.len(), 1);
    let shown = errs[0].to_string();
    assert!(!shown.contains("key `"), "{shown}");
    assert!(
        shown.starts_with("not valid TOML") && shown.contains("line 2"),
        "{shown}"
    );
}

#[test]
fn listen_forms() {
    let a = |v: &str| parse_listen(v).unwrap().to_string();
    assert_eq!(a("127.0.0.1:80"), "127.0.0.1:80");
    assert_eq!(a("[::1]:8080"), "[::1]:8080");
    assert_eq!(a(":8080"), "0.0.0.0:8080");
    assert_eq!(
        a("8080"),
        "127.0.0.1:8080",
        "a bare port is loopback, as -p is"
    );
    assert!(parse_listen("localhost:8080").unwrap().ip().is_loopback());
    for bad in ["", "nope", "host:", "1.2.3.4:99999", "99999", "[::1]:x"] {
        assert!(parse_listen(bad).is_err(), "{bad:?}");
    }
    assert_eq!(with_port("127.0.0.1:8080", 9), "127.0.0.1:9");
    assert_eq!(with_port("[::1]:8080", 9), "[::1]:9");
    assert_eq!(with_port("[::1]", 9), "[::1]:9");
    assert_eq!(with_port("8080", 9), ":9");
    assert_eq!(with_port("localhost", 9), "localhost:9");
}

#[test]
fn unknown_keys_suggest_the_nearest() {
    let msg = unknown_key_message("max_range", [String::from("max_ranges")].iter());
    assert!(msg.contains("did you mean `max_ranges`?"), "{msg}");
    let msg = unknown_key_message("zzz", [String::from("max_ranges")].iter());
    assert!(msg.contains("known keys here: max_ranges"), "{msg}");
    assert_eq!(edit_distance("wokers", "workers"), 1);
    assert_eq!(edit_distance("", "abc"), 3);
}

#[test]
fn log_levels_are_levels() {
    for ok in ["info", "WARN", "off", "info,fileserver=debug", "hyper=warn"] {
        assert_eq!(check_log_level(ok), Ok(()), "{ok}");
    }
    for (bad, hint) in [
        ("warning", "`warn`"),
        ("verbose", "`debug`"),
        ("infp", "`info`"),
        ("info,hyper=loud", ""),
        ("", ""),
    ] {
        let m = check_log_level(bad).unwrap_err();
        assert!(m.contains(hint), "{bad}: {m}");
    }
}

#[test]
fn durations() {
    assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
    assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    assert_eq!(parse_duration("1h 15m").unwrap(), Duration::from_secs(4500));
    assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
    assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
    assert!(parse_duration("x").is_err());
    assert!(parse_duration("3 parsecs").is_err());
}

/// A reload keeps every restart key as it started, names it, and takes
/// the rest: the sites' rules, `[cache]`, the certificate files.
#[test]
fn a_reload_keeps_the_restart_keys_and_takes_the_rest() {
    let started = parse_file_text(
        "listen = \"127.0.0.1:9000\"\ntls_listen = \"127.0.0.1:9443\"\ntls_cert = \"a.pem\"\ntls_key = \"a.key\"\n\
         [cache]\nmax_entries = 10\n[[sites]]\nhosts = [\"a.test\"]\nroot = \"/srv/a\"\n",
    )
    .unwrap();
    let new = parse_file_text(
        "listen = \"127.0.0.1:9001\"\ntls_listen = \"127.0.0.1:9443\"\ntls_cert = \"b.pem\"\ntls_key = \"b.key\"\n\
         [cache]\nmax_entries = 20\nwatch = false\n[http3]\nenabled = true\n\
         [[sites]]\nhosts = [\"a.test\"]\nroot = \"/srv/a\"\n[[sites.rules]]\npath = \"/x\"\nheaders = { X-A = \"1\" }\n",
    )
    .unwrap();
    let r = reload(&new, &started).unwrap();
    assert_eq!(r.waiting, ["listen", "cache.watch", "http3"]);
    assert_eq!(r.settings.listen.unwrap().port(), 9000);
    assert!(r.settings.watch_changes && r.settings.http3.is_none());
    assert_eq!(r.settings.cache.max_entries, 20);
    let tls = r.settings.tls.unwrap();
    assert_eq!(tls.manual.unwrap().cert, PathBuf::from("b.pem"));
    assert_eq!(r.settings.sites[0].serve.rules.len(), 1);

    // A listener added, or a site's root moved, waits; with it its files
    // and the whole list of sites.
    let moved = parse_file_text(
        "tls_listen = \"127.0.0.1:9444\"\ntls_cert = \"b.pem\"\ntls_key = \"b.key\"\n\
         [[sites]]\nhosts = [\"a.test\"]\nroot = \"/srv/b\"\n[[sites.rules]]\npath = \"/x\"\nheaders = { X-A = \"1\" }\n",
    )
    .unwrap();
    let r = reload(&moved, &started).unwrap();
    assert_eq!(r.waiting, ["listen", "tls_listen", "sites[].root"]);
    let tls = r.settings.tls.unwrap();
    assert_eq!(tls.listen.port(), 9443);
    assert_eq!(tls.manual.unwrap().cert, PathBuf::from("a.pem"));
    assert_eq!(r.settings.sites[0].root, PathBuf::from("/srv/a"));
    assert_eq!(r.settings.sites[0].serve.rules.len(), 0);
    let plain = Config::default();
    let r = reload(&started, &plain).unwrap();
    assert!(r.settings.tls.is_none() && r.settings.sites.is_empty());
}

/// Each restart mark names a key there is, and the shipped file's
/// opening says which keys wait for a restart: all of them, by name.
#[test]
fn restart_marks_name_real_keys_and_the_shipped_file_lists_them() {
    let keys = all_keys();
    let tables: Vec<String> = table_fields().into_iter().map(|(k, _)| k).collect();
    let text = include_str!("../../../../config/fileserver.toml");
    let opening: String = text
        .split("\n\n")
        .find(|p| p.contains("Reloaded on SIGHUP"))
        .unwrap()
        .replace("\n# ", " ");
    for mark in restart_keys() {
        let key = mark.key;
        let known = keys
            .iter()
            .any(|k| k == key || k.starts_with(&format!("{key}.")))
            || tables
                .iter()
                .any(|k| k == key || k.starts_with(&format!("{key}.")))
            || key == "acme";
        assert!(known, "restart mark `{key}` is no key");
        let named = match key.split_once('.') {
            _ if key == "http3" || key == "acme" => format!("[{key}]"),
            Some((table, field)) if table.ends_with("[]") => {
                format!("[[{}]] {field}", table.trim_end_matches("[]"))
            }
            _ => key.to_string(),
        };
        assert!(
            opening.contains(&named),
            "config/fileserver.toml's opening does not say `{named}` needs a restart"
        );
    }
}
