//! A UDP ping-pong client that measures round trips inside the engine: it sends
//! a datagram, and the moment the echo comes back it records the round trip
//! and sends the next, so no thread crossing is in the loop (seed 000 §5.2's
//! latency test on real links). Pair it with [`UdpEcho`](super::udp_echo::UdpEcho).
//!
//! A round trip is timed with engine time, which the runtime reads once per
//! turn before it receives; the request goes out in the same turn the previous
//! echo came in, so the samples are whole cycles: both hosts' stacks, their
//! drivers and the wire, twice.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use bytes::Bytes;
use strata_core::{
    Addr, App, AppCx, AppId, Control, Engine, Instant, Message, PacketMeta, Participants, ProtoId,
    Qos, Reply, SessionRef, TimerId, UpiError,
};

use super::{any_app, proto_of_kind};

/// How long to wait for an echo before sending again (the lost one is counted).
const RETRY: Duration = Duration::from_millis(200);

/// Timer tokens.
const START: u64 = 1;

/// What to measure.
#[derive(Clone, Debug)]
pub struct RttConfig {
    /// The echo server.
    pub dest: SocketAddrV4,
    /// The next hop to resolve before the first request.
    pub next_hop: Ipv4Addr,
    /// Payload bytes (at least 8, which carry the sequence number).
    pub size: usize,
    /// Round trips to keep.
    pub samples: usize,
    /// Round trips to make first and not keep.
    pub warmup: usize,
}

/// The client.
pub struct UdpRtt {
    config: RttConfig,
    session: SessionRef,
    arp: Option<ProtoId>,
    payload: Vec<u8>,
    seq: u64,
    sent_at: Option<Instant>,
    /// Bumped at every send, so a stale retry timer is recognised.
    generation: u64,
    /// The retry timer of the outstanding request, cancelled when its echo
    /// comes (so timers do not pile up at one per round trip).
    retry: Option<TimerId>,
    /// Round trips in nanoseconds.
    pub samples: Vec<u64>,
    /// Requests whose echo never came.
    pub lost: u64,
    /// Echoes that matched no outstanding request.
    pub stray: u64,
}

impl UdpRtt {
    /// Adds the client to `engine`; it starts as soon as the next hop resolves.
    pub fn install(engine: &mut Engine, config: RttConfig) -> Result<AppId, UpiError> {
        if config.size < 8 {
            return Err(UpiError::BadParticipant(
                "a ping-pong payload needs at least 8 bytes",
            ));
        }
        let udp = proto_of_kind(engine, "udp")?;
        let arp = proto_of_kind(engine, "arp").ok();
        let id = engine.add_app(Box::new(UdpRtt {
            session: SessionRef::new(udp, strata_core::SessionId(0)),
            arp,
            payload: vec![0x5a; config.size],
            seq: 0,
            sent_at: None,
            generation: 0,
            retry: None,
            samples: Vec::with_capacity(config.samples),
            lost: 0,
            stray: 0,
            config: config.clone(),
        }));
        engine.with_app(id, |app, cx| {
            let parts =
                Participants::remote([Addr::Ip(*config.dest.ip()), Addr::Port(config.dest.port())])
                    .with_local([Addr::Port(0)]);
            let session = cx.open(udp, parts, Qos::default())?;
            if let Some(me) = app.as_any_mut().downcast_mut::<UdpRtt>() {
                me.session = session;
            }
            cx.set_timer(cx.now(), START);
            Ok::<_, UpiError>(())
        })??;
        Ok(id)
    }

    /// True once every sample is in.
    pub fn is_finished(&self) -> bool {
        self.samples.len() >= self.config.samples
    }

    fn send(&mut self, cx: &mut AppCx) {
        self.seq += 1;
        self.generation += 1;
        self.payload[..8].copy_from_slice(&self.seq.to_be_bytes());
        let now = cx.now();
        self.sent_at = Some(now);
        cx.send(
            self.session,
            Message::from_bytes(Bytes::copy_from_slice(&self.payload)),
        );
        self.retry = Some(cx.set_timer(now + RETRY, START + self.generation));
    }

    fn resolved(&self, cx: &mut AppCx) -> bool {
        let Some(arp) = self.arp else {
            return true;
        };
        matches!(
            cx.control(arp, None, Control::Resolve(self.config.next_hop)),
            Ok(Reply::Resolved { .. })
        )
    }
}

impl App for UdpRtt {
    fn receive(
        &mut self,
        _s: Option<SessionRef>,
        msg: Message,
        _meta: &PacketMeta,
        cx: &mut AppCx,
    ) {
        let mut seq = [0u8; 8];
        let matches = msg.copy_to_slice(0, &mut seq) == 8 && u64::from_be_bytes(seq) == self.seq;
        let Some(sent) = self.sent_at.filter(|_| matches) else {
            self.stray += 1;
            return;
        };
        self.sent_at = None;
        if let Some(t) = self.retry.take() {
            cx.cancel_timer(t);
        }
        let rtt = cx.now() - sent;
        if self.seq > self.config.warmup as u64 && !self.is_finished() {
            self.samples
                .push(u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX));
        }
        if !self.is_finished() {
            self.send(cx);
        }
    }

    fn timer(&mut self, token: u64, cx: &mut AppCx) {
        if self.is_finished() {
            return;
        }
        if token == START && self.seq == 0 {
            if self.resolved(cx) {
                self.send(cx);
            } else {
                cx.set_timer(cx.now() + Duration::from_millis(1), START);
            }
        } else if token == START + self.generation && self.sent_at.is_some() {
            self.lost += 1;
            self.send(cx);
        }
    }

    any_app!();
}
