//! The `ddp` entry of the registry: its options and their defaults.

use strata_core::graph::{BuildInfo, Lower, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{GraphError, Protocol};

use super::Ddp;
use super::amt::Entry;

/// The options of `ddp`.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "net",
        doc: "this node's network number (default 65280, the start of the startup range)",
    },
    OptionDoc {
        name: "node",
        doc: "this node's number, 1 to 253 (default: the last byte of the Ethernet address, moved into range)",
    },
    OptionDoc {
        name: "checksum",
        doc: "send and verify DDP checksums unless a session turns them off (default true)",
    },
    OptionDoc {
        name: "amt",
        doc: "address mapping table entries, [\"net.node=mac\", …]; others are gleaned from received datagrams",
    },
    OptionDoc {
        name: "max_sessions",
        doc: "most sockets open at once (default 1024)",
    },
    OptionDoc {
        name: "max_amt",
        doc: "most address mapping table entries gleaned (default 256)",
    },
    OptionDoc {
        name: "amt_timeout",
        doc: "how long a gleaned entry lives unless a datagram from its node refreshes it (default 60s)",
    },
];

/// The registry entry of `ddp`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: "ddp",
    doc: "AppleTalk's Datagram Delivery Protocol, long headers on EtherTalk (Inside AppleTalk ch. 4)",
    options: OPTIONS,
    demux_by_number: true,
    implies_above: &[],
    implies_beside: &[],
    factory: make,
};

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let eth = b
        .lower_proto_except(&["aarp"])
        .ok_or_else(|| b.needs_below("eth"))?;
    // AARP, when the graph puts one beside Ethernet below DDP.
    let aarp = b.lower_of_kind("aarp").and_then(|l| match l.lower {
        Lower::Proto(p) => Some(p),
        _ => None,
    });
    let net: u16 = c.options.get("net")?.unwrap_or(0xff00);
    let node: Option<u8> = c.options.get("node")?;
    if let Some(n) = node
        && !(1..=253).contains(&n)
    {
        return Err(GraphError::BadOption {
            owner: c.options.owner().into(),
            option: "node".into(),
            problem: "must lie between 1 and 253".into(),
        });
    }
    let checksum: bool = c.options.get("checksum")?.unwrap_or(true);
    let amt: Vec<Entry> = c.options.list("amt")?;
    let max_sessions: usize = c.options.get("max_sessions")?.unwrap_or(1024);
    let max_amt: usize = c.options.get("max_amt")?.unwrap_or(256);
    let amt_timeout = c
        .options
        .duration("amt_timeout")?
        .unwrap_or(super::amt::AMT_TIMEOUT);
    if amt_timeout.is_zero() {
        return Err(GraphError::BadOption {
            owner: c.options.owner().into(),
            option: "amt_timeout".into(),
            problem: "must be longer than zero".into(),
        });
    }
    let mut ddp = Ddp::new(eth, net, node, &amt, max_amt, max_sessions);
    ddp.amt.set_timeout(amt_timeout);
    ddp.checksum = checksum;
    ddp.aarp = aarp;
    Ok(Box::new(ddp))
}
