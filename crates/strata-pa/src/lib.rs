//! # strata-pa
//!
//! Seed 003 (van Renesse, the Horus Protocol Accelerator): a per-connection
//! accelerator between the application and an ordinary Strata stack, so that a
//! stack of small canonical-form layers runs at the speed of one fused protocol.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod field;

pub use field::{ByteOrder, Class, FieldHandle, Layout, LayoutBuilder, LayoutError};
pub mod filter;
pub mod preamble;
