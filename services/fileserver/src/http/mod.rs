//! The daemon's own pure HTTP pieces: HTTP/1.1 request-head parsing, the
//! forwarded client address and the PROXY protocol header before them. The file semantics (paths, ranges,
//! preconditions, the response plan and its encoding) are the `httpfile`
//! crate's. No I/O; each is fuzzable.

pub mod forwarded;
pub mod proxy_protocol;
pub mod request;
