//! One connection: RFC 9293's transmission control block, built from the
//! send side, the receive side, the timers, congestion control and loss
//! recovery, with what the connection negotiated in its handshake.

use std::net::Ipv4Addr;

use strata_core::{AppEvent, Cx, Instant, SessionId, SessionRef, UpiError, Upper};

use super::api::{ConnInfo, Keepalive, Stats};
use super::config::Config;
use super::congestion::{Congestion, Window};
use super::options::TcpOptions;
use super::recovery::Recovery;
use super::recv::Receiver;
use super::rtt::{Rto, RttTimer};
use super::send::Sender;
use super::seq::Seq;
use super::state::State;
use super::timers::Deadlines;

/// Bytes the timestamps option takes in every segment (two NOPs and ten).
pub const TS_OPTION_LEN: u32 = 12;

/// RFC 9293 §3.7.1: the MSS to assume when the peer sends none.
pub const DEFAULT_MSS: u16 = 536;

/// RFC 7323 timestamp state, once both ends use timestamps.
#[derive(Clone, Copy, Debug)]
pub struct Timestamps {
    /// TS.Recent: the TSval to echo (RFC 7323 §4.3).
    pub recent: u32,
    /// When TS.Recent was set, for PAWS's 24-day rule (RFC 7323 §5.5).
    pub recent_at: Instant,
}

/// What our SYN offered (or a SYN-ACK would offer).
#[derive(Clone, Copy, Debug)]
pub struct Offer {
    /// SACK-permitted.
    pub sack: bool,
    /// Timestamps.
    pub timestamps: bool,
    /// Our window scale.
    pub wscale: Option<u8>,
    /// Our MSS: the IP payload that fits a frame, less the TCP header.
    pub mss: u16,
}

/// A connection.
pub(crate) struct Conn {
    /// Its session.
    pub id: SessionId,
    /// The state.
    pub state: State,
    /// Who sits above.
    pub upper: Upper,
    /// The upper still holds the session: data and events go to it. False
    /// after it closed or aborted the session, or was told `Closed`.
    pub attached: bool,
    /// The upper has been told of the session (`Connected`, `OpenDone`).
    pub announced: bool,
    /// A passive child's listener port, until the handshake completes.
    pub listener: Option<u16>,
    /// This end.
    pub local: (Ipv4Addr, u16),
    /// The peer.
    pub remote: (Ipv4Addr, u16),
    /// The IP session to the peer.
    pub ip: SessionRef,
    /// What we offered.
    pub offer: Offer,
    /// The send side.
    pub snd: Sender,
    /// The receive side (its IRS is a placeholder until the peer's SYN).
    pub rcv: Receiver,
    /// The retransmission timeout estimator.
    pub rto: Rto,
    /// One timed segment when timestamps are off.
    pub rtt_timer: RttTimer,
    /// The timers' deadlines.
    pub timers: Deadlines,
    /// The congestion control algorithm.
    pub cc: Box<dyn Congestion>,
    /// cwnd and ssthresh.
    pub win: Window,
    /// Loss recovery and the SACK scoreboard.
    pub rec: Recovery,
    /// Timestamps, when both ends use them.
    pub ts: Option<Timestamps>,
    /// The offset of our timestamp clock, random per 4-tuple (RFC 7323 §5.4).
    pub ts_offset: u32,
    /// RCV.NXT in the last ACK we sent (RFC 7323 §4.3's Last.ACK.sent).
    pub last_ack_sent: Seq,
    /// Window scaling is in use.
    pub scaling: bool,
    /// Keepalive settings, when on.
    pub keepalive: Option<Keepalive>,
    /// Unanswered keepalive probes.
    pub probes: u32,
    /// Consecutive retransmission timeouts without progress.
    pub retries: u32,
    /// Unanswered zero-window probes (the persist backoff).
    pub persist_backoff: u32,
    /// Probes of the closed window sent since the peer last sent anything:
    /// the connection is given up only when the peer stops answering (RFC
    /// 9293 §3.8.6.1: never for a window that stays closed while ACKs come).
    pub probes_unanswered: u32,
    /// Last time a segment arrived (keepalive idle time).
    pub last_recv: Instant,
    /// Last time data was sent (cwnd restart after idle, RFC 5681 §4.1).
    pub last_send: Instant,
    /// When pacing lets the next segment go (`output`).
    pub next_send: Instant,
    /// Compute and verify checksums.
    pub checksum: bool,
    /// Counters.
    pub stats: Stats,
    /// RFC 5961 §7 rate limit: the second and the challenge ACKs sent in it.
    pub challenge_window: (u64, u32),
    /// An ICMP error seen while the connection retried (RFC 1122 §4.2.3.9's
    /// soft errors): reported if it then times out.
    pub soft_error: Option<UpiError>,
}

