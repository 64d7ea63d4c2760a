//! Today's peers that Strata is measured beside, each driven in the same process
//! run as Strata, alternating, so machine noise hits both alike.

pub mod kernel_tcp;
pub mod kernel_udp;
pub mod proc;
pub mod smoltcp_tcp;
pub mod smoltcp_tcp_rtt;
pub mod smoltcp_udp;
pub mod srt;
pub mod transfer;
pub mod udt;
pub mod xport;
