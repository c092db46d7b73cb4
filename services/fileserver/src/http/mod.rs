//! Pure HTTP pieces: request parsing, path normalization, ranges,
//! preconditions, dates and content types. No I/O; each is fuzzable.

pub mod conditional;
pub mod date;
pub mod mime;
pub mod path;
pub mod range;
pub mod request;
pub mod response;
