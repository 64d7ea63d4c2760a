//! Resolution as a state machine per address: start (broadcast request,
//! retry timer), retry once a second, learn (send what waited), refresh by
//! unicast in the last quarter of an entry's life, expire; and the Ethernet
//! sessions ARP sends through.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use strata_core::{
    Addr, Cx, DropReason, HwAddr, Instant, Message, Participants, Qos, Reply, SessionRef, UpiError,
};

use super::cache::{Entry, Held, State};
use super::wire::{Operation, Repr};
use super::{Arp, LINK_LIMIT, RETRY_INTERVAL, TIMER_EXPIRE, TIMER_RETRY};

impl Arp {
    /// An Ethernet session to `hw` carrying `number` (ARP's own when `None`).
    fn link(
        &mut self,
        hw: HwAddr,
        number: Option<u32>,
        cx: &mut Cx,
    ) -> Result<SessionRef, UpiError> {
        self.link_clock += 1;
        let now = self.link_clock;
        if let Some((s, used)) = self.links.get_mut(&(hw, number)) {
            *used = now;
            return Ok(*s);
        }
        if self.links.len() >= LINK_LIMIT {
            let lru = self
                .links
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| *k);
            if let Some(key) = lru
                && let Some((s, _)) = self.links.remove(&key)
            {
                cx.close(s);
            }
        }
        let parts = Participants::remote([Addr::Hw(hw)]);
        let s = match number {
            None => cx.open(self.eth, parts, Qos::default())?,
            Some(n) => cx.open_numbered(self.eth, n, parts, Qos::default())?,
        };
        self.links.insert((hw, number), (s, now));
        Ok(s)
    }

    /// Sends one of ARP's own packets to `to`.
    pub(super) fn send(&mut self, to: HwAddr, packet: Repr, cx: &mut Cx) {
        match self.link(to, None, cx) {
            Ok(s) => cx.push(s, Message::from_slice(&packet.to_bytes())),
            Err(e) => cx.count_drop(e.into()),
        }
    }

    /// Asks who has `ip`: broadcast, or unicast to `to` when refreshing.
    fn request(&mut self, ip: Ipv4Addr, to: HwAddr, cx: &mut Cx) {
        let Some(mac) = self.mac(cx) else {
            cx.count_drop(DropReason::Other("no-hw-address"));
            return;
        };
        cx.count("requests");
        self.send(
            to,
            Repr {
                operation: Operation::Request,
                sender_hw: mac,
                sender_ip: self.address,
                target_hw: HwAddr::ZERO,
                target_ip: ip,
            },
            cx,
        );
    }

    /// Replaces `ip`'s entry, cleaning up whatever it replaced or evicted.
    fn put(&mut self, ip: Ipv4Addr, entry: Entry, cx: &mut Cx) {
        for (addr, old) in self.cache.insert(ip, entry) {
            if let Some(t) = old.timer {
                cx.cancel_timer(t);
            }
            if let State::Pending { held, .. } = old.state {
                // Packets still held are lost either way (a resolution takes
                // them out first); only another address's entry pushed out of a
                // full cache is an eviction.
                for _ in held {
                    cx.count_drop(DropReason::QueueFull);
                }
                if addr != ip {
                    cx.count("evicted-pending");
                }
            }
        }
    }

    /// Starts resolving `ip`: a pending entry, the first request, the retry timer.
    fn start(&mut self, ip: Ipv4Addr, cx: &mut Cx) {
        let now = cx.now();
        let timer = cx.set_timer(now + RETRY_INTERVAL, TIMER_RETRY | u64::from(u32::from(ip)));
        let entry = Entry {
            state: State::Pending {
                requests: 1,
                held: VecDeque::new(),
            },
            updated: now,
            timer: Some(timer),
        };
        self.put(ip, entry, cx);
        self.request(ip, HwAddr::BROADCAST, cx);
    }

    /// Records that `ip` is at `hw` and sends whatever waited for it.
    pub(super) fn learn(&mut self, ip: Ipv4Addr, hw: HwAddr, cx: &mut Cx) {
        let now = cx.now();
        let expires = now + self.timeout;
        let timer = cx.set_timer(expires, TIMER_EXPIRE | u64::from(u32::from(ip)));
        let entry = Entry {
            state: State::Resolved {
                hw,
                expires,
                probed: false,
            },
            updated: now,
            timer: Some(timer),
        };
        let held = match self.cache.get_mut(ip) {
            Some(Entry {
                state: State::Pending { held, .. },
                ..
            }) => std::mem::take(held),
            _ => VecDeque::new(),
        };
        self.put(ip, entry, cx);
        tracing::debug!(%ip, %hw, held = held.len(), "arp: resolved");
        for Held { msg, number } in held {
            match self.link(hw, Some(number), cx) {
                Ok(s) => cx.push(s, msg),
                Err(e) => cx.count_drop(e.into()),
            }
        }
    }

    /// A valid resolved entry's address and when to ask again. In the last
    /// quarter of its life the entry is refreshed by a unicast request; until
    /// that request is out, callers are told to ask again at the refresh point,
    /// so that a busy flow's next packet is the one that triggers it.
    fn resolved(&mut self, ip: Ipv4Addr, cx: &mut Cx) -> Option<(HwAddr, Instant)> {
        let now = cx.now();
        let last_quarter = self.timeout / 4;
        let Some(Entry {
            state:
                State::Resolved {
                    hw,
                    expires,
                    probed,
                },
            ..
        }) = self.cache.get_mut(ip)
        else {
            return None;
        };
        if *expires <= now {
            return None;
        }
        let (hw, expires) = (*hw, *expires);
        let refresh_at = expires - last_quarter;
        if *probed {
            return Some((hw, expires));
        }
        if now < refresh_at {
            return Some((hw, refresh_at));
        }
        *probed = true;
        self.request(ip, hw, cx);
        Some((hw, expires))
    }

    /// [`Control::Resolve`](strata_core::Control::Resolve): the address if
    /// known, or `Pending` with a request on its way.
    pub(super) fn resolve(&mut self, ip: Ipv4Addr, cx: &mut Cx) -> Reply {
        if let Some((hw, valid_until)) = self.resolved(ip, cx) {
            return Reply::Resolved { hw, valid_until };
        }
        let pending = matches!(
            self.cache.get(ip).map(|e| &e.state),
            Some(State::Pending { .. })
        );
        if !pending {
            self.start(ip, cx);
        }
        Reply::Pending
    }

    /// [`Control::Hold`](strata_core::Control::Hold): keeps `msg` until `ip`
    /// resolves, or sends it at once if it already has. ARP counts every held
    /// packet it drops, here or later; an error tells the caller so, and the
    /// caller counts nothing more.
    pub(super) fn hold(
        &mut self,
        ip: Ipv4Addr,
        msg: Message,
        number: u32,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        if let Some((hw, _)) = self.resolved(ip, cx) {
            return match self.link(hw, Some(number), cx) {
                Ok(s) => {
                    cx.push(s, msg);
                    Ok(Reply::Done)
                }
                Err(e) => {
                    cx.count_drop(e.clone().into());
                    Err(e)
                }
            };
        }
        if !matches!(
            self.cache.get(ip).map(|e| &e.state),
            Some(State::Pending { .. })
        ) {
            self.start(ip, cx);
        }
        let limit = self.pending;
        match self.cache.get_mut(ip).map(|e| &mut e.state) {
            Some(State::Pending { held, .. }) if held.len() < limit => {
                held.push_back(Held { msg, number });
                Ok(Reply::Done)
            }
            _ => {
                cx.count_drop(DropReason::QueueFull);
                Err(UpiError::Exhausted("arp pending packets"))
            }
        }
    }

    /// The retry timer: another request, or give up and drop what waited.
    pub(super) fn retry(&mut self, ip: Ipv4Addr, cx: &mut Cx) {
        let retries = self.retries;
        let Some(entry) = self.cache.get_mut(ip) else {
            return;
        };
        let State::Pending { requests, .. } = &mut entry.state else {
            return;
        };
        if *requests < retries {
            *requests += 1;
            entry.timer = Some(cx.set_timer(
                cx.now() + RETRY_INTERVAL,
                TIMER_RETRY | u64::from(u32::from(ip)),
            ));
            self.request(ip, HwAddr::BROADCAST, cx);
            return;
        }
        if let Some(Entry {
            state: State::Pending { held, .. },
            ..
        }) = self.cache.remove(ip)
        {
            tracing::debug!(%ip, dropped = held.len(), "arp: no answer, giving up");
            cx.count("unresolved");
            for _ in held {
                cx.count_drop(DropReason::Unresolved);
            }
        }
    }

    /// The expiry timer: forget the entry unless it was renewed meanwhile.
    pub(super) fn expire(&mut self, ip: Ipv4Addr, cx: &mut Cx) {
        let now = cx.now();
        let Some(entry) = self.cache.get_mut(ip) else {
            return;
        };
        let State::Resolved { expires, .. } = entry.state else {
            return;
        };
        if expires > now {
            // Refreshed since the timer was set: wait for the new expiry.
            entry.timer = Some(cx.set_timer(expires, TIMER_EXPIRE | u64::from(u32::from(ip))));
            return;
        }
        self.cache.remove(ip);
        cx.count("expired");
    }
}
