//! Segments arriving: `demux` and `pop`, and smoltcp's ingress.
//!
//! Demux is the module's: smoltcp finds a socket by asking each in turn, so
//! the module keeps the 4-tuple table a Strata demux needs. A segment of a
//! session goes to its application (`Next::App`) once the session is
//! announced; a SYN for a listened port is a passive open
//! (`Target::Enable`); anything else is for the protocol, which lets
//! smoltcp answer it (a reset) and counts it `no-session`.
//!
//! Pop gives smoltcp the segment as the device would: the module first runs
//! smoltcp's own parser over it (`TcpRepr::parse`) and verifies its checksum
//! — the emulated device offloads checksums — so that every segment smoltcp
//! would throw away without a word is dropped here and counted by reason.
//! A segment of an established connection (no SYN, FIN or RST, no option
//! but a timestamp) is read without that parser ([`plain`]): it is one that
//! parser accepts, and smoltcp parses it again when it takes it. After a
//! plain segment that left its connection established, the egress pass the
//! pop asks for runs only if smoltcp's `poll_at` says it is due (usually
//! the acknowledgment is delayed and the application's answer carries it).
//! Then smoltcp's ingress runs over only the sockets that may take the
//! segment: the session's, or the listener's. Data smoltcp makes readable
//! goes up as the popped message itself, where demux said (`Up::Continue`
//! to the application: a session announced before this segment, which is
//! also what lets a DAA path learn its pops), or, when the segment also
//! completed the handshake, after the event that announces the session.
//!
//! `PacketMeta` is read in one place, [`addresses`].

use std::net::Ipv4Addr;

use smoltcp::iface::PollIngressSingleResult;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::socket::tcp;
use smoltcp::wire::{IpAddress, TcpControl, TcpPacket, TcpRepr, TcpTimestampRepr};
use strata_core::{
    Addr, Demux, DropReason, Message, Next, PacketMeta, Participants, Qos, Target, Up, Upper,
};
use strata_proto::info::Ipv4Info;
use strata_proto::tcp::wire as tcp_wire;

use super::SmolTcp;
use super::clock;
use super::device::Addresses;
use super::observe::Observed;
use super::table::{Conn, Listener};

/// The fixed TCP header.
const HEADER: usize = 20;

/// What Strata's IP layer learned about the datagram a segment came in.
fn addresses(meta: &PacketMeta) -> Addresses {
    let ip = Ipv4Info::from_meta(meta);
    Addresses {
        src: ip.src,
        dst: ip.dst,
        ttl: ip.ttl,
    }
}

/// A source smoltcp would drop a segment from (RFC 1122 §3.2.1.3, RFC 9293
/// §3.10.7.2: no connection with a broadcast, multicast or unspecified
/// peer).
fn bad_source(a: Ipv4Addr) -> bool {
    a.is_unspecified() || a.is_broadcast() || a.is_multicast()
}

/// The checks smoltcp makes of a segment before it looks for a socket, in
/// its order — its own parser, and the checksum its device is said to
/// verify — so that what smoltcp would drop without a word is dropped here,
/// counted. A merged run of segments (receive offload) had each segment's
/// checksum verified by the link, and carries none of its own.
fn check(segment: &[u8], from: Addresses, merged: bool) -> Result<TcpRepr<'_>, DropReason> {
    let packet = TcpPacket::new_checked(segment).map_err(|_| {
        if segment.len() < HEADER {
            DropReason::Truncated
        } else {
            DropReason::Malformed
        }
    })?;
    if !merged && !tcp_wire::verifies(from.src, from.dst, segment.len(), [segment]) {
        return Err(DropReason::BadChecksum);
    }
    if let Some(repr) = plain(&packet) {
        return Ok(repr);
    }
    let (src, dst) = (IpAddress::Ipv4(from.src), IpAddress::Ipv4(from.dst));
    TcpRepr::parse(&packet, &src, &dst, &ChecksumCapabilities::ignored())
        .map_err(|_| DropReason::Malformed)
}

/// The options of nearly every segment of an established connection:
/// two no-ops and a timestamp (RFC 7323 Appendix A's layout).
const NOP_NOP_TIMESTAMP: [u8; 4] = [1, 1, 8, 10];

