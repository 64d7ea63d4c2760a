//! The protocol graph: which protocols a host runs and which sits on which
//! (the x-kernel's graph.comp, seed 000 §4.1), as data rather than code.
//!
//! A graph comes from a TOML config (`[link.NAME]` and `[protocol.NAME]` tables) or
//! from a one-line stack spec such as `udp/ip/eth`. Protocols are made by factories
//! looked up by kind in a [`Registry`]; each demultiplexing layer finds its upper
//! protocols through a protocol-number table. Building validates the whole graph
//! and names the culprit of any mistake.

mod build;
mod config;
mod numbers;
mod registry;
mod show;
mod spec;

pub use build::{BuildInfo, Built, LowerInfo, build};
pub use config::{GraphConfig, LinkConfig, Options, ProtocolConfig};
pub use numbers::NumberTable;
pub use registry::{LinkSpec, LinkValidator, OptionDoc, ProtocolSpec, Registry};
pub use show::{to_dot, to_text};
pub use spec::from_spec;

use crate::ids::{AppId, LinkId, ProtoId, Upper};

/// What sits directly below a protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lower {
    /// A protocol.
    Proto(ProtoId),
    /// A link (driver anchor).
    Link(LinkId),
}

/// One protocol of a built graph.
#[derive(Clone, Debug)]
pub struct Node {
    /// Instance name from the config.
    pub name: String,
    /// Protocol kind (the factory it was made by).
    pub kind: String,
    /// What sits below, in config order.
    pub lowers: Vec<Lower>,
    /// Who sits above, by this protocol's number for them.
    pub above: Vec<(u32, Upper)>,
}

impl Node {
    /// The upper protocol or application registered under `number`.
    pub fn upper_for(&self, number: u32) -> Option<Upper> {
        self.above
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, u)| *u)
    }

    /// The number `upper` is registered under.
    pub fn number_of(&self, upper: Upper) -> Option<u32> {
        self.above
            .iter()
            .find(|(_, u)| *u == upper)
            .map(|(n, _)| *n)
    }

    /// Applications bound to this protocol by number.
    pub fn bound_apps(&self) -> impl Iterator<Item = (u32, AppId)> + '_ {
        self.above.iter().filter_map(|(n, u)| match u {
            Upper::App(a) => Some((*n, *a)),
            Upper::Proto(_) => None,
        })
    }
}

/// One link of a built graph.
#[derive(Clone, Debug)]
pub struct LinkNode {
    /// Instance name from the config.
    pub name: String,
    /// Driver kind ("sim", "tap", "packet", "udp" …).
    pub kind: String,
    /// The driver's options, for whoever attaches the driver.
    pub options: Options,
    /// The protocol that sits on the link.
    pub upper: ProtoId,
}

/// A mistake in a graph, naming its culprit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// The config is not valid TOML or has the wrong shape.
    #[error("graph config: {0}")]
    Syntax(String),
    /// A protocol kind no factory is registered for.
    #[error("protocol '{name}': unknown protocol kind '{kind}' (known: {known})")]
    UnknownProtocol {
        /// The instance.
        name: String,
        /// Its kind.
        kind: String,
        /// The kinds that exist.
        known: String,
    },
    /// A link kind no driver exists for.
    #[error("link '{name}': unknown link kind '{kind}' (known: {known})")]
    UnknownLink {
        /// The instance.
        name: String,
        /// Its kind.
        kind: String,
        /// The kinds that exist.
        known: String,
    },
    /// A `below` entry names nothing.
    #[error("protocol '{name}': below names '{below}', which is neither a protocol nor a link")]
    UnknownBelow {
        /// The protocol.
        name: String,
        /// The missing name.
        below: String,
    },
    /// A protocol with nothing below it.
    #[error("protocol '{0}': nothing below it (give below = [\"...\"])")]
    NothingBelow(String),
    /// The same name is used twice.
    #[error("'{0}' names both a link and a protocol")]
    DuplicateName(String),
    /// Protocols sit on each other in a circle.
    #[error("protocol graph has a cycle: {}", .0.join(" → "))]
    Cycle(Vec<String>),
    /// A link with no protocol on it, or more than one.
    #[error("link '{link}': {problem}")]
    LinkUse {
        /// The link.
        link: String,
        /// What is wrong.
        problem: String,
    },
    /// A required option is missing.
    #[error("{owner}: missing option '{option}'")]
    MissingOption {
        /// "protocol 'ip'" or "link 'net0'".
        owner: String,
        /// The option.
        option: String,
    },
    /// An option has a bad value or is not known.
    #[error("{owner}: option '{option}': {problem}")]
    BadOption {
        /// "protocol 'ip'" or "link 'net0'".
        owner: String,
        /// The option.
        option: String,
        /// What is wrong.
        problem: String,
    },
    /// A demultiplexing protocol has no number for a protocol placed above it.
    #[error(
        "protocol '{upper}' sits on '{lower}', but '{lower}' has no number for it (add it to the number table or give numbers.{lower_kind} = N)"
    )]
    NoNumber {
        /// The upper protocol.
        upper: String,
        /// The lower protocol.
        lower: String,
        /// The lower protocol's kind.
        lower_kind: String,
    },
    /// Two protocols above one share a number.
    #[error("protocols '{first}' and '{second}' both use number {number:#x} in '{lower}'")]
    NumberClash {
        /// The lower protocol.
        lower: String,
        /// The number.
        number: u32,
        /// One user.
        first: String,
        /// The other.
        second: String,
    },
    /// A stack spec that does not parse.
    #[error("stack spec '{spec}': {problem}")]
    BadSpec {
        /// The spec.
        spec: String,
        /// What is wrong.
        problem: String,
    },
}
