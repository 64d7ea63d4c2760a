//! A connection's settings: what the set-up negotiates (§2.1) and the
//! switches the paper's evaluation turns (§4: recovery algorithm, rate
//! control, data checksum).

use std::time::Duration;

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
    /// Payload bytes per data packet (1400 keeps a datagram within a 1500-byte MTU).
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

impl Default for Config {
    fn default() -> Self {
        Config {
            mss: 1400,
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
