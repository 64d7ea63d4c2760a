//! The workloads of `strata bench paper004-smoltcp`, one per test, so that
//! each can be counted alone with callgrind (docs/benchmarks.md, "smoltcp's
//! TCP imported into Strata"): bulk transfers of 2 × 20 MB and 20,000
//! round trips of one byte, over smoltcp imported into Strata, Strata's own
//! TCP, and smoltcp on its own. As tests they check that every byte and
//! every pong arrives.

use bytes::Bytes;
use smoltcp::socket::tcp::CongestionControl;
use strata::Arch;
use strata_bench::peers::smoltcp_tcp::SmolTcpBulk;
use strata_bench::peers::smoltcp_tcp_rtt::SmolTcpPingPong;
use strata_bench::rtt::{MemPingPong, RttSetup};
use strata_bench::tcp_bulk::{BulkSetup, MemBulk};

const BYTES: u64 = 20_000_000;
const ROUND_TRIPS: usize = 20_000;
const BUFFER: usize = 256 * 1024;

fn bulk_over(tcp: &'static str) {
    let setup = BulkSetup {
        tcp,
        arch: Arch::Llm,
        buffer: Some(BUFFER),
    };
    let mut b = MemBulk::new(&setup, 1500, false).unwrap();
    for _ in 0..2 {
        assert_eq!(b.transfer(BYTES).unwrap().bytes, BYTES);
    }
}

fn round_trips_over(stack: &str) {
    let setup = RttSetup {
        stack: stack.into(),
        arch: Arch::Llm,
        checksum: true,
    };
    let mut pp = MemPingPong::new(&setup).unwrap();
    let ping = Bytes::from_static(&[0x5a]);
    for _ in 0..ROUND_TRIPS {
        pp.round_trip(&ping).unwrap();
    }
}

#[test]
fn bulk_imported() {
    bulk_over("smoltcp-tcp");
}

#[test]
fn bulk_native() {
    bulk_over("tcp");
}

#[test]
fn bulk_smoltcp() {
    let mut s = SmolTcpBulk::with_congestion(BUFFER, 1500, CongestionControl::Cubic).unwrap();
    for _ in 0..2 {
        assert_eq!(s.transfer(BYTES).unwrap().bytes, BYTES);
    }
}

#[test]
fn rtt_imported() {
    round_trips_over("smoltcp-tcp/ip/eth");
}

#[test]
fn rtt_native() {
    round_trips_over("tcp/ip/eth");
}

#[test]
fn rtt_smoltcp() {
    let mut pp = SmolTcpPingPong::new(BUFFER, 1500, CongestionControl::Cubic).unwrap();
    for _ in 0..ROUND_TRIPS {
        assert_eq!(pp.round_trip(&[0x5a]), 1);
    }
}
