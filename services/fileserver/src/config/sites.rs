//! Sites and their rules: `[[rules]]`, the one-liners every site shares
//! (`https_redirect`, `headers`, `cors`, `rate_limit`, `spa`) and the
//! virtual hosts (`[[sites]]`), compiled into `siterules::Rules` per site.

use super::restart::Restart;
use super::{err, ConfigError, Settings};
use serde::{Deserialize, Serialize};
use siterules::{CorsSpec, HostPattern, RateLimitSpec, RuleSpec, Rules};
use std::path::PathBuf;

/// The site keys of the top table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct SitesConfig {
    /// Redirect plain-HTTP requests to HTTPS (308, to `tls_listen`'s port).
    pub https_redirect: bool,
    /// A single-page app: what is not found is answered with `/index.html`.
    pub spa: bool,
    /// `Name: value` fields set on every response.
    pub headers: Vec<String>,
    /// Origins allowed cross-origin requests to every path (`*`: any).
    pub cors: Vec<String>,
    /// Requests each client may make to every path (`20/s`, `600/m`);
    /// empty: no limit.
    pub rate_limit: String,
    /// Per-path rules of the default site, in order (`[[rules]]`).
    pub rules: Vec<RuleSpec>,
    /// Virtual hosts: sites with their own root, chosen by `Host`
    /// (`[[sites]]`); a request for any other name gets the default site.
    pub sites: Vec<SiteConfig>,
}

/// One `[[sites]]` table: a virtual host.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SiteConfig {
    /// The names it answers for (`example.com`, `*.example.com`).
    pub hosts: Vec<String>,
    /// Its directory.
    pub root: PathBuf,
    /// Its rules (`[[sites.rules]]`), before the one-liners every site
    /// shares (`https_redirect`, `headers`, `cors`, `rate_limit`, `spa`).
    pub rules: Vec<RuleSpec>,
    /// Obtain a certificate for its `hosts` through `[acme]` (one
    /// certificate per site; wildcard names cannot be).
    pub acme: bool,
}

/// Each site's root has its file manager, and each certificate its order,
/// since start; the sites' rules reload.
pub(super) const RESTART: &[Restart] = &[
    Restart {
        key: "sites[].hosts",
        keeps: &["sites"],
    },
    Restart {
        key: "sites[].root",
        keeps: &["sites"],
    },
    Restart {
        key: "sites[].acme",
        keeps: &["sites"],
    },
];

/// A virtual host: the names it answers for, its root, and how its files
/// are answered (the top-level options with its own rules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// The names.
    pub hosts: Vec<HostPattern>,
    /// Its directory.
    pub root: PathBuf,
    /// Its serving options.
    pub serve: decide::Options,
}

impl Settings {
    /// The site a request for `host` (`Host` or `:authority`, port and
    /// all) goes to: an exact name first, then the first wildcard; `None`
    /// is the default site (`root`).
    pub fn site_for(&self, host: Option<&[u8]>) -> Option<usize> {
        if self.sites.is_empty() {
            return None;
        }
        let name = siterules::hostname(host?);
        let exact = |p: &HostPattern| matches!(p, HostPattern::Exact(_)) && p.matches(name);
        self.sites
            .iter()
            .position(|s| s.hosts.iter().any(exact))
            .or_else(|| {
                self.sites
                    .iter()
                    .position(|s| s.hosts.iter().any(|p| p.matches(name)))
            })
    }
}

impl SitesConfig {
    /// A site's rules: `rules` (under `key`) in order, so a rule's
    /// position is the same in every message, then `https_redirect`
    /// (to `tls_listen`'s port), `headers`, `cors`, `rate_limit` and
    /// `spa`: every path's one-liners, after which a `[[rules]]` table's
    /// redirect, `try_files` or `cors` for a path comes first, and a
    /// `headers` line sets its field last. Each site compiles its own
    /// `rate_limit` rule: a client's requests to two sites count apart.
    pub(super) fn rules(
        &self,
        rules: &[RuleSpec],
        key: &str,
        tls_listen: &str,
        e: &mut Vec<ConfigError>,
    ) -> Rules {
        let mut specs = rules.to_vec();
        if let Err(errors) = Rules::compile(rules) {
            // The others are still built, each in its place, so that what
            // they name (an error page) is checked in the same run.
            for x in errors {
                e.push(err(&format!("{key}[{}].{}", x.rule, x.field), x.message));
                if let Some(spec) = specs.get_mut(x.rule.wrapping_sub(1)) {
                    *spec = RuleSpec::default();
                }
            }
        }
        if self.https_redirect {
            let spec = https_redirect(tls_listen, e);
            specs.push(spec);
        }
        for (key, spec) in self.one_liners(e) {
            match Rules::compile(std::slice::from_ref(&spec)) {
                Ok(_) => specs.push(spec),
                Err(errors) => e.extend(errors.into_iter().map(|x| err(key, x.message))),
            }
        }
        Rules::compile(&specs).unwrap_or_default()
    }

