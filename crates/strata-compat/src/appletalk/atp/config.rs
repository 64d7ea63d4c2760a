//! The `atp` entry of the registry: its options and their defaults.

use std::time::Duration;

use strata_core::graph::{BuildInfo, OptionDoc, ProtocolConfig, ProtocolSpec};
use strata_core::{GraphError, Protocol};

use super::Atp;
use crate::appletalk::wire::atp::TRelTimeout;

/// `atp`'s options and one more (an imported ATP's pool size): the list a
/// const can hold, `N` being `OPTIONS.len() + 1`.
pub const fn options_and<const N: usize>(extra: OptionDoc) -> [OptionDoc; N] {
    let mut out = [extra; N];
    let mut i = 0;
    while i < OPTIONS.len() && i + 1 < N {
        out[i] = OPTIONS[i];
        i += 1;
    }
    out
}

/// The options of `atp`.
pub const OPTIONS: &[OptionDoc] = &[
    OptionDoc {
        name: "xo",
        doc: "requests are exactly-once (XO) transactions (default true)",
    },
    OptionDoc {
        name: "trel_timeout",
        doc: "how long a responder keeps an XO transaction's responses: 30s, 1m, 2m, 4m or 8m as seconds (default \"30s\")",
    },
    OptionDoc {
        name: "retry_interval",
        doc: "a request not answered in full this long is sent again (default \"2s\")",
    },
    OptionDoc {
        name: "retries",
        doc: "how many times a request is sent again before the transaction fails (default 32)",
    },
    OptionDoc {
        name: "max_transactions",
        doc: "most transactions outstanding per session, each side (default 64)",
    },
    OptionDoc {
        name: "max_sessions",
        doc: "most sessions, requesters and passively made responders (default 1024)",
    },
];

/// The registry entry of `atp`.
pub const SPEC: ProtocolSpec = ProtocolSpec {
    kind: "atp",
    doc: "AppleTalk Transaction Protocol: exactly-once transactions over DDP (Inside AppleTalk ch. 9)",
    options: OPTIONS,
    demux_by_number: false,
    implies_above: &[],
    implies_beside: &[],
    factory: make,
};

/// ATP's settings.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Requests are XO.
    pub xo: bool,
    /// The TRel timeout asked for in XO requests.
    pub trel: TRelTimeout,
    /// Time between a request's sends.
    pub retry_interval: Duration,
    /// Resends before a transaction fails.
    pub retries: u32,
    /// Outstanding transactions per session.
    pub max_transactions: usize,
    /// Sessions.
    pub max_sessions: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            xo: true,
            trel: TRelTimeout::Sec30,
            retry_interval: Duration::from_secs(2),
            retries: 32,
            max_transactions: 64,
            max_sessions: 1024,
        }
    }
}

impl Settings {
    /// From `atp`'s options (the imported ATPs take the same).
    pub fn from_config(c: &ProtocolConfig) -> Result<Settings, GraphError> {
        let d = Settings::default();
        let trel = match c.options.duration("trel_timeout")? {
            None => d.trel,
            Some(t) => (0..=4)
                .filter_map(TRelTimeout::from_bits)
                .find(|v| v.duration() == t)
                .ok_or_else(|| GraphError::BadOption {
                    owner: c.options.owner().into(),
                    option: "trel_timeout".into(),
                    problem: "must be 30s, 60s, 120s, 240s or 480s".into(),
                })?,
        };
        Ok(Settings {
            xo: c.options.get("xo")?.unwrap_or(d.xo),
            trel,
            retry_interval: c
                .options
                .duration("retry_interval")?
                .unwrap_or(d.retry_interval),
            retries: c.options.get("retries")?.unwrap_or(d.retries),
            max_transactions: c
                .options
                .get("max_transactions")?
                .unwrap_or(d.max_transactions),
            max_sessions: c.options.get("max_sessions")?.unwrap_or(d.max_sessions),
        })
    }
}

fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let ddp = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("ddp"))?;
    Ok(Box::new(Atp::new(ddp, Settings::from_config(c)?)))
}
