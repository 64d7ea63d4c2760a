//! BSD-in-Strata: protocols written for the BSD subsystem, imported
//! unmodified into Strata graphs (seed 004 §3, with Strata as the host).
//!
//! Each module here is a Strata protocol wrapping one BSD protocol switch
//! entry — the same source file the native BSD subsystem compiles
//! (`bsd/netatalk/*.rs`) — and a [`BsdKernel`](crate::bsd::BsdKernel) of its
//! own that translates: Strata sessions to BSD sockets, Strata messages to
//! mbuf chains and back, Strata's pushes to `if_output`, what the protocol
//! appends to a socket to a delivery up the graph.
//!
//! - [`ddp`]: `ddp@bsd`, BSD's DDP over Strata's `eth`.
//! - [`atp`]: `atp@bsd`, BSD's ATP over any Strata DDP.

pub mod atp;
pub mod ddp;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{GraphError, Protocol};

use crate::appletalk::ddp::host::Host;

/// The options of `ddp@bsd`.
pub const DDP_OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "net",
        doc: "this node's network number (default 65280)",
    },
    OptionDoc {
        name: "node",
        doc: "this node's number, 1 to 253 (default: from the Ethernet address)",
    },
    OptionDoc {
        name: "amt",
        doc: "address mapping table entries, [\"net.node=mac\", …]",
    },
    OptionDoc {
        name: "max_sessions",
        doc: "most Strata sessions at once (default 1024)",
    },
    OptionDoc {
        name: "mbufs",
        doc: "the module's mbuf pool: small mbufs, and as many clusters (default 4096)",
    },
];

/// The registry entry of `ddp@bsd`.
pub const DDP_SPEC: ProtocolSpec = ProtocolSpec {
    kind: "ddp@bsd",
    doc: "BSD's DDP (bsd/netatalk/ddp.rs, unmodified) imported into Strata by encapsulation",
    options: DDP_OPTIONS,
    demux_by_number: true,
    implies_above: &[],
    implies_beside: &[],
    factory: make_ddp,
};

fn make_ddp(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let eth = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("eth"))?;
    let host = Host::from_config(c, eth)?;
    let mbufs: usize = c.options.get("mbufs")?.unwrap_or(4096);
    Ok(Box::new(ddp::BsdDdp::new(host, mbufs)))
}

/// The options of `atp@bsd`: `atp`'s and the module's mbuf pool.
pub const ATP_OPTIONS: [OptionDoc; crate::appletalk::atp::OPTIONS.len() + 1] =
    crate::appletalk::atp::options_and(OptionDoc {
        name: "mbufs",
        doc: "the module's mbuf pool: small mbufs, and as many clusters (default 4096)",
    });

/// The registry entry of `atp@bsd`.
pub const ATP_SPEC: ProtocolSpec = ProtocolSpec {
    kind: "atp@bsd",
    doc: "BSD's ATP (bsd/netatalk/atp.rs, unmodified) imported into Strata by encapsulation",
    options: &ATP_OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: atp::make,
};

/// A Strata message holding a copy of mbuf chain `m` (one copy, none more).
pub(crate) fn message_of(m: &crate::bsd::mbuf::Mbuf) -> strata_core::Message {
    match m.next() {
        None => strata_core::Message::from_slice(m.data()),
        Some(_) => strata_core::Message::from(m.to_vec()),
    }
}
