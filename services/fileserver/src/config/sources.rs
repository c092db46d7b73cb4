//! Where a configuration comes from and how the sources merge: the
//! defaults as a TOML table, then the file, the environment
//! (`FILESERVER_<KEY>`) and the flags laid over it key by key (an unknown
//! key or a wrong type is reported under its key), then read into a
//! [`Config`] and settled.

use super::acme::AcmeConfig;
use super::keys::{all_keys, defaults_table, env_name};
use super::listen::{admin_port_for, with_port, DEFAULT_PORT};
use super::sites::SiteConfig;
use super::values::edit_distance;
use super::{err, Config, ConfigError, Settings};
use std::path::{Path, PathBuf};

fn type_name(v: &toml::Value) -> &'static str {
    v.type_str()
}

/// Overlays `src` onto `dst` (which holds the defaults and so every known
/// key), reporting unknown keys and type mismatches.
fn overlay(dst: &mut toml::Table, src: toml::Table, prefix: &str, errors: &mut Vec<ConfigError>) {
    for (k, v) in src {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        if key == "acme" && !dst.contains_key(&k) {
            // Absent by default (no ACME): its keys are checked against
            // [acme]'s defaults once the table is given.
            match v {
                toml::Value::Table(given) => {
                    let mut table = match toml::Value::try_from(AcmeConfig::default()) {
                        Ok(toml::Value::Table(t)) => t,
                        _ => unreachable!("AcmeConfig serializes to a table"),
                    };
                    overlay(&mut table, given, &key, errors);
                    dst.insert(k, toml::Value::Table(table));
                }
                _ => errors.push(err(&key, "expected a table: write it as [acme]")),
            }
            continue;
        }
        let Some(slot) = dst.get_mut(&k) else {
            errors.push(err(&key, unknown_key_message(&k, dst.keys())));
            continue;
        };
        match (slot, v) {
            (toml::Value::Table(d), toml::Value::Table(s)) => overlay(d, s, &key, errors),
            (slot, toml::Value::Array(items)) if key == "rules" || key == "sites" => {
                overlay_tables(&key, slot, items, errors)
            }
            // Several listen addresses: a TOML array, kept as the
            // comma-separated string a flag or variable writes.
            (slot @ toml::Value::String(_), toml::Value::Array(items))
                if (key == "listen" || key == "tls_listen")
                    && items.iter().all(toml::Value::is_str) =>
            {
                let all: Vec<&str> = items.iter().filter_map(toml::Value::as_str).collect();
                *slot = toml::Value::String(all.join(","));
            }
            (slot, v) => {
                if std::mem::discriminant(slot) != std::mem::discriminant(&v) {
                    errors.push(err(
                        &key,
                        format!(
                            "expected {}, found {} `{}`",
                            type_name(slot),
                            type_name(&v),
                            v
                        ),
                    ));
                } else if let toml::Value::Integer(i) = v {
                    if i < 0 {
                        errors.push(err(&key, format!("must not be negative, found {i}")));
                    } else {
                        *slot = v;
                    }
                } else if let toml::Value::Array(items) = &v {
                    if items.iter().any(|i| !i.is_str()) {
                        errors.push(err(&key, "expected an array of strings"));
                    } else {
                        *slot = v;
                    }
                } else {
                    *slot = v;
                }
            }
        }
    }
}

/// `[[rules]]` and `[[sites]]`: each table is read as a rule or a site
/// (unknown fields and wrong types are reported with its position, counted
/// from 1); what the values mean is checked in `validate`. A rule that
/// cannot be read is kept as an empty one, so that `validate` still checks
/// the others, under the same positions, in the same run.
fn overlay_tables(
    name: &str,
    slot: &mut toml::Value,
    mut items: Vec<toml::Value>,
    errors: &mut Vec<ConfigError>,
) {
    use serde::Deserialize;
    let mut ok = true;
    for (i, item) in items.iter_mut().enumerate() {
        let key = format!("{name}[{}]", i + 1);
        let read = match name {
            "rules" => siterules::RuleSpec::deserialize(item.clone()).map(drop),
            _ => SiteConfig::deserialize(item.clone()).map(drop),
        };
        if !item.is_table() {
            errors.push(err(
                &key,
                format!("expected a table: write each as [[{name}]]"),
            ));
            ok = false;
        } else if let Err(e) = read {
            errors.push(err(&key, e.to_string().trim().replace('\n', " ")));
            if name == "rules" {
                *item = toml::Value::Table(toml::Table::new());
            } else {
                ok = false;
            }
        }
    }
    if ok {
        *slot = toml::Value::Array(items);
    }
}

