//! What `fileserver check-config` checks beyond the values themselves: the
//! files a start would open. The root exists and is a readable directory,
//! the certificate and key load and belong together, and the access log
//! can be opened for appending (an existing file is opened without
//! changing it; a missing one needs a writable directory, and is not
//! created here).
//!
//! Not checked, because only binding them would tell and the start reports
//! them in one line: whether the listen addresses are free. [`NOT_CHECKED`]
//! says so on the command's `ok` line. `check-config --values-only` skips
//! the files too, for a config checked away from its host (an image
//! build, CI).

use crate::config::{AccessLog, ConfigError, Settings};
use std::path::Path;

/// The part of a start `check-config` does not try, said on its `ok` line.
pub(crate) const NOT_CHECKED: &str =
    "not checked: whether listen, admin_listen and tls_listen are free to bind";

/// The `ok` line's note under `--values-only`.
pub(crate) const NOT_CHECKED_VALUES_ONLY: &str =
    "values only: not checked whether the root, certificate, key and access log open, \
     nor whether the listen addresses are free";

fn problem(key: &str, message: String) -> ConfigError {
    ConfigError {
        key: key.to_string(),
        message,
    }
}

/// Every problem a start with `s` would stop at, before binding; empty when
/// there is none.
pub(crate) fn check(s: &Settings) -> Vec<ConfigError> {
    let mut e = Vec::new();
    if let Err(m) = check_root(&s.root) {
        e.push(problem("root", m));
    }
    if let Some(files) = s.tls.as_ref().and_then(|t| t.manual.as_ref()) {
        if let Err(m) = crate::tls::load_pair(files) {
            // load_pair's message starts with the key at fault.
            let (key, m) = match m.split_once(": ") {
                Some((k, rest)) if k.starts_with("tls_") => (k.to_string(), rest.to_string()),
                _ => ("tls_cert".to_string(), m),
            };
            e.push(problem(&key, m));
        }
    }
    if let Some(path) = s.tls.as_ref().and_then(|t| t.ticket_keys.as_ref()) {
        if let Err(m) = crate::tickets::TicketKeys::load(path) {
            e.push(problem("tls_ticket_keys", m));
        }
    }
    if let Some(a) = &s.acme {
        if let Some(root) = &a.ca_root {
            match std::fs::read(root) {
                Ok(pem) if pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") => {}
                Ok(_) => e.push(problem(
                    "acme.ca_root",
                    format!("{} holds no PEM certificate", root.display()),
                )),
                Err(err) => e.push(problem(
                    "acme.ca_root",
                    format!("cannot read {}: {err}", root.display()),
                )),
            }
        }
        if a.state_dir.exists() && !a.state_dir.is_dir() {
            e.push(problem(
                "acme.state_dir",
                format!("{} is not a directory", a.state_dir.display()),
            ));
        }
    }
    let default_site = (&s.root, &s.serve.rules, "rules".to_string());
    let sites = s.sites.iter().enumerate().map(|(i, site)| {
        (
            &site.root,
            &site.serve.rules,
            format!("sites[{}].rules", i + 1),
        )
    });
    for (n, (root, rules, key)) in std::iter::once(default_site).chain(sites).enumerate() {
        if n > 0 {
            if let Err(m) = check_root(root) {
                e.push(problem(&format!("sites[{n}].root"), m));
                continue;
            }
        }
        for (rule, status, page) in rules.error_pages() {
            let file = root.join(page.trim_start_matches('/'));
            if !file.is_file() {
                e.push(problem(
                    &format!("{key}[{rule}].error_pages"),
                    format!("the page for {status}, `{page}`, is not a file under the root"),
                ));
            }
        }
    }
    if let AccessLog::File(p) = &s.access_log {
        if let Err(m) = check_access_log(p) {
            e.push(problem("access_log", m));
        }
    }
    e
}

fn check_root(root: &Path) -> Result<(), String> {
    let shown = root.display();
    let meta = std::fs::metadata(root).map_err(|err| format!("cannot open {shown}: {err}"))?;
    if !meta.is_dir() {
        return Err(format!("{shown} is not a directory"));
    }
    std::fs::read_dir(root)
        .map(|_| ())
        .map_err(|err| format!("cannot read {shown}: {err}"))
}

fn check_access_log(p: &Path) -> Result<(), String> {
    let shown = p.display();
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => Err(format!("{shown} is a directory")),
        Ok(_) => std::fs::OpenOptions::new()
            .append(true)
            .open(p)
            .map(|_| ())
            .map_err(|err| format!("cannot open {shown} for appending: {err}")),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            let parent = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            match std::fs::metadata(parent) {
                Ok(m) if m.is_dir() => rustix::fs::access(parent, rustix::fs::Access::WRITE_OK)
                    .map_err(|err| {
                        format!(
                            "cannot create {shown}: {} is not writable ({err})",
                            parent.display()
                        )
                    }),
                Ok(_) => Err(format!(
                    "cannot create {shown}: {} is not a directory",
                    parent.display()
                )),
                Err(err) => Err(format!(
                    "cannot create {shown}: {}: {err}",
                    parent.display()
                )),
            }
        }
        Err(err) => Err(format!("cannot open {shown}: {err}")),
    }
}
