//! QPACK (RFC 9204) for a server that keeps no dynamic table: it
//! announces `SETTINGS_QPACK_MAX_TABLE_CAPACITY` 0 (the default), so a
//! client's field sections may refer to the static table only, and the
//! responses it writes refer to nothing else.
//!
//! - [`decode`] reads a request's field section into an
//!   [`h2wire::Request`], which checks each field as HTTP/2's heads are
//!   checked (RFC 9114 4.2-4.3 repeats RFC 9113 8.2-8.3). A reference to a
//!   dynamic table is `QPACK_DECOMPRESSION_FAILED`.
//! - [`begin`], [`status`], [`field`] and [`literal`] write a response's
//!   field section: static references where the table has the field or
//!   its name, plain literals otherwise. Nothing is Huffman-coded: a
//!   response's values (dates, ETags, lengths) are mostly unique, and
//!   Huffman-coding every value, as the `h3` crate does, was 14 380 of the
//!   daemon's 95 040 instructions per HTTP/3 request (callgrind).

use crate::frame::Code;
use h2wire::Request;

/// Reads field section `section` into `req` (begun by the caller with
/// [`Request::begin`]), field by field; `scratch` holds a field's
/// Huffman-coded name and value while they are decoded. `Err`: the
/// section cannot be decoded (the connection's error); a field that
/// breaks the request rules leaves `req` [`malformed`](Request::malformed)
/// instead.
pub fn decode(section: &[u8], req: &mut Request, scratch: &mut Vec<u8>) -> Result<(), Code> {
    const FAILED: Code = Code::QPACK_DECOMPRESSION_FAILED;
    let mut pos = 0;
    // Required Insert Count 0: no dynamic entry; the Base is then unused.
    if int(section, &mut pos, 8)? != 0 {
        return Err(FAILED);
    }
    int(section, &mut pos, 7)?;
    while let Some(&first) = section.get(pos) {
        scratch.clear();
        if first & 0x80 != 0 {
            // Indexed field line; T (0x40) set: the static table.
            if first & 0x40 == 0 {
                return Err(FAILED);
            }
            let (name, value) = entry(int(section, &mut pos, 6)?)?;
            req.push(name, value);
        } else if first & 0x40 != 0 {
            // Literal with a name reference; T is 0x10.
            if first & 0x10 == 0 {
                return Err(FAILED);
            }
            let (name, _) = entry(int(section, &mut pos, 4)?)?;
            let value = string(section, &mut pos, 7, scratch)?;
            req.push(name, value.of(section, scratch));
        } else if first & 0x20 != 0 {
            // Literal with a literal name: its Huffman flag is 0x08.
            let name = string(section, &mut pos, 3, scratch)?;
            let value = string(section, &mut pos, 7, scratch)?;
            req.push(name.of(section, scratch), value.of(section, scratch));
        } else {
            // The post-base forms refer to the dynamic table.
            return Err(FAILED);
        }
    }
    Ok(())
}

fn entry(index: usize) -> Result<(&'static [u8], &'static [u8]), Code> {
    STATIC
        .get(index)
        .copied()
        .ok_or(Code::QPACK_DECOMPRESSION_FAILED)
}

fn int(buf: &[u8], pos: &mut usize, n: u32) -> Result<usize, Code> {
    hpack::decode_integer(buf, pos, n).map_err(|_| Code::QPACK_DECOMPRESSION_FAILED)
}

/// Where a string literal's octets are: in the section as sent, or
/// Huffman-decoded into the scratch buffer.
enum Literal {
    Sent(std::ops::Range<usize>),
    Decoded(std::ops::Range<usize>),
}

impl Literal {
    fn of<'a>(&self, section: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
        match self {
            Literal::Sent(r) => &section[r.clone()],
            Literal::Decoded(r) => &scratch[r.clone()],
        }
    }
}

