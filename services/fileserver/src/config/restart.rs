//! The mark a table file puts beside each key the daemon reads once, at
//! start; `reload` gathers them.

/// A key read once, at start.
#[derive(Clone, Copy, Debug)]
pub struct Restart {
    /// The dotted key; a table's name is the whole table, and
    /// `sites[].root` is that field of every `[[sites]]`.
    pub key: &'static str,
    /// The keys a change of it keeps as started (itself when empty): a
    /// group read together, as a listener with its certificate.
    pub keeps: &'static [&'static str],
}

impl Restart {
    /// A key kept alone.
    pub(super) const fn key(key: &'static str) -> Restart {
        Restart { key, keeps: &[] }
    }

    /// The keys a change of it keeps.
    pub(super) fn kept(&self) -> &[&'static str] {
        if self.keeps.is_empty() {
            std::slice::from_ref(&self.key)
        } else {
            self.keeps
        }
    }
}
