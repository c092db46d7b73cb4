//! What a reload (SIGHUP) may change. Each table file marks its keys that
//! the daemon reads once, at start (`RESTART`, beside the key); a reload
//! gives them back the value they started with, says which changed, and
//! settles the rest as a start would.

use super::restart::Restart;
use super::{Config, ConfigError, Settings};

/// Every key a reload keeps as started, by table file.
pub fn restart_keys() -> impl Iterator<Item = &'static Restart> {
    [
        super::files::RESTART,
        super::listen::RESTART,
        super::logging::RESTART,
        super::tls::RESTART,
        super::sites::RESTART,
        super::cache::RESTART,
        super::http2::RESTART,
        super::http3::RESTART,
        super::acme::RESTART,
    ]
    .into_iter()
    .flatten()
}

/// A reloaded configuration: what the daemon runs with from now on.
#[derive(Debug)]
pub struct Reloaded {
    /// `new` with every restart key as it started.
    pub config: Config,
    /// Its settings.
    pub settings: Settings,
    /// The restart keys `new` changed (each waits for a restart).
    pub waiting: Vec<&'static str>,
}

/// `new` as a running daemon can take it: each restart key back to its
/// value in `started`, then validated.
pub fn reload(new: &Config, started: &Config) -> Result<Reloaded, Vec<ConfigError>> {
    let (mut new_t, old_t) = (table(new), table(started));
    let mut waiting = Vec::new();
    for mark in restart_keys() {
        if lookup(&new_t, mark.key) == lookup(&old_t, mark.key) {
            continue;
        }
        waiting.push(mark.key);
        for key in mark.kept() {
            put(&mut new_t, key, lookup(&old_t, key));
        }
    }
    let config: Config = toml::Value::Table(new_t)
        .try_into()
        .map_err(|e| vec![super::err("", e.to_string())])?;
    let settings = config.validate()?;
    Ok(Reloaded {
        config,
        settings,
        waiting,
    })
}

fn table(c: &Config) -> toml::Table {
    match toml::Value::try_from(c) {
        Ok(toml::Value::Table(t)) => t,
        _ => unreachable!("Config serializes to a table"),
    }
}

/// Sets (or, for `None`, removes) the value at a dotted key of tables.
fn put(t: &mut toml::Table, key: &str, value: Option<toml::Value>) {
    match key.split_once('.') {
        Some((head, rest)) => {
            if let Some(toml::Value::Table(sub)) = t.get_mut(head) {
                put(sub, rest, value);
            }
        }
        None => {
            match value {
                Some(v) => t.insert(key.to_string(), v),
                None => t.remove(key),
            };
        }
    }
}

/// The value at a dotted key (`cache.watch`, `sites[].root`: the list of
/// that field of each `[[sites]]`).
fn lookup(t: &toml::Table, key: &str) -> Option<toml::Value> {
    let (head, rest) = key.split_once('.').unwrap_or((key, ""));
    let (head, each) = match head.strip_suffix("[]") {
        Some(h) => (h, true),
        None => (head, false),
    };
    let v = t.get(head)?;
    match (v, rest.is_empty(), each) {
        (_, true, _) => Some(v.clone()),
        (toml::Value::Array(items), false, true) => Some(toml::Value::Array(
            items
                .iter()
                .map(|i| match i {
                    toml::Value::Table(t) => lookup(t, rest),
                    _ => None,
                })
                .map(|v| v.unwrap_or(toml::Value::Boolean(false)))
                .collect(),
        )),
        (toml::Value::Table(t), false, false) => lookup(t, rest),
        _ => None,
    }
}
