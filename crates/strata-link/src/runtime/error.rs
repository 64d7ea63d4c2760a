//! Why a runtime could not start or had to stop.

use std::io;

use crate::drivers::DriverError;
use crate::pcap::CaptureError;

/// A runtime that could not start, or stopped on an error.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A link's driver could not be opened.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// The engine has no link of that name.
    #[error("no link '{link}' (links: {known})")]
    NoSuchLink {
        /// The name asked for.
        link: String,
        /// The engine's links.
        known: String,
    },
    /// A capture file could not be created.
    #[error("capture of link '{link}': {source}")]
    Capture {
        /// The link.
        link: String,
        /// Why.
        source: CaptureError,
    },
    /// The event loop or a driver failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// The runtime's thread panicked.
    #[error("the runtime thread panicked")]
    Panicked,
}

impl RuntimeError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> RuntimeError {
        RuntimeError::Io {
            what: what.into(),
            source,
        }
    }
}
