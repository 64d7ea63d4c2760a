//! The IP sessions a TCP keeps for segments that belong to no connection (a
//! reset), and for connections that just ended: a segment queued for one
//! still needs its IP session after the connection is gone, so the session
//! is kept, least recently used first out, instead of closed at once.
//! Strata's TCP and the smoltcp module (`strata-compat`) both keep theirs
//! here.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use strata_core::{Addr, Cx, Participants, ProtoId, Qos, SessionRef};

/// Most IP sessions kept.
const PEER_LIMIT: usize = 64;

/// IP sessions by peer, least recently used first.
#[derive(Default)]
pub struct PeerSessions {
    peers: VecDeque<(Ipv4Addr, SessionRef)>,
}

impl PeerSessions {
    /// An IP session to `peer`, opened on `ip` when none is kept.
    pub fn get(&mut self, peer: Ipv4Addr, ip: ProtoId, cx: &mut Cx) -> Option<SessionRef> {
        if let Some(i) = self.peers.iter().position(|(a, _)| *a == peer) {
            let entry = self.peers.remove(i)?;
            self.peers.push_back(entry);
            return Some(entry.1);
        }
        let s = cx
            .open(ip, Participants::remote([Addr::Ip(peer)]), Qos::default())
            .ok()?;
        self.keep(peer, s, cx);
        Some(s)
    }

    /// Takes over the IP session of a connection that ended instead of
    /// closing it at once: a segment it just queued (a final ACK or a reset)
    /// still needs it.
    pub fn retire(&mut self, peer: Ipv4Addr, session: SessionRef, cx: &mut Cx) {
        if self.peers.iter().any(|(a, _)| *a == peer) {
            // IP shares one session per peer; ours was another reference.
            cx.close(session);
            return;
        }
        self.keep(peer, session, cx);
    }

    fn keep(&mut self, peer: Ipv4Addr, session: SessionRef, cx: &mut Cx) {
        if self.peers.len() >= PEER_LIMIT
            && let Some((_, old)) = self.peers.pop_front()
        {
            cx.close(old);
        }
        self.peers.push_back((peer, session));
    }
}
