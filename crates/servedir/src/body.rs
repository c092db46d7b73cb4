//! The response body: nothing, bytes already in memory (a message, a
//! listing, a cached small file as a `Bytes` that shares the cache's copy),
//! or ranges of a file read through the manager in bounded chunks.
//!
//! ```text
//! Body::File { segments: [Bytes(part head), Range(a..b), Bytes(part head), Range(c..d), Bytes(closing)] }
//!   poll_frame: a Bytes segment is sent as it is; a Range is read `chunk` bytes at a time
//!   (one read in flight: the client's pace is the reader's pace), each read checked for
//!   length, and the last one, with one statx, for the file still being the version the
//!   head described
//! ```

use bytes::Bytes;
use filemanager::{CachedFile, FileManager};
use http_body::{Frame, SizeHint};
use httpfile::ByteRange;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

/// A boxed error, as `http_body` users expect.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

type Read = Pin<Box<dyn Future<Output = io::Result<Bytes>> + Send>>;

/// The body of a [`ServeDir`](crate::ServeDir) response.
pub struct Body(Kind);

enum Kind {
    Empty,
    Full(Option<Bytes>),
    File(Box<FileBody>),
    Boxed(http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>),
}

pub(crate) enum Segment {
    Bytes(Bytes),
    Range(ByteRange),
}

pub(crate) struct FileBody {
    fm: FileManager,
    file: Arc<CachedFile>,
    segments: VecDeque<Segment>,
    /// Bytes of the body not yet yielded.
    remaining: u64,
    /// Bytes of the file's ranges not yet read.
    unread: u64,
    /// The most one read asks for.
    chunk: usize,
    reading: Option<(Read, usize)>,
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.0 {
            Kind::Empty => "empty",
            Kind::Full(_) => "full",
            Kind::File(_) => "file",
            Kind::Boxed(_) => "boxed",
        };
        f.debug_tuple("Body").field(&kind).finish()
    }
}

impl Body {
    /// An empty body.
    pub fn empty() -> Body {
        Body(Kind::Empty)
    }

    /// A body of `bytes`.
    ///
    /// ```
    /// use http_body::Body as _;
    /// let body = servedir::Body::full("hello");
    /// assert_eq!(body.size_hint().exact(), Some(5));
    /// ```
    pub fn full(bytes: impl Into<Bytes>) -> Body {
        Body(Kind::Full(Some(bytes.into())))
    }

    /// Any other body (a fallback service's), boxed.
    pub fn new<B>(body: B) -> Body
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        use http_body_util::BodyExt;
        Body(Kind::Boxed(body.map_err(Into::into).boxed_unsync()))
    }

    pub(crate) fn file(
        fm: FileManager,
        file: Arc<CachedFile>,
        segments: VecDeque<Segment>,
        chunk: usize,
    ) -> Body {
        let (mut remaining, mut unread) = (0, 0);
        for s in &segments {
            match s {
                Segment::Bytes(b) => remaining += b.len() as u64,
                Segment::Range(r) => {
                    remaining += r.len();
                    unread += r.len();
                }
            }
        }
        Body(Kind::File(Box::new(FileBody {
            fm,
            file,
            segments,
            remaining,
            unread,
            chunk: chunk.max(1),
            reading: None,
        })))
    }
}

impl FileBody {
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>> {
        loop {
            if let Some((read, want)) = &mut self.reading {
                let want = *want;
                let result = ready!(read.as_mut().poll(cx));
                self.reading = None;
                let bytes = result?;
                if bytes.len() != want {
                    return Poll::Ready(Some(Err("file shrank while it was sent".into())));
                }
                self.remaining -= want as u64;
                self.unread -= want as u64;
                // A file rewritten in place since the head was planned would
                // go out as a mix of versions under the old validators. One
                // check before the last bytes suffices (the watcher's word,
                // else a statx): a change at any earlier point shows in it,
                // and the body then ends short (the client sees fewer bytes
                // than Content-Length), never complete with mixed contents.
                // Per chunk it was 8 per MiB.
                if self.unread == 0 && !self.fm.contents_unchanged(&self.file) {
                    return Poll::Ready(Some(Err("file changed while it was sent".into())));
                }
                return Poll::Ready(Some(Ok(bytes)));
            }
            match self.segments.front_mut() {
                None => return Poll::Ready(None),
                Some(Segment::Bytes(_)) => {
                    let Some(Segment::Bytes(b)) = self.segments.pop_front() else {
                        unreachable!("front was a Bytes segment")
                    };
                    self.remaining -= b.len() as u64;
                    return Poll::Ready(Some(Ok(b)));
                }
                Some(Segment::Range(r)) => {
                    if r.is_empty() {
                        self.segments.pop_front();
                        continue;
                    }
                    let len = (r.len().min(self.chunk as u64)) as usize;
                    let offset = r.start;
                    r.start += len as u64;
                    let (fm, file) = (self.fm.clone(), self.file.clone());
                    let read: Read = Box::pin(async move { fm.read_at(&*file, offset, len).await });
                    self.reading = Some((read, len));
                }
            }
        }
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.get_mut().0 {
            Kind::Empty => Poll::Ready(None),
            Kind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Kind::File(f) => f.poll_next(cx).map(|r| r.map(|r| r.map(Frame::data))),
            Kind::Boxed(b) => Pin::new(b).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Kind::Empty => true,
            Kind::Full(bytes) => bytes.is_none(),
            Kind::File(f) => f.remaining == 0 && f.reading.is_none(),
            Kind::Boxed(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Kind::Empty => SizeHint::with_exact(0),
            Kind::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::File(f) => SizeHint::with_exact(f.remaining),
            Kind::Boxed(b) => b.size_hint(),
        }
    }
}
