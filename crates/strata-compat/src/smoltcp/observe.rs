//! What `tcp::Info` reports about an imported connection, learned by
//! watching its segments.
//!
//! smoltcp keeps its connection record private: it tells its state and the
//! fill of its rings, not its sequence numbers, window, segment size or any
//! count. Strata's `tcp::Info` answers all of those, and applications use it
//! (the echo service and the socket layer read `bytes_received`). The module
//! supplies what a packet capture would show: every segment smoltcp sends
//! and every one it is fed crosses the module, whose headers it reads —
//! sequence numbers, windows, the options of the handshake, and
//! retransmissions (a segment that starts below the highest sequence number
//! sent), window probes (a segment sent into a closed window). What only
//! smoltcp's insides know — congestion window, slow-start
//! threshold, round-trip estimate, timeouts — is reported as zero or `None`.

use smoltcp::socket::tcp::{self as smol, CongestionControl};
use smoltcp::wire::{TcpControl, TcpRepr};
use strata_proto::tcp::api::{ConnInfo, Stats};
use strata_proto::tcp::options::TcpOptions;
use strata_proto::tcp::seq::Seq;
use strata_proto::tcp::state::State;
use strata_proto::tcp::wire::{Flags, Header};

/// Bytes of the timestamp option, as smoltcp pads it (RFC 7323 §3).
const TIMESTAMP_OPTION: u32 = 12;

/// A connection as seen on its segments.
#[derive(Clone, Debug, Default)]
pub(super) struct Observed {
    /// Segments smoltcp sent.
    pub segs_out: u64,
    /// Segments fed to smoltcp.
    pub segs_in: u64,
    /// Segments sent again.
    pub retransmits: u64,
    /// Segments sent into a window the peer had closed (zero-window
    /// probes, RFC 9293 §3.8.6.1).
    pub window_probes: u64,
    /// Data bytes handed to the application.
    pub bytes_received: u64,
    iss: Option<Seq>,
    /// The highest sequence number sent, plus one.
    snd_max: Option<Seq>,
    /// The highest acknowledgment received.
    snd_una: Option<Seq>,
    /// The acknowledgment last sent.
    rcv_nxt: Option<Seq>,
    peer_window: u16,
    our_window: u16,
    /// Window scale shifts offered in the SYNs: (ours, the peer's).
    shifts: (Option<u8>, Option<u8>),
    sack: (bool, bool),
    timestamps: (bool, bool),
    peer_mss: Option<u16>,
}

/// A segment's length in sequence space: data, SYN and FIN.
fn seq_len(payload: usize, syn: bool, fin: bool) -> u32 {
    payload as u32 + u32::from(syn) + u32::from(fin)
}

impl Observed {
    /// A segment smoltcp sent: `segment` is its TCP header and data.
    pub fn sent(&mut self, segment: &[u8]) {
        let Ok(h) = Header::new_checked(segment) else {
            return;
        };
        let flags = h.flags();
        let syn = flags.has(Flags::SYN);
        self.segs_out += 1;
        if syn {
            let o = TcpOptions::parse(h.options());
            self.iss = Some(h.seq());
            self.shifts.0 = o.window_scale;
            self.sack.0 = o.sack_permitted;
            self.timestamps.0 = o.timestamp.is_some();
        }
        if flags.has(Flags::ACK) {
            self.rcv_nxt = Some(h.ack());
        }
        self.our_window = h.window();
        let len = seq_len(segment.len() - h.header_len(), syn, flags.has(Flags::FIN));
        if len == 0 {
            return;
        }
        let end = h.seq() + len;
        if self.peer_window == 0 && self.snd_una.is_some() && !syn {
            self.window_probes += 1;
        } else if let Some(max) = self.snd_max
            && h.seq() < max
        {
            self.retransmits += 1;
        }
        self.snd_max = Some(self.snd_max.map_or(end, |m| m.max(end)));
    }

    /// A segment fed to smoltcp for this connection.
    pub fn received(&mut self, seg: &TcpRepr) {
        self.segs_in += 1;
        if seg.control == TcpControl::Syn {
            self.shifts.1 = seg.window_scale;
            self.sack.1 = seg.sack_permitted;
            self.timestamps.1 = seg.timestamp.is_some();
            self.peer_mss = seg.max_seg_size;
        }
        if let Some(ack) = seg.ack_number {
            let ack = Seq(ack.0 as u32);
            self.snd_una = Some(self.snd_una.map_or(ack, |u| u.max(ack)));
        }
        self.peer_window = seg.window_len;
    }

