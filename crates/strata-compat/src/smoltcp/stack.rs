//! smoltcp's subsystem as the module sets it up: one interface on the
//! emulated device ([`Wire`]), with the host's address, and the sockets.
//!
//! smoltcp's interface expects to own the IP layer: an address, routes, a
//! device. Here Strata's IP layer owns all of it, so the interface is given
//! what makes it a pass-through: the host's address as a /32 (the same one
//! Strata's IP layer has, so that TCP's pseudo-header checksums agree) and a
//! default route through that address, so that smoltcp addresses every
//! segment to its peer directly; Strata's IP layer routes it.
//!
//! The interface is made on first use rather than when the graph is built,
//! because the address and the MTU come from Strata's IP layer by `control`.

use std::net::Ipv4Addr;

use smoltcp::iface::{Config as IfaceConfig, Interface};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SmolInstant;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr};

use super::clock;
use super::config::Config;
use super::device::Wire;

/// The interface and its device.
pub(super) struct Stack {
    /// smoltcp's interface.
    pub iface: Interface,
    /// The device below it.
    pub wire: Wire,
    /// The host's address.
    pub address: Ipv4Addr,
    /// IP MTU: what one datagram carries on the link.
    pub mtu: usize,
}

fn interface(wire: &mut Wire, address: Ipv4Addr, seed: u64, now: SmolInstant) -> Interface {
    let mut config = IfaceConfig::new(HardwareAddress::Ip);
    config.random_seed = seed;
    let mut iface = Interface::new(config, wire, now);
    iface.update_ip_addrs(|addrs| {
        // An interface holds at least one address (smoltcp's
        // `iface-max-addr-count` is never zero), and this is its only one.
        let _ = addrs.push(IpCidr::new(IpAddress::Ipv4(address), 32));
    });
    // The route table has room for a default route in every smoltcp
    // configuration; a full one would only refuse a second.
    let _ = iface.routes_mut().add_default_ipv4_route(address);
    iface
}

impl Stack {
    /// An interface with `address` on a device of IP MTU `mtu`; `seed`
    /// seeds smoltcp's random numbers (initial sequence numbers), from the
    /// engine's generator so that simulations repeat.
    pub fn new(address: Ipv4Addr, mtu: usize, seed: u64, now: SmolInstant) -> Stack {
        let mut wire = Wire::new(mtu);
        let iface = interface(&mut wire, address, seed, now);
        Stack {
            iface,
            wire,
            address,
            mtu,
        }
    }
}

/// A socket with `cfg`'s rings and settings.
pub(super) fn socket(cfg: &Config) -> tcp::Socket<'static> {
    let mut s = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; cfg.rcvbuf]),
        tcp::SocketBuffer::new(vec![0; cfg.sndbuf]),
    );
    s.set_congestion_control(cfg.congestion);
    s.set_nagle_enabled(!cfg.nodelay);
    s.set_ack_delay(cfg.delayed_ack.map(Into::into));
    s.set_timeout(cfg.timeout.map(Into::into));
    s.set_keep_alive(cfg.keepalive.map(Into::into));
    if cfg.timestamps {
        s.set_tsval_generator(Some(clock::tsval));
    }
    s
}
