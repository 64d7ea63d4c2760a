//! Options shared by `strata xsend`, `xrecv` and `xperf`: the transport's
//! settings as the paper's evaluation turns them (§4: application buffers,
//! UDP sockets, checksum, recovery, rate control).

use std::time::Duration;

use strata::xport::{RecoveryPolicy, XportOptions, XportStream};
use strata::xport_stack::parse_recovery;

use super::xport_stack::XStream;

use super::tcp_send::duration;

/// The transport's knobs.
#[derive(clap::Args, Debug, Clone)]
pub struct XportArgs {
    /// Application buffer size, bytes (each handed to the transport whole).
    #[arg(long, default_value_t = 1 << 20)]
    pub buffer: usize,
    /// Application buffers in flight (§3.5.2's multiple buffering).
    #[arg(long, default_value_t = 4)]
    pub buffers: usize,
    /// UDP data sockets (more are opened if the kernel clamps socket buffers).
    #[arg(long, default_value_t = 1)]
    pub data_sockets: usize,
    /// Socket buffer to ask for, bytes, over all data sockets.
    #[arg(long, default_value_t = 8 << 20)]
    pub socket_buffer: usize,
    /// Error recovery the receiver asks for: go-back-n, selective or adaptive.
    #[arg(long, default_value = "adaptive", value_parser = parse_recovery)]
    pub recovery: RecoveryPolicy,
    /// Turn rate control (rate = cwnd / SRTT) off.
    #[arg(long)]
    pub no_rate_control: bool,
    /// Add XTP's data checksum to data packets (for UDP without its own).
    #[arg(long)]
    pub data_checksum: bool,
    /// Busy-poll the sockets instead of sleeping (latency for a core).
    #[arg(long)]
    pub busy_poll: bool,
    /// Receive into the driver's buffers and copy into the application's,
    /// instead of straight into the application's (kernel UDP; to compare).
    #[arg(long)]
    pub copy_receive: bool,
    /// A peer silent this long has vanished.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub idle_timeout: Duration,
}

impl XportArgs {
    /// The library's options.
    pub fn options(&self) -> XportOptions {
        let mut o = XportOptions::default();
        o.config.app_buffer = self.buffer.min(u32::MAX as usize) as u32;
        o.config.recovery = self.recovery;
        o.config.rate_control = !self.no_rate_control;
        o.config.data_checksum = self.data_checksum;
        o.config.idle_timeout = self.idle_timeout;
        o.udp.data_sockets = self.data_sockets;
        o.udp.socket_buffer = self.socket_buffer;
        o.udp.busy_poll = self.busy_poll;
        o.udp.place = !self.copy_receive;
        o
    }
}

/// Tells the user when the kernel clamped socket buffers (§3.4).
pub fn say_buffers(s: &XportStream) -> Option<String> {
    let r = s.buffer_report();
    r.clamped.then(|| {
        format!(
            "socket buffers clamped by the kernel to {} KiB (asked {} KiB in all): using {} data sockets",
            r.rcvbuf >> 10,
            r.requested >> 10,
            r.data_sockets
        )
    })
}

/// One line of statistics: rate since the last line, RTT, windows, the
/// sending rate, ACKs/NAKs and retransmissions.
pub struct Ticker {
    last: std::time::Instant,
    last_bytes: u64,
    started: std::time::Instant,
}

impl Ticker {
    pub fn new() -> Ticker {
        let now = std::time::Instant::now();
        Ticker {
            last: now,
            last_bytes: 0,
            started: now,
        }
    }

    /// A line if a second passed since the last; `bytes` moved so far.
    pub fn tick(&mut self, s: &mut impl XStream, bytes: u64, every: Duration) -> Option<String> {
        let now = std::time::Instant::now();
        if now - self.last < every {
            return None;
        }
        let secs = (now - self.last).as_secs_f64();
        let rate = (bytes - self.last_bytes) as f64 * 8.0 / secs / 1e6;
        self.last = now;
        self.last_bytes = bytes;
        let i = s.info().ok()?;
        let st = s.stats();
        Some(format!(
            "{:6.1}s {:8.2} Mbit/s rtt={:.1}ms cwnd={} peer-cwnd={} send-rate={:.1} Mbit/s acks={}/{} naks={}/{} retx={} timeouts={}",
            (now - self.started).as_secs_f64(),
            rate,
            i.srtt.as_secs_f64() * 1e3,
            i.cwnd,
            i.peer_cwnd,
            i.sending_rate * 8.0 / 1e6,
            st.acks_sent,
            st.acks_received,
            st.go_back_n_sent + st.selective_sent,
            st.naks_received,
            st.retransmitted,
            st.timeouts,
        ))
    }
}