/// "unknown key", with the closest known key when one is near (an edit
/// distance of at most a third of the name), else the list of keys there.
pub(super) fn unknown_key_message<'k>(
    name: &str,
    known: impl Iterator<Item = &'k String>,
) -> String {
    let known: Vec<&str> = known.map(String::as_str).collect();
    let closest = known
        .iter()
        .map(|k| (edit_distance(name, k), *k))
        .min()
        .filter(|(d, _)| *d <= name.len().max(3) / 3);
    match closest {
        Some((_, k)) => format!("unknown key (did you mean `{k}`?)"),
        None => format!("unknown key (known keys here: {})", known.join(", ")),
    }
}

/// Sets one key from a string (env var or flag), converting to the key's type.
fn set_from_str(
    table: &mut toml::Table,
    key: &str,
    value: &str,
    origin: &str,
    errors: &mut Vec<ConfigError>,
) {
    let mut parts: Vec<&str> = key.split('.').collect();
    let leaf = parts.pop().unwrap_or_default();
    let mut t = table;
    for p in parts {
        match t.get_mut(p) {
            Some(toml::Value::Table(sub)) => t = sub,
            _ => {
                errors.push(err(key, format!("unknown key (from {origin})")));
                return;
            }
        }
    }
    if !t.contains_key(leaf) {
        let hint = unknown_key_message(leaf, t.keys());
        errors.push(err(key, format!("{hint} (from {origin})")));
        return;
    }
    let Some(slot) = t.get_mut(leaf) else {
        return;
    };
    let new = match slot {
        toml::Value::Integer(_) => match value.trim().parse::<u64>() {
            Ok(n) if n <= i64::MAX as u64 => toml::Value::Integer(n as i64),
            _ => {
                errors.push(err(
                    key,
                    format!("expected a non-negative integer, found `{value}` (from {origin})"),
                ));
                return;
            }
        },
        toml::Value::Boolean(_) => match value.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => toml::Value::Boolean(true),
            "false" | "0" | "no" | "off" => toml::Value::Boolean(false),
            _ => {
                errors.push(err(
                    key,
                    format!("expected true or false, found `{value}` (from {origin})"),
                ));
                return;
            }
        },
        // A header's value may hold commas: `headers` are one per line.
        toml::Value::Array(_) if key == "headers" => toml::Value::Array(
            value
                .lines()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| toml::Value::String(s.to_string()))
                .collect(),
        ),
        toml::Value::Array(_) if key == "rules" || key == "sites" => {
            errors.push(err(
                key,
                format!("{key} are written in a config file's [[{key}]] tables (from {origin})"),
            ));
            return;
        }
        toml::Value::Array(_) => toml::Value::Array(
            value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| toml::Value::String(s.to_string()))
                .collect(),
        ),
        _ => toml::Value::String(value.to_string()),
    };
    *slot = new;
}

/// Where a configuration comes from.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// Config file, if any.
    pub file: Option<PathBuf>,
    /// `(KEY, value)` environment pairs (only `FILESERVER_*` matter).
    pub env: Vec<(String, String)>,
    /// `(dotted key, value)` from command-line flags.
    pub flags: Vec<(String, String)>,
    /// `--port`: replaces the port of `listen` from every other source.
    pub port: Option<u16>,
}

impl Sources {
    /// The process environment's `FILESERVER_*` variables.
    pub fn process_env() -> Vec<(String, String)> {
        std::env::vars()
            .filter(|(k, _)| k.starts_with("FILESERVER_"))
            .collect()
    }
}

/// Parses the text of a config file over the defaults (no env, no flags).
pub fn parse_file_text(text: &str) -> Result<Config, Vec<ConfigError>> {
    let mut errors = Vec::new();
    let mut table = defaults_table();
    match text.parse::<toml::Table>() {
        Ok(file) => overlay(&mut table, file, "", &mut errors),
        Err(e) => errors.push(err("", format!("not valid TOML: {}", e.to_string().trim()))),
    }
    match finish(table, errors) {
        (Some((c, _)), errors) if errors.is_empty() => Ok(c),
        (_, errors) => Err(errors),
    }
}

