//! The parts of UDP that answer the network rather than the application:
//! sessions made by passive opens, port unreachable for datagrams nobody
//! wants, and destination-unreachable reports closing connected sessions.

use strata_core::{
    Addr, AppEvent, Control, Cx, DropReason, Message, PacketMeta, Participant, Participants, Qos,
    Reply, SessionRef, Up, Upper,
};

use super::Udp;
use super::sessions::{Enable, Session};
use super::wire::{HEADER_LEN, Header};
use crate::icmp::{ErrorKind, SendError, Unreachable};
use crate::info::{Ipv4Info, NetHeader, Ports, link_broadcast};
use crate::ipv4::wire::Header as IpHeader;

impl Udp {
    /// A datagram matched the passive open on `port`: make its session.
    pub(super) fn accept(
        &mut self,
        port: u16,
        msg: &mut Message,
        meta: &PacketMeta,
        cx: &mut Cx,
    ) -> Up {
        let Some(Enable { upper, checksum }) = self.table.enables.get(&port).copied() else {
            return Up::Drop(DropReason::NoSession);
        };
        if self.table.passive >= self.table.max_passive {
            return Up::Drop(DropReason::QueueFull);
        }
        let Some(me) = self.address(cx) else {
            return Up::Drop(DropReason::NoRoute);
        };
        let src = Ipv4Info::from_meta(meta).src;
        let Some(ports) = meta.get::<Ports>() else {
            return Up::Drop(DropReason::Malformed);
        };
        let peer = Participants::remote([Addr::Ip(src)]);
        let ip = match cx.open(self.ip, peer, Qos::default()) {
            Ok(ip) => ip,
            Err(e) => return Up::Drop(e.into()),
        };
        let now = cx.now();
        let session = Session {
            upper,
            local_port: port,
            remote: Some((src, ports.src)),
            ip: Some(ip),
            checksum,
            passive: true,
            last_active: now,
            timer: None,
        };
        let Some(id) = self.table.insert(session) else {
            cx.close(ip);
            return Up::Drop(DropReason::QueueFull);
        };
        let timer = cx.set_timer(now + self.table.idle_timeout, u64::from(id.0));
        if let Some(s) = self.table.sessions.get_mut(id) {
            s.timer = Some(timer);
        }
        cx.count("passive-open");
        msg.strip(HEADER_LEN);
        let parts = Participants {
            remote: Participant::of([Addr::Ip(src), Addr::Port(ports.src)]),
            local: Participant::of([Addr::Ip(me), Addr::Port(port)]),
        };
        cx.open_done(upper, id, parts);
        // Demux named the listener's owner as where the rest goes; the engine
        // delivers there on the session just made.
        Up::Opened(id)
    }

    /// Asks ICMP for a port unreachable about the datagram in `msg` (UDP
    /// header still on); ICMP refuses it for broadcasts.
    pub(super) fn refuse(&mut self, msg: &Message, meta: &PacketMeta, cx: &mut Cx) {
        let Some(icmp) = cx.find_kind("icmp") else {
            return;
        };
        // IP passes up only datagrams for our address or a broadcast one.
        let dst = Ipv4Info::from_meta(meta).dst;
        let broadcast = link_broadcast(meta) || Some(dst) != self.address(cx);
        let header = NetHeader::of(meta);
        let mut quoted = Vec::with_capacity(header.get().len() + HEADER_LEN);
        quoted.extend_from_slice(header.get());
        let mut udp = [0u8; HEADER_LEN];
        let n = msg.copy_to_slice(0, &mut udp);
        quoted.extend_from_slice(&udp[..n]);
        let err = SendError {
            kind: ErrorKind::PortUnreachable,
            quoted,
            broadcast,
        };
        if cx
            .control(icmp, None, Control::Private(Box::new(err)))
            .is_err()
        {
            cx.count("icmp-refused-error");
        }
    }

    /// A destination unreachable about a datagram we sent.
    pub(super) fn unreachable(&mut self, u: &Unreachable, cx: &mut Cx) -> Reply {
        let Ok(ip) = IpHeader::new_checked(&u.quoted[..]) else {
            cx.count("icmp-error-malformed");
            return Reply::Done;
        };
        let Some(udp) = u
            .quoted
            .get(ip.header_len()..)
            .and_then(|b| Header::new_checked(b).ok())
        else {
            cx.count("icmp-error-malformed");
            return Reply::Done;
        };
        let key = (udp.src_port(), ip.dst(), udp.dst_port());
        let Some(&id) = self.table.connected.get(&key) else {
            cx.count("icmp-error-unmatched");
            return Reply::Done;
        };
        match self.table.sessions.get(id).map(|s| s.upper) {
            Some(Upper::App(app)) => {
                self.close_session(id, cx);
                cx.count("closed-by-icmp");
                let session = SessionRef::new(cx.me(), id);
                cx.notify(
                    app,
                    AppEvent::Closed {
                        session,
                        error: Some(u.error()),
                    },
                );
            }
            _ => cx.count("icmp-error-for-protocol"),
        }
        Reply::Done
    }
}
