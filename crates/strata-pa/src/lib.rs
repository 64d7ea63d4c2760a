//! # strata-pa
//!
//! Seed 003 (van Renesse, the Horus Protocol Accelerator): a per-connection
//! accelerator between the application and an ordinary Strata stack, so that a
//! stack of small canonical-form layers runs at the speed of one fused protocol.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod field;

pub use field::{ByteOrder, Class, FieldHandle, Layout, LayoutBuilder, LayoutError};
pub mod accel;
pub mod filter;
pub mod layer;
pub mod layered;
pub mod pack;
pub mod preamble;
pub mod runner;
pub mod stack;

/// Registers `pa` and the four `hp-*` layers of the paper's stack.
pub fn register(reg: &mut strata_core::Registry) {
    reg.register_protocol(accel::SPEC);
    for spec in layered::SPECS {
        reg.register_protocol(spec);
    }
}
pub mod example;
