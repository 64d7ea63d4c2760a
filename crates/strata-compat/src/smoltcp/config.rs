//! The `smoltcp-tcp` entry of the registry: its options, their defaults, and
//! how each becomes a setting of smoltcp's sockets.
//!
//! smoltcp has fewer settings than Strata's `tcp` (no buffer autotuning, no
//! retry counts, one keep-alive interval): each option here is one smoltcp
//! has, named as Strata's `tcp` names it where the two mean the same.

use std::time::Duration;

use smoltcp::socket::tcp::CongestionControl;
use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{GraphError, Protocol};

use super::SmolTcp;

/// The registry name.
pub const KIND: &str = "smoltcp-tcp";

/// The options of `smoltcp-tcp`.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "rcvbuf",
        doc: "receive ring of each connection, fixed (smoltcp does not autotune); also picks the window scale (default \"256KiB\")",
    },
    OptionDoc {
        name: "sndbuf",
        doc: "send ring of each connection, fixed (default \"256KiB\")",
    },
    OptionDoc {
        name: "congestion",
        doc: "smoltcp's congestion control, \"cubic\", \"reno\" or \"none\" (default \"cubic\")",
    },
    OptionDoc {
        name: "nodelay",
        doc: "turn Nagle's algorithm off for new sessions (default false)",
    },
    OptionDoc {
        name: "manual_consume",
        doc: "new sessions use manual receive flow control (tcp::Consumed) (default false)",
    },
    OptionDoc {
        name: "delayed_ack",
        doc: "smoltcp's ACK delay, \"0s\" for none (default \"10ms\", smoltcp's own)",
    },
    OptionDoc {
        name: "timestamps",
        doc: "offer timestamps, RFC 7323, clocked by the engine (default true)",
    },
    OptionDoc {
        name: "timeout",
        doc: "smoltcp's user timeout: a connection whose peer is silent this long while it waits for an answer is aborted (default \"120s\")",
    },
    OptionDoc {
        name: "keepalive",
        doc: "keepalives on for new sessions, every keepalive_interval (default false)",
    },
    OptionDoc {
        name: "keepalive_interval",
        doc: "time between keep-alive probes of an idle connection (default \"75s\")",
    },
    OptionDoc {
        name: "backlog",
        doc: "most connections of one listener in SYN-RECEIVED; more SYNs are dropped, counted (default 128)",
    },
    OptionDoc {
        name: "max_connections",
        doc: "most connections of every state at once, each with its two rings (default 4096)",
    },
];

/// The registry entry of `smoltcp-tcp`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: KIND,
    doc: "smoltcp's TCP (the crate as published) imported through an encapsulation module",
    options: OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: make,
};

/// The largest ring smoltcp takes: its window scale stops at 2^30.
const RING_MAX: usize = 1 << 30;

/// The settings of one `smoltcp-tcp` instance.
#[derive(Clone, Debug)]
pub struct Config {
    /// Receive ring size.
    pub rcvbuf: usize,
    /// Send ring size.
    pub sndbuf: usize,
    /// Congestion control of new connections.
    pub congestion: CongestionControl,
    /// Nagle off by default.
    pub nodelay: bool,
    /// Manual receive flow control by default.
    pub manual_consume: bool,
    /// smoltcp's ACK delay.
    pub delayed_ack: Option<Duration>,
    /// Timestamps on.
    pub timestamps: bool,
    /// smoltcp's user timeout.
    pub timeout: Option<Duration>,
    /// Keep-alive interval of new sessions.
    pub keepalive: Option<Duration>,
    /// Listener backlog.
    pub backlog: usize,
    /// Connection limit.
    pub max_connections: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            rcvbuf: 256 * 1024,
            sndbuf: 256 * 1024,
            congestion: CongestionControl::Cubic,
            nodelay: false,
            manual_consume: false,
            delayed_ack: Some(Duration::from_millis(10)),
            timestamps: true,
            timeout: Some(Duration::from_secs(120)),
            keepalive: None,
            backlog: 128,
            max_connections: 4096,
        }
    }
}

