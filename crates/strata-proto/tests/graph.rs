//! Building hosts from one-line stack specs: the graph the registry makes, and
//! configuration mistakes refused with their culprit named.

mod common;

use std::net::Ipv4Addr;

use strata_core::graph::{self, LinkConfig};
use strata_core::{
    Arch, Control, Engine, EngineConfig, HwAddr, Priority, Reply, SessionId, UpiError,
};
use strata_proto::{Ipv4Cidr, host_options};

fn build_error(spec: &str, kind: &str, key: &str, value: toml::Value) -> String {
    let reg = common::registry();
    let mut opts = host_options(HwAddr::local(1), "198.18.0.1/24".parse().unwrap(), None);
    opts.entry(kind.into())
        .or_default()
        .insert(key.into(), value);
    let cfg = graph::from_spec(spec, &reg, LinkConfig::new("net0", "wire"), &opts).unwrap();
    match graph::build(&cfg, &reg) {
        Ok(_) => "built".into(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn udp_over_ip_over_eth_brings_arp_beside_ip_and_icmp_above_it() {
    let h = common::host(1, Arch::Llm);
    let kinds: Vec<&str> = h.engine.nodes().iter().map(|n| n.kind.as_str()).collect();
    for kind in ["eth", "arp", "ip", "icmp", "udp"] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    let eth = &h.engine.nodes()[h.proto("eth").index()];
    assert_eq!(
        eth.number_of(strata_core::Upper::Proto(h.proto("ip"))),
        Some(0x0800)
    );
    assert_eq!(
        eth.number_of(strata_core::Upper::Proto(h.proto("arp"))),
        Some(0x0806)
    );
    let ip = &h.engine.nodes()[h.proto("ip").index()];
    assert_eq!(
        ip.number_of(strata_core::Upper::Proto(h.proto("udp"))),
        Some(17)
    );
    assert_eq!(
        ip.number_of(strata_core::Upper::Proto(h.proto("icmp"))),
        Some(1)
    );
}

#[test]
fn eth_and_ip_answer_their_addresses_and_eth_its_mtu() {
    let mut h = common::host(1, Arch::Llm);
    let eth = h.proto("eth");
    assert!(
        matches!(h.engine.control(eth, None, Control::GetHwAddr), Ok(Reply::Hw(a)) if a == HwAddr::local(1))
    );
    assert!(matches!(
        h.engine.control(eth, None, Control::GetMaxPayload),
        Ok(Reply::Size(1500))
    ));
    let ip = h.proto("ip");
    assert!(
        matches!(h.engine.control(ip, None, Control::GetIpAddr), Ok(Reply::Ip(a)) if a == Ipv4Addr::new(198, 18, 0, 1))
    );
    let bad = h
        .engine
        .control(eth, Some(SessionId(77)), Control::SetPriority(Priority(1)));
    assert_eq!(bad.unwrap_err(), UpiError::NoSuchSession);
}

#[test]
fn configuration_mistakes_name_the_option() {
    let bad_gateway = build_error("udp/ip/eth", "ip", "gateway", "203.0.113.1".into());
    assert!(
        bad_gateway.contains("protocol 'ip': option 'gateway'"),
        "{bad_gateway}"
    );
    let bad_route = build_error(
        "ip/eth",
        "ip",
        "routes",
        toml::Value::Array(vec!["203.0.113.0/24 via 203.0.113.1".into()]),
    );
    assert!(
        bad_route.contains("option 'routes'") && bad_route.contains("203.0.113.0/24"),
        "{bad_route}"
    );
    let bad_mtu = build_error("eth", "eth", "mtu", 40.into());
    assert!(bad_mtu.contains("option 'mtu'"), "{bad_mtu}");
    let group_mac = build_error("eth", "eth", "mac", "01:00:5e:00:00:01".into());
    assert!(group_mac.contains("option 'mac'"), "{group_mac}");
    let zero_ttl = build_error("ip/eth", "ip", "ttl", 0.into());
    assert!(zero_ttl.contains("option 'ttl'"), "{zero_ttl}");
    let no_retries = build_error("ip/eth", "arp", "retries", 0.into());
    assert!(no_retries.contains("option 'retries'"), "{no_retries}");
    assert_eq!(
        build_error("udp/ip/eth", "udp", "checksum", false.into()),
        "built"
    );
}

#[test]
fn an_address_without_a_prefix_is_refused_for_ip_but_fine_for_arp() {
    let ip = build_error("ip/eth", "ip", "address", "198.18.0.1".into());
    assert!(
        ip.contains("option 'address'") && ip.contains("prefix"),
        "{ip}"
    );
    assert_eq!(
        build_error("ip/eth", "arp", "address", "198.18.0.1".into()),
        "built"
    );
}

#[test]
fn host_options_build_a_host_under_every_architecture() {
    let reg = common::registry();
    let cidr = Ipv4Cidr::new(Ipv4Addr::new(198, 18, 0, 9), 24).unwrap();
    let opts = host_options(HwAddr::local(9), cidr, Some(Ipv4Addr::new(198, 18, 0, 254)));
    for arch in Arch::ALL {
        let cfg =
            graph::from_spec("udp/ip/eth", &reg, LinkConfig::new("net0", "wire"), &opts).unwrap();
        let built = graph::build(&cfg, &reg).unwrap();
        let config = EngineConfig {
            arch: Some(arch),
            ..Default::default()
        };
        assert!(Engine::new(built, config).is_ok(), "{arch}");
    }
}
