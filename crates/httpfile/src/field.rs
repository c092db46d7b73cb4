//! The response header fields the server writes, in one place for every
//! wire: each [`Name`] with its HTTP/1.1 spelling, its lower-case one
//! (HTTP/2 and HTTP/3 send names in lower case: RFC 9113 8.2.1, RFC 9114
//! 4.2) and whether its value names one response (a compression table
//! would gain nothing from it); and [`CONNECTION_SPECIFIC`], the fields
//! HTTP/2 and HTTP/3 never carry. A plan's fields are [`FieldName`]s: one
//! of these, or a name a site rule wrote.
//!
//! A new response field is a line of the table below and a field of
//! [`crate::plan::Headers`] (written by its `for_each_field`); every
//! encoder renders it from there.
//!
//! ```
//! use httpfile::field::{FieldName, Name};
//! let mut out = Vec::new();
//! FieldName::Known(Name::ETag).push_http1(&mut out);
//! assert_eq!(out, b"ETag: ");
//! assert_eq!(Name::ETag.lower(), "etag");
//! assert!(Name::ETag.per_response());
//! let mut buf = Vec::new();
//! assert_eq!(FieldName::Rule("X-Frame-Options").lowered(&mut buf), Some((&b"x-frame-options"[..], false)));
//! assert_eq!(FieldName::Rule("Keep-Alive").lowered(&mut buf), None);
//! ```

/// The fields HTTP/2 and HTTP/3 must not carry (RFC 9113 8.2.2, RFC 9114
/// 4.2), lower case: an encoder of those wires drops them, and a site
/// rule may not write them.
pub const CONNECTION_SPECIFIC: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
];

/// `name` (any case) is one of [`CONNECTION_SPECIFIC`].
pub fn is_connection_specific(name: &str) -> bool {
    CONNECTION_SPECIFIC
        .iter()
        .any(|c| c.eq_ignore_ascii_case(name))
}

/// What a field's value says, as a compression table sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The same value comes again on other responses: worth an entry.
    Shared,
    /// The value names one file or answer (a length, tag, time, range,
    /// place): HPACK and QPACK encoders do not index it.
    PerResponse,
    /// HTTP/1.1's framing only: never sent on HTTP/2 or HTTP/3.
    Connection,
}

macro_rules! names {
    ($($(#[doc = $doc:literal])* $variant:ident = $http1:literal, $lower:literal, $scope:ident;)*) => {
        /// A response field the server writes.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Name {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Name {
            /// Every name, in the order declared.
            pub const ALL: &'static [Name] = &[$(Name::$variant),*];

            /// Its HTTP/1.1 spelling (`Content-Type`).
            #[inline]
            pub const fn http1(self) -> &'static str {
                match self {
                    $(Name::$variant => $http1,)*
                }
            }

            /// Its HTTP/1.1 spelling and the `": "` after it, what a
            /// header line starts with.
            #[inline]
            pub const fn http1_line(self) -> &'static str {
                match self {
                    $(Name::$variant => concat!($http1, ": "),)*
                }
            }

            /// Its lower-case spelling, as HTTP/2 and HTTP/3 send it
            /// (`content-type`).
            #[inline]
            pub const fn lower(self) -> &'static str {
                match self {
                    $(Name::$variant => $lower,)*
                }
            }

            /// What its value says to a compression table.
            #[inline]
            pub const fn scope(self) -> Scope {
                match self {
                    $(Name::$variant => Scope::$scope,)*
                }
            }
        }
    };
}

names! {
    /// `Server` (every engine adds it).
    Server = "Server", "server", Shared;
    /// `Date` (every engine adds it; the same for a second).
    Date = "Date", "date", Shared;
    /// `Connection` (HTTP/1.1's encoder adds it when it must).
    Connection = "Connection", "connection", Connection;
    /// `Alt-Svc` (the HTTPS listener's, while HTTP/3 runs).
    AltSvc = "Alt-Svc", "alt-svc", Shared;
    /// `Location`.
    Location = "Location", "location", PerResponse;
    /// `Allow`.
    Allow = "Allow", "allow", Shared;
    /// `Retry-After`.
    RetryAfter = "Retry-After", "retry-after", Shared;
    /// `Content-Type`.
    ContentType = "Content-Type", "content-type", Shared;
    /// `Content-Range`.
    ContentRange = "Content-Range", "content-range", PerResponse;
    /// `Content-Length`.
    ContentLength = "Content-Length", "content-length", PerResponse;
    /// `Accept-Ranges`.
    AcceptRanges = "Accept-Ranges", "accept-ranges", Shared;
    /// `Last-Modified`.
    LastModified = "Last-Modified", "last-modified", PerResponse;
    /// `ETag`.
    ETag = "ETag", "etag", PerResponse;
    /// `Cache-Control`.
    CacheControl = "Cache-Control", "cache-control", Shared;
    /// `Content-Encoding`.
    ContentEncoding = "Content-Encoding", "content-encoding", Shared;
    /// `Vary`.
    Vary = "Vary", "vary", Shared;
    /// `Content-Security-Policy`.
    ContentSecurityPolicy = "Content-Security-Policy", "content-security-policy", Shared;
    /// `X-Content-Type-Options`.
    XContentTypeOptions = "X-Content-Type-Options", "x-content-type-options", Shared;
    /// `Listing-Truncated`.
    ListingTruncated = "Listing-Truncated", "listing-truncated", PerResponse;
}

