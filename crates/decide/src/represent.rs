//! The representation a file is sent in: a precompressed sibling or a
//! compressed variant made of it, its coding, entity-tag and whether it
//! varies by `Accept-Encoding`, with its preconditions evaluated once;
//! and a [`Decision`]'s answer rendered as a [`Plan`].

use crate::{codec, Answer, Decider, Decision, Representation};
use filemanager::ResolvedFile;
use httpfile::conditional::Precondition;
use httpfile::mime::{AcceptEncoding, ContentCoding};
use httpfile::plan::{self, Plan};
use httpfile::{ByteRange, EntityTag, RequestHead};

impl Decider<'_, '_> {
    /// A file's own entity-tag: by size and time, or by a digest of its
    /// bytes (`content_etag`; by size and time when it cannot be read whole).
    async fn identity_tag(&self, file: &filemanager::CachedFile) -> EntityTag {
        if self.options.content_etag {
            match self.fm.content_digest(file).await {
                Ok(d) => return EntityTag::of_digest(&d),
                Err(e) => tracing::debug!(path = file.path(), "tagged by time: {e}"),
            }
        }
        EntityTag::of_file(file.meta().size, file.meta().mtime_ns)
    }

    /// The representation of `f` that the request gets, its preconditions
    /// evaluated once against the tag it goes out with.
    ///
    /// Compression, when the options compress the file's type and size and no
    /// sibling is served: every response varies by `Accept-Encoding`, identity
    /// ones too; the coding `accept` prefers is made now or taken from the
    /// kept variant (see [`CompressionOptions`](crate::CompressionOptions) for why the request waits). A
    /// request that revalidates the variant (`If-None-Match` with its tag)
    /// gets its `304` from the tag alone: no compression runs for it, even
    /// when the variant was evicted. A failed compression (the file changed
    /// while it was read) leaves the file to be sent as it is.
    pub(crate) async fn represent(
        &self,
        accept: &AcceptEncoding,
        f: ResolvedFile,
    ) -> Representation {
        let (fm, options, head) = (self.fm, self.options, self.head);
        let ResolvedFile {
            file,
            sibling,
            mime,
        } = f;
        let sibling_coding = sibling.map(|i| ContentCoding::PREFERENCE[i]);
        // A path that names a sibling itself is one file, not a negotiation.
        let is_sibling_path = || {
            ContentCoding::PREFERENCE
                .iter()
                .any(|c| file.path().ends_with(c.suffix()))
        };
        let vary = options.precompressed && (sibling.is_some() || !is_sibling_path());
        let compression = options
            .compression
            .as_ref()
            .filter(|c| sibling.is_none() && c.applies(mime, file.meta().size));
        let etag = self.identity_tag(&file).await;
        let mut r = Representation {
            variant: None,
            coding: sibling_coding,
            vary: vary || compression.is_some(),
            mime,
            etag,
            precondition: Precondition::Proceed { use_range: false },
            now: httpfile::date::now_secs(),
            file,
        };
        let chosen = compression.and_then(|c| Some((c, accept.choose(&c.codings)?)));
        let Some((c, coding)) = chosen else {
            r.precondition = plan::file_precondition(head, &r.info(), r.now);
            return r;
        };
        // The variant's tag is known before its bytes: evaluate with it first.
        r.coding = Some(coding);
        r.etag = r.etag.with_coding(coding);
        r.precondition = plan::file_precondition(head, &r.info(), r.now);
        if r.precondition == Precondition::NotModified {
            return r;
        }
        match fm.variant(&r.file, codec(coding), c.level(coding)).await {
            Ok(Some(v)) => {
                if r.precondition != Precondition::Failed && !head.is_head() {
                    fm.count_variant_served(&r.file, &v);
                }
                r.variant = Some(v);
            }
            outcome => {
                if let Err(e) = outcome {
                    tracing::debug!(path = r.file.path(), "not compressed: {e}");
                }
                // Sent as it is: its own tag, evaluated again (rare).
                r.coding = None;
                r.etag = self.identity_tag(&r.file).await;
                r.precondition = plan::file_precondition(head, &r.info(), r.now);
            }
        }
        r
    }
}

impl Decision<'_> {
    /// The plan of the answer alone, before the rules' header edits and
    /// `Location`.
    pub(crate) fn answer_plan<'s>(
        &'s self,
        head: &RequestHead<'_>,
        ranges: &'s mut Vec<ByteRange>,
    ) -> Plan<'s> {
        match (&self.answer, self.status) {
            (Answer::File(r), Some(status)) => {
                // An error page: the whole file, no validators or ranges
                // (they would describe the page, not the missing resource).
                let bare = RequestHead {
                    method: head.method,
                    ..RequestHead::default()
                };
                let mut p = plan::file_evaluated(
                    &bare,
                    &r.info(),
                    &self.policy,
                    r.now,
                    Precondition::Proceed { use_range: false },
                    ranges,
                    plan::random_boundary,
                );
                p.status = status;
                p.headers.etag = None;
                p.headers.last_modified = None;
                p.headers.accept_ranges = false;
                p
            }
            (Answer::Plan(p), _) => **p,
            (Answer::NotFound, _) => plan::error(head.method, 404, ""),
            (Answer::File(r), None) => plan::file_evaluated(
                head,
                &r.info(),
                &self.policy,
                r.now,
                r.precondition,
                ranges,
                plan::random_boundary,
            ),
            (Answer::Listing(page), _) => plan::listing(head, page, &self.policy),
        }
    }
}
