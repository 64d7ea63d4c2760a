//! The `aarp` entry of the registry: options, defaults and their checks.

use std::time::Duration;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{GraphError, Protocol};

use super::Aarp;

/// The options of `aarp`.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "net",
        doc: "this node's network number (default 65280, as ddp's)",
    },
    OptionDoc {
        name: "node",
        doc: "the node number to probe for first, 1 to 253 (default: the last byte of the Ethernet address, moved into range, as ddp's)",
    },
    OptionDoc {
        name: "timeout",
        doc: "how long a learned address is trusted (default \"10s\")",
    },
    OptionDoc {
        name: "retries",
        doc: "requests sent, 200 ms apart, before giving up on a node (default 10)",
    },
    OptionDoc {
        name: "pending",
        doc: "datagrams held per node being resolved; more are dropped (default 16)",
    },
    OptionDoc {
        name: "max_entries",
        doc: "most nodes in the address mapping table (default 256)",
    },
];

/// The registry entry of `aarp`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: "aarp",
    doc: "AppleTalk address resolution on EtherTalk: probe, request/response, aging table (Inside AppleTalk ch. 2)",
    options: OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: make,
};

fn bad(c: &ProtocolConfig, option: &str, problem: &str) -> GraphError {
    GraphError::BadOption {
        owner: c.options.owner().into(),
        option: option.into(),
        problem: problem.into(),
    }
}

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let eth = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("eth"))?;
    let net: u16 = c.options.get("net")?.unwrap_or(0xff00);
    let node: Option<u8> = c.options.get("node")?;
    if node.is_some_and(|n| !(1..=253).contains(&n)) {
        return Err(bad(c, "node", "must lie between 1 and 253"));
    }
    let timeout = c
        .options
        .duration("timeout")?
        .unwrap_or(Duration::from_secs(10));
    if timeout.is_zero() {
        return Err(bad(c, "timeout", "must be longer than zero"));
    }
    let retries: u32 = c.options.get("retries")?.unwrap_or(10);
    if retries == 0 {
        return Err(bad(c, "retries", "must be at least 1"));
    }
    let pending: usize = c.options.get("pending")?.unwrap_or(16);
    let max_entries: usize = c.options.get("max_entries")?.unwrap_or(256);
    Ok(Box::new(Aarp::new(
        eth,
        net,
        node,
        timeout,
        retries,
        pending,
        max_entries,
    )))
}
