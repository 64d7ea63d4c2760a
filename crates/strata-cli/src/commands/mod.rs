//! One module per subcommand: its arguments and what it does.

pub mod bench;
pub mod bench_probe;
pub mod bench_tcp;
pub mod demo;
mod demo_atalk;
pub mod demo_pa;
mod demo_xport;
pub mod ftp;
pub mod ftpd;
pub mod graph;
pub mod host;
pub mod paper000;
pub mod paper001;
pub mod paper003;
pub mod paper004_smoltcp;
pub mod paper004_subsystems;
pub mod perf;
pub mod ping;
pub mod rtt;
pub mod rtt_veth;
pub mod tcp_recv;
pub mod tcp_send;
pub mod udp_send;
pub mod wanem;
pub mod xperf;
pub mod xport_args;
pub mod xsend;