/// Converts the merged table and validates every value, so one run reports
/// every problem: unknown keys and type mismatches found while merging (their
/// keys keep the default) together with the values `validate` rejects.
fn finish(table: toml::Table, mut errors: Vec<ConfigError>) -> Checked {
    let config: Config = match toml::Value::Table(table).try_into() {
        Ok(c) => c,
        Err(e) => {
            errors.push(err("", e.to_string()));
            return (None, errors);
        }
    };
    let (settings, more) = config.settle();
    errors.extend(more);
    (Some((config, settings)), errors)
}

/// A config as read: what it makes (wrong values at their keys'
/// defaults), and every problem found.
type Checked = (Option<(Config, Settings)>, Vec<ConfigError>);

/// Loads and validates a configuration from all sources.
pub fn load(sources: &Sources) -> Result<(Config, Settings), Vec<ConfigError>> {
    match read_sources(sources) {
        (Some(loaded), errors) if errors.is_empty() => Ok(loaded),
        (_, errors) => Err(errors),
    }
}

fn read_sources(sources: &Sources) -> Checked {
    let mut errors = Vec::new();
    let mut table = defaults_table();
    let mut admin_in_file = false;
    if let Some(path) = &sources.file {
        match std::fs::read_to_string(path) {
            Ok(text) => match text.parse::<toml::Table>() {
                Ok(file) => {
                    admin_in_file = file.contains_key("admin_listen");
                    overlay(&mut table, file, "", &mut errors)
                }
                Err(e) => errors.push(err(
                    "",
                    format!(
                        "{} is not valid TOML: {}",
                        path.display(),
                        e.to_string().trim()
                    ),
                )),
            },
            Err(e) => errors.push(err(
                "config",
                format!("cannot read {}: {e}", path.display()),
            )),
        }
    }
    let admin_set = admin_in_file
        || sources
            .env
            .iter()
            .any(|(k, _)| k == &env_name("admin_listen"))
        || sources.flags.iter().any(|(k, _)| k == "admin_listen");
    let keys = all_keys();
    for (name, value) in &sources.env {
        if name == "FILESERVER_CONFIG" {
            continue;
        }
        if let Some(key) = keys.iter().find(|k| &env_name(k) == name) {
            set_from_str(&mut table, key, value, &format!("env {name}"), &mut errors);
        }
    }
    for (key, value) in &sources.flags {
        set_from_str(&mut table, key, value, "command line", &mut errors);
    }
    if let (Some(port), Some(toml::Value::String(listen))) = (sources.port, table.get("listen")) {
        let listen: Vec<String> = listen
            .split(',')
            .map(|l| with_port(l.trim(), port))
            .collect();
        table.insert("listen".into(), toml::Value::String(listen.join(",")));
    }
    // A listen port chosen anywhere (`-p 9000`, `--listen :9000`, the
    // file, the environment) moves the admin port along, one above (8080
    // and 8081 by default), unless admin_listen is set: a second instance
    // should not collide on it.
    // The port alone: `listen` is resolved once, in `validate`.
    let moved = match table.get("listen") {
        Some(toml::Value::String(l)) => l
            .split(',')
            .next()
            .and_then(|l| l.rsplit(':').next())
            .and_then(|p| p.trim().parse().ok()),
        _ => None,
    }
    .filter(|&p: &u16| p != DEFAULT_PORT);
    if let (Some(port), false) = (moved, admin_set) {
        if let Some(toml::Value::String(admin)) = table.get("admin_listen") {
            match admin_port_for(port) {
                Some(p) => {
                    let admin = with_port(admin, p);
                    table.insert("admin_listen".into(), toml::Value::String(admin));
                }
                None => errors.push(err(
                    "admin_listen",
                    "listen port 65535 leaves no port above it for the admin listener: set admin_listen",
                )),
            }
        }
    }
    finish(table, errors)
}

/// Validates a config file for `fileserver check-config`: every problem
/// found, and the settings it makes (a wrong value's key at its default)
/// unless the file could not be read as a config at all.
pub fn check_file(path: &Path) -> (Option<Settings>, Vec<ConfigError>) {
    let (loaded, errors) = read_sources(&Sources {
        file: Some(path.to_path_buf()),
        ..Sources::default()
    });
    (loaded.map(|(_, s)| s), errors)
}
