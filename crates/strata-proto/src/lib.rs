//! # strata-proto
//!
//! The Internet protocols of a Strata host — Ethernet II, ARP, IPv4, ICMP and
//! UDP — written as x-kernel protocols over [`strata_core`]: each is a protocol
//! object with sessions, a pure `demux` and a state-changing `pop`, so the same
//! code runs under every dispatch architecture of seed 000. Each protocol lives
//! in its own folder: `wire.rs` is a typed, checked view of its header (parse
//! and emit, never a panic), and the other files hold its state by concern.
//!
//! Where to start reading:
//! - [`register`] puts every protocol and the protocol-number table
//!   (`numbers.toml`) in a [`Registry`]; [`host_options`] gives the options a
//!   host needs, so `strata_core::graph::from_spec("udp/ip/eth", …)` builds one;
//! - [`eth`] is the bottom layer and the simplest protocol, a good first read;
//! - [`ipv4`] shows a stateful demux (fragments) and how a packet finds its
//!   neighbour through [`arp`]; [`udp`] shows passive opens;
//! - [`icmp`] answers pings and reports errors for the layers around it.
//!
//! What is not implemented is listed in this crate's README.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arp;
pub mod cidr;
pub mod eth;
pub mod ethdaa;
pub mod icmp;
pub mod info;
pub mod ipv4;
pub mod seqnum;
mod slab;
pub mod tcp;
pub mod transform;
pub mod udp;
pub mod wire;

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;

use strata_core::graph::ProtocolConfig;
use strata_core::{Control, GraphError, HwAddr, Registry, UpiError};

pub use cidr::{BadCidr, Ipv4Cidr};
pub use info::{EthInfo, Ipv4Info, Ports};

/// The ethertype raw Ethernet applications bind (seed 000 Table 1's ETH stack):
/// 0x88B5, IEEE 802 "local experimental ethertype 1".
pub const RAW_ETHERTYPE: u32 = 0x88B5;

/// The IP protocol number raw IP applications bind (seed 000 Table 1's IP-ETH
/// stack): 253, reserved for experimentation by RFC 3692.
pub const RAW_IP_PROTOCOL: u32 = 253;

/// The protocol-number table, as TOML: ethertypes for `eth` and `ethdaa`, IP
/// protocol numbers for `ip`.
pub const NUMBERS: &str = include_str!("numbers.toml");

/// Registers `eth`, `arp`, `ip`, `icmp` and `udp` and loads [`NUMBERS`].
pub fn register(reg: &mut Registry) {
    for spec in [
        eth::SPEC,
        ethdaa::SPEC,
        arp::SPEC,
        ipv4::SPEC,
        icmp::SPEC,
        udp::SPEC,
        tcp::SPEC,
        seqnum::SPEC,
        transform::CIPHER,
        transform::XDR,
        transform::COPY,
    ] {
        reg.register_protocol(spec);
    }
    reg.numbers_mut()
        .load_toml(NUMBERS)
        .expect("the embedded numbers.toml parses (checked by a unit test)");
}

/// The options of one host for `from_spec`: `eth.mac` (and `ethdaa.mac`), `arp.address`,
/// `ip.address` and, when given, `ip.gateway`.
pub fn host_options(
    mac: HwAddr,
    address: Ipv4Cidr,
    gateway: Option<Ipv4Addr>,
) -> BTreeMap<String, toml::Table> {
    let mut eth = toml::Table::new();
    eth.insert("mac".into(), mac.to_string().into());
    let mut arp = toml::Table::new();
    arp.insert("address".into(), address.to_string().into());
    let mut ip = toml::Table::new();
    ip.insert("address".into(), address.to_string().into());
    if let Some(gw) = gateway {
        ip.insert("gateway".into(), gw.to_string().into());
    }
    BTreeMap::from([
        // Whichever link layer the stack uses, plain or DAA.
        ("ethdaa".to_string(), eth.clone()),
        ("eth".to_string(), eth),
        ("arp".to_string(), arp),
        ("ip".to_string(), ip),
    ])
}

/// A config error naming the protocol, the option and what is wrong with it.
pub(crate) fn bad_option(
    c: &ProtocolConfig,
    option: &str,
    problem: impl fmt::Display,
) -> GraphError {
    GraphError::BadOption {
        owner: c.options.owner().into(),
        option: option.into(),
        problem: problem.to_string(),
    }
}

/// The error for a control operation a protocol does not implement.
pub(crate) fn unsupported(op: &Control) -> UpiError {
    UpiError::Unsupported(match op {
        Control::Private(_) => "this private operation",
        op => op.name(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_number_table_parses_and_names_the_usual_numbers() {
        let mut reg = Registry::new();
        register(&mut reg);
        let n = reg.numbers();
        assert_eq!(n.get("eth", "ip"), Some(0x0800));
        assert_eq!(n.get("eth", "arp"), Some(0x0806));
        assert_eq!(n.get("ethdaa", "ip"), Some(0x0800));
        assert_eq!(n.get("ethdaa", "arp"), Some(0x0806));
        assert_eq!(n.get("ip", "icmp"), Some(1));
        assert_eq!(n.get("ip", "tcp"), Some(6));
        assert_eq!(n.get("ip", "udp"), Some(17));
    }
}
