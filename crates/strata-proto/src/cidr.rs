//! An IPv4 address with its prefix length ("198.18.0.1/24"): a host's address
//! and the subnet it is on-link with, as configs and routes name them.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 address and a prefix length of at most 32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Cidr {
    address: Ipv4Addr,
    prefix: u8,
}

/// Text that is not an address with a prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not an IPv4 address with a prefix (want a.b.c.d/n with n at most 32)")]
pub struct BadCidr(pub String);

impl Ipv4Cidr {
    /// 0.0.0.0/0, which every address matches (the default route's prefix).
    pub const ANY: Ipv4Cidr = Ipv4Cidr {
        address: Ipv4Addr::UNSPECIFIED,
        prefix: 0,
    };

    /// `address/prefix`; `None` when the prefix exceeds 32.
    pub const fn new(address: Ipv4Addr, prefix: u8) -> Option<Ipv4Cidr> {
        if prefix > 32 {
            None
        } else {
            Some(Ipv4Cidr { address, prefix })
        }
    }

    /// The address as given (a host's own address, or a route's network).
    pub fn address(&self) -> Ipv4Addr {
        self.address
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The netmask, e.g. 255.255.255.0 for /24.
    pub fn netmask(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.mask())
    }

    fn mask(&self) -> u32 {
        u32::MAX
            .checked_shl(32 - u32::from(self.prefix))
            .unwrap_or(0)
    }

    /// The network address (host bits cleared).
    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.address) & self.mask())
    }

    /// True when `addr` lies in this prefix.
    pub fn contains(&self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & self.mask() == u32::from(self.address) & self.mask()
    }

    /// The directed broadcast address (all host bits set). Prefixes /31 and /32
    /// have none: RFC 3021 point-to-point links use both addresses for hosts.
    pub fn broadcast(&self) -> Option<Ipv4Addr> {
        if self.prefix >= 31 {
            None
        } else {
            Some(Ipv4Addr::from(u32::from(self.address) | !self.mask()))
        }
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
    }
}

impl FromStr for Ipv4Cidr {
    type Err = BadCidr;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadCidr(s.into());
        let (addr, prefix) = s.trim().split_once('/').ok_or_else(bad)?;
        let address: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        Ipv4Cidr::new(address, prefix).ok_or_else(bad)
    }
}

/// A host address given with or without a prefix ("198.18.0.1" or
/// "198.18.0.1/24"): protocols that need only the address (ARP) accept both, so
/// one `address` value serves every layer of a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HostAddress(pub Ipv4Addr);

impl FromStr for HostAddress {
    type Err = BadCidr;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.parse::<Ipv4Cidr>() {
            Ok(c) => Ok(HostAddress(c.address())),
            Err(e) => s.trim().parse().map(HostAddress).map_err(|_| e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Ipv4Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn a_slash_24_has_the_usual_mask_network_and_broadcast() {
        let c = cidr("198.18.0.1/24");
        assert_eq!(c.netmask(), Ipv4Addr::new(255, 255, 255, 0));
        assert_eq!(c.network(), Ipv4Addr::new(198, 18, 0, 0));
        assert_eq!(c.broadcast(), Some(Ipv4Addr::new(198, 18, 0, 255)));
        assert!(c.contains(Ipv4Addr::new(198, 18, 0, 200)));
        assert!(!c.contains(Ipv4Addr::new(198, 18, 1, 1)));
        assert_eq!(c.to_string(), "198.18.0.1/24");
    }

    #[test]
    fn extreme_prefixes_neither_overflow_nor_invent_broadcasts() {
        let all = cidr("0.0.0.0/0");
        assert!(all.contains(Ipv4Addr::new(203, 0, 113, 9)));
        assert_eq!(all.netmask(), Ipv4Addr::UNSPECIFIED);
        let host = cidr("198.18.0.1/32");
        assert!(host.contains(Ipv4Addr::new(198, 18, 0, 1)));
        assert!(!host.contains(Ipv4Addr::new(198, 18, 0, 2)));
        assert_eq!(host.broadcast(), None);
        assert_eq!(cidr("198.18.0.0/31").broadcast(), None, "RFC 3021");
    }

    #[test]
    fn bad_text_is_refused_and_host_addresses_take_both_forms() {
        for bad in [
            "198.18.0.1",
            "198.18.0.1/33",
            "198.18.0/24",
            "x/24",
            "1.2.3.4/-1",
        ] {
            assert!(bad.parse::<Ipv4Cidr>().is_err(), "{bad}");
        }
        let a = Ipv4Addr::new(198, 18, 0, 1);
        assert_eq!("198.18.0.1".parse::<HostAddress>(), Ok(HostAddress(a)));
        assert_eq!("198.18.0.1/24".parse::<HostAddress>(), Ok(HostAddress(a)));
        assert!("198.18.0.1/40".parse::<HostAddress>().is_err());
    }
}