/// The segments of an established connection, read without smoltcp's
/// parser: neither SYN, FIN nor RST, both ports set, and no options or only
/// [`NOP_NOP_TIMESTAMP`]. For these `TcpRepr::parse` accepts and returns
/// exactly this; any other segment goes through it (smoltcp parses each
/// segment again when it takes it, so the module's parse was a second one).
fn plain<'a>(packet: &TcpPacket<&'a [u8]>) -> Option<TcpRepr<'a>> {
    if packet.syn() || packet.fin() || packet.rst() {
        return None;
    }
    if packet.src_port() == 0 || packet.dst_port() == 0 {
        return None;
    }
    let timestamp = match packet.options() {
        [] => None,
        [a, b, c, d, ts @ ..] if [*a, *b, *c, *d] == NOP_NOP_TIMESTAMP && ts.len() == 8 => {
            let word = |i: usize| u32::from_be_bytes([ts[i], ts[i + 1], ts[i + 2], ts[i + 3]]);
            Some(TcpTimestampRepr::new(word(0), word(4)))
        }
        _ => return None,
    };
    Some(TcpRepr {
        src_port: packet.src_port(),
        dst_port: packet.dst_port(),
        control: if packet.psh() {
            TcpControl::Psh
        } else {
            TcpControl::None
        },
        seq_number: packet.seq_number(),
        ack_number: packet.ack().then(|| packet.ack_number()),
        window_len: packet.window_len(),
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp,
        payload: packet.payload(),
    })
}

/// Which socket set smoltcp's ingress runs over.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sockets {
    /// Sessions' sockets.
    Sessions,
    /// Listening sockets.
    Listening,
}

impl SmolTcp {
    /// Pure demultiplexing by 4-tuple, listener port, or neither.
    pub(super) fn demux_segment(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        if hdr.len() < HEADER {
            return Demux::Short(HEADER);
        }
        let offset = usize::from(hdr[12] >> 4) * 4;
        if offset < HEADER || offset > meta.present {
            return Demux::Drop(DropReason::Malformed);
        }
        let src_port = u16::from_be_bytes([hdr[0], hdr[1]]);
        let dst_port = u16::from_be_bytes([hdr[2], hdr[3]]);
        let flags = tcp_wire::Flags(hdr[13]);
        let from = addresses(meta);
        if let Some(id) = self.table.lookup(&(from.src, src_port, dst_port)) {
            let next = match self.table.conns.get(&id) {
                Some(Conn {
                    upper: Upper::App(app),
                    announced: true,
                    attached: true,
                    ..
                }) => Next::App(*app),
                _ => Next::Here,
            };
            return Demux::To {
                target: Target::Session(id),
                hdr_len: offset,
                next,
            };
        }
        let target = if self.table.listeners.contains_key(&dst_port)
            && flags.has(tcp_wire::Flags::SYN)
            && !flags.has(tcp_wire::Flags::ACK)
        {
            Target::Enable(u32::from(dst_port))
        } else {
            Target::Protocol
        };
        Demux::To {
            target,
            hdr_len: offset,
            next: Next::Here,
        }
    }

