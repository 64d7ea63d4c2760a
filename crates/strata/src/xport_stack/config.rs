//! The `xport` entry of the registry: the transport's settings as options
//! of the graph node.

use std::time::Duration;

use strata_core::graph::{BuildInfo, Lower, OptionDoc, Options, ProtocolConfig, ProtocolSpec};
use strata_core::{GraphError, Protocol};
use strata_xport::{Config, RecoveryPolicy};

use super::XportNode;

/// The registry name.
pub const KIND: &str = "xport";

/// The options of `xport`.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "data_sockets",
        doc: "UDP data ports each end opens beside its control port, 1–16 (default 1)",
    },
    OptionDoc {
        name: "recovery",
        doc: "error recovery the receiver asks for: go-back-n, selective or adaptive (default adaptive)",
    },
    OptionDoc {
        name: "rate_control",
        doc: "pace data at cwnd / SRTT (default true)",
    },
    OptionDoc {
        name: "data_checksum",
        doc: "put XTP's data checksum on data packets (default false)",
    },
    OptionDoc {
        name: "app_buffer",
        doc: "application buffer size proposed at set-up (default \"1MB\")",
    },
    OptionDoc {
        name: "receive_buffer",
        doc: "the receive buffering reported to the peer in place of a socket buffer (default \"8MB\")",
    },
    OptionDoc {
        name: "idle_timeout",
        doc: "a peer silent this long has vanished (default \"10s\")",
    },
    OptionDoc {
        name: "backlog",
        doc: "set-ups a listener holds before the application takes them (default 64)",
    },
    OptionDoc {
        name: "deterministic",
        doc: "connection ids and sequence numbers from the engine's seed alone, for reproducible simulations (default false: mixed with the OS's randomness)",
    },
    OptionDoc {
        name: "max_ends",
        doc: "connections and listeners open at once; more opens are refused (default 64)",
    },
];

/// The registry entry of `xport`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: KIND,
    doc: "seed 001's transport (strata-xport) over udp: a control port and data ports per end",
    options: OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: make,
};

/// What the node needs beyond the transport's own [`Config`].
#[derive(Clone, Debug)]
pub struct Settings {
    /// Both ends' protocol settings.
    pub config: Config,
    /// Data ports per end.
    pub data_sockets: u8,
    /// Set-ups a listener holds for the application.
    pub backlog: usize,
    /// Connections plus listeners, at most.
    pub max_ends: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            config: Config {
                socket_buffer: 8 << 20,
                ..Config::default()
            },
            data_sockets: 1,
            backlog: 64,
            max_ends: 64,
        }
    }
}

/// A recovery policy by the name the options and the command line use.
pub fn parse_recovery(s: &str) -> Result<RecoveryPolicy, String> {
    match s {
        "go-back-n" | "gbn" => Ok(RecoveryPolicy::GoBackN),
        "selective" => Ok(RecoveryPolicy::Selective),
        "adaptive" => Ok(RecoveryPolicy::Adaptive),
        _ => Err(format!("{s}: expected go-back-n, selective or adaptive")),
    }
}

fn bad(o: &Options, key: &str, problem: impl std::fmt::Display) -> GraphError {
    GraphError::BadOption {
        owner: o.owner().to_string(),
        option: key.into(),
        problem: problem.to_string(),
    }
}

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    // UDP by name when the layer below holds more (`xport/udp+tcp/ip/eth`:
    // a host whose applications use TCP too).
    let udp = match b.lower_of_kind("udp").map(|l| &l.lower) {
        Some(Lower::Proto(p)) => *p,
        _ => b
            .lower_proto_except(&["tcp", "smoltcp-tcp"])
            .ok_or_else(|| b.needs_below("udp"))?,
    };
    let o = &c.options;
    let mut s = Settings::default();
    let data_sockets: u8 = o.get("data_sockets")?.unwrap_or(1);
    if !(1..=16).contains(&data_sockets) {
        return Err(bad(o, "data_sockets", "must be 1 to 16"));
    }
    s.data_sockets = data_sockets;
    if let Some(r) = o.get::<String>("recovery")? {
        s.config.recovery = parse_recovery(&r).map_err(|e| bad(o, "recovery", e))?;
    }
    s.config.rate_control = o.get("rate_control")?.unwrap_or(true);
    s.config.data_checksum = o.get("data_checksum")?.unwrap_or(false);
    let size = |key: &str, default: u64| -> Result<u32, GraphError> {
        let v = o.size(key)?.unwrap_or(default);
        u32::try_from(v)
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| bad(o, key, "must be 1 byte to 4 GB"))
    };
    s.config.app_buffer = size("app_buffer", 1 << 20)?;
    s.config.socket_buffer = size("receive_buffer", 8 << 20)?;
    s.config.idle_timeout = o
        .duration("idle_timeout")?
        .unwrap_or(Duration::from_secs(10));
    s.backlog = o.get("backlog")?.unwrap_or(64).max(1);
    s.max_ends = o.get("max_ends")?.unwrap_or(64).max(1);
    let salt = if o.get("deterministic")?.unwrap_or(false) {
        0
    } else {
        unpredictable()
    };
    Ok(Box::new(XportNode::new(udp, s, salt)))
}

/// A number an off-path sender cannot guess (std's hasher keys come from the OS).
pub(super) fn unpredictable() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::Instant::now().elapsed().as_nanos());
    h.finish()
}
