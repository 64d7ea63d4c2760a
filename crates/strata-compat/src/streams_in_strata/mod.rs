//! STREAMS-in-Strata: STREAMS modules imported unmodified into Strata graphs
//! (seed 004 §3, with Strata as the host).
//!
//! Each module here is a Strata protocol running STREAMS modules — the same
//! source files the native STREAMS subsystem compiles
//! (`streams/atalk/*.rs`) — with a [`StreamsKernel`](crate::streams::StreamsKernel)
//! of its own: a stream per Strata endpoint, TPI primitives for Strata's
//! sessions and pushes, Strata messages copied into `mblk`s and back, and the
//! queues' service procedures run within each Strata call.
//!
//! - [`ddp`]: `ddp@streams`, the STREAMS DDP module over Strata's `eth`.
//! - [`atp`]: `atp@streams`, the STREAMS ATP module over any Strata DDP.

pub mod atp;
pub mod ddp;
pub mod kernel;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{GraphError, Protocol};

use crate::appletalk::ddp::host::Host;

/// The options of `ddp@streams`.
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
        name: "dblks",
        doc: "the module's data block pool (default 8192)",
    },
];

/// The registry entry of `ddp@streams`.
pub const DDP_SPEC: ProtocolSpec = ProtocolSpec {
    kind: "ddp@streams",
    doc: "the STREAMS DDP module (streams/atalk/ddp.rs, unmodified) imported into Strata by encapsulation",
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
    let dblks: usize = c.options.get("dblks")?.unwrap_or(8192);
    Ok(Box::new(ddp::StreamsDdp::new(host, dblks)))
}

/// The options of `atp@streams`: `atp`'s and the module's data block pool.
pub const ATP_OPTIONS: [OptionDoc; crate::appletalk::atp::OPTIONS.len() + 1] =
    crate::appletalk::atp::options_and(OptionDoc {
        name: "dblks",
        doc: "the module's data block pool (default 8192)",
    });

/// The registry entry of `atp@streams`.
pub const ATP_SPEC: ProtocolSpec = ProtocolSpec {
    kind: "atp@streams",
    doc: "the STREAMS ATP module (streams/atalk/atp.rs, unmodified) imported into Strata by encapsulation",
    options: &ATP_OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: atp::make,
};
