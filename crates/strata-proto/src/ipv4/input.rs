//! The inbound half of IPv4: the header checks demux and pop share, who gets
//! a datagram, reassembly, and the errors ICMP reports for IP.

use std::net::Ipv4Addr;

use strata_core::{
    Control, Cx, Demux, DropReason, Message, Next, PacketMeta, RecordsFull, Target, Up, Upper,
};

use super::Ipv4;
use super::reassembly::{Fragment, Key, Outcome};
use super::wire::{Header, MIN_HEADER_LEN, Repr};
use crate::icmp::{ErrorKind, SendError};
use crate::info::{Ipv4Info, Ipv4Options, NetHeader, link_broadcast};
use crate::wire::WireError;

/// The checks that make reading a header safe, for one whose other checks
/// demux has just made (or that was checked when it arrived, as a
/// reassembled datagram's first header): its length, version and total
/// length. Returns the header and its length.
#[inline]
pub(super) fn checked(hdr: &[u8]) -> Result<(Header<&[u8]>, usize), Demux> {
    let h = Header::new_checked(hdr).map_err(|e| e.demux())?;
    let header_len = h.header_len();
    if h.version() != 4 {
        return Err(Demux::Drop(WireError::Unsupported.into()));
    }
    if h.total_len() < header_len {
        return Err(Demux::Drop(WireError::Malformed.into()));
    }
    Ok((h, header_len))
}

/// What pop answers for a header demux would have refused: the same drop, and
/// a short header is a truncated packet (pop has all the bytes there are).
pub(super) fn up_of(d: Demux) -> Up {
    match d {
        Demux::Drop(reason) => Up::Drop(reason),
        _ => Up::Drop(DropReason::Truncated),
    }
}

/// Records what upper layers need from a checked header `hdr`: its fields
/// (UDP's demux needs the source to find a connected session), and its
/// options when it has some, so that an error report can quote it whole.
#[inline(always)]
pub(super) fn record_info(
    meta: &mut PacketMeta,
    info: Ipv4Info,
    header_len: usize,
    hdr: &[u8],
) -> Result<(), RecordsFull> {
    meta.set(info)?;
    if header_len > MIN_HEADER_LEN
        && let Some(hdr) = hdr.get(..header_len)
    {
        record_options(meta, hdr)?;
    }
    Ok(())
}

/// The options of a header that has some (rare: hosts send none).
#[cold]
fn record_options(meta: &mut PacketMeta, hdr: &[u8]) -> Result<(), RecordsFull> {
    if let Some(options) = hdr.get(MIN_HEADER_LEN..).and_then(Ipv4Options::of) {
        meta.set(options)?;
    }
    Ok(())
}

impl Ipv4 {
    /// RFC 1122 §3.2.1.3: a source that names no single host, or this host,
    /// cannot be real; such datagrams are discarded. 0.0.0.0 is allowed: hosts
    /// use it while they learn their address.
    pub(super) fn is_martian_source(&self, a: Ipv4Addr) -> bool {
        a.is_multicast()
            || a.is_loopback()
            || self.is_broadcast(a)
            || u32::from(a) >> 28 == 0xf
            || a == self.cidr.address()
    }