/// The string literal at `*pos` whose length has an `n`-bit prefix, its
/// Huffman flag the bit above; a Huffman-coded one is decoded onto the
/// end of `scratch` (a name and its value share it).
fn string(buf: &[u8], pos: &mut usize, n: u32, scratch: &mut Vec<u8>) -> Result<Literal, Code> {
    let huffman = buf.get(*pos).is_some_and(|&b| b & (1 << n) != 0);
    let len = int(buf, pos, n)?;
    let end = pos
        .checked_add(len)
        .filter(|&end| end <= buf.len())
        .ok_or(Code::QPACK_DECOMPRESSION_FAILED)?;
    let raw = *pos..end;
    *pos = end;
    if !huffman {
        return Ok(Literal::Sent(raw));
    }
    let start = scratch.len();
    hpack::huffman_decode(&buf[raw], scratch).map_err(|_| Code::QPACK_DECOMPRESSION_FAILED)?;
    Ok(Literal::Decoded(start..scratch.len()))
}

/// Starts a field section in `dst`: Required Insert Count 0, Base 0.
pub fn begin(dst: &mut Vec<u8>) {
    dst.extend_from_slice(&[0, 0]);
}

/// Appends `:status` `code`.
pub fn status(code: u16, dst: &mut Vec<u8>) {
    let mut digits = [0u8; 3];
    for (i, d) in digits.iter_mut().enumerate() {
        *d = b'0' + (code / 10u16.pow(2 - i as u32) % 10) as u8;
    }
    field(b":status", &digits, dst);
}

/// Appends field `name` (lower case) `value`.
pub fn field(name: &[u8], value: &[u8], dst: &mut Vec<u8>) {
    if let Some(index) = static_exact(name, value) {
        // Indexed field line, static (T = 0x40).
        hpack::encode_integer(index.into(), 6, 0xc0, dst);
        return;
    }
    literal(name, value, dst);
}

/// Appends field `name` (lower case) `value` as a literal, without
/// looking for the value in the table: for a value made for this
/// response (a date, an entity-tag, a length), which it never holds.
pub fn literal(name: &[u8], value: &[u8], dst: &mut Vec<u8>) {
    match static_name(name) {
        // Literal with a static name reference (T = 0x10).
        Some(index) => hpack::encode_integer(index.into(), 4, 0x50, dst),
        None => {
            // Literal with a literal name, not Huffman-coded.
            hpack::encode_integer(name.len(), 3, 0x20, dst);
            dst.extend_from_slice(name);
        }
    }
    hpack::encode_integer(value.len(), 7, 0x00, dst);
    dst.extend_from_slice(value);
}

/// The static table (RFC 9204 Appendix A): index, then (name, value).
pub(crate) const STATIC: [(&[u8], &[u8]); 99] = [
    (b":authority", b""),
    (b":path", b"/"),
    (b"age", b"0"),
    (b"content-disposition", b""),
    (b"content-length", b"0"),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"referer", b""),
    (b"set-cookie", b""),
    (b":method", b"CONNECT"),
    (b":method", b"DELETE"),
    (b":method", b"GET"),
    (b":method", b"HEAD"),
    (b":method", b"OPTIONS"),
    (b":method", b"POST"),
    (b":method", b"PUT"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"103"),
    (b":status", b"200"),
    (b":status", b"304"),
    (b":status", b"404"),
    (b":status", b"503"),
    (b"accept", b"*/*"),
    (b"accept", b"application/dns-message"),
    (b"accept-encoding", b"gzip, deflate, br"),
    (b"accept-ranges", b"bytes"),
    (b"access-control-allow-headers", b"cache-control"),
    (b"access-control-allow-headers", b"content-type"),
    (b"access-control-allow-origin", b"*"),
    (b"cache-control", b"max-age=0"),
    (b"cache-control", b"max-age=2592000"),
    (b"cache-control", b"max-age=604800"),
    (b"cache-control", b"no-cache"),
    (b"cache-control", b"no-store"),
    (b"cache-control", b"public, max-age=31536000"),
    (b"content-encoding", b"br"),
    (b"content-encoding", b"gzip"),
    (b"content-type", b"application/dns-message"),
    (b"content-type", b"application/javascript"),
    (b"content-type", b"application/json"),
    (b"content-type", b"application/x-www-form-urlencoded"),
    (b"content-type", b"image/gif"),
    (b"content-type", b"image/jpeg"),
    (b"content-type", b"image/png"),
    (b"content-type", b"text/css"),
    (b"content-type", b"text/html; charset=utf-8"),
    (b"content-type", b"text/plain"),
    (b"content-type", b"text/plain;charset=utf-8"),
    (b"range", b"bytes=0-"),
    (b"strict-transport-security", b"max-age=31536000"),
    (
        b"strict-transport-security",
        b"max-age=31536000; includesubdomains",
    ),
    (
        b"strict-transport-security",
        b"max-age=31536000; includesubdomains; preload",
    ),
    (b"vary", b"accept-encoding"),
    (b"vary", b"origin"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-xss-protection", b"1; mode=block"),
    (b":status", b"100"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"302"),
    (b":status", b"400"),
    (b":status", b"403"),
    (b":status", b"421"),
    (b":status", b"425"),
    (b":status", b"500"),
    (b"accept-language", b""),
    (b"access-control-allow-credentials", b"FALSE"),
    (b"access-control-allow-credentials", b"TRUE"),
    (b"access-control-allow-headers", b"*"),
    (b"access-control-allow-methods", b"get"),
    (b"access-control-allow-methods", b"get, post, options"),
    (b"access-control-allow-methods", b"options"),
    (b"access-control-expose-headers", b"content-length"),
    (b"access-control-request-headers", b"content-type"),
    (b"access-control-request-method", b"get"),
    (b"access-control-request-method", b"post"),
    (b"alt-svc", b"clear"),
    (b"authorization", b""),
    (
        b"content-security-policy",
        b"script-src 'none'; object-src 'none'; base-uri 'none'",
    ),
    (b"early-data", b"1"),
    (b"expect-ct", b""),
    (b"forwarded", b""),
    (b"if-range", b""),
    (b"origin", b""),
    (b"purpose", b"prefetch"),
    (b"server", b""),
    (b"timing-allow-origin", b"*"),
    (b"upgrade-insecure-requests", b"1"),
    (b"user-agent", b""),
    (b"x-forwarded-for", b""),
    (b"x-frame-options", b"deny"),
    (b"x-frame-options", b"sameorigin"),
];

