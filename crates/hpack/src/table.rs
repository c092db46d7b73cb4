//! The static table (RFC 7541 Appendix A) and the decoder's dynamic table
//! (RFC 7541 2.3.2, 4).
//!
//! ```text
//! index  1 ..= 61   static            62 ..            dynamic, newest first
//!                                      [newest, ..., oldest]  evicted from the back
//! ```

use std::collections::VecDeque;

/// RFC 7541 Appendix A: (name, value), index 1 first.
pub(crate) const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// What an entry costs beyond its octets (RFC 7541 4.1).
pub(crate) const ENTRY_OVERHEAD: usize = 32;

/// The decoder's dynamic table: entries newest first, within `max_size`.
#[derive(Debug, Default)]
pub(crate) struct Dynamic {
    /// Name and value in one allocation; the name's length beside it.
    entries: VecDeque<(Box<[u8]>, usize)>,
    /// Sum of the entries' sizes (octets + 32 each).
    size: usize,
    max_size: usize,
}

impl Dynamic {
    pub(crate) fn new(max_size: usize) -> Dynamic {
        Dynamic {
            entries: VecDeque::new(),
            size: 0,
            max_size,
        }
    }

    /// The entry at dynamic index `i` (0: the newest).
    pub(crate) fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.entries.get(i).map(|(e, n)| e.split_at(*n))
    }

    /// Adds `entry` (name then value, the name `name_len` long) as the
    /// newest, evicting the oldest until it fits; one larger than the
    /// whole table empties it and is not added (RFC 7541 4.4).
    pub(crate) fn insert(&mut self, entry: Box<[u8]>, name_len: usize) {
        let size = entry.len() + ENTRY_OVERHEAD;
        self.evict_to(self.max_size.saturating_sub(size));
        if size <= self.max_size {
            self.size += size;
            self.entries.push_front((entry, name_len));
        }
    }

    /// A dynamic table size update (RFC 7541 6.3), already checked against
    /// the limit the decoder announced.
    /// The size in force: the peer's last size update, or the first limit.
    pub(crate) fn max_size(&self) -> usize {
        self.max_size
    }

    pub(crate) fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
    }

    fn evict_to(&mut self, bound: usize) {
        while self.size > bound {
            let Some((e, _)) = self.entries.pop_back() else {
                break;
            };
            self.size -= e.len() + ENTRY_OVERHEAD;
        }
    }

    #[cfg(test)]
    pub(crate) fn size(&self) -> usize {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, value: &str) -> (Box<[u8]>, usize) {
        let mut v = name.as_bytes().to_vec();
        v.extend_from_slice(value.as_bytes());
        (v.into_boxed_slice(), name.len())
    }

    #[test]
    fn evicts_the_oldest_and_refuses_what_cannot_fit() {
        let mut t = Dynamic::new(100);
        let (a, n) = entry("a", "1111111111"); // 43
        t.insert(a, n);
        let (b, n) = entry("b", "2222222222"); // 43
        t.insert(b, n);
        assert_eq!(t.size(), 86);
        let (c, n) = entry("c", "3"); // 34: "a" goes
        t.insert(c, n);
        assert_eq!(t.get(0), Some((&b"c"[..], &b"3"[..])));
        assert_eq!(t.get(1), Some((&b"b"[..], &b"2222222222"[..])));
        assert_eq!(t.get(2), None);
        assert_eq!(t.size(), 77);
        let (big, n) = entry("big", &"x".repeat(80)); // 115 > 100: empties
        t.insert(big, n);
        assert_eq!((t.get(0), t.size()), (None, 0));
        let (d, n) = entry("d", "4");
        t.insert(d, n);
        t.set_max_size(0);
        assert_eq!((t.get(0), t.size()), (None, 0));
    }
}