    /// The checks demux and pop share; `present` is how many bytes follow the
    /// header's start. Returns the checked header and its length, and reads
    /// no field it does not check (demux and pop need only the record; a
    /// fragment's pop parses the whole `Repr`).
    #[inline]
    pub(super) fn check<'h>(
        &self,
        hdr: &'h [u8],
        present: usize,
    ) -> Result<(Header<&'h [u8]>, usize), Demux> {
        let h = Header::new_checked(hdr).map_err(|e| e.demux())?;
        if h.version() != 4 {
            return Err(Demux::Drop(WireError::Unsupported.into()));
        }
        let header_len = h.header_len();
        let total = h.total_len();
        if total < header_len {
            return Err(Demux::Drop(WireError::Malformed.into()));
        }
        if total > present {
            return Err(Demux::Short(total));
        }
        let dst = h.dst();
        if dst != self.cidr.address() && !self.is_broadcast(dst) {
            return Err(Demux::Drop(DropReason::NotForUs));
        }
        if self.is_martian_source(h.src()) {
            return Err(Demux::Drop(DropReason::Malformed));
        }
        Ok((h, header_len))
    }

    /// Who gets a datagram from `src` for `protocol`.
    pub(super) fn upward(&self, src: Ipv4Addr, protocol: u8) -> (Target, Next) {
        let session = self
            .sessions
            .find(
                &self.last,
                |s| s.remote == src && s.protocol == protocol,
                || self.by_key.get(&(src, protocol)).copied(),
            )
            .and_then(|id| self.sessions.get(id).map(|s| (id, s.upper)));
        match session {
            Some((id, Upper::App(a))) => (Target::Session(id), Next::App(a)),
            Some((id, Upper::Proto(p))) => (Target::Session(id), Next::Proto(p)),
            None => (Target::Protocol, Next::Number(u32::from(protocol))),
        }
    }

    /// Asks ICMP, if the graph has it, to report an error about the datagram
    /// whose header is `header` and payload starts with `first`.
    pub(super) fn report(
        &self,
        kind: ErrorKind,
        header: &[u8],
        first: &[u8],
        link_broadcast: bool,
        cx: &mut Cx,
    ) {
        let Some(icmp) = cx.find_kind("icmp") else {
            return;
        };
        let broadcast =
            link_broadcast || Header::new_checked(header).is_ok_and(|h| self.is_broadcast(h.dst()));
        let mut quoted = Vec::with_capacity(header.len() + first.len());
        quoted.extend_from_slice(header);
        quoted.extend_from_slice(first);
        let err = SendError {
            kind,
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

    /// The end of pop for a whole datagram: up to its session or protocol, or a
    /// protocol-unreachable report when nobody speaks its protocol.
    pub(super) fn finish(
        &mut self,
        src: Ipv4Addr,
        protocol: u8,
        msg: &Message,
        meta: &PacketMeta,
        cx: &mut Cx,
        reassembled: bool,
    ) -> Up {
        let (_, next) = self.upward(src, protocol);
        if let Next::Number(n) = next
            && cx.upper_for(n).is_none()
        {
            // RFC 1122 §3.2.2.1: a host SHOULD say it does not speak the protocol.
            let mut first = [0u8; 8];
            let n = msg.copy_to_slice(0, &mut first);
            let header = NetHeader::of(meta);
            self.report(
                ErrorKind::ProtocolUnreachable,
                header.get(),
                &first[..n],
                link_broadcast(meta),
                cx,
            );
            return Up::Drop(DropReason::NoProtocol);
        }
        if reassembled {
            Up::Redirect(next)
        } else {
            Up::Continue
        }
    }

    /// Pop's path for a fragment: held (consumed), refused (dropped), or the
    /// last piece, when the whole datagram replaces `msg` and goes up.
    pub(super) fn reassemble(
        &mut self,
        r: Repr,
        msg: &mut Message,
        meta: &mut PacketMeta,
        cx: &mut Cx,
    ) -> Up {
        let fragment = Fragment {
            key: Key {
                src: r.src,
                dst: r.dst,
                ident: r.ident,
                protocol: r.protocol,
            },
            offset: r.frag_offset,
            more: r.more_frags,
            header: NetHeader::of(meta),
            link_broadcast: link_broadcast(meta),
            payload: std::mem::take(msg),
        };
        match self.reassembly.insert(fragment, cx.now()) {
            Outcome::Held { started } => {
                if let Some((serial, deadline)) = started {
                    let timer = cx.set_timer(deadline, serial);
                    self.reassembly.attach_timer(serial, timer);
                }
                Up::Consumed
            }
            Outcome::Complete {
                payload,
                header,
                timer,
            } => {
                if let Some(t) = timer {
                    cx.cancel_timer(t);
                }
                *msg = payload;
                // The whole datagram's header is the first fragment's.
                if let Ok((first, header_len)) = checked(header.get())
                    && record_info(meta, Ipv4Info::of(&first), header_len, header.get()).is_err()
                {
                    return Up::Drop(DropReason::Other("meta-full"));
                }
                cx.count("reassembled");
                self.finish(r.src, r.protocol, msg, meta, cx, true)
            }
            Outcome::Refused(reason) => Up::Drop(reason),
        }
    }
}
