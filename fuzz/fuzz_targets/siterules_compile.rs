//! siterules on what a config file and a client can write: `Glob::new`
//! with `matches` / `captures`, `HostPattern`, `IpNet`, and
//! `Rules::compile` on `RuleSpec`s built from the input (through a local
//! mirror with `arbitrary`'s derive), then matched against requests:
//! the guards, header edits, redirects, rewrites, `try_files`, error pages
//! and CORS.
//!
//! Checked:
//! - globs: `matches` agrees with `captures` and with a plain backtracking
//!   matcher written here (no shapes, no prefix/suffix shortcuts); a match
//!   has `capture_count()` captures, in order, inside the path and on
//!   character boundaries (a template slices the path with them);
//! - host patterns: an exact name matches itself in any ASCII case, a
//!   wildcard matches a name beneath it and not its bare suffix;
//! - addresses: `contains` is a prefix compare of the bits (IPv4-mapped
//!   IPv6 addresses as IPv4); a block contains the address it was
//!   written with;
//! - compile: errors name a rule of the list; compiled rules keep the
//!   specs and describe each rule; for each request: a redirect's status
//!   is a redirect's, and no rendered `Location`, header edit or CORS
//!   field holds CR, LF or NUL (no header injection from a path);
//!   `permits` is the gate's `Pass`; a rate limit's refusal names a rule
//!   of the list and a wait of at least a second.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use httpfile::plan::HeaderEdit;
use httpfile::Method;
use libfuzzer_sys::fuzz_target;
use siterules::{
    BasicAuthSpec, CorsSpec, Facts, Gate, Glob, HostPattern, IpNet, RateLimitSpec, RuleSpec, Rules,
};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A bcrypt hash (of "secret", cost 4) a spec's user may name, so that
/// `basic_auth` compiles; passwords are never verified here (bcrypt is
/// slow by design), only their form.
const HASH: &str = "$2b$04$0y7ZrVjx0rpSbCeVwZtH1eWq5WpNnq4jX.z7f5jS6h1zXoS4BpCZC";

#[derive(Arbitrary, Debug)]
struct SpecMirror {
    path: String,
    methods: Vec<String>,
    hosts: Vec<String>,
    scheme: u8,
    navigation_only: bool,
    always: bool,
    headers: Vec<(String, String)>,
    add_headers: Vec<(String, String)>,
    remove_headers: Vec<String>,
    redirect: String,
    status: u16,
    rewrite: String,
    try_files: Vec<String>,
    error_pages: Vec<(String, String)>,
    basic_auth: Option<(String, Vec<(String, bool)>)>,
    allow: Vec<String>,
    deny: Vec<String>,
    cors: Option<CorsMirror>,
    rate_limit: Option<RateLimitMirror>,
}

#[derive(Arbitrary, Debug)]
struct RateLimitMirror {
    rate: String,
    burst: Option<u32>,
    key: String,
    exempt: Vec<String>,
}

#[derive(Arbitrary, Debug)]
struct CorsMirror {
    origins: Vec<String>,
    methods: Vec<String>,
    headers: Vec<String>,
    expose: Vec<String>,
    max_age: u64,
    credentials: bool,
}

