//! Directory listings: a directory's entries rendered as the request asks
//! (HTML or JSON, filtered and sorted), without the names a guard keeps
//! from this client.

use crate::Decider;
use filemanager::Listing;
use httpfile::listing::{ListingEntry, ListingFormat, ListingView, Page};

impl Decider<'_, '_> {
    /// `listing` of the directory at `path` beneath the mount
    /// (`redirect_base`), rendered in the form the request asks for (HTML
    /// or JSON), filtered and sorted as its query says. The page names the
    /// URL path the client asked for (`/{base}/{path}/`); its links are
    /// relative, so they hold under any mount.
    pub(crate) fn listing_page(&self, listing: &Listing, path: &str) -> Page {
        let req = self.head;
        let rel_dir = path;
        let base = self.options.redirect_base.trim_matches('/');
        let shown;
        let path = if base.is_empty() {
            path
        } else {
            shown = [base, path].join("/");
            shown.trim_end_matches('/')
        };
        // Names a guard keeps from this client are not shown.
        let guarded = self.options.rules.has_guards();
        let mut child = String::new();
        let mut shown = |name: &str| {
            !guarded || {
                child.clear();
                if !rel_dir.is_empty() {
                    child.push_str(rel_dir);
                    child.push('/');
                }
                child.push_str(name);
                self.permits(&child)
            }
        };
        let kept: Vec<_> = listing.entries.iter().filter(|e| shown(&e.name)).collect();
        let entries = kept.iter().map(|e| ListingEntry {
            name: &e.name,
            is_dir: e.is_dir(),
            size: e.size,
            mtime_secs: e.mtime_secs(),
        });
        let view = ListingView::of(req);
        Page::render(
            ListingFormat::of(req),
            &view,
            path,
            entries,
            listing.truncated,
        )
    }
}
