//! A connection's settings: what the set-up negotiates (§2.1) and the
//! switches the paper's evaluation turns (§4: recovery algorithm, rate
//! control, data checksum).

use std::time::Duration;

use crate::wire;

/// Which error recovery a receiver asks for (§3.2). The sender answers both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryPolicy {
    /// Always go-back-N: out-of-order packets are discarded.
    GoBackN,
    /// Always selective: out-of-order packets are kept, gaps requested.
    Selective,
    /// Picked per recovery episode: go-back-N while the window is small
    /// (little to resend, nothing to track), selective once it exceeds
    /// [`Config::adaptive_threshold`] packets.
    Adaptive,
}

/// Settings of one end of a connection.
#[derive(Clone, Debug)]
pub struct Config {
    /// Payload bytes per data packet: the most this end sends and receives
    /// (announced in the set-up, which agrees on the smaller of both ends').
    /// The default, 1,444, fills a 1500-byte MTU over IPv4 (1500 − 20 IP − 8
    /// UDP − 28 data header); [`Config::fit_mtu`] fits it to another path.
    /// An end that puts the data checksum on its packets carries 4 bytes
    /// less payload in each, so that its datagrams keep their size.
    pub mss: u32,
    /// The application buffer size proposed in the set-up (§2.1).
    pub app_buffer: u32,
    /// The socket buffer size obtained (read back by the driver), reported
    /// to the peer (§3.4).
    pub socket_buffer: u32,
    /// The receiver's choice of recovery algorithm.
    pub recovery: RecoveryPolicy,
    /// Window size above which [`RecoveryPolicy::Adaptive`] picks selective.
    pub adaptive_threshold: u32,
    /// Rate control, rate = cwnd / SRTT (§3.1): on, data packets are paced;
    /// off, only the window limits the sender.
    pub rate_control: bool,
    /// Keep the window on a loss with no queue in front of it (random loss:
    /// bit errors, a lossy hop); halve it only for losses behind a standing
    /// queue (congestion). Off, every recovery episode halves it (Reno).
    pub loss_discrimination: bool,
    /// Slow start paced at cwnd / SRTT (whatever `rate_control` says) and
    /// left when the delay rises, through a conservative phase (HyStart++,
    /// RFC 9406, at the receiver): it no longer overflows a bottleneck
    /// queue shorter than the path's BDP. Off, only a loss ends slow start.
    pub slow_start_exit: bool,
    /// Put XTP's data checksum on data packets (§3.3: only when the UDP
    /// checksum is off).
    pub data_checksum: bool,
    /// Initial congestion window, packets.
    pub initial_cwnd: u32,
    /// Largest congestion window, packets.
    pub max_cwnd: u32,
    /// RTT assumed before the first sample.
    pub initial_rtt: Duration,
    /// Smallest retransmission time-out.
    pub min_rto: Duration,
    /// A gap in the sequence counts as a loss only after this long (or 64
    /// packets of the missing packet's own data socket past it): data spread
    /// over several sockets arrives a little out of order.
    pub reorder_window: Duration,
    /// A receiver acknowledges at most this long after in-order data.
    pub ack_delay: Duration,
    /// Each end sends a control packet at least this often (§3.7's 500 ms).
    pub keepalive: Duration,
    /// A peer silent this long has vanished: the connection is lost.
    pub idle_timeout: Duration,
    /// The first set-up retransmission (doubling after).
    pub connect_retry: Duration,
}

impl Config {
    /// Fits [`Config::mss`] to a path of `mtu` bytes behind `below` bytes
    /// of lower headers ([`wire::IPV4_UDP_LEN`], [`wire::IPV6_UDP_LEN`]):
    /// the payload that fills the MTU; never more than set already.
    pub fn fit_mtu(&mut self, mtu: usize, below: usize) {
        self.mss = self.mss.min(wire::payload_for_mtu(mtu, below));
    }
}

/// The payload size a set-up announces: the MSS, within the 16-bit field.
pub(crate) fn max_payload(config: &Config) -> u16 {
    config.mss.clamp(1, u32::from(u16::MAX)) as u16
}

/// The payload of a full data packet of an end whose MSS is `mss`: 4 bytes
/// less with the data checksum (which then takes them).
pub(crate) fn full_payload(mss: u32, data_checksum: bool) -> u32 {
    let checksum = (wire::DATA_HEADER_MAX - wire::DATA_HEADER_LEN) as u32;
    if data_checksum {
        mss.saturating_sub(checksum).max(1)
    } else {
        mss.max(1)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mss: wire::payload_for_mtu(1500, wire::IPV4_UDP_LEN),
            app_buffer: 1 << 20,
            socket_buffer: 1 << 20,
            recovery: RecoveryPolicy::Adaptive,
            adaptive_threshold: 16,
            rate_control: true,
            loss_discrimination: true,
            slow_start_exit: true,
            data_checksum: false,
            initial_cwnd: 10,
            max_cwnd: 1 << 16,
            initial_rtt: Duration::from_millis(100),
            min_rto: Duration::from_millis(200),
            reorder_window: Duration::from_millis(1),
            ack_delay: Duration::from_millis(2),
            keepalive: Duration::from_millis(500),
            idle_timeout: Duration::from_secs(10),
            connect_retry: Duration::from_millis(250),
        }
    }
}
