//! The `tcp` entry of the registry: options, their defaults, and the
//! settings every connection of an instance starts from.

use std::time::Duration;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{GraphError, Protocol};

use super::Tcp;
use super::api::Keepalive;
use super::congestion::Algorithm;
use crate::bad_option;

/// The options of `tcp`.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "congestion",
        doc: "congestion control, \"cubic\" (RFC 9438), \"reno\" (RFC 5681/6582) or \"bbr\" (BBR v1, paced) (default \"cubic\")",
    },
    OptionDoc {
        name: "rcvbuf",
        doc: "initial receive buffer, the first window advertised (default \"128KiB\", Linux's tcp_rmem)",
    },
    OptionDoc {
        name: "rcvbuf_max",
        doc: "receive buffer cap for autotuning; also picks the window scale (default \"6MiB\")",
    },
    OptionDoc {
        name: "sndbuf",
        doc: "initial send buffer, raised to twice the initial window (default \"16KiB\", Linux's tcp_wmem)",
    },
    OptionDoc {
        name: "sndbuf_max",
        doc: "send buffer cap for autotuning and for data queued by push (default \"4MiB\")",
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
        doc: "longest an ACK waits for a second segment, at most 200ms (default \"40ms\", Linux's minimum)",
    },
    OptionDoc {
        name: "rto_min",
        doc: "floor of the RTO's variance term (RTO ≥ SRTT + rto_min) (default \"200ms\", as Linux)",
    },
    OptionDoc {
        name: "rto_max",
        doc: "ceiling of the backed-off RTO (default \"60s\")",
    },
    OptionDoc {
        name: "time_wait",
        doc: "how long TIME-WAIT lasts, 2·MSL (default \"60s\", as Linux)",
    },
    OptionDoc {
        name: "fin_timeout",
        doc: "how long a closed session waits in FIN-WAIT-2 for the peer's FIN (default \"60s\")",
    },
    OptionDoc {
        name: "syn_retries",
        doc: "SYN retransmissions before an active open fails with TimedOut (default 6)",
    },
    OptionDoc {
        name: "synack_retries",
        doc: "SYN-ACK retransmissions before a half-open connection is dropped (default 5)",
    },
    OptionDoc {
        name: "retries",
        doc: "retransmissions of one segment before the connection fails with TimedOut (default 15)",
    },
    OptionDoc {
        name: "keepalive",
        doc: "keepalives on for new sessions (default false)",
    },
    OptionDoc {
        name: "keepalive_idle",
        doc: "idle time before the first keepalive probe (default \"7200s\")",
    },
    OptionDoc {
        name: "keepalive_interval",
        doc: "time between unanswered keepalive probes (default \"75s\")",
    },
    OptionDoc {
        name: "keepalive_probes",
        doc: "unanswered probes before the connection fails with TimedOut (default 9)",
    },
    OptionDoc {
        name: "backlog",
        doc: "most connections of one listener in SYN-RECEIVED; more SYNs are dropped, counted (default 128)",
    },
    OptionDoc {
        name: "max_connections",
        doc: "most connections of every state at once (default 65536)",
    },
    OptionDoc {
        name: "checksum",
        doc: "compute and verify checksums (default true)",
    },
    OptionDoc {
        name: "sack",
        doc: "offer selective acknowledgments, RFC 2018 (default true)",
    },
    OptionDoc {
        name: "timestamps",
        doc: "offer timestamps, RFC 7323 (default true)",
    },
    OptionDoc {
        name: "window_scaling",
        doc: "offer window scaling, RFC 7323 (default true)",
    },
];

/// The registry entry of `tcp`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: "tcp",
    doc: "TCP (RFC 9293) with SACK, timestamps, window scaling, CUBIC/NewReno",
    options: OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: make,
};