    /// The segment at the front of `msg` goes through smoltcp.
    pub(super) fn pop_segment(
        &mut self,
        target: Target,
        msg: &mut Message,
        meta: &mut PacketMeta,
        cx: &mut strata_core::Cx,
    ) -> Up {
        let from = addresses(meta);
        if bad_source(from.src) {
            return Up::Drop(DropReason::Other("bad-source"));
        }
        if self.ensure_stack(cx).is_err() {
            return Up::Drop(DropReason::Other("no-address"));
        }
        let Some(stack) = self.stack.as_mut() else {
            return Up::Drop(DropReason::Other("no-address"));
        };
        if from.dst != stack.address {
            // A broadcast IP passed up: TCP has no use for it.
            return Up::Drop(DropReason::NotForUs);
        }
        if !stack.wire.load(from, msg) {
            return Up::Drop(DropReason::Other("too-long"));
        }
        let merged = msg.segment_size() != 0;
        let repr = match check(stack.wire.loaded_segment(), from, merged) {
            Ok(repr) => repr,
            Err(reason) => {
                stack.wire.unload();
                return Up::Drop(reason);
            }
        };
        let tuple = (from.src, repr.src_port, repr.dst_port);
        let rst = repr.control == TcpControl::Rst;
        let syn = repr.control == TcpControl::Syn && repr.ack_number.is_none();
        let plain = matches!(repr.control, TcpControl::None | TcpControl::Psh);
        // The session demux named (or a DAA path recorded) if it is still
        // this segment's; otherwise the table says.
        let session = match target {
            Target::Session(id)
                if self
                    .table
                    .conns
                    .get(&id)
                    .is_some_and(|c| c.tuple() == tuple) =>
            {
                Some(id)
            }
            _ => self.table.lookup(&tuple),
        };
        if let Some(id) = session {
            if let Some(c) = self.table.conns.get_mut(&id) {
                c.seen.received(&repr);
            }
            self.ingress(Sockets::Sessions, cx);
            let data = self.upcalls(id, Some(meta), rst, cx);
            // A plain segment that left its connection established changed
            // nothing the egress pass's upcalls would report.
            let established = self.table.conns.get(&id).is_some_and(|c| {
                self.sockets.get::<tcp::Socket>(c.socket).state() == tcp::State::Established
            });
            self.kick_for(plain && established, cx);
            // Data comes back only for a session announced before this
            // segment, to an application: demux named it (`Next::App`).
            return match data {
                Some(data) => {
                    *msg = data;
                    Up::Continue
                }
                None => Up::Consumed,
            };
        }
        let port = repr.dst_port;
        if syn
            && let Some(&Listener {
                pending, backlog, ..
            }) = self.table.listeners.get(&port)
        {
            if pending >= backlog {
                self.unload();
                return Up::Drop(DropReason::Other("backlog-full"));
            }
            if self.table.conns.len() >= self.cfg.max_connections {
                self.unload();
                return Up::Drop(DropReason::QueueFull);
            }
            let mut seen = Observed::default();
            seen.received(&repr);
            self.ingress(Sockets::Listening, cx);
            return self.accept(port, tuple, seen, cx);
        }
        // No socket takes it: smoltcp answers with a reset (unless it is one).
        self.ingress(Sockets::Sessions, cx);
        Up::Drop(DropReason::NoSession)
    }

    /// Forgets a loaded segment smoltcp will not see.
    fn unload(&mut self) {
        if let Some(stack) = self.stack.as_mut() {
            stack.wire.unload();
        }
    }

    /// smoltcp's ingress for the loaded segment, over one socket set, and
    /// whatever it answered at once pushed down.
    fn ingress(&mut self, which: Sockets, cx: &mut strata_core::Cx) {
        let now = clock::enter(cx.now());
        let Some(stack) = self.stack.as_mut() else {
            return;
        };
        let set = match which {
            Sockets::Sessions => &mut self.sockets,
            Sockets::Listening => &mut self.listening,
        };
        if stack.iface.poll_ingress_single(now, &mut stack.wire, set)
            == PollIngressSingleResult::None
        {
            cx.count("ingress-unread");
        }
        self.transmit(cx);
    }

    /// After a SYN went to the listener of `port`: when its socket took it,
    /// the socket becomes a session (announced once its handshake completes)
    /// and a fresh socket listens in its place.
    fn accept(
        &mut self,
        port: u16,
        tuple: (Ipv4Addr, u16, u16),
        seen: Observed,
        cx: &mut strata_core::Cx,
    ) -> Up {
        let Some((handle, upper)) = self.table.listeners.get(&port).map(|l| (l.socket, l.upper))
        else {
            return Up::Drop(DropReason::NoSession);
        };
        let state = self.listening.get::<tcp::Socket>(handle).state();
        if state == tcp::State::Listen {
            // smoltcp let the SYN go without a word.
            return Up::Drop(DropReason::Refused);
        }
        // The socket leaves the listening set either way: it serves this
        // peer now, or nobody.
        let socket = self.listening.remove(handle);
        self.relisten(port);
        let parts = Participants::remote([Addr::Ip(tuple.0)]);
        let Ok(ip) = cx.open(self.ip, parts, Qos::default()) else {
            return Up::Drop(DropReason::NoRoute);
        };
        let socket = self.sockets.add(socket);
        if let Some(l) = self.table.listeners.get_mut(&port) {
            l.pending += 1;
        }
        let mut conn = Conn::new(
            socket,
            upper,
            (tuple.0, tuple.1),
            port,
            ip,
            Some(port),
            self.cfg.manual_consume,
            state,
        );
        conn.seen = seen;
        let id = self.table.insert(conn);
        cx.acting_for(id);
        cx.count("passive-open");
        // The SYN-ACK goes from the egress pass.
        self.kick(cx);
        Up::Consumed
    }