impl SpecMirror {
    fn spec(self) -> RuleSpec {
        RuleSpec {
            path: self.path,
            methods: self.methods,
            hosts: self.hosts,
            scheme: match self.scheme % 4 {
                0 => String::new(),
                1 => "http".into(),
                2 => "https".into(),
                _ => "gopher".into(),
            },
            navigation_only: self.navigation_only,
            headers: self.headers.into_iter().collect(),
            add_headers: self.add_headers.into_iter().collect(),
            remove_headers: self.remove_headers,
            always: self.always,
            redirect: self.redirect,
            status: self.status,
            rewrite: self.rewrite,
            try_files: self.try_files,
            error_pages: self.error_pages.into_iter().collect(),
            basic_auth: self.basic_auth.map(|(realm, users)| BasicAuthSpec {
                realm,
                users: users
                    .into_iter()
                    .map(|(u, valid)| (u, if valid { HASH.into() } else { "plain".into() }))
                    .collect::<BTreeMap<_, _>>(),
            }),
            allow: self.allow,
            deny: self.deny,
            cors: self.cors.map(|c| CorsSpec {
                origins: c.origins,
                methods: c.methods,
                headers: c.headers,
                expose: c.expose,
                max_age: c.max_age,
                credentials: c.credentials,
            }),
            rate_limit: self.rate_limit.map(|r| RateLimitSpec {
                rate: r.rate,
                burst: r.burst,
                key: r.key,
                exempt: r.exempt,
            }),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Ip {
    V4([u8; 4]),
    V6([u8; 16]),
    Mapped([u8; 4]),
}

impl Ip {
    fn addr(&self) -> IpAddr {
        match *self {
            Ip::V4(b) => Ipv4Addr::from(b).into(),
            Ip::V6(b) => Ipv6Addr::from(b).into(),
            Ip::Mapped(b) => Ipv4Addr::from(b).to_ipv6_mapped().into(),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Request {
    method: u8,
    rel: String,
    host: Vec<u8>,
    tls: bool,
    navigation: bool,
    target: Vec<u8>,
    client: Option<Ip>,
    authorization: Option<Vec<u8>>,
    origin: Option<Vec<u8>>,
    request_method: Option<Vec<u8>>,
    request_headers: Option<Vec<u8>>,
    status: u16,
}

#[derive(Arbitrary, Debug)]
struct Input {
    globs: Vec<String>,
    paths: Vec<String>,
    hosts: Vec<(String, String)>,
    nets: Vec<(String, Ip)>,
    specs: Vec<SpecMirror>,
    requests: Vec<Request>,
}

/// A plain reading of the glob rules: segments of literals (ASCII case
/// folded), `?` (one character), `*` (a run within a segment) and `**`
/// (whole segments), matched by backtracking over characters.
fn reference_matches(glob: &str, rel: &str) -> bool {
    let body = match glob.strip_prefix('/') {
        Some(rest) => rest.to_string(),
        None if glob.starts_with("**") => glob.to_string(),
        None => format!("**/{glob}"),
    };
    let pat: Vec<&str> = if body.is_empty() {
        Vec::new()
    } else {
        body.split('/').collect()
    };
    let path: Vec<&str> = if rel.is_empty() {
        Vec::new()
    } else {
        rel.split('/').collect()
    };
    fn segs(pat: &[&str], path: &[&str]) -> bool {
        match pat.split_first() {
            None => path.is_empty(),
            Some((&"**", rest)) => (0..=path.len()).any(|k| segs(rest, &path[k..])),
            Some((p, rest)) => {
                let Some((s, more)) = path.split_first() else {
                    return false;
                };
                let p: Vec<char> = p.chars().collect();
                let s: Vec<char> = s.chars().collect();
                one(&p, &s) && segs(rest, more)
            }
        }
    }
    fn one(p: &[char], s: &[char]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some(('*', rest)) => (0..=s.len()).any(|k| one(rest, &s[k..])),
            Some(('?', rest)) => !s.is_empty() && one(rest, &s[1..]),
            Some((c, rest)) => {
                s.first().is_some_and(|d| c.eq_ignore_ascii_case(d)) && one(rest, &s[1..])
            }
        }
    }
    segs(&pat, &path)
}

/// Keeps the glob and path small enough that the backtracking (the
/// library's and the reference's) stays fast.
fn small(s: &str, chars: usize) -> &str {
    match s.char_indices().nth(chars) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn stars(s: &str) -> usize {
    s.bytes().filter(|&b| b == b'*').count()
}

fn check_glob(text: &str, paths: &[String]) {
    let Ok(glob) = Glob::new(text) else {
        return;
    };
    assert_eq!(glob.as_str(), text);
    let mut caps = Vec::new();
    for rel in paths {
        let rel = small(rel, 48);
        let m = glob.matches(rel);
        let c = glob.captures(rel, &mut caps);
        assert_eq!(m, c, "matches and captures disagree on {rel:?}");
        if stars(text) <= 6 {
            assert_eq!(m, reference_matches(text, rel), "{text:?} on {rel:?}");
        }
        if !c {
            assert!(caps.is_empty());
            continue;
        }
        assert_eq!(caps.len(), glob.capture_count(), "{text:?} on {rel:?}");
        let mut at = 0;
        for &(a, b) in &caps {
            assert!(at <= a && a <= b && b <= rel.len(), "{caps:?} in {rel:?}");
            // A `*` before a `?` once ended inside a character (siterules-1
            // in fuzz/regressions/README.md).
            assert!(
                rel.is_char_boundary(a) && rel.is_char_boundary(b),
                "capture {a}..{b} of {rel:?} ({text:?}) splits a character"
            );
            at = b;
        }
    }
}

fn check_host(pattern: &str, name: &str) {
    let Ok(p) = HostPattern::parse(pattern) else {
        return;
    };
    match &p {
        HostPattern::Exact(h) => {
            assert!(p.matches(pattern.as_bytes()));
            assert!(p.matches(pattern.to_ascii_uppercase().as_bytes()));
            assert_eq!(h, &pattern.to_ascii_lowercase());
        }
        HostPattern::Wildcard(suffix) => {
            // `*example.com` was once taken as a wildcard matching
            // `badexample.com` (siterules-2 in fuzz/regressions/README.md).
            assert!(
                suffix.starts_with('.'),
                "{pattern:?} parsed as the wildcard of {suffix:?}"
            );
            assert!(
                !p.matches(suffix.as_bytes()),
                "{suffix:?} matches its own wildcard"
            );
            assert!(p.matches(format!("a{suffix}").as_bytes()));
        }
    }
    let _ = p.matches(name.as_bytes());
}

fn bits(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(v4) => (true, u128::from(u32::from(v4)) << 96),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => (true, u128::from(u32::from(v4)) << 96),
            None => (false, u128::from(v6)),
        },
    }
}

fn check_net(text: &str, ip: IpAddr) {
    let Ok(net) = IpNet::parse(text) else {
        return;
    };
    let (addr, prefix) = match text.trim().split_once('/') {
        Some((a, p)) => (a.parse::<IpAddr>().unwrap(), p.parse::<u32>().unwrap()),
        None => {
            let a = text.trim().parse::<IpAddr>().unwrap();
            (a, if a.is_ipv4() { 32 } else { 128 })
        }
    };
    let net_v4 = addr.is_ipv4();
    let net_bits = match addr {
        IpAddr::V4(v4) => u128::from(u32::from(v4)) << 96,
        IpAddr::V6(v6) => u128::from(v6),
    };
    let (host_v4, host_bits) = bits(ip);
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    let want = net_v4 == host_v4 && net_bits & mask == host_bits & mask;
    assert_eq!(net.contains(ip), want, "{text:?} contains {ip}?");
    if addr.to_canonical() == addr {
        assert!(
            net.contains(addr),
            "{text:?} does not contain its own address"
        );
    }
}

fn clean(v: &[u8]) -> Vec<u8> {
    // What a request field can hold: both engines refuse CR, LF and NUL.
    v.iter()
        .copied()
        .filter(|b| !matches!(b, b'\r' | b'\n' | 0))
        .collect()
}

fn header_safe(s: &str) -> bool {
    !s.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0))
}

fn check_edits(edits: &[HeaderEdit<'_>]) {
    for e in edits {
        assert!(header_safe(e.name()), "{e:?}");
        if let HeaderEdit::Set(_, v) | HeaderEdit::Add(_, v) = e {
            assert!(header_safe(v), "{e:?}");
        }
    }
}

fn check_rules(specs: Vec<RuleSpec>, requests: &[Request]) {
    let rules = match Rules::compile(&specs) {
        Ok(rules) => rules,
        Err(errors) => {
            assert!(!errors.is_empty());
            for e in &errors {
                assert!((1..=specs.len()).contains(&e.rule), "{e}");
            }
            return;
        }
    };
    assert_eq!(rules.len(), specs.len());
    assert_eq!(rules.specs(), &specs[..]);
    assert_eq!(rules.describe().len(), specs.len());
    for (rule, status, page) in rules.error_pages() {
        assert!((1..=specs.len()).contains(&rule) && (400..=599).contains(&status));
        assert!(page.starts_with('/'));
    }
    for (rule, _) in rules.rate_limits() {
        assert!((1..=specs.len()).contains(&rule));
    }
    let now = std::time::Instant::now();
    for r in requests {
        let method =
            [Method::Get, Method::Head, Method::Options, Method::Other][usize::from(r.method & 3)];
        let host = clean(&r.host);
        let target = clean(&r.target);
        let rel = small(&r.rel, 48);
        let facts = Facts {
            method,
            rel,
            host: &host,
            hostname: siterules::hostname(&host),
            tls: r.tls,
            navigation: r.navigation,
        };
        let client = r.client.as_ref().map(Ip::addr);
        let authorization = r.authorization.as_deref().map(clean);
        let m = rules.matching(&facts);
        let gate = m.gate(client, authorization.as_deref());
        assert_eq!(
            rules.permits(&facts, client, authorization.as_deref()),
            matches!(gate, Gate::Pass) || !rules.has_guards()
        );
        if let Gate::Challenge(auth) = &gate {
            assert!(header_safe(auth.challenge()));
        }
        let mut edits = Vec::new();
        m.header_edits(&mut edits, false);
        check_edits(&edits);
        {
            if let Some((status, location)) = m.redirect(&facts, &target) {
                assert!(matches!(status, 301 | 302 | 303 | 307 | 308), "{status}");
                assert!(header_safe(&location), "Location {location:?}");
            }
            let _ = m.rewrite(&facts, &target);
            let _ = m.try_files(&facts, &target);
        }
        if let Some(page) = m.error_page(r.status) {
            assert!(page.starts_with('/'));
        }
        if let Some(refused) = m.rate_limited(client, now) {
            assert!(refused.retry_after >= 1, "{refused:?}");
            assert!((1..=specs.len()).contains(&refused.rule), "{refused:?}");
        }
        if let Some(cors) = m.cors() {
            let origin = r.origin.as_deref().map(clean);
            let request_method = r.request_method.as_deref().map(clean);
            let request_headers = r.request_headers.as_deref().map(clean);
            let mut edits = Vec::new();
            cors.response_edits(origin.as_deref(), &mut edits);
            check_edits(&edits);
            edits.clear();
            cors.preflight(
                method,
                origin.as_deref(),
                request_method.as_deref(),
                request_headers.as_deref(),
                &mut edits,
            );
            check_edits(&edits);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let paths = &input.paths[..input.paths.len().min(8)];
    for g in input.globs.iter().take(8) {
        check_glob(small(g, 40), paths);
    }
    for (pattern, name) in input.hosts.iter().take(8) {
        check_host(pattern, name);
    }
    for (text, ip) in input.nets.iter().take(8) {
        check_net(text, ip.addr());
    }
    let specs: Vec<RuleSpec> = input
        .specs
        .into_iter()
        .take(8)
        .map(SpecMirror::spec)
        .collect();
    check_rules(specs, &input.requests[..input.requests.len().min(8)]);
});
