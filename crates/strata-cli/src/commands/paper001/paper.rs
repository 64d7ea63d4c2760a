//! The paper's side of each figure. The seed's figures are images the OCR
//! lost (only their axes survive), so the values are what its text states
//! — and, between them, what its own explanation computes, said so where
//! printed:
//!
//! - §4.2.1: at no inserted delay TCP (ttcp) reached 26.78 Mbit/s and the
//!   library about 32, of a 36.864 Mbit/s path (DS-3's ATM payload); with
//!   4 or 8 buffers the library stays at that level at every RTT; one
//!   buffer waits an RTT per 512 KB buffer (so 4.19 Mbit / (4.19 Mbit /
//!   32 Mbit/s + RTT)); TCP's 52 KB buffer is its window (so at most
//!   52 KB / RTT).
//! - Table 2 (§4.2.2, 10 Mbit/s Ethernet): rate control on 8.92 Mbit/s and
//!   60 retransmission requests, off 8.31 and 164, ttcp 8.09.
//! - §4.2.3: with a bit error rate of 1e-8, go-back-N is a little faster at
//!   small RTTs, selective retransmission ahead at long ones.
//! - §5.2: the OS's ftp about 16 Mbit/s at no delay, falling dramatically
//!   with delay (its 64 KB window); tplftp always above it.

/// The paper's path: DS-3's ATM payload, Mbit/s.
pub const LINK_MBIT: f64 = 36.864;

/// Figure 6's lines at one RTT, as fractions of [`LINK_MBIT`].
#[derive(Clone, Copy, Debug)]
pub struct Fig6 {
    /// The library with 4 or 8 application buffers.
    pub lib4: f64,
    /// The library with one.
    pub lib1: f64,
    /// ttcp.
    pub tcp: f64,
}

/// Figure 6 at `rtt_ms` (see the module docs for what is computed).
pub fn fig6(rtt_ms: f64) -> Fig6 {
    let rtt = rtt_ms / 1e3;
    let lib = 32.0;
    let buffer_bits = 512.0 * 1024.0 * 8.0 / 1e6;
    let lib1 = buffer_bits / (buffer_bits / lib + rtt);
    let tcp = if rtt == 0.0 {
        26.78
    } else {
        (52.0 * 1024.0 * 8.0 / 1e6 / rtt).min(26.78)
    };
    Fig6 {
        lib4: lib / LINK_MBIT,
        lib1: lib1 / LINK_MBIT,
        tcp: tcp / LINK_MBIT,
    }
}

/// Table 2's rows: (name, Mbit/s, retransmission requests).
pub const TABLE2: [(&str, f64, Option<u64>); 3] = [
    ("rate control on", 8.92, Some(60)),
    ("rate control off", 8.31, Some(164)),
    ("TCP (ttcp)", 8.09, None),
];

/// Figure 9: the OS's ftp at no inserted delay, Mbit/s.
pub const FIG9_FTP_AT_0: f64 = 16.0;
