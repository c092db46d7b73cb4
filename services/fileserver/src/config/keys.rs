//! The catalogue of keys: every dotted key of the defaults, the fields of
//! the tables only a file sets, and each key's environment variable
//! (what `fileserver keys`, the manual and the environment read).

use super::acme::AcmeConfig;
use super::sites::SiteConfig;
use super::Config;
use serde::Serialize;

/// The defaults as a TOML table: every key a source may set.
pub(super) fn defaults_table() -> toml::Table {
    match toml::Value::try_from(Config::default()) {
        Ok(toml::Value::Table(t)) => t,
        _ => unreachable!("Config serializes to a table"),
    }
}

/// Every leaf key of the defaults, dotted (`cache.max_entries`).
pub fn all_keys() -> Vec<String> {
    fn walk(t: &toml::Table, prefix: &str, out: &mut Vec<String>) {
        for (k, v) in t {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                toml::Value::Table(sub) => walk(sub, &key, out),
                // `[[rules]]` are tables in a file, not a value a flag or
                // variable sets.
                _ if key == "rules" || key == "sites" => {}
                _ => out.push(key),
            }
        }
    }
    let mut out = Vec::new();
    walk(&defaults_table(), "", &mut out);
    out
}

/// The fields of the tables a config file alone sets (`[acme]`, and each
/// `[[rules]]` and `[[sites]]` as `rules[].path`), with their defaults,
/// read from the types the parser fills: a field added there is listed
/// (and `fileserver keys` must then find its meaning).
pub fn table_fields() -> Vec<(String, toml::Value)> {
    fn fields<T: Serialize>(value: &T, prefix: &str, out: &mut Vec<(String, toml::Value)>) {
        if let Ok(toml::Value::Table(t)) = toml::Value::try_from(value) {
            for (k, v) in t {
                out.push((format!("{prefix}.{k}"), v));
            }
        }
    }
    let mut out = Vec::new();
    fields(&AcmeConfig::default(), "acme", &mut out);
    fields(&siterules::RuleSpec::default(), "rules[]", &mut out);
    fields(
        &siterules::BasicAuthSpec::default(),
        "rules[].basic_auth",
        &mut out,
    );
    fields(&siterules::CorsSpec::default(), "rules[].cors", &mut out);
    let limit = "rules[].rate_limit";
    fields(&siterules::RateLimitSpec::default(), limit, &mut out);
    // Unset by default (the rate's second, rounded up), so the default
    // above leaves it out; its line says what unset means.
    out.push((
        format!("{limit}.burst"),
        toml::Value::String("unset".into()),
    ));
    fields(&SiteConfig::default(), "sites[]", &mut out);
    out
}

/// `cache.max_entries` -> `FILESERVER_CACHE_MAX_ENTRIES`.
pub fn env_name(key: &str) -> String {
    format!("FILESERVER_{}", key.replace('.', "_").to_ascii_uppercase())
}

/// Environment variables named `FILESERVER_*` that match no key (reported as warnings).
pub fn unknown_env(env: &[(String, String)]) -> Vec<String> {
    let keys: Vec<String> = all_keys().iter().map(|k| env_name(k)).collect();
    env.iter()
        .map(|(k, _)| k)
        .filter(|k| k.as_str() != "FILESERVER_CONFIG" && !keys.contains(k))
        .cloned()
        .collect()
}
