//! Whatever a client sends, in whatever pieces: no panic, buffers
//! bounded by the limit, and a head read in pieces equals the head read
//! whole.

use h3wire::{qpack, ControlReader, Head, HeadReader};
use proptest::prelude::*;

const MAX: usize = 256;

/// Cases per property: `FUZZ_CASES` when set (`scripts/fuzz.sh`).
fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn arbitrary_request_streams_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600),
                                             cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
        let whole = match HeadReader::default().receive(&bytes, MAX) {
            Ok(Head::Section(s)) => Ok(Some(s.to_vec())),
            Ok(Head::TooLarge) => Ok(None),
            Ok(Head::More) => Err(None),
            Err(c) => Err(Some(c)),
        };
        let mut r = HeadReader::default();
        let mut at = 0;
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        points.push(bytes.len());
        points.sort_unstable();
        let mut pieces = Err(None);
        for p in points {
            let got = r.receive(&bytes[at..p], MAX);
            at = p;
            match got {
                Ok(Head::More) => continue,
                Ok(Head::Section(s)) => pieces = Ok(Some(s.to_vec())),
                Ok(Head::TooLarge) => pieces = Ok(None),
                Err(c) => pieces = Err(Some(c)),
            }
            break;
        }
        prop_assert_eq!(&whole, &pieces);
        if let Ok(Some(section)) = pieces {
            let mut req = h2wire::Request::default();
            req.begin(false, MAX);
            let _ = qpack::decode(&section, &mut req, &mut Vec::new());
            req.finish();
        }
    }

    #[test]
    fn arbitrary_control_streams_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600),
                                             cut in any::<usize>()) {
        let whole = ControlReader::default().receive(&bytes);
        let mut c = ControlReader::default();
        let cut = cut % (bytes.len() + 1);
        let pieces = c
            .receive(&bytes[..cut])
            .and_then(|first| Ok(c.receive(&bytes[cut..])?.or(first)));
        prop_assert_eq!(whole, pieces);
    }

    #[test]
    fn response_sections_decode_back(fields in proptest::collection::vec(
        (prop_oneof!["x-[a-z]{1,12}", "(content-type|etag|date|vary|accept-ranges|server|cache-control)"],
         "[!-~]([ -~]{0,38}[!-~])?"), 0..8), status in 100u16..600) {
        let mut section = Vec::new();
        qpack::begin(&mut section);
        for (n, v) in &fields {
            qpack::field(n.as_bytes(), v.as_bytes(), &mut section);
        }
        let mut req = h2wire::Request::default();
        req.begin(true, 1 << 20);
        qpack::decode(&section, &mut req, &mut Vec::new()).unwrap();
        let back: Vec<(String, String)> = req
            .fields()
            .map(|(n, v)| (String::from_utf8_lossy(n).into(), String::from_utf8_lossy(v).into()))
            .collect();
        prop_assert_eq!(back, fields);
        // A status, from the table or not, decodes back to `:status`: a
        // request's reader takes it for a response's pseudo-header.
        let mut s = Vec::new();
        qpack::begin(&mut s);
        qpack::status(status, &mut s);
        let mut req = h2wire::Request::default();
        req.begin(true, 1 << 20);
        qpack::decode(&s, &mut req, &mut Vec::new()).unwrap();
        prop_assert_eq!(req.malformed(), Some("an unknown or response pseudo-header field"));
    }
}
