//! A paced UDP sender for measured transfers: `total` bytes in datagrams of
//! `size` bytes to one destination, at `rate` bits per second, each datagram
//! made by [`transfer::datagram`] so the receiver can check every byte.
//!
//! Pacing is a token bucket refilled on a 1 ms timer, with a burst of at most
//! [`BURST`] datagrams, so no queue on the way (the engine's, a socket's, a
//! bridge's) sees more than a small burst at once. The sender waits for its
//! next hop to resolve before the first datagram, so ARP's small hold queue
//! never overflows at the start.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use strata_core::{
    Addr, App, AppCx, AppEvent, AppId, Control, Engine, Instant, Message, PacketMeta, Participants,
    ProtoId, Qos, Reply, SessionRef, UpiError,
};

use super::transfer::{self, HEADER_LEN};
use super::{any_app, proto_of_kind};

/// Most datagrams sent back to back in one tick.
pub const BURST: u64 = 32;

/// How often the sender wakes.
const TICK: Duration = Duration::from_millis(1);

/// What to send.
#[derive(Clone, Debug)]
pub struct BlastConfig {
    /// The receiver.
    pub dest: SocketAddrV4,
    /// The next hop to resolve before sending (the receiver itself on-link).
    pub next_hop: Ipv4Addr,
    /// Local port (0 picks one).
    pub local_port: u16,
    /// Bytes of UDP payload in all.
    pub total: u64,
    /// Payload bytes per datagram (at least 16).
    pub size: usize,
    /// Bits of payload per second.
    pub rate: u64,
    /// The transfer's identifier, carried in every datagram.
    pub run: u32,
}

/// Where the sender is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the next hop to resolve.
    Resolving,
    /// Sending.
    Sending,
    /// Everything sent.
    Done,
    /// The session closed under us (an ICMP error).
    Failed,
}

/// The sender.
pub struct UdpBlast {
    config: BlastConfig,
    session: SessionRef,
    arp: Option<ProtoId>,
    /// Where the sender is.
    pub phase: Phase,
    /// Datagrams sent.
    pub sent: u64,
    /// Their payload bytes.
    pub sent_bytes: u64,
    /// Sum of the sent datagrams' hashes.
    pub digest: u64,
    /// When sending started and ended, engine time.
    pub started: Option<Instant>,
    /// When the last datagram went.
    pub finished: Option<Instant>,
}

impl UdpBlast {
    /// Adds a sender to `engine`; it starts at once.
    pub fn install(engine: &mut Engine, config: BlastConfig) -> Result<AppId, UpiError> {
        if config.size < HEADER_LEN || config.rate == 0 {
            return Err(UpiError::BadParticipant(
                "a transfer needs datagrams of 16 bytes or more and a rate",
            ));
        }
        let udp = proto_of_kind(engine, "udp")?;
        let arp = proto_of_kind(engine, "arp").ok();
        let id = engine.add_app(Box::new(UdpBlast {
            session: SessionRef::new(udp, strata_core::SessionId(0)),
            arp,
            phase: Phase::Resolving,
            sent: 0,
            sent_bytes: 0,
            digest: 0,
            started: None,
            finished: None,
            config: config.clone(),
        }));
        engine.with_app(id, |app, cx| {
            let remote =
                Participants::remote([Addr::Ip(*config.dest.ip()), Addr::Port(config.dest.port())])
                    .with_local([Addr::Port(config.local_port)]);
            let session = cx.open(udp, remote, Qos::default())?;
            if let Some(me) = app.as_any_mut().downcast_mut::<UdpBlast>() {
                me.session = session;
            }
            cx.set_timer(cx.now(), 0);
            Ok::<_, UpiError>(())
        })??;
        Ok(id)
    }

    /// True once every datagram has been sent (or sending failed).
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Done | Phase::Failed)
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

    fn send_due(&mut self, now: Instant, cx: &mut AppCx) {
        let started = *self.started.get_or_insert(now);
        let elapsed = now - started;
        let allowed = (self.config.rate as f64 / 8.0 * elapsed.as_secs_f64()) as u64
            + self.config.size as u64;
        let mut burst = 0;
        while self.sent_bytes < self.config.total && self.sent_bytes < allowed && burst < BURST {
            let size = (self.config.total - self.sent_bytes).min(self.config.size as u64) as usize;
            let d = transfer::datagram(self.config.run, self.sent, size.max(HEADER_LEN));
            self.digest = self.digest.wrapping_add(transfer::hash([&d[..]]));
            self.sent_bytes += d.len() as u64;
            self.sent += 1;
            burst += 1;
            cx.send(self.session, Message::from_bytes(d));
        }
        if self.sent_bytes >= self.config.total {
            self.phase = Phase::Done;
            self.finished = Some(now);
        }
    }
}

impl App for UdpBlast {
    fn receive(
        &mut self,
        _s: Option<SessionRef>,
        _msg: Message,
        _meta: &PacketMeta,
        _cx: &mut AppCx,
    ) {
    }

    fn event(&mut self, event: AppEvent, _cx: &mut AppCx) {
        if let AppEvent::Closed { session, .. } = event
            && session == self.session
            && !self.is_finished()
        {
            self.phase = Phase::Failed;
        }
    }

    fn timer(&mut self, _token: u64, cx: &mut AppCx) {
        let now = cx.now();
        if self.phase == Phase::Resolving && self.resolved(cx) {
            self.phase = Phase::Sending;
        }
        if self.phase == Phase::Sending {
            self.send_due(now, cx);
        }
        if !self.is_finished() {
            cx.set_timer(now + TICK, 0);
        }
    }

    any_app!();
}