/// The static entry that is exactly `name: value` (one with a value):
/// by name, then by value among that name's entries.
fn static_exact(name: &[u8], value: &[u8]) -> Option<u8> {
    Some(match name {
        b":path" => match value {
            b"/" => 1,
            _ => return None,
        },
        b"age" => match value {
            b"0" => 2,
            _ => return None,
        },
        b"content-length" => match value {
            b"0" => 4,
            _ => return None,
        },
        b":method" => match value {
            b"CONNECT" => 15,
            b"DELETE" => 16,
            b"GET" => 17,
            b"HEAD" => 18,
            b"OPTIONS" => 19,
            b"POST" => 20,
            b"PUT" => 21,
            _ => return None,
        },
        b":scheme" => match value {
            b"http" => 22,
            b"https" => 23,
            _ => return None,
        },
        b":status" => match value {
            b"103" => 24,
            b"200" => 25,
            b"304" => 26,
            b"404" => 27,
            b"503" => 28,
            b"100" => 63,
            b"204" => 64,
            b"206" => 65,
            b"302" => 66,
            b"400" => 67,
            b"403" => 68,
            b"421" => 69,
            b"425" => 70,
            b"500" => 71,
            _ => return None,
        },
        b"accept" => match value {
            b"*/*" => 29,
            b"application/dns-message" => 30,
            _ => return None,
        },
        b"accept-encoding" => match value {
            b"gzip, deflate, br" => 31,
            _ => return None,
        },
        b"accept-ranges" => match value {
            b"bytes" => 32,
            _ => return None,
        },
        b"access-control-allow-headers" => match value {
            b"cache-control" => 33,
            b"content-type" => 34,
            b"*" => 75,
            _ => return None,
        },
        b"access-control-allow-origin" => match value {
            b"*" => 35,
            _ => return None,
        },
        b"cache-control" => match value {
            b"max-age=0" => 36,
            b"max-age=2592000" => 37,
            b"max-age=604800" => 38,
            b"no-cache" => 39,
            b"no-store" => 40,
            b"public, max-age=31536000" => 41,
            _ => return None,
        },
        b"content-encoding" => match value {
            b"br" => 42,
            b"gzip" => 43,
            _ => return None,
        },
        b"content-type" => match value {
            b"application/dns-message" => 44,
            b"application/javascript" => 45,
            b"application/json" => 46,
            b"application/x-www-form-urlencoded" => 47,
            b"image/gif" => 48,
            b"image/jpeg" => 49,
            b"image/png" => 50,
            b"text/css" => 51,
            b"text/html; charset=utf-8" => 52,
            b"text/plain" => 53,
            b"text/plain;charset=utf-8" => 54,
            _ => return None,
        },
        b"range" => match value {
            b"bytes=0-" => 55,
            _ => return None,
        },
        b"strict-transport-security" => match value {
            b"max-age=31536000" => 56,
            b"max-age=31536000; includesubdomains" => 57,
            b"max-age=31536000; includesubdomains; preload" => 58,
            _ => return None,
        },
        b"vary" => match value {
            b"accept-encoding" => 59,
            b"origin" => 60,
            _ => return None,
        },
        b"x-content-type-options" => match value {
            b"nosniff" => 61,
            _ => return None,
        },
        b"x-xss-protection" => match value {
            b"1; mode=block" => 62,
            _ => return None,
        },
        b"access-control-allow-credentials" => match value {
            b"FALSE" => 73,
            b"TRUE" => 74,
            _ => return None,
        },
        b"access-control-allow-methods" => match value {
            b"get" => 76,
            b"get, post, options" => 77,
            b"options" => 78,
            _ => return None,
        },
        b"access-control-expose-headers" => match value {
            b"content-length" => 79,
            _ => return None,
        },
        b"access-control-request-headers" => match value {
            b"content-type" => 80,
            _ => return None,
        },
        b"access-control-request-method" => match value {
            b"get" => 81,
            b"post" => 82,
            _ => return None,
        },
        b"alt-svc" => match value {
            b"clear" => 83,
            _ => return None,
        },
        b"content-security-policy" => match value {
            b"script-src 'none'; object-src 'none'; base-uri 'none'" => 85,
            _ => return None,
        },
        b"early-data" => match value {
            b"1" => 86,
            _ => return None,
        },
        b"purpose" => match value {
            b"prefetch" => 91,
            _ => return None,
        },
        b"timing-allow-origin" => match value {
            b"*" => 93,
            _ => return None,
        },
        b"upgrade-insecure-requests" => match value {
            b"1" => 94,
            _ => return None,
        },
        b"x-frame-options" => match value {
            b"deny" => 97,
            b"sameorigin" => 98,
            _ => return None,
        },
        _ => return None,
    })
}