impl Name {
    /// Its value names one response: never indexed by HPACK or QPACK.
    #[inline]
    pub const fn per_response(self) -> bool {
        matches!(self.scope(), Scope::PerResponse)
    }

    /// The name spelled `name`, in any case.
    pub fn find(name: &str) -> Option<Name> {
        Name::ALL
            .iter()
            .copied()
            .find(|n| n.http1().eq_ignore_ascii_case(name))
    }
}

/// The name of one of a plan's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldName<'a> {
    /// One the planner writes.
    Known(Name),
    /// One a site rule writes, as written.
    Rule(&'a str),
}

impl<'a> FieldName<'a> {
    /// Its HTTP/1.1 spelling (a rule's as written).
    #[inline]
    pub fn as_str(self) -> &'a str {
        match self {
            FieldName::Known(n) => n.http1(),
            FieldName::Rule(n) => n,
        }
    }

    /// Appends `Name: `, what its HTTP/1.1 line starts with.
    #[inline]
    pub fn push_http1(self, out: &mut Vec<u8>) {
        match self {
            FieldName::Known(n) => out.extend_from_slice(n.http1_line().as_bytes()),
            FieldName::Rule(n) => {
                out.extend_from_slice(n.as_bytes());
                out.extend_from_slice(b": ");
            }
        }
    }

    /// The name as HTTP/2 and HTTP/3 send it (lower case; a rule's
    /// lowered into `buf`) and whether its value names one response
    /// ([`Name::per_response`], a rule's by the name it spells); `None`
    /// for a field those wires do not carry ([`CONNECTION_SPECIFIC`]).
    #[inline]
    pub fn lowered(self, buf: &mut Vec<u8>) -> Option<(&[u8], bool)> {
        let known = match self {
            FieldName::Known(n) => n,
            FieldName::Rule(name) => match Name::find(name) {
                Some(n) => n,
                None if is_connection_specific(name) => return None,
                None => {
                    buf.clear();
                    buf.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
                    return Some((&buf[..], false));
                }
            },
        };
        match known.scope() {
            Scope::Connection => None,
            scope => Some((known.lower().as_bytes(), scope == Scope::PerResponse)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_spelled_alike_on_every_wire() {
        for n in Name::ALL {
            assert!(n.http1().eq_ignore_ascii_case(n.lower()), "{n:?}");
            assert!(n.lower().bytes().all(|b| !b.is_ascii_uppercase()), "{n:?}");
            assert_eq!(n.http1_line(), format!("{}: ", n.http1()));
            assert_eq!(Name::find(&n.lower().to_ascii_uppercase()), Some(*n));
            let mut line = Vec::new();
            FieldName::Known(*n).push_http1(&mut line);
            assert_eq!(line, n.http1_line().as_bytes());
        }
        let mut names: Vec<_> = Name::ALL.iter().map(|n| n.lower()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Name::ALL.len(), "a name twice");
    }

    #[test]
    fn what_names_one_response_is_never_indexed() {
        let per_response: Vec<_> = Name::ALL
            .iter()
            .filter(|n| n.per_response())
            .map(|n| n.lower())
            .collect();
        assert_eq!(
            per_response,
            [
                "location",
                "content-range",
                "content-length",
                "last-modified",
                "etag",
                "listing-truncated"
            ]
        );
        // A rule's field of such a name is not indexed either.
        let mut buf = Vec::new();
        assert_eq!(
            FieldName::Rule("ETAG").lowered(&mut buf),
            Some((&b"etag"[..], true))
        );
        assert_eq!(
            FieldName::Rule("Cache-control").lowered(&mut buf),
            Some((&b"cache-control"[..], false))
        );
    }

    #[test]
    fn http2_and_http3_drop_the_connection_specific_fields() {
        let mut buf = Vec::new();
        for name in CONNECTION_SPECIFIC {
            let upper = name.to_ascii_uppercase();
            for spelled in [name, &upper] {
                assert!(is_connection_specific(spelled));
                assert_eq!(
                    FieldName::Rule(spelled).lowered(&mut buf),
                    None,
                    "{spelled}"
                );
            }
        }
        // Of the server's own, only HTTP/1.1's framing is.
        for n in Name::ALL {
            let dropped = FieldName::Known(*n).lowered(&mut buf).is_none();
            assert_eq!(dropped, is_connection_specific(n.lower()), "{n:?}");
            assert_eq!(dropped, n.scope() == Scope::Connection, "{n:?}");
        }
        assert_eq!(
            FieldName::Rule("X-Te").lowered(&mut buf),
            Some((&b"x-te"[..], false))
        );
    }
}
