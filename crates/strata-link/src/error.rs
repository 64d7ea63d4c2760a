//! The errors of wiring hosts together.

use strata_core::GraphError;

use crate::pcap::CaptureError;

/// Why a host, wire or capture could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The host's graph has no link of that name.
    #[error("host '{host}' has no link '{link}' (its links: {known})")]
    NoSuchLink {
        /// The host.
        host: String,
        /// The missing link.
        link: String,
        /// The links it has.
        known: String,
    },
    /// The link is already wired to something.
    #[error("host '{host}': link '{link}' is already connected")]
    LinkInUse {
        /// The host.
        host: String,
        /// The link.
        link: String,
    },
    /// The link's config names a different kind of driver.
    #[error("host '{host}': link '{link}' is of kind '{kind}', not '{wanted}'")]
    WrongKind {
        /// The host.
        host: String,
        /// The link.
        link: String,
        /// Its configured kind.
        kind: String,
        /// The kind this wiring needs.
        wanted: &'static str,
    },
    /// The two ends of one wire configure it differently.
    #[error("the two ends of a wire disagree: '{a}' says {a_params}, '{b}' says {b_params}")]
    Disagreement {
        /// One end, as host:link.
        a: String,
        /// Its settings.
        a_params: String,
        /// The other end.
        b: String,
        /// Its settings.
        b_params: String,
    },
    /// A link option has a bad value.
    #[error(transparent)]
    Config(#[from] GraphError),
    /// A capture file could not be written.
    #[error("capture of host '{host}' link '{link}': {source}")]
    Capture {
        /// The host.
        host: String,
        /// The link.
        link: String,
        /// What went wrong.
        source: CaptureError,
    },
}
