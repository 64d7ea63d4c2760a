//! The paper's test stack (§5): four layers that together make a basic
//! sliding-window protocol with a window of 16. From the top:
//!
//! | layer | does | fields (class, bits) |
//! |---|---|---|
//! | [`frag`] | cuts messages longer than a fragment, reassembles them | `frag` (protocol, 1), `last` (message, 1) |
//! | [`window`] | sequence numbers, window of 16, acknowledgements as gossip, in-order delivery, go-back-N retransmission | `seq` (protocol, 14), `ack-only` (protocol, 1), `ack` (gossip, 14) |
//! | [`ident`] | who talks to whom, for which application | `src`, `dst` (connection identification, 64 each), `app` (32) |
//! | [`check`] | Internet checksum of the data and of every header above | `sum` (message, 16) |
//!
//! The same layer code runs on Strata's engine as four protocols, each with
//! its own 4-byte-aligned header ([`crate::layered`]), and under the PA with
//! the four compact headers ([`crate::accel`]).
//!
//! `check` is the bottom layer so that its sum covers the identification:
//! without the PA, `ident`'s header is part of `check`'s data; with the PA,
//! `ident` writes its fields before `check` sums the headers, and the
//! checksum covers the identification class whether or not it is sent.

pub mod check;
pub mod frag;
pub mod ident;
pub mod window;

use std::time::Duration;

use crate::layer::Layer;

/// The settings of the paper's stack.
#[derive(Clone, Copy, Debug)]
pub struct StackConfig {
    /// The largest fragment, in bytes of data.
    pub fragment: usize,
    /// The largest reassembled message.
    pub reassembly_limit: usize,
    /// Retransmission timeout.
    pub rto: Duration,
    /// How long an acknowledgement waits for data to ride on.
    pub ack_delay: Duration,
}

impl Default for StackConfig {
    fn default() -> Self {
        StackConfig {
            fragment: 1400,
            reassembly_limit: 64 * 1024,
            rto: Duration::from_millis(20),
            ack_delay: Duration::from_millis(2),
        }
    }
}

/// The four layers of one connection, top first.
pub fn paper_stack(local: u64, remote: u64, app: u32, c: &StackConfig) -> Vec<Box<dyn Layer>> {
    vec![
        Box::new(frag::Frag::new(c.fragment, c.reassembly_limit)),
        Box::new(window::Window::new(c.rto, c.ack_delay)),
        Box::new(ident::Ident::new(local, remote, app)),
        Box::new(check::Check16::default()),
    ]
}

/// One layer of the paper's stack by name (for the engine's protocols).
pub fn layer_by_name(
    name: &str,
    local: u64,
    remote: u64,
    app: u32,
    c: &StackConfig,
) -> Option<Box<dyn Layer>> {
    let l: Box<dyn Layer> = match name {
        "frag" => Box::new(frag::Frag::new(c.fragment, c.reassembly_limit)),
        "window" => Box::new(window::Window::new(c.rto, c.ack_delay)),
        "check" => Box::new(check::Check16::default()),
        "ident" => Box::new(ident::Ident::new(local, remote, app)),
        _ => return None,
    };
    Some(l)
}
