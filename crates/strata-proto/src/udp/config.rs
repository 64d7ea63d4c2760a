//! The `udp` entry of the registry: options and their defaults.

use std::time::Duration;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{GraphError, Protocol};

use super::Udp;

/// The options of `udp`.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "checksum",
        doc: "compute and verify checksums unless a session turns them off (default true)",
    },
    OptionDoc {
        name: "max_sessions",
        doc: "most sessions made by passive opens at once; more peers are dropped (default 4096)",
    },
    OptionDoc {
        name: "idle_timeout",
        doc: "a passively made session closes after this long without traffic (default \"120s\")",
    },
];

/// The registry entry of `udp`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: "udp",
    doc: "UDP with connected, bound and passively opened sessions (RFC 768)",
    options: OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: make,
};

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let ip = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("ip"))?;
    let checksum: bool = c.options.get("checksum")?.unwrap_or(true);
    let max_sessions: usize = c.options.get("max_sessions")?.unwrap_or(4096);
    let idle = c
        .options
        .duration("idle_timeout")?
        .unwrap_or(Duration::from_secs(120));
    Ok(Box::new(Udp::new(ip, checksum, max_sessions, idle)))
}
