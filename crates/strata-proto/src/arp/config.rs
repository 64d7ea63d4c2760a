//! The `arp` entry of the registry: options, defaults and their checks.

use std::time::Duration;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{GraphError, Protocol};

use super::Arp;
use crate::bad_option;
use crate::cidr::HostAddress;

/// The options of `arp`.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "address",
        doc: "this host's IPv4 address, with or without a prefix, e.g. \"198.18.0.1/24\" (required)",
    },
    OptionDoc {
        name: "timeout",
        doc: "how long a learned address is trusted (default \"60s\")",
    },
    OptionDoc {
        name: "retries",
        doc: "requests sent, one a second, before giving up on an address (default 3)",
    },
    OptionDoc {
        name: "pending",
        doc: "packets held per address being resolved; more are dropped (default 64)",
    },
];

/// The registry entry of `arp`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: "arp",
    doc: "address resolution for IPv4 over Ethernet (RFC 826)",
    options: OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: make,
};

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let eth = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("an Ethernet layer"))?;
    let HostAddress(address) = c.options.require("address")?;
    let timeout = c
        .options
        .duration("timeout")?
        .unwrap_or(Duration::from_secs(60));
    if timeout.is_zero() {
        return Err(bad_option(c, "timeout", "must be longer than zero"));
    }
    let retries: u32 = c.options.get("retries")?.unwrap_or(3);
    if retries == 0 {
        return Err(bad_option(c, "retries", "must be at least 1"));
    }
    // Linux holds about a hundred packets per unresolved neighbour (unres_qlen);
    // 64 lets a burst of fragmented datagrams wait out a lost first request.
    let pending: usize = c.options.get("pending")?.unwrap_or(64);
    Ok(Box::new(Arp::new(eth, address, timeout, retries, pending)))
}
