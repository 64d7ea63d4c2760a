//! The routing table of a host (RFC 1122 §3.3.1): the on-link prefix of the
//! host's address, static routes, and a default gateway. The longest matching
//! prefix wins; among equal prefixes the first configured does. A host does not
//! forward, so the table only chooses the next hop of what it sends itself.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use crate::cidr::Ipv4Cidr;

/// One route: destinations in `dest` go to `via`, or straight to the
/// destination when `via` is `None` (on-link).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The destination prefix.
    pub dest: Ipv4Cidr,
    /// The gateway, on-link; `None` for an on-link prefix.
    pub via: Option<Ipv4Addr>,
}

/// Text that is not a route.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a route (want \"198.18.4.0/24 via 198.18.0.254\" or \"198.18.4.0/24\")")]
pub struct BadRoute(pub String);

impl FromStr for Route {
    type Err = BadRoute;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadRoute(s.into());
        let mut words = s.split_whitespace();
        let dest: Ipv4Cidr = words.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        let via = match (words.next(), words.next()) {
            (None, _) => None,
            (Some("via"), Some(gw)) => Some(gw.parse().map_err(|_| bad())?),
            _ => return Err(bad()),
        };
        if words.next().is_some() {
            return Err(bad());
        }
        Ok(Route { dest, via })
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.dest.network(), self.dest.prefix())?;
        if let Some(gw) = self.via {
            write!(f, " via {gw}")?;
        }
        Ok(())
    }
}

/// A host's routes, longest prefix first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteTable {
    routes: Vec<Route>,
}

impl RouteTable {
    /// The table of a host at `address`: its on-link prefix, `routes`, and a
    /// default route via `gateway`. Every gateway must be on-link (RFC 1122
    /// §3.3.1.1: a host sends to gateways on a connected network) and must not
    /// be the host itself; the error names the offending route.
    pub fn new(
        address: Ipv4Cidr,
        gateway: Option<Ipv4Addr>,
        routes: &[Route],
    ) -> Result<RouteTable, String> {
        let on_link = Route {
            dest: address,
            via: None,
        };
        let default = gateway.map(|gw| Route {
            dest: Ipv4Cidr::ANY,
            via: Some(gw),
        });
        let mut all: Vec<Route> = std::iter::once(on_link)
            .chain(routes.iter().copied())
            .chain(default)
            .collect();
        for r in &all {
            if let Some(gw) = r.via
                && (!address.contains(gw) || gw == address.address())
            {
                return Err(format!(
                    "gateway {gw} of '{r}' is not another host on {}/{}",
                    address.network(),
                    address.prefix()
                ));
            }
        }
        // A stable sort keeps configuration order among equal prefixes.
        all.sort_by_key(|r| std::cmp::Reverse(r.dest.prefix()));
        Ok(RouteTable { routes: all })
    }

    /// The next hop for `dst`: the gateway of the longest matching prefix, or
    /// `dst` itself when that prefix is on-link; `None` when no route matches.
    pub fn next_hop(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        self.routes
            .iter()
            .find(|r| r.dest.contains(dst))
            .map(|r| r.via.unwrap_or(dst))
    }

    /// The routes, longest prefix first.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn table(gw: Option<&str>, routes: &[&str]) -> Result<RouteTable, String> {
        let routes: Vec<Route> = routes.iter().map(|r| r.parse().unwrap()).collect();
        RouteTable::new("198.18.0.1/24".parse().unwrap(), gw.map(ip), &routes)
    }

    #[test]
    fn on_link_destinations_are_their_own_next_hop() {
        let t = table(None, &[]).unwrap();
        assert_eq!(t.next_hop(ip("198.18.0.77")), Some(ip("198.18.0.77")));
    }

    #[test]
    fn without_a_gateway_off_link_destinations_have_no_route() {
        let t = table(None, &[]).unwrap();
        assert_eq!(t.next_hop(ip("203.0.113.5")), None);
    }

    #[test]
    fn the_default_route_takes_what_nothing_else_matches() {
        let t = table(Some("198.18.0.254"), &[]).unwrap();
        assert_eq!(t.next_hop(ip("203.0.113.5")), Some(ip("198.18.0.254")));
        assert_eq!(t.next_hop(ip("198.18.0.9")), Some(ip("198.18.0.9")));
    }

    #[test]
    fn the_longest_prefix_wins_whatever_the_order_given() {
        let t = table(
            Some("198.18.0.254"),
            &[
                "198.18.0.0/16 via 198.18.0.2",
                "198.18.4.0/24 via 198.18.0.3",
            ],
        )
        .unwrap();
        assert_eq!(t.next_hop(ip("198.18.4.9")), Some(ip("198.18.0.3")), "/24");
        assert_eq!(t.next_hop(ip("198.18.5.9")), Some(ip("198.18.0.2")), "/16");
        assert_eq!(
            t.next_hop(ip("198.18.0.9")),
            Some(ip("198.18.0.9")),
            "on-link /24 beats /16"
        );
        assert_eq!(
            t.next_hop(ip("192.0.2.1")),
            Some(ip("198.18.0.254")),
            "default"
        );
    }

    #[test]
    fn gateways_off_link_or_ourselves_are_refused() {
        assert!(
            table(Some("203.0.113.1"), &[])
                .unwrap_err()
                .contains("203.0.113.1")
        );
        assert!(table(Some("198.18.0.1"), &[]).is_err());
        assert!(
            table(None, &["203.0.113.0/24 via 203.0.113.1"])
                .unwrap_err()
                .contains("203.0.113.0/24")
        );
    }

    #[test]
    fn routes_parse_from_config_text_and_print_back() {
        let r: Route = "198.18.4.0/24 via 198.18.0.254".parse().unwrap();
        assert_eq!(r.to_string(), "198.18.4.0/24 via 198.18.0.254");
        let r: Route = "198.18.4.0/24".parse().unwrap();
        assert_eq!(r.via, None);
        for bad in [
            "198.18.4.0/24 via",
            "198.18.4.0/24 by 1.2.3.4",
            "x via 1.2.3.4",
            "1.2.3.0/24 via 1.2.3.4 extra",
        ] {
            assert!(bad.parse::<Route>().is_err(), "{bad}");
        }
    }
}
