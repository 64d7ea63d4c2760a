//! The registry of protocol factories and link kinds, by name (gVisor's
//! registration, the x-kernel's protocol table): nobody hard-codes a `match` over
//! protocol kinds.

use std::collections::BTreeMap;

use super::GraphError;
use super::build::BuildInfo;
use super::config::{Options, ProtocolConfig};
use super::numbers::NumberTable;
use crate::upi::Protocol;

/// A documented option.
#[derive(Clone, Copy, Debug)]
pub struct OptionDoc {
    /// The key.
    pub name: &'static str,
    /// What it does, with its form and default.
    pub doc: &'static str,
}

/// Makes a protocol from its config.
pub type Factory = fn(&ProtocolConfig, &BuildInfo) -> Result<Box<dyn Protocol>, GraphError>;

/// How to make one kind of protocol.
#[derive(Clone, Copy)]
pub struct ProtocolSpec {
    /// The kind name used in configs and stack specs.
    pub kind: &'static str,
    /// One line on what it is.
    pub doc: &'static str,
    /// The options it accepts.
    pub options: &'static [OptionDoc],
    /// True when it demultiplexes upward by a protocol number, so every protocol
    /// placed above it needs a number in its space.
    pub demux_by_number: bool,
    /// Protocols a stack spec adds above it (ICMP above IP).
    pub implies_above: &'static [&'static str],
    /// Protocols a stack spec adds beside it, on its lower layer and among its
    /// lowers (ARP beside IP).
    pub implies_beside: &'static [&'static str],
    /// The factory.
    pub factory: Factory,
}

/// Checks a link's option values when a graph is built, so a bad value is refused
/// with the graph rather than when the driver starts.
pub type LinkValidator = fn(&Options) -> Result<(), GraphError>;

/// One kind of link (driver).
#[derive(Clone, Copy, Debug)]
pub struct LinkSpec {
    /// The kind name used in configs.
    pub kind: &'static str,
    /// One line on what it is.
    pub doc: &'static str,
    /// The options it accepts.
    pub options: &'static [OptionDoc],
    /// Checks the option values (names are checked against `options` anyway).
    pub validate: Option<LinkValidator>,
}

/// Protocol factories, link kinds and the protocol-number table.
#[derive(Clone, Default)]
pub struct Registry {
    protocols: BTreeMap<&'static str, ProtocolSpec>,
    links: BTreeMap<&'static str, LinkSpec>,
    numbers: NumberTable,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a protocol kind (replacing one of the same name).
    pub fn register_protocol(&mut self, spec: ProtocolSpec) {
        self.protocols.insert(spec.kind, spec);
    }

    /// Registers a link kind.
    pub fn register_link(&mut self, spec: LinkSpec) {
        self.links.insert(spec.kind, spec);
    }

    /// The protocol kind called `kind`.
    pub fn protocol(&self, kind: &str) -> Option<&ProtocolSpec> {
        self.protocols.get(kind)
    }

    /// The link kind called `kind`.
    pub fn link(&self, kind: &str) -> Option<&LinkSpec> {
        self.links.get(kind)
    }

    /// All protocol kinds.
    pub fn protocols(&self) -> impl Iterator<Item = &ProtocolSpec> {
        self.protocols.values()
    }

    /// All link kinds.
    pub fn links(&self) -> impl Iterator<Item = &LinkSpec> {
        self.links.values()
    }

    /// The protocol-number table.
    pub fn numbers(&self) -> &NumberTable {
        &self.numbers
    }

    /// The protocol-number table, for adding entries.
    pub fn numbers_mut(&mut self) -> &mut NumberTable {
        &mut self.numbers
    }

    pub(super) fn known_protocols(&self) -> String {
        self.protocols
            .keys()
            .copied()
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub(super) fn known_links(&self) -> String {
        self.links.keys().copied().collect::<Vec<_>>().join(", ")
    }
}
