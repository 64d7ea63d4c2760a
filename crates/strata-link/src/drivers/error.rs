//! Why a driver could not be opened.

use std::io;

use strata_core::GraphError;

/// A driver that could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The link's options are wrong.
    #[error(transparent)]
    Config(#[from] GraphError),
    /// The link's kind has no real device (a simulated or in-memory link).
    #[error("link '{link}': kind '{kind}' has no driver on real links (want tap, packet or udp)")]
    NotReal {
        /// The link.
        link: String,
        /// Its kind.
        kind: String,
    },
    /// A system call failed while setting the device up.
    #[error("{what}: {source}")]
    Setup {
        /// What was being done, naming the device.
        what: String,
        /// The error.
        source: io::Error,
    },
}

impl DriverError {
    /// A setup error: `what` failed with `source`.
    pub fn setup(what: impl Into<String>, source: io::Error) -> DriverError {
        DriverError::Setup {
            what: what.into(),
            source,
        }
    }
}
