//! The three dispatch architectures of seed 000 — engine strategies over the same
//! protocol code.

use std::fmt;
use std::str::FromStr;

/// How the engine orders demux and pop for inbound packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Layered logical multiplexing: demux, pop, demux, pop … (seed 000 §3.1).
    #[default]
    Llm,
    /// Direct application association: one demux at the lowest layer finds the
    /// path, then pops along it, in deadline/priority order (§3.2, §4.2).
    Daa,
    /// Integrated layered logical multiplexing: demux through every layer to the
    /// up-boundary, then all pops, with data manipulation fused (§3.3, §4.3).
    Illm,
}

impl Arch {
    /// All architectures, for experiments that compare them.
    pub const ALL: [Arch; 3] = [Arch::Llm, Arch::Daa, Arch::Illm];
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arch::Llm => "llm",
            Arch::Daa => "daa",
            Arch::Illm => "illm",
        })
    }
}

/// An architecture name that is not one of llm, daa, illm.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown architecture '{0}' (want llm, daa or illm)")]
pub struct BadArch(pub String);

impl FromStr for Arch {
    type Err = BadArch;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "llm" => Ok(Arch::Llm),
            "daa" => Ok(Arch::Daa),
            "illm" => Ok(Arch::Illm),
            _ => Err(BadArch(s.into())),
        }
    }
}