    /// `headers`, `cors`, `rate_limit` and `spa` as rules, each under its
    /// key.
    fn one_liners(&self, e: &mut Vec<ConfigError>) -> Vec<(&'static str, RuleSpec)> {
        let mut out = Vec::new();
        if !self.headers.is_empty() {
            // "On every response": errors too, as HSTS must be.
            let mut spec = RuleSpec {
                always: true,
                ..RuleSpec::default()
            };
            for line in &self.headers {
                match line.split_once(':') {
                    Some((name, value)) => {
                        spec.headers
                            .insert(name.trim().to_string(), value.trim().to_string());
                    }
                    None => e.push(err("headers", format!("`{line}` is not `Name: value`"))),
                }
            }
            out.push(("headers", spec));
        }
        if !self.cors.is_empty() {
            let cors = CorsSpec {
                origins: self.cors.clone(),
                ..CorsSpec::default()
            };
            let spec = RuleSpec {
                cors: Some(cors),
                ..RuleSpec::default()
            };
            out.push(("cors", spec));
        }
        if !self.rate_limit.is_empty() {
            let limit = RateLimitSpec {
                rate: self.rate_limit.clone(),
                ..RateLimitSpec::default()
            };
            let spec = RuleSpec {
                rate_limit: Some(limit),
                ..RuleSpec::default()
            };
            out.push(("rate_limit", spec));
        }
        if self.spa {
            let spa = RuleSpec {
                methods: vec!["GET".into(), "HEAD".into()],
                navigation_only: true,
                try_files: vec!["{path}".into(), "/index.html".into()],
                ..RuleSpec::default()
            };
            out.push(("spa", spa));
        }
        out
    }

    /// The `[[sites]]`: each the default site's serving options with its
    /// own rules. A name may belong to one site only.
    pub(super) fn sites(
        &self,
        default: &decide::Options,
        tls_listen: &str,
        e: &mut Vec<ConfigError>,
    ) -> Vec<Site> {
        let mut seen: Vec<(HostPattern, usize)> = Vec::new();
        let mut out = Vec::new();
        for (i, site) in self.sites.iter().enumerate() {
            let n = i + 1;
            let key = |field: &str| format!("sites[{n}].{field}");
            if site.hosts.is_empty() {
                e.push(err(
                    &key("hosts"),
                    "names no host: which requests is this site for?",
                ));
            }
            if site.root.as_os_str().is_empty() {
                e.push(err(&key("root"), "must be set: the site's directory"));
            }
            let mut hosts = Vec::new();
            for h in &site.hosts {
                match HostPattern::parse(h) {
                    Ok(p) => {
                        if let Some((_, other)) = seen.iter().find(|(q, _)| *q == p) {
                            e.push(err(
                                &key("hosts"),
                                format!("`{h}` is also a name of sites[{other}]"),
                            ));
                        }
                        seen.push((p.clone(), n));
                        hosts.push(p);
                    }
                    Err(m) => e.push(err(&key("hosts"), m)),
                }
            }
            let mut serve = default.clone();
            // The one-liners' problems are reported once, by the default site.
            let mut problems = Vec::new();
            let prefix = format!("sites[{n}].rules");
            let rules = self.rules(&site.rules, &prefix, tls_listen, &mut problems);
            e.extend(problems.into_iter().filter(|p| p.key.starts_with(&prefix)));
            serve.rules = std::sync::Arc::new(rules);
            out.push(Site {
                hosts,
                root: site.root.clone(),
                serve,
            });
        }
        out
    }
}

/// `https_redirect`'s rule: 308 to `tls_listen`'s port.
fn https_redirect(tls_listen: &str, e: &mut Vec<ConfigError>) -> RuleSpec {
    // The first address's port, as Alt-Svc's.
    let first = tls_listen.split(',').next().unwrap_or_default().trim();
    let port = first
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok());
    let target = match port {
        None | Some(0) => {
            e.push(err(
                "https_redirect",
                "needs tls_listen with a fixed port: where would it redirect to?",
            ));
            String::new()
        }
        Some(443) => "https://{hostname}{uri}".to_string(),
        Some(p) => format!("https://{{hostname}}:{p}{{uri}}"),
    };
    RuleSpec {
        scheme: "http".into(),
        redirect: target,
        status: 308,
        ..RuleSpec::default()
    }
}