    /// A fresh socket listening on `port` in place of the one that took a
    /// SYN (which the caller has taken out of the listening set).
    pub(super) fn relisten(&mut self, port: u16) {
        let mut socket = super::stack::socket(&self.cfg);
        if socket.listen(port).is_err() {
            return;
        }
        let handle = self.listening.add(socket);
        if let Some(l) = self.table.listeners.get_mut(&port) {
            l.socket = handle;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// smoltcp's own parse of `segment`, checksum not checked.
    fn parsed(segment: &[u8]) -> Option<TcpRepr<'_>> {
        let packet = TcpPacket::new_checked(segment).ok()?;
        let a = IpAddress::Ipv4(Ipv4Addr::new(198, 18, 0, 1));
        TcpRepr::parse(&packet, &a, &a, &ChecksumCapabilities::ignored()).ok()
    }

    /// A header of `words` 32-bit words with `flags`, ports and options.
    fn header(words: u8, flags: u8, ports: [u16; 2], options: &[u8], tail: &[u8]) -> Vec<u8> {
        let mut h = vec![0u8; usize::from(words) * 4];
        h[0..2].copy_from_slice(&ports[0].to_be_bytes());
        h[2..4].copy_from_slice(&ports[1].to_be_bytes());
        h[4..12].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        h[12] = words << 4;
        h[13] = flags;
        h[14..16].copy_from_slice(&1000u16.to_be_bytes());
        let n = options.len().min(h.len().saturating_sub(20));
        h[20..20 + n].copy_from_slice(&options[..n]);
        h.extend_from_slice(tail);
        h
    }

    #[test]
    fn the_plain_reading_is_smoltcps_for_established_segments() {
        let ts = [1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7];
        for (words, opts) in [(5u8, &[][..]), (8, &ts[..])] {
            for flags in [0x10, 0x18, 0x00, 0x08] {
                let seg = header(words, flags, [7, 80], opts, b"data");
                let p = TcpPacket::new_checked(&seg[..]).unwrap();
                let mine = plain(&p).expect("read plainly");
                assert_eq!(Some(mine), parsed(&seg), "flags {flags:#x}");
            }
        }
        // What it leaves to smoltcp's parser.
        for seg in [
            header(5, 0x02, [7, 80], &[], &[]),
            header(5, 0x11, [7, 80], &[], &[]),
            header(5, 0x14, [7, 80], &[], &[]),
            header(5, 0x10, [0, 80], &[], &[]),
            header(6, 0x10, [7, 80], &[2, 4, 5, 0xb4], &[]),
            header(
                8,
                0x10,
                [7, 80],
                &[1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7, 0],
                &[],
            ),
        ] {
            assert!(plain(&TcpPacket::new_checked(&seg[..]).unwrap()).is_none());
        }
    }

    proptest! {
        #[test]
        fn whatever_is_read_plainly_smoltcp_reads_the_same(
            words in 5u8..=8,
            flags in any::<u8>(),
            ports in any::<[u16; 2]>(),
            opts in proptest::collection::vec(any::<u8>(), 0..12),
            timestamped in any::<bool>(),
        ) {
            // Half with the usual timestamp layout in front of their bytes.
            let opts: Vec<u8> = if timestamped {
                NOP_NOP_TIMESTAMP.iter().chain(opts.iter().cycle()).take(12).copied().collect()
            } else {
                opts
            };
            let seg = header(words, flags, ports, &opts, b"xy");
            if let Ok(p) = TcpPacket::new_checked(&seg[..])
                && let Some(mine) = plain(&p)
            {
                prop_assert_eq!(Some(mine), parsed(&seg));
            }
        }
    }
}
