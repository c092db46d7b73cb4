//! How the table is built (documentation only).
//!
//! TODO: layout diagram.