fn bad(c: &ProtocolConfig, option: &str, problem: &str) -> GraphError {
    GraphError::BadOption {
        owner: c.options.owner().into(),
        option: option.into(),
        problem: problem.into(),
    }
}

fn ring(c: &ProtocolConfig, key: &str, default: usize) -> Result<usize, GraphError> {
    let v = c.options.size(key)?.map_or(default, |v| v as usize);
    if v == 0 || v > RING_MAX {
        return Err(bad(c, key, "must be between one byte and 1GiB"));
    }
    Ok(v)
}

/// Reads a config's options over the defaults.
pub fn from_options(c: &ProtocolConfig) -> Result<Config, GraphError> {
    let d = Config::default();
    let o = &c.options;
    let congestion = match o.text("congestion")?.as_deref() {
        None | Some("cubic") => CongestionControl::Cubic,
        Some("reno") => CongestionControl::Reno,
        Some("none") => CongestionControl::None,
        Some(_) => return Err(bad(c, "congestion", "want \"cubic\", \"reno\" or \"none\"")),
    };
    let nonzero = |d: Option<Duration>| d.filter(|d| !d.is_zero());
    let interval = o
        .duration("keepalive_interval")?
        .unwrap_or(Duration::from_secs(75));
    Ok(Config {
        rcvbuf: ring(c, "rcvbuf", d.rcvbuf)?,
        sndbuf: ring(c, "sndbuf", d.sndbuf)?,
        congestion,
        nodelay: o.get("nodelay")?.unwrap_or(d.nodelay),
        manual_consume: o.get("manual_consume")?.unwrap_or(d.manual_consume),
        delayed_ack: match o.duration("delayed_ack")? {
            Some(v) => nonzero(Some(v)),
            None => d.delayed_ack,
        },
        timestamps: o.get("timestamps")?.unwrap_or(d.timestamps),
        timeout: match o.duration("timeout")? {
            Some(v) => nonzero(Some(v)),
            None => d.timeout,
        },
        keepalive: o
            .get::<bool>("keepalive")?
            .unwrap_or(false)
            .then_some(interval),
        backlog: o.get("backlog")?.unwrap_or(d.backlog),
        max_connections: o.get("max_connections")?.unwrap_or(d.max_connections),
    })
}

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let ip = b
        .lower_of_kind("ip")
        .and_then(|l| match l.lower {
            strata_core::graph::Lower::Proto(p) => Some(p),
            strata_core::graph::Lower::Link(_) => None,
        })
        .ok_or_else(|| b.needs_below("ip"))?;
    Ok(Box::new(SmolTcp::new(ip, from_options(c)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(options: &[(&str, toml::Value)]) -> Result<Config, GraphError> {
        let mut c = ProtocolConfig::new(KIND, &["ip"]);
        for (k, v) in options {
            c.options.set(k, v.clone());
        }
        from_options(&c)
    }

    #[test]
    fn options_become_smoltcp_settings_and_nonsense_is_refused() {
        let c = config(&[
            ("rcvbuf", "1MiB".into()),
            ("congestion", "reno".into()),
            ("delayed_ack", "0s".into()),
            ("keepalive", true.into()),
        ])
        .unwrap();
        assert_eq!(c.rcvbuf, 1 << 20);
        assert_eq!(c.congestion, CongestionControl::Reno);
        assert_eq!(c.delayed_ack, None, "zero turns the delay off");
        assert_eq!(c.keepalive, Some(Duration::from_secs(75)));
        assert!(config(&[("congestion", "bbr".into())]).is_err());
        assert!(config(&[("rcvbuf", "2GiB".into())]).is_err());
        assert!(config(&[("sndbuf", 0.into())]).is_err());
    }
}