/// The settings of one TCP instance.
#[derive(Clone, Debug)]
pub struct Config {
    /// Congestion control of new connections.
    pub congestion: Algorithm,
    /// Initial receive buffer.
    pub rcvbuf: usize,
    /// Receive buffer cap.
    pub rcvbuf_max: usize,
    /// Initial send buffer.
    pub sndbuf: usize,
    /// Send buffer cap.
    pub sndbuf_max: usize,
    /// Nagle off by default.
    pub nodelay: bool,
    /// Manual receive flow control by default.
    pub manual_consume: bool,
    /// Delayed-ACK timeout.
    pub delayed_ack: Duration,
    /// RTO variance floor.
    pub rto_min: Duration,
    /// RTO ceiling.
    pub rto_max: Duration,
    /// TIME-WAIT length.
    pub time_wait: Duration,
    /// Orphaned FIN-WAIT-2 timeout.
    pub fin_timeout: Duration,
    /// SYN retransmissions.
    pub syn_retries: u32,
    /// SYN-ACK retransmissions.
    pub synack_retries: u32,
    /// Data retransmissions.
    pub retries: u32,
    /// Keepalive of new sessions.
    pub keepalive: Option<Keepalive>,
    /// Listener backlog.
    pub backlog: usize,
    /// Connection limit.
    pub max_connections: usize,
    /// Checksums on.
    pub checksum: bool,
    /// Offer SACK.
    pub sack: bool,
    /// Offer timestamps.
    pub timestamps: bool,
    /// Offer window scaling.
    pub window_scaling: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            congestion: Algorithm::Cubic,
            rcvbuf: 128 * 1024,
            rcvbuf_max: 6 * 1024 * 1024,
            sndbuf: 16 * 1024,
            sndbuf_max: 4 * 1024 * 1024,
            nodelay: false,
            manual_consume: false,
            delayed_ack: Duration::from_millis(40),
            rto_min: Duration::from_millis(200),
            rto_max: Duration::from_secs(60),
            time_wait: Duration::from_secs(60),
            fin_timeout: Duration::from_secs(60),
            syn_retries: 6,
            synack_retries: 5,
            retries: 15,
            keepalive: None,
            backlog: 128,
            max_connections: 65_536,
            checksum: true,
            sack: true,
            timestamps: true,
            window_scaling: true,
        }
    }
}

fn size(c: &ProtocolConfig, key: &str, default: usize) -> Result<usize, GraphError> {
    let v = c.options.size(key)?.map_or(default, |v| v as usize);
    if v == 0 {
        return Err(bad_option(c, key, "must be at least one byte"));
    }
    Ok(v)
}

/// Reads a config's options over the defaults.
pub fn from_options(c: &ProtocolConfig) -> Result<Config, GraphError> {
    let d = Config::default();
    let o = &c.options;
    let delayed_ack = o.duration("delayed_ack")?.unwrap_or(d.delayed_ack);
    if delayed_ack > Duration::from_millis(200) {
        // RFC 9293 §3.8.6.3 allows up to 0.5 s; 200 ms keeps ACK clocking
        // and the sender's RTO estimate sane, as Linux's ceiling does.
        return Err(bad_option(c, "delayed_ack", "must be at most 200ms"));
    }
    let rcvbuf = size(c, "rcvbuf", d.rcvbuf)?;
    let sndbuf = size(c, "sndbuf", d.sndbuf)?;
    let ka = Keepalive::default();
    let keepalive = o
        .get::<bool>("keepalive")?
        .unwrap_or(false)
        .then_some(Keepalive {
            idle: o.duration("keepalive_idle")?.unwrap_or(ka.idle),
            interval: o.duration("keepalive_interval")?.unwrap_or(ka.interval),
            probes: o.get("keepalive_probes")?.unwrap_or(ka.probes),
        });
    Ok(Config {
        congestion: o.get("congestion")?.unwrap_or(d.congestion),
        rcvbuf,
        rcvbuf_max: size(c, "rcvbuf_max", d.rcvbuf_max)?.max(rcvbuf),
        sndbuf,
        sndbuf_max: size(c, "sndbuf_max", d.sndbuf_max)?.max(sndbuf),
        nodelay: o.get("nodelay")?.unwrap_or(d.nodelay),
        manual_consume: o.get("manual_consume")?.unwrap_or(d.manual_consume),
        delayed_ack,
        rto_min: o.duration("rto_min")?.unwrap_or(d.rto_min),
        rto_max: o.duration("rto_max")?.unwrap_or(d.rto_max),
        time_wait: o.duration("time_wait")?.unwrap_or(d.time_wait),
        fin_timeout: o.duration("fin_timeout")?.unwrap_or(d.fin_timeout),
        syn_retries: o.get("syn_retries")?.unwrap_or(d.syn_retries),
        synack_retries: o.get("synack_retries")?.unwrap_or(d.synack_retries),
        retries: o.get("retries")?.unwrap_or(d.retries),
        keepalive,
        backlog: o.get("backlog")?.unwrap_or(d.backlog),
        max_connections: o.get("max_connections")?.unwrap_or(d.max_connections),
        checksum: o.get("checksum")?.unwrap_or(d.checksum),
        sack: o.get("sack")?.unwrap_or(d.sack),
        timestamps: o.get("timestamps")?.unwrap_or(d.timestamps),
        window_scaling: o.get("window_scaling")?.unwrap_or(d.window_scaling),
    })
}

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let ip = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("ip"))?;
    Ok(Box::new(Tcp::new(ip, from_options(c)?)))
}
