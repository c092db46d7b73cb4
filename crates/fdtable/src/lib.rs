//! A sharded user-level descriptor table (work in progress).
#![deny(missing_docs)]
