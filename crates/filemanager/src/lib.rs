//! Runtime-level file management (work in progress).
#![deny(missing_docs)]
