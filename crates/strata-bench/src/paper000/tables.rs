//! Seed 000 Tables 1–3: the ping-pong round trip over each stack, under LLM, DAA
//! and ILLM, for 1 to 1400 bytes, beside the paper's figures.

use anyhow::Result;
use strata::Arch;

use crate::rtt::{RttRow, RttSetup, rtt_mem};

/// The payload sizes of the paper's tables.
pub const SIZES: [usize; 5] = [1, 100, 500, 1000, 1400];

/// One row of the paper: its table, stack and round trips in milliseconds.
pub struct PaperRow {
    /// 1, 2 or 3.
    pub table: u8,
    /// The architecture the paper ran.
    pub arch: Arch,
    /// Strata's stack spec for the row.
    pub stack: &'static str,
    /// The paper's figures, ms, for `SIZES`.
    pub ms: [f64; 5],
}

/// The paper's three tables (1994 hardware, 10 Mb/s Ethernet).
pub const PAPER: &[PaperRow] = &[
    PaperRow {
        table: 1,
        arch: Arch::Llm,
        stack: "eth",
        ms: [0.88, 1.01, 2.09, 3.44, 4.51],
    },
    PaperRow {
        table: 1,
        arch: Arch::Llm,
        stack: "ip/eth",
        ms: [1.04, 1.20, 2.27, 3.64, 4.71],
    },
    PaperRow {
        table: 1,
        arch: Arch::Llm,
        stack: "udp/ip/eth",
        ms: [1.21, 1.42, 2.49, 3.80, 4.87],
    },
    PaperRow {
        table: 1,
        arch: Arch::Llm,
        stack: "tcp/ip/eth",
        ms: [1.74, 2.17, 3.63, 5.47, 6.92],
    },
    PaperRow {
        table: 2,
        arch: Arch::Daa,
        stack: "ethdaa",
        ms: [0.92, 1.06, 2.14, 3.47, 4.53],
    },
    PaperRow {
        table: 2,
        arch: Arch::Daa,
        stack: "ip/ethdaa",
        ms: [1.07, 1.25, 2.33, 3.70, 4.76],
    },
    PaperRow {
        table: 2,
        arch: Arch::Daa,
        stack: "udp/ip/ethdaa",
        ms: [1.20, 1.40, 2.49, 3.86, 4.94],
    },
    PaperRow {
        table: 3,
        arch: Arch::Illm,
        stack: "eth",
        ms: [0.89, 0.95, 2.03, 3.39, 4.47],
    },
    PaperRow {
        table: 3,
        arch: Arch::Illm,
        stack: "ip/eth",
        ms: [1.14, 1.29, 2.37, 3.73, 4.80],
    },
    PaperRow {
        table: 3,
        arch: Arch::Illm,
        stack: "udp/ip/eth",
        ms: [1.27, 1.49, 2.57, 3.89, 4.97],
    },
];

/// Every stack Strata measures: the paper's, their DAA forms, and the ILP stack.
pub const STACKS: &[&str] = &[
    "eth",
    "ip/eth",
    "udp/ip/eth",
    "tcp/ip/eth",
    "ethdaa",
    "ip/ethdaa",
    "udp/ip/ethdaa",
    "tcp/ip/ethdaa",
    "copy/xdr/cipher/udp/ip/eth",
];

/// Measures every stack that this build can run under every architecture on
/// the in-memory link. Stacks whose top protocol the ping-pong cannot drive (or
/// that this build lacks) are reported, not silently left out.
pub fn measure(count: usize, warmup: usize) -> Result<(Vec<RttRow>, Vec<String>)> {
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for &stack in STACKS {
        for arch in Arch::ALL {
            let setup = RttSetup {
                stack: stack.into(),
                arch,
                checksum: stack.contains("cipher"),
            };
            match rtt_mem(&setup, &SIZES, warmup, count) {
                Ok(r) => rows.extend(r),
                Err(e) => {
                    missing.push(format!("{stack} under {arch}: {e:#}"));
                    break;
                }
            }
        }
    }
    Ok((rows, missing))
}

/// The mean round trip of `stack` under `arch` for each size, if measured.
pub fn means(rows: &[RttRow], stack: &str, arch: Arch) -> Option<[f64; 5]> {
    let mut out = [0.0; 5];
    for (slot, size) in out.iter_mut().zip(SIZES) {
        *slot = rows
            .iter()
            .find(|r| r.stack == stack && r.arch == arch.to_string() && r.size == size)?
            .rtt_us_mean;
    }
    Some(out)
}
