//! A concurrent path cache (work in progress).
#![deny(missing_docs)]
