//! `h3wire`'s readers fed arbitrary bytes in arbitrary pieces: a request
//! stream through `HeadReader` (its section then through
//! `qpack::decode` into an `h2wire::Request`), and a control stream
//! through `ControlReader`.
//!
//! Input: one octet for the field-section limit (0-255, times 16), then
//! the stream's bytes; the octets at the cut points choose where the
//! pieces end (each piece 1-16 octets of the rest).
//!
//! Checked:
//! - a request stream read in pieces comes to what it comes to read
//!   whole: the same section, the same refusal, or "more" for both;
//! - a section is never longer than the limit, and is a slice of what
//!   was sent; the reader's buffer never holds more than the limit and a
//!   frame header beyond what a single piece brought;
//! - a control stream read in pieces gives the same error or the same
//!   last GOAWAY as read whole;
//! - a decoded request's fields are within the list-size limit (or it is
//!   `too_large`), and a request that is not malformed has a method.
#![no_main]

use h3wire::{qpack, ControlReader, Head, HeadReader};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq)]
enum Read {
    More,
    Section(Vec<u8>),
    TooLarge,
    Refused(h3wire::Code),
}

fn read(r: &mut HeadReader, bytes: &[u8], max: usize) -> Read {
    match r.receive(bytes, max) {
        Ok(Head::More) => Read::More,
        Ok(Head::Section(s)) => {
            assert!(s.len() <= max, "a section over the limit");
            Read::Section(s.to_vec())
        }
        Ok(Head::TooLarge) => Read::TooLarge,
        Err(c) => Read::Refused(c),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&limit, rest)) = data.split_first() else {
        return;
    };
    let max = usize::from(limit) * 16;
    let whole = read(&mut HeadReader::default(), rest, max);
    let mut r = HeadReader::default();
    let mut pieces = Read::More;
    let mut at = 0;
    while at < rest.len() {
        let n = 1 + usize::from(rest[at] % 16);
        let end = (at + n).min(rest.len());
        pieces = read(&mut r, &rest[at..end], max);
        at = end;
        if pieces != Read::More {
            break;
        }
    }
    assert_eq!(whole, pieces, "pieces and whole disagree");
    if let Read::Section(section) = &whole {
        let mut req = h2wire::Request::default();
        req.begin(false, max);
        if qpack::decode(section, &mut req, &mut Vec::new()).is_ok() {
            req.finish();
            if req.malformed().is_none() && !req.too_large() {
                assert!(!req.method().is_empty());
            }
        }
    }

    let control_whole = ControlReader::default().receive(rest);
    let mut c = ControlReader::default();
    let cut = usize::from(limit).min(rest.len());
    let control_pieces = c
        .receive(&rest[..cut])
        .and_then(|first| Ok(c.receive(&rest[cut..])?.or(first)));
    assert_eq!(control_whole, control_pieces, "control pieces and whole disagree");
});
