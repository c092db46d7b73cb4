//! The daemon's PROXY protocol reader (`fileserver::http::proxy_protocol`),
//! which a balancer's peer reaches before any other byte.
//!
//! Input: the bytes at the start of a connection.
//!
//! Checked: `parse` never panics; a complete header is no longer than
//! what was read, reads the same from exactly its own bytes, and every
//! shorter prefix of it is "more needed" (so a reader that peeks never
//! refuses a header that is still arriving, nor consumes the client's
//! first bytes); a refused input stays refused with more bytes after it.
#![no_main]

use fileserver::http::proxy_protocol::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match parse(data) {
        Ok(Some(h)) => {
            assert!(h.len <= data.len() && h.len > 0);
            assert_eq!(parse(&data[..h.len]), Ok(Some(h)));
            for cut in 0..h.len {
                assert_eq!(parse(&data[..cut]), Ok(None), "a prefix of {} octets", cut);
            }
        }
        Ok(None) => {}
        Err(e) => {
            let mut more = data.to_vec();
            more.extend_from_slice(b"\r\n\r\n more bytes");
            assert!(parse(&more).is_err(), "{e:?} then accepted with more bytes");
        }
    }
});