impl Conn {
    /// A connection in `state` with our ISN `iss`; the receive side waits for
    /// the peer's SYN.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: SessionId,
        state: State,
        upper: Upper,
        local: (Ipv4Addr, u16),
        remote: (Ipv4Addr, u16),
        ip: SessionRef,
        iss: Seq,
        offer: Offer,
        cfg: &Config,
        now: Instant,
        ts_offset: u32,
    ) -> Conn {
        let mut snd = Sender::new(iss, cfg.sndbuf, cfg.sndbuf_max, cfg.nodelay);
        snd.mss = u32::from(offer.mss.min(DEFAULT_MSS));
        let mut rcv = Receiver::new(Seq(0), cfg.rcvbuf, cfg.rcvbuf_max, 0, now);
        rcv.manual = cfg.manual_consume;
        let rec = Recovery::default();
        Conn {
            id,
            state,
            upper,
            attached: true,
            announced: false,
            listener: None,
            local,
            remote,
            ip,
            offer,
            snd,
            rcv,
            rto: Rto::new(cfg.rto_min, cfg.rto_max),
            rtt_timer: RttTimer::default(),
            timers: Deadlines::default(),
            cc: cfg.congestion.instance(),
            win: Window::initial(u32::from(DEFAULT_MSS)),
            rec,
            ts: None,
            ts_offset,
            last_ack_sent: iss,
            scaling: false,
            keepalive: cfg.keepalive,
            probes: 0,
            retries: 0,
            persist_backoff: 0,
            probes_unanswered: 0,
            last_recv: now,
            last_send: now,
            next_send: now,
            checksum: cfg.checksum,
            stats: Stats::default(),
            challenge_window: (0, 0),
            soft_error: None,
        }
    }

    /// The session as the rest of the graph names it.
    pub fn session(&self, cx: &Cx) -> SessionRef {
        SessionRef::new(cx.me(), self.id)
    }

    /// Settles what the handshake agreed from the peer's SYN options (RFC
    /// 7323 §2.2, §3.2; RFC 2018 §2; RFC 9293 §3.7.1), and starts the receive
    /// side at its ISN. Each option is on only when both ends sent it.
    pub fn negotiate(&mut self, irs: Seq, peer: &TcpOptions, cfg: &Config, now: Instant) {
        let (ours, theirs) = match (self.offer.wscale, peer.window_scale) {
            (Some(o), Some(t)) => (o, t),
            _ => (0, 0),
        };
        self.scaling = self.offer.wscale.is_some() && peer.window_scale.is_some();
        self.snd.wscale = theirs;
        let manual = self.rcv.manual;
        self.rcv = Receiver::new(irs, cfg.rcvbuf, cfg.rcvbuf_max, ours, now);
        self.rcv.manual = manual;
        // The window a SYN announces, unscaled (RFC 7323 §2.2).
        self.rcv.adv = self.rcv.nxt + cfg.rcvbuf.min(usize::from(u16::MAX)) as u32;
        self.rec.sack = self.offer.sack && peer.sack_permitted;
        self.ts = match (self.offer.timestamps, peer.timestamp) {
            (true, Some(t)) => Some(Timestamps {
                recent: t.val,
                recent_at: now,
            }),
            _ => None,
        };
        // Eff.snd.MSS = min(SendMSS + 20, MMS_S) − TCP header − options.
        let peer_mss = u32::from(peer.mss.unwrap_or(DEFAULT_MSS));
        let mms = u32::from(self.offer.mss) + 20;
        let options = if self.ts.is_some() { TS_OPTION_LEN } else { 0 };
        // Linux's floor (TCP_MIN_SND_MSS, 48) keeps a peer announcing a
        // tiny MSS from making us send a segment per few bytes.
        self.snd.mss = ((peer_mss + 20).min(mms) - 20)
            .saturating_sub(options)
            .max(48);
        self.win = Window::initial(self.snd.mss);
        let floor = 2 * self.win.cwnd as usize;
        self.snd.sndbuf = self.snd.sndbuf.max(floor.min(self.snd.sndbuf_max));
    }

    /// Tells the upper application `event`, when it knows the session and
    /// still holds it.
    pub fn notify(&self, cx: &mut Cx, event: AppEvent) {
        if let (true, true, Upper::App(app)) = (self.attached, self.announced, self.upper) {
            cx.notify(app, event);
        }
    }

    /// The application is done sending: a FIN follows the queued data (RFC
    /// 9293 §3.10.4 CLOSE). Before the handshake ends the FIN waits for it.
    pub fn close_send(&mut self) {
        if self.snd.fin_queued || !self.state.can_send() {
            return;
        }
        self.snd.fin_queued = true;
        if self.state.is_synchronized()
            && let Some(next) = self.state.after_close()
        {
            self.state = next;
        }
    }

    /// The connection is gone for its upper: tells it `Closed` once.
    pub fn detach(&mut self, error: Option<UpiError>, cx: &mut Cx) {
        if self.attached && self.announced {
            let session = self.session(cx);
            self.notify(cx, AppEvent::Closed { session, error });
        }
        self.attached = false;
    }

    /// Ends the connection: CLOSED, the upper told, to be deleted.
    pub fn terminate(&mut self, error: Option<UpiError>, cx: &mut Cx) {
        self.state = State::Closed;
        self.detach(error, cx);
    }

    /// Our TSval at `now`: milliseconds since the engine's epoch, offset.
    pub fn ts_val(&self, now: Instant) -> u32 {
        ((now.as_nanos() / 1_000_000) as u32).wrapping_add(self.ts_offset)
    }

    /// What `tcp::Info` reports.
    pub fn info(&self) -> ConnInfo {
        ConnInfo {
            state: self.state,
            congestion: self.cc.name(),
            cwnd: self.win.cwnd,
            ssthresh: self.win.ssthresh,
            srtt: self.rto.srtt(),
            rttvar: self.rto.rttvar(),
            rto: self.rto.rto(),
            mss: self.snd.mss,
            snd_wnd: self.snd.wnd,
            rcv_wnd: self.rcv.wnd(),
            in_flight: self.snd.flight(),
            snd_una: self.snd.una,
            snd_nxt: self.snd.nxt,
            rcv_nxt: self.rcv.nxt,
            sndbuf: (self.snd.sndbuf, self.snd.buf.len()),
            rcvbuf: (self.rcv.rcvbuf, self.rcv.unread),
            rcv_rtt: self.rcv.rtt(),
            sack: self.rec.sack,
            timestamps: self.ts.is_some(),
            wscale: self.scaling.then_some((self.rcv.wscale, self.snd.wscale)),
            stats: self.stats,
        }
    }
}
