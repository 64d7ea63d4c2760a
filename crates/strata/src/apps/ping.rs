//! An ICMP echo client, as ping(8) is: echo requests on a schedule, a line per
//! reply, a summary at the end.
//!
//! It opens an ICMP ping session to the target (the `icmp` protocol picks the
//! identifier and numbers requests from 1). Each request carries `size` bytes of
//! data: the send time (engine nanoseconds, as ping puts a timeval there) and
//! then a fixed pattern, which the reply must bring back unchanged. Replies and
//! the end are reported through a bounded channel as they happen; the totals
//! stay in the app.

use std::net::Ipv4Addr;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;
use strata_proto::Ipv4Info;

use bytes::{BufMut, BytesMut};
use strata_core::{
    Addr, App, AppCx, AppEvent, AppId, Engine, Instant, Message, PacketMeta, Participants, Qos,
    SessionRef, UpiError,
};

use super::{any_app, proto_of_kind};

/// Events that may wait in the channel; more are counted and dropped.
pub const EVENT_CAPACITY: usize = 4096;

/// How many recent requests are remembered for matching replies and spotting
/// duplicates.
const WINDOW: usize = 1024;

/// Timer tokens.
const SEND: u64 = 1;
const FINISH: u64 = 2;

/// What to send.
#[derive(Clone, Debug)]
pub struct PingConfig {
    /// Who to ping.
    pub target: Ipv4Addr,
    /// Requests to send; `None` until stopped.
    pub count: Option<u64>,
    /// Data bytes per request (ping's -s; at least 8 carry the send time).
    pub size: usize,
    /// Time between requests.
    pub interval: Duration,
    /// How long to wait for replies after the last request.
    pub linger: Duration,
}

/// Something that happened.
#[derive(Clone, Debug, PartialEq)]
pub enum PingEvent {
    /// An echo reply.
    Reply {
        /// The sequence number.
        seq: u16,
        /// ICMP bytes (header and data), as ping prints them.
        bytes: usize,
        /// Who answered.
        from: Ipv4Addr,
        /// The reply's time to live.
        ttl: u8,
        /// Round-trip time.
        rtt: Duration,
        /// A reply to a request already answered.
        duplicate: bool,
        /// The data came back changed.
        corrupt: bool,
    },
    /// Every request is out and the linger time has passed (or every reply is in).
    Finished,
}

/// The totals, as ping's summary gives them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PingTotals {
    /// Requests sent.
    pub transmitted: u64,
    /// Distinct requests answered.
    pub received: u64,
    /// Extra replies.
    pub duplicates: u64,
    /// Replies whose data came back changed.
    pub corrupt: u64,
    /// Smallest, mean, largest round trip and the mean deviation (ping's mdev:
    /// the standard deviation).
    pub rtt: Option<(Duration, Duration, Duration, Duration)>,
    /// Events dropped because nobody read the channel.
    pub events_dropped: u64,
}

/// The client.
pub struct Pinger {
    config: PingConfig,
    session: SessionRef,
    events: SyncSender<PingEvent>,
    /// Per slot `seq % WINDOW`: the sequence number, when it was sent, and
    /// whether a reply came.
    window: Vec<Option<(u16, Instant, bool)>>,
    next_seq: u16,
    started: Option<Instant>,
    sum: f64,
    sum_sq: f64,
    min: Duration,
    max: Duration,
    finished: bool,
    /// The totals so far.
    pub totals: PingTotals,
}

impl Pinger {
    /// Adds a pinger to `engine`, sending its first request at once; events
    /// arrive on the returned channel.
    pub fn install(
        engine: &mut Engine,
        config: PingConfig,
    ) -> Result<(AppId, Receiver<PingEvent>), UpiError> {
        let icmp = proto_of_kind(engine, "icmp")?;
        let (tx, rx) = sync_channel(EVENT_CAPACITY);
        let target = config.target;
        let id = engine.add_app(Box::new(Pinger {
            config,
            session: SessionRef::new(icmp, strata_core::SessionId(0)),
            events: tx,
            window: vec![None; WINDOW],
            next_seq: 1,
            started: None,
            sum: 0.0,
            sum_sq: 0.0,
            min: Duration::MAX,
            max: Duration::ZERO,
            finished: false,
            totals: PingTotals::default(),
        }));
        engine.with_app(id, |app, cx| {
            let session = cx.open(
                icmp,
                Participants::remote([Addr::Ip(target)]),
                Qos::default(),
            )?;
            if let Some(me) = app.as_any_mut().downcast_mut::<Pinger>() {
                me.session = session;
            }
            cx.set_timer(cx.now(), SEND);
            Ok::<_, UpiError>(())
        })??;
        Ok((id, rx))
    }

