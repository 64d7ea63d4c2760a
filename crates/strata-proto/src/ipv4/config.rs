//! The `ip` entry of the registry: options, defaults and their checks.

use std::net::Ipv4Addr;
use std::time::Duration;

use strata_core::graph::{BuildInfo, Lower, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{GraphError, Protocol};

use super::Ipv4;
use super::reassembly::Limits;
use super::route::{Route, RouteTable};
use crate::{Ipv4Cidr, bad_option};

/// The options of `ip`.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "address",
        doc: "this host's address and on-link prefix, e.g. \"198.18.0.1/24\" (required)",
    },
    OptionDoc {
        name: "gateway",
        doc: "the default route's gateway, on-link (optional)",
    },
    OptionDoc {
        name: "routes",
        doc: "static routes, e.g. [\"198.18.4.0/24 via 198.18.0.254\"] (optional)",
    },
    OptionDoc {
        name: "ttl",
        doc: "time to live of sent datagrams, 1 to 255 (default 64)",
    },
    OptionDoc {
        name: "reassembly_timeout",
        doc: "how long a fragmented datagram may take to complete (default \"30s\")",
    },
    OptionDoc {
        name: "reassembly_buffers",
        doc: "most datagrams being reassembled at once (default 64)",
    },
    OptionDoc {
        name: "reassembly_bytes",
        doc: "most bytes held for reassembly in total (default \"1MB\")",
    },
];

/// The registry entry of `ip`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: "ip",
    doc: "IPv4 for a host (RFC 791, RFC 1122)",
    options: OPTIONS,
    demux_by_number: true,
    implies_above: &["icmp"],
    implies_beside: &["arp"],
    factory: make,
};

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let link = b
        .lower_proto_except(&["arp"])
        .ok_or_else(|| b.needs_below("a link layer such as eth"))?;
    let arp = match b.lower_of_kind("arp").map(|l| l.lower) {
        Some(Lower::Proto(p)) => p,
        _ => return Err(b.needs_below("arp")),
    };
    let cidr: Ipv4Cidr = c.options.require("address")?;
    let gateway: Option<Ipv4Addr> = c.options.get("gateway")?;
    let routes: Vec<Route> = c.options.list("routes")?;
    let table = RouteTable::new(cidr, gateway, &routes).map_err(|e| {
        let culprit = if routes.is_empty() {
            "gateway"
        } else {
            "routes"
        };
        bad_option(c, culprit, e)
    })?;
    let ttl: u8 = c.options.get("ttl")?.unwrap_or(64);
    if ttl == 0 {
        // RFC 1122 §3.2.1.7: a host must not send a datagram with TTL zero.
        return Err(bad_option(c, "ttl", "must be at least 1"));
    }
    let limits = Limits {
        timeout: c
            .options
            .duration("reassembly_timeout")?
            .unwrap_or(Duration::from_secs(30)),
        datagrams: c.options.get("reassembly_buffers")?.unwrap_or(64),
        bytes: c
            .options
            .size("reassembly_bytes")?
            .map_or(1_000_000, |b| usize::try_from(b).unwrap_or(usize::MAX)),
    };
    Ok(Box::new(Ipv4::new(link, arp, cidr, table, ttl, limits)))
}
