//! ARP (RFC 826) for IPv4 over Ethernet: resolves next hops for IP and answers
//! for this host's address.
//!
//! IP asks with [`Control::Resolve`]; an unknown address starts resolution (a
//! broadcast request, retried once a second — RFC 1122 §2.3.2.1 forbids
//! flooding) and IP parks its packets with [`Control::Hold`] until the answer
//! comes, when ARP sends them itself through Ethernet sessions opened with IP's
//! ethertype. Learning follows RFC 826's merge rule: a packet whose sender is
//! already in the table updates it (this covers replies and gratuitous ARP),
//! and a packet addressed to us adds its sender. Entries expire after `timeout`;
//! an entry in use is refreshed by a unicast request in the last quarter of its
//! life (RFC 1122 §2.3.2.1's "unicast poll"), so busy flows never stall on it.

mod cache;
mod config;
mod resolve;
pub mod wire;

use std::any::Any;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use strata_core::{
    Control, Cx, Demux, DropReason, HwAddr, Message, Next, Open, PacketMeta, ProtoId, Protocol,
    Reply, SessionId, SessionRef, Target, Up, UpiError,
};

use crate::unsupported;
use cache::{Cache, State};
use wire::{Operation, PACKET_LEN, Packet, Repr};

pub use config::{OPTIONS, SPEC};

/// Most addresses the table holds.
const CACHE_LIMIT: usize = 1024;

/// Most Ethernet sessions ARP keeps open for sending (least recently used
/// ones are closed first).
const LINK_LIMIT: usize = 256;

/// RFC 1122 §2.3.2.1: at most one request per second per address.
const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// Timer tokens: the kind in the high half, the address in the low half.
const TIMER_RETRY: u64 = 1 << 32;
const TIMER_EXPIRE: u64 = 2 << 32;

/// The ARP protocol object.
pub struct Arp {
    eth: ProtoId,
    address: Ipv4Addr,
    timeout: Duration,
    retries: u32,
    pending: usize,
    /// This host's hardware address, asked of Ethernet when first needed.
    mac: Option<HwAddr>,
    cache: Cache,
    /// Ethernet sessions by (hardware address, number; `None` for ARP's own),
    /// with when each was last used, on `link_clock`.
    links: BTreeMap<(HwAddr, Option<u32>), (SessionRef, u64)>,
    link_clock: u64,
}

impl Arp {
    /// ARP for `address` on the Ethernet protocol `eth`.
    pub fn new(
        eth: ProtoId,
        address: Ipv4Addr,
        timeout: Duration,
        retries: u32,
        pending: usize,
    ) -> Arp {
        Arp {
            eth,
            address,
            timeout,
            retries,
            pending,
            mac: None,
            cache: Cache::new(CACHE_LIMIT),
            links: BTreeMap::new(),
            link_clock: 0,
        }
    }

    /// The hardware address learned for `ip`, if it is resolved.
    pub fn lookup(&self, ip: Ipv4Addr) -> Option<HwAddr> {
        match self.cache.get(ip)?.state {
            State::Resolved { hw, .. } => Some(hw),
            State::Pending { .. } => None,
        }
    }

    /// How many packets wait for `ip` to resolve.
    pub fn held(&self, ip: Ipv4Addr) -> usize {
        match self.cache.get(ip).map(|e| &e.state) {
            Some(State::Pending { held, .. }) => held.len(),
            _ => 0,
        }
    }

    /// How many addresses the table holds, resolved or pending.
    pub fn entries(&self) -> usize {
        self.cache.len()
    }

    fn mac(&mut self, cx: &mut Cx) -> Option<HwAddr> {
        if self.mac.is_none()
            && let Ok(Reply::Hw(mac)) = cx.control(self.eth, None, Control::GetHwAddr)
        {
            self.mac = Some(mac);
        }
        self.mac
    }

    /// RFC 826's reception algorithm, for a packet already checked to be
    /// Ethernet/IPv4.
    fn receive(&mut self, p: Repr, cx: &mut Cx) -> Up {
        if p.sender_hw.is_multicast() || p.sender_hw == HwAddr::ZERO {
            return Up::Drop(DropReason::Malformed);
        }
        if p.sender_ip == self.address {
            // Someone else claims our address (RFC 5227 §2.4 conflict).
            cx.count("address-conflict");
            return Up::Drop(DropReason::Other("address-conflict"));
        }
        // An ARP probe (RFC 5227 §2.1.1) has sender address 0.0.0.0: nothing
        // to learn, but a probe for our address still deserves an answer.
        let learnable = is_host(p.sender_ip);
        let known = learnable && self.cache.get(p.sender_ip).is_some();
        if known {
            self.learn(p.sender_ip, p.sender_hw, cx);
        }
        if p.target_ip != self.address {
            return if known {
                Up::Consumed
            } else {
                Up::Drop(DropReason::NotForUs)
            };
        }
        if learnable && !known {
            self.learn(p.sender_ip, p.sender_hw, cx);
        }
        if p.operation == Operation::Request {
            let Some(mac) = self.mac(cx) else {
                return Up::Drop(DropReason::Other("no-hw-address"));
            };
            cx.count("replies");
            self.send(
                p.sender_hw,
                Repr {
                    operation: Operation::Reply,
                    sender_hw: mac,
                    sender_ip: self.address,
                    target_hw: p.sender_hw,
                    target_ip: p.sender_ip,
                },
                cx,
            );
        }
        Up::Consumed
    }
}

/// Whether `ip` can name one host: not 0.0.0.0, broadcast or multicast.
fn is_host(ip: Ipv4Addr) -> bool {
    !(ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast())
}

impl Protocol for Arp {
    fn demux(&self, hdr: &[u8], _meta: &mut PacketMeta) -> Demux {
        match Packet::new_checked(hdr).and_then(|p| Repr::parse(&p)) {
            Ok(_) => Demux::To {
                target: Target::Protocol,
                hdr_len: PACKET_LEN,
                next: Next::Here,
            },
            Err(e) => e.demux(),
        }
    }

    fn pop(&mut self, _t: Target, msg: &mut Message, _meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        let Some(bytes) = msg.pullup(PACKET_LEN) else {
            return Up::Drop(DropReason::Truncated);
        };
        match Packet::new_checked(bytes).and_then(|p| Repr::parse(&p)) {
            Ok(p) => self.receive(p, cx),
            Err(e) => Up::Drop(e.into()),
        }
    }

    fn push(&mut self, _sess: SessionId, _msg: Message, cx: &mut Cx) {
        // ARP has no sessions to send on: upper layers use Hold.
        cx.count_drop(DropReason::NoSession);
    }

    fn open(&mut self, _req: Open, _cx: &mut Cx) -> Result<SessionId, UpiError> {
        Err(UpiError::Unsupported("open on arp (use Resolve and Hold)"))
    }

    fn close(&mut self, _sess: SessionId, _cx: &mut Cx) {}

    fn control(
        &mut self,
        _sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        match op {
            Control::Resolve(ip) => Ok(self.resolve(ip, cx)),
            Control::Hold {
                next_hop,
                msg,
                number,
            } => self.hold(next_hop, msg, number, cx),
            Control::GetIpAddr => Ok(Reply::Ip(self.address)),
            op => Err(unsupported(&op)),
        }
    }

    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        let ip = Ipv4Addr::from(token as u32);
        match token & !u64::from(u32::MAX) {
            TIMER_RETRY => self.retry(ip, cx),
            TIMER_EXPIRE => self.expire(ip, cx),
            _ => cx.count("unknown-timer"),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