    /// The report, for a socket in `socket` whose application has `unread`
    /// bytes delivered and not consumed, on a link whose IP MTU is `mtu`.
    pub fn info(&self, socket: &smol::Socket, unread: usize, mtu: usize) -> ConnInfo {
        let timestamps = self.timestamps.0 && self.timestamps.1;
        let scaled = matches!(self.shifts, (Some(_), Some(_)));
        let (ours, theirs) = (self.shifts.0.unwrap_or(0), self.shifts.1.unwrap_or(0));
        // smoltcp's effective MSS: the smaller of ours and the peer's (536
        // when it named none, RFC 9293 §3.7.1), less the timestamp option.
        let local = mtu.saturating_sub(40) as u32;
        let peer = u32::from(self.peer_mss.unwrap_or(536));
        let mss = local
            .min(peer)
            .saturating_sub(if timestamps { TIMESTAMP_OPTION } else { 0 });
        let una = self.snd_una.unwrap_or(Seq(0));
        let nxt = self.snd_max.unwrap_or(una);
        let acked = match self.iss {
            Some(iss) if self.snd_una.is_some() => una.since(iss + 1),
            _ => 0,
        };
        ConnInfo {
            state: state_of(socket.state()),
            congestion: match socket.congestion_control() {
                CongestionControl::Cubic => "cubic",
                CongestionControl::Reno => "reno",
                CongestionControl::None => "none",
            },
            cwnd: 0,
            ssthresh: 0,
            srtt: None,
            rttvar: std::time::Duration::ZERO,
            rto: std::time::Duration::ZERO,
            mss,
            snd_wnd: u32::from(self.peer_window) << if scaled { theirs } else { 0 },
            rcv_wnd: u32::from(self.our_window) << if scaled { ours } else { 0 },
            in_flight: nxt.since(una),
            snd_una: una,
            snd_nxt: nxt,
            rcv_nxt: self.rcv_nxt.unwrap_or(Seq(0)),
            sndbuf: (socket.send_capacity(), socket.send_queue()),
            rcvbuf: (socket.recv_capacity(), unread),
            rcv_rtt: None,
            sack: self.sack.0 && self.sack.1,
            timestamps,
            wscale: scaled.then_some((ours, theirs)),
            stats: Stats {
                segs_out: self.segs_out,
                segs_in: self.segs_in,
                retransmits: self.retransmits,
                window_probes: self.window_probes,
                bytes_acked: u64::from(acked),
                bytes_received: self.bytes_received,
                ..Stats::default()
            },
        }
    }
}

/// smoltcp's state as Strata's TCP names it (a listening socket never
/// backs a session: it reads as closed).
pub(super) fn state_of(s: smol::State) -> State {
    match s {
        smol::State::SynSent => State::SynSent,
        smol::State::SynReceived => State::SynReceived,
        smol::State::Established => State::Established,
        smol::State::FinWait1 => State::FinWait1,
        smol::State::FinWait2 => State::FinWait2,
        smol::State::CloseWait => State::CloseWait,
        smol::State::Closing => State::Closing,
        smol::State::LastAck => State::LastAck,
        smol::State::TimeWait => State::TimeWait,
        smol::State::Closed | smol::State::Listen => State::Closed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_proto::tcp::wire::Repr;

    fn segment(seq: u32, flags: Flags, data: usize) -> Vec<u8> {
        let repr = Repr {
            src_port: 49152,
            dst_port: 80,
            seq: Seq(seq),
            ack: Seq(500),
            flags,
            window: 1000,
            urgent: 0,
            options: TcpOptions::default(),
        };
        let mut out = [0u8; strata_proto::tcp::wire::MAX_HEADER_LEN];
        let n = repr.emit(&mut out);
        let mut v = out[..n].to_vec();
        v.resize(n + data, 0);
        v
    }

    #[test]
    fn a_segment_sent_again_counts_as_a_retransmission_and_sequence_numbers_follow() {
        let mut o = Observed::default();
        o.sent(&segment(99, Flags::SYN, 0));
        o.sent(&segment(100, Flags::ACK, 1000));
        o.sent(&segment(1100, Flags::ACK, 1000));
        o.sent(&segment(100, Flags::ACK, 1000));
        o.sent(&segment(2100, Flags::ACK, 0));
        assert_eq!(o.retransmits, 1, "the second 100, not the pure ACK");
        assert_eq!(o.segs_out, 5);
        assert_eq!(o.snd_max, Some(Seq(2100)));
        assert_eq!(o.rcv_nxt, Some(Seq(500)));
    }
}
