//! TCP's control operations. Each converts into the [`Control`] that carries
//! it (`cx.control(tcp, Some(sess), op.into())`): [`Write`], the data path,
//! into the typed `Control::Write`; the others into `Control::Private`, sent
//! to a session (or, for [`SetBacklog`], to the protocol). The module docs of
//! [`tcp`](super) describe how an application uses them together.

use std::time::Duration;

use strata_core::{Control, Message};

use super::seq::Seq;
use super::state::State;

/// Queues the first `n` bytes of the message for sending, where `n` is the
/// free space of the send buffer, and answers `Reply::Size(n)`. The rest is
/// the caller's to offer again after `AppEvent::Writable`: nothing is lost.
#[derive(Debug)]
pub struct Write(pub Message);

impl From<Write> for Control {
    fn from(w: Write) -> Control {
        Control::Write(w.0)
    }
}

/// The private operations travel boxed.
macro_rules! private {
    ($($op:ident),*) => {
        $(impl From<$op> for Control {
            fn from(op: $op) -> Control {
                Control::Private(Box::new(op))
            }
        })*
    };
}

private!(
    SendSpace,
    Shutdown,
    Abort,
    Consumed,
    ManualConsume,
    SetNodelay,
    SetKeepalive,
    Info,
    SetBacklog
);

/// Answers `Reply::Size` with the free space of the send buffer.
#[derive(Clone, Copy, Debug)]
pub struct SendSpace;

/// Closes the send direction (a FIN follows the queued data) while receiving
/// goes on: a half-close. `AppEvent::Closed` comes once both directions are
/// done.
#[derive(Clone, Copy, Debug)]
pub struct Shutdown;

/// Resets the connection (RST) and forgets it at once; queued data is
/// discarded and no event follows.
#[derive(Clone, Copy, Debug)]
pub struct Abort;

/// Manual receive flow control: the application has consumed `n` more of the
/// bytes delivered to it, so the window may open by as much.
#[derive(Clone, Copy, Debug)]
pub struct Consumed(pub usize);

/// Turns manual receive flow control on or off for the session. Off (the
/// default), delivered data counts as consumed at once; on, it counts against
/// the advertised window until [`Consumed`] says it was read.
#[derive(Clone, Copy, Debug)]
pub struct ManualConsume(pub bool);

/// Turns Nagle's algorithm off (`true`) or on (RFC 9293 §3.7.4).
#[derive(Clone, Copy, Debug)]
pub struct SetNodelay(pub bool);

/// Turns keepalives on with these settings, or off with `None`.
#[derive(Clone, Copy, Debug)]
pub struct SetKeepalive(pub Option<Keepalive>);

/// Answers `Reply::Private(Box<ConnInfo>)`.
#[derive(Clone, Copy, Debug)]
pub struct Info;

/// Sets the backlog of the listener on `port` (sent to the protocol, session
/// `None`).
#[derive(Clone, Copy, Debug)]
pub struct SetBacklog {
    /// The listening port.
    pub port: u16,
    /// Most connections in SYN-RECEIVED at once.
    pub backlog: usize,
}

/// Keepalive settings (RFC 1122 §4.2.3.6); the defaults are Linux's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe (Linux tcp_keepalive_time, 7200 s).
    pub idle: Duration,
    /// Time between unanswered probes (tcp_keepalive_intvl, 75 s).
    pub interval: Duration,
    /// Unanswered probes before the connection is dropped (tcp_keepalive_probes, 9).
    pub probes: u32,
}

impl Default for Keepalive {
    fn default() -> Self {
        Keepalive {
            idle: Duration::from_secs(7200),
            interval: Duration::from_secs(75),
            probes: 9,
        }
    }
}

/// What [`Info`] reports about a connection, for `strata perf` and tests.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnInfo {
    /// The state.
    pub state: State,
    /// The congestion control algorithm.
    pub congestion: &'static str,
    /// Congestion window, bytes.
    pub cwnd: u32,
    /// Slow-start threshold, bytes (`u32::MAX` before the first loss).
    pub ssthresh: u32,
    /// Smoothed round-trip time.
    pub srtt: Option<Duration>,
    /// Round-trip time variation.
    pub rttvar: Duration,
    /// Retransmission timeout, with backoff.
    pub rto: Duration,
    /// Effective send MSS.
    pub mss: u32,
    /// The peer's window, bytes.
    pub snd_wnd: u32,
    /// Our advertised window, bytes.
    pub rcv_wnd: u32,
    /// Bytes sent and not acknowledged.
    pub in_flight: u32,
    /// SND.UNA.
    pub snd_una: Seq,
    /// SND.NXT.
    pub snd_nxt: Seq,
    /// RCV.NXT.
    pub rcv_nxt: Seq,
    /// Send buffer size and bytes in it.
    pub sndbuf: (usize, usize),
    /// Receive buffer size, and bytes delivered but not consumed.
    pub rcvbuf: (usize, usize),
    /// The receiver's round-trip estimate that sizes the receive buffer.
    pub rcv_rtt: Option<Duration>,
    /// SACK, timestamps and window scaling in use.
    pub sack: bool,
    /// Timestamps in use.
    pub timestamps: bool,
    /// Window scale shifts (ours, the peer's) when scaling is in use.
    pub wscale: Option<(u8, u8)>,
    /// Counters.
    pub stats: Stats,
}

/// A connection's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Segments sent, retransmissions included.
    pub segs_out: u64,
    /// Segments received and processed.
    pub segs_in: u64,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Fast retransmits (entries into loss recovery).
    pub fast_recoveries: u64,
    /// Data bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// Data bytes received in order.
    pub bytes_received: u64,
    /// Zero-window probes sent.
    pub window_probes: u64,
    /// Tail loss probes sent (RFC 8985 §7).
    pub loss_probes: u64,
    /// Retransmissions found lost again and repaired without a timeout
    /// (RFC 8985 §6.2).
    pub lost_retransmits: u64,
}
