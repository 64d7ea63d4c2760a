//! # strata
//!
//! The crate Strata's users depend on. It gathers the core (messages, the UPI, the
//! engine), the protocols, and the links, and adds what an application needs:
//!
//! - [`registry`] — every protocol and link kind Strata knows, for graph configs;
//! - [`HostBuilder`] — a host's engine from a stack spec (`udp/ip/eth`) or a config;
//! - the callback API — implement [`App`] and run inside the engine ([`apps`] has
//!   ready-made ones);
//! - the blocking API — [`UdpSocket`], [`TcpListener`] and [`TcpStream`] on a
//!   host running on its own thread: a [`Network`] (the in-memory network in
//!   real time) or a runtime on real links;
//! - [`xport`] — seed 001's transport over the kernel's UDP: [`xport::XportListener`]
//!   and [`xport::XportStream`];
//! - [`xport_stack`] — the same transport as the protocol node `xport` over
//!   Strata's own UDP (`xport/udp/ip/eth`), with [`xport_stack::StackStream`];
//!   [`xport::Stream`] is the one API of both streams, for code that runs
//!   over either.
//!
//! Start with `HostBuilder` and the examples in this crate's tests.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod apps;
mod host;
mod network;
mod socket;
pub mod xport;
pub mod xport_sim;
pub mod xport_stack;

pub use host::{HostBuilder, HostParams, Stack};
pub use network::Network;
pub use socket::{DEFAULT_BACKLOG, TcpListener, TcpStream, UdpSocket};
pub use strata_core::{
    Addr, App, AppCx, AppEvent, AppId, Arch, Control, Counters, DropReason, Engine, EngineConfig,
    GraphConfig, GraphError, HwAddr, Instant, LinkId, Message, PacketMeta, Participants, ProtoId,
    Qos, Registry, SessionRef, UpiError,
};
pub use strata_proto::Ipv4Cidr;
pub use {strata_core as core, strata_link as link, strata_proto as proto};

/// Every protocol and link kind Strata knows, with the protocol-number table.
pub fn registry() -> Registry {
    let mut reg = Registry::new();
    strata_proto::register(&mut reg);
    strata_link::register_links(&mut reg);
    strata_compat::smoltcp::register(&mut reg);
    strata_compat::appletalk::register(&mut reg);
    xport_stack::register(&mut reg);
    reg
}

/// What can go wrong building or running a host.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The graph is wrong.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A UPI call failed.
    #[error(transparent)]
    Upi(#[from] UpiError),
    /// A link could not be set up.
    #[error(transparent)]
    Link(#[from] strata_link::LinkError),
}
