//! Seed 003's real-link runs (`strata bench paper003`) finish what they are
//! asked over kernel UDP on loopback, PA off and on: every round trip comes
//! back, every streamed message arrives.

use strata_bench::paper003::real_link;

fn port() -> String {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string()
}

#[test]
fn round_trips_and_a_stream_over_kernel_udp_complete_with_the_pa_off_and_on() {
    for pa in [false, true] {
        let (a, b) = (port(), port());
        let link = |l: &str, p: &str| format!("kind = \"udp\"\nlocal = \"{l}\"\npeer = \"{p}\"");
        let r = real_link(pa, [&link(&a, &b), &link(&b, &a)], 50, 3_000).unwrap();
        assert_eq!(r.round_trips, 50, "pa {pa}");
        assert_eq!(r.streamed, 3_000, "pa {pa}");
        assert!(r.rtt_us > 0.0 && r.msgs_per_s > 0.0, "pa {pa}: {r:?}");
    }
}