/// The first static entry named `name`.
fn static_name(name: &[u8]) -> Option<u8> {
    Some(match name {
        b":authority" => 0,
        b":path" => 1,
        b"age" => 2,
        b"content-disposition" => 3,
        b"content-length" => 4,
        b"cookie" => 5,
        b"date" => 6,
        b"etag" => 7,
        b"if-modified-since" => 8,
        b"if-none-match" => 9,
        b"last-modified" => 10,
        b"link" => 11,
        b"location" => 12,
        b"referer" => 13,
        b"set-cookie" => 14,
        b":method" => 15,
        b":scheme" => 22,
        b":status" => 24,
        b"accept" => 29,
        b"accept-encoding" => 31,
        b"accept-ranges" => 32,
        b"access-control-allow-headers" => 33,
        b"access-control-allow-origin" => 35,
        b"cache-control" => 36,
        b"content-encoding" => 42,
        b"content-type" => 44,
        b"range" => 55,
        b"strict-transport-security" => 56,
        b"vary" => 59,
        b"x-content-type-options" => 61,
        b"x-xss-protection" => 62,
        b"accept-language" => 72,
        b"access-control-allow-credentials" => 73,
        b"access-control-allow-methods" => 76,
        b"access-control-expose-headers" => 79,
        b"access-control-request-headers" => 80,
        b"access-control-request-method" => 81,
        b"alt-svc" => 83,
        b"authorization" => 84,
        b"content-security-policy" => 85,
        b"early-data" => 86,
        b"expect-ct" => 87,
        b"forwarded" => 88,
        b"if-range" => 89,
        b"origin" => 90,
        b"purpose" => 91,
        b"server" => 92,
        b"timing-allow-origin" => 93,
        b"upgrade-insecure-requests" => 94,
        b"user-agent" => 95,
        b"x-forwarded-for" => 96,
        b"x-frame-options" => 97,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(section: &[u8]) -> Result<Request, Code> {
        let mut req = Request::default();
        req.begin(true, 16 << 10);
        decode(section, &mut req, &mut Vec::new())?;
        req.finish();
        Ok(req)
    }

    #[test]
    fn the_static_table_agrees_with_its_lookups() {
        for (i, &(name, value)) in STATIC.iter().enumerate() {
            assert!(static_name(name).is_some_and(|first| usize::from(first) <= i));
            if !value.is_empty() {
                assert_eq!(static_exact(name, value), Some(i as u8), "{i}");
            }
        }
    }

    #[test]
    fn a_request_from_static_refs_plain_and_huffman_literals() {
        // RFC 9204 B.1's section, plus :method GET, :scheme https and a
        // Huffman-coded :authority "www.example.com" (RFC 7541 C.4.1).
        let mut s = vec![0x00, 0x00, 0xd1, 0xd7, 0x51, 0x0b];
        s.extend_from_slice(b"/index.html");
        s.extend_from_slice(&[0x50, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a]);
        s.extend_from_slice(&[0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff]);
        // A literal name: "x-a: b".
        s.extend_from_slice(&[0x23, b'x', b'-', b'a', 0x01, b'b']);
        let req = decoded(&s).unwrap();
        assert_eq!(req.malformed(), None);
        assert_eq!(req.method(), b"GET");
        assert_eq!(req.path(), Some(&b"/index.html"[..]));
        assert_eq!(req.authority(), Some(&b"www.example.com"[..]));
        assert_eq!(req.fields().collect::<Vec<_>>(), [(&b"x-a"[..], &b"b"[..])]);
    }

    #[test]
    fn a_huffman_coded_name_and_value_share_the_scratch() {
        // A literal name and its value, both "www.example.com" Huffman-
        // coded (RFC 7541 C.4.1): the value's decoding must not overwrite
        // the name's.
        let coded = [
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        let mut s = vec![0x00, 0x00, 0x2f, 0x05];
        s.extend_from_slice(&coded);
        s.push(0x8c);
        s.extend_from_slice(&coded);
        let mut req = Request::default();
        req.begin(true, 16 << 10);
        let mut scratch = Vec::new();
        decode(&s, &mut req, &mut scratch).unwrap();
        let name = &b"www.example.com"[..];
        assert_eq!(req.fields().collect::<Vec<_>>(), [(name, name)]);
    }

    #[test]
    fn dynamic_references_and_truncation_fail_and_bad_fields_are_malformed() {
        let failed = Err(Code::QPACK_DECOMPRESSION_FAILED);
        for s in [
            &[0x01, 0x00][..],               // Required Insert Count 1
            &[0x00, 0x00, 0x80],             // indexed, dynamic
            &[0x00, 0x00, 0x10],             // indexed post-base
            &[0x00, 0x00, 0x40, 0],          // name reference, dynamic
            &[0x00, 0x00, 0xff, 0x40],       // static index 127: past the table
            &[0x00, 0x00, 0x51, 0x05, b'/'], // a value past the end
            &[0x00],
        ] {
            assert_eq!(decoded(s).map(|_| ()), failed, "{s:?}");
        }
        // Connection-specific: decoded, but the request is malformed.
        let mut s = vec![0x00, 0x00, 0xd1, 0xd7, 0xc1];
        s.extend_from_slice(&[0x27, 0x03]);
        s.extend_from_slice(b"connection");
        s.extend_from_slice(&[0x05, b'c', b'l', b'o', b's', b'e']);
        assert!(decoded(&s).unwrap().malformed().is_some());
    }

    #[test]
    fn responses_use_the_table_where_it_has_the_field_or_name() {
        let mut s = Vec::new();
        begin(&mut s);
        status(200, &mut s);
        field(b"accept-ranges", b"bytes", &mut s);
        field(b"content-length", b"1024", &mut s);
        field(b"x-served-by", b"fdwarden", &mut s);
        status(206, &mut s);
        status(418, &mut s);
        let mut want = vec![0x00, 0x00, 0xd9, 0xe0, 0x54, 0x04];
        want.extend_from_slice(b"1024");
        want.extend_from_slice(&[0x27, 0x04]);
        want.extend_from_slice(b"x-served-by");
        want.push(0x08);
        want.extend_from_slice(b"fdwarden");
        // :status 206 is static 65; 418 a literal on :status's name (24).
        want.extend_from_slice(&[0xff, 0x02, 0x5f, 0x09, 0x03]);
        want.extend_from_slice(b"418");
        assert_eq!(s, want);
    }
}