    /// True once the run is over.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn emit(&mut self, e: PingEvent) {
        if let Err(TrySendError::Full(_)) = self.events.try_send(e) {
            self.totals.events_dropped += 1;
        }
    }

    fn data(&self, sent: Instant) -> Message {
        let mut b = BytesMut::with_capacity(self.config.size);
        let stamp = sent.as_nanos().to_be_bytes();
        b.put_slice(&stamp[..self.config.size.min(8)]);
        for i in 8..self.config.size {
            b.put_u8(pattern(i));
        }
        Message::from_bytes(b.freeze())
    }

    fn send(&mut self, cx: &mut AppCx) {
        let now = cx.now();
        self.started.get_or_insert(now);
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.window[usize::from(seq) % WINDOW] = Some((seq, now, false));
        self.totals.transmitted += 1;
        cx.send(self.session, self.data(now));
        let more = self
            .config
            .count
            .is_none_or(|c| self.totals.transmitted < c);
        if more {
            cx.set_timer(now + self.config.interval, SEND);
        } else {
            cx.set_timer(now + self.config.linger, FINISH);
        }
    }

    fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        if self.totals.received > 0 {
            let n = self.totals.received as f64;
            let mean = self.sum / n;
            let sd = (self.sum_sq / n - mean * mean).max(0.0).sqrt();
            self.totals.rtt = Some((
                self.min,
                Duration::from_secs_f64(mean),
                self.max,
                Duration::from_secs_f64(sd),
            ));
        }
        self.emit(PingEvent::Finished);
    }
}

fn pattern(i: usize) -> u8 {
    (i as u8).wrapping_add(0x10)
}

impl App for Pinger {
    fn receive(&mut self, _s: Option<SessionRef>, msg: Message, meta: &PacketMeta, cx: &mut AppCx) {
        // The icmp session delivers the 2-byte sequence number, then the data.
        let bytes = msg.to_vec();
        let Some(seq) = bytes.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
            return;
        };
        let data = &bytes[2..];
        let now = cx.now();
        let Some((sent_seq, sent, answered)) = self.window[usize::from(seq) % WINDOW] else {
            return;
        };
        if sent_seq != seq {
            return;
        }
        let corrupt = data.len() != self.config.size
            || data
                .iter()
                .enumerate()
                .any(|(i, &b)| i >= 8 && b != pattern(i))
            || (self.config.size >= 8 && data[..8] != sent.as_nanos().to_be_bytes());
        let rtt = now - sent;
        if answered {
            self.totals.duplicates += 1;
        } else {
            self.window[usize::from(seq) % WINDOW] = Some((seq, sent, true));
            self.totals.received += 1;
            let s = rtt.as_secs_f64();
            self.sum += s;
            self.sum_sq += s * s;
            self.min = self.min.min(rtt);
            self.max = self.max.max(rtt);
        }
        if corrupt {
            self.totals.corrupt += 1;
        }
        let ip = Ipv4Info::from_meta(meta);
        self.emit(PingEvent::Reply {
            seq,
            bytes: data.len() + 8,
            from: ip.src,
            ttl: ip.ttl,
            rtt,
            duplicate: answered,
            corrupt,
        });
        let all_in = self
            .config
            .count
            .is_some_and(|c| self.totals.transmitted == c && self.totals.received == c);
        if all_in {
            self.finish();
        }
    }

    fn event(&mut self, event: AppEvent, _cx: &mut AppCx) {
        if let AppEvent::Closed { session, .. } = event
            && session == self.session
        {
            self.finish();
        }
    }

    fn timer(&mut self, token: u64, cx: &mut AppCx) {
        match token {
            SEND if !self.finished => self.send(cx),
            FINISH => self.finish(),
            _ => {}
        }
    }

    any_app!();
}
