//! In-engine applications (callback anchors, seed 000 §4.1) that hosts, commands
//! and benchmarks share: servers a host can run (`udp_echo`, `udp_discard`,
//! `tcp_echo`, `tcp_discard`, `http`), clients that drive a test (`ping`,
//! `udp_client`, `udp_blast` with its `udp_sink`, `udp_rtt`).
//!
//! Each runs inside the engine with no thread crossing on its data path. Each
//! has an `install` that adds it to an engine and opens its sessions; what it
//! learns is read back with `Engine::app` (through an `EngineHandle` when the
//! engine runs on a runtime thread), or, for the interactive clients, streamed
//! through a bounded channel as it happens.

pub mod http;
pub mod ping;
pub mod tcp_discard;
pub mod tcp_echo;
pub mod transfer;
pub mod udp_blast;
pub mod udp_client;
pub mod udp_discard;
pub mod udp_echo;
pub mod udp_rtt;
pub mod udp_sink;

use strata_core::{Engine, ProtoId, UpiError};

/// The first protocol of kind `kind` in the engine's graph (whatever its
/// instance name).
pub fn proto_of_kind(engine: &Engine, kind: &str) -> Result<ProtoId, UpiError> {
    engine
        .nodes()
        .iter()
        .position(|n| n.kind == kind)
        .map(|i| ProtoId(i as u16))
        .ok_or_else(|| UpiError::NoSuchObject(format!("a protocol of kind '{kind}'")))
}

/// The protocol an IPv4 layer of the engine's graph hands TCP segments to
/// (IP protocol 6): Strata's `tcp`, or a TCP imported from another stack
/// (`smoltcp-tcp`, which answers the same operations, `strata_proto::tcp::api`).
/// The applications and the socket layer find their TCP this way, so they
/// run over either.
pub fn tcp_of(engine: &Engine) -> Result<ProtoId, UpiError> {
    engine
        .nodes()
        .iter()
        .filter(|n| n.kind == "ip")
        .find_map(
            |n| match n.upper_for(u32::from(strata_proto::tcp::wire::PROTOCOL)) {
                Some(strata_core::Upper::Proto(p)) => Some(p),
                _ => None,
            },
        )
        .ok_or_else(|| UpiError::NoSuchObject("a TCP above ip (tcp or smoltcp-tcp)".into()))
}

/// Implements the `as_any` pair of [`strata_core::App`] for a type.
macro_rules! any_app {
    () => {
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }

        fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
            self
        }
    };
}
pub(crate) use any_app;

#[cfg(test)]
mod tests;
