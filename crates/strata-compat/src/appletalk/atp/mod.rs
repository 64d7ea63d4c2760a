//! ATP, the AppleTalk Transaction Protocol (Inside AppleTalk ch. 9), as a
//! native Strata protocol over [`ddp`](super::ddp) (`atp/ddp/eth`).
//!
//! A *requester* opens a session with remote `[AppleTalk{net, node},
//! Port(socket)]`; each message it sends is one transaction's request (at
//! most 578 bytes), and the reply — every response packet, in order — comes
//! back as one message on the session. A *responder* enables passive opens
//! with local `[Port(socket)]`; the first request from a new requester makes a
//! session (announced with `open_done`), each new request is delivered on it,
//! and each message the application sends answers the oldest request not yet
//! answered (at most eight packets of 578 bytes).
//!
//! Exactly-once (XO, the default): the responder keeps an answered
//! transaction's packets in its transaction list until the requester's TRel
//! or the release timer (the request's TRel timeout), and answers a retried
//! request from them; a retry of a request not yet answered is ignored. A
//! requester sends its TReq again every `retry_interval` with the bitmap of
//! the responses still missing, `retries` times before the transaction fails
//! (counted `transaction-failed`). Sessions and transactions are bounded.
//!
//! Not implemented: user bytes (sent as zero), STS sent by a responder (it is
//! honoured when received), at-least-once requests' re-delivery suppression
//! (ALO requests are delivered again when retried, as §9 allows).

mod config;
pub mod host;
mod requester;
mod responder;

use std::any::Any;

use rustc_hash::FxHashMap;
use strata_core::{
    Addr, Control, Cx, Demux, DropReason, Message, Open, PacketMeta, Participants, ProtoId,
    Protocol, Qos, Reply, SessionId, SessionRef, Target, Up, UpiError, Upper,
};

use super::info::DdpInfo;
use super::wire::atp::{Function, HEADER_LEN, Header, MAX_DATA, MAX_RESPONSES, Repr};
use super::wire::ddp;
use requester::{Requester, Transaction};
use responder::{Arrival, Responder, Saved, Waiting};

pub use config::{OPTIONS, SPEC, Settings, options_and};

const RETRY: u64 = 1;
const RELEASE: u64 = 2;

fn token(kind: u64, sess: SessionId, tid: u16) -> u64 {
    (kind << 48) | (u64::from(sess.0) << 16) | u64::from(tid)
}

/// Which end of transactions a session is.
#[derive(Debug)]
enum Role {
    Requester(Requester),
    Responder(Responder),
}

/// One ATP session: a local DDP socket and a peer.
#[derive(Debug)]
struct Session {
    upper: Upper,
    socket: u8,
    remote: ddp::Addr,
    ddp: SessionRef,
    role: Role,
}

/// A socket open for requests from anyone.
#[derive(Debug)]
struct Listener {
    upper: Upper,
    ddp: SessionRef,
}

/// The ATP protocol object.
pub struct Atp {
    ddp: ProtoId,
    settings: Settings,
    sessions: Vec<Option<Session>>,
    free: Vec<u32>,
    by_peer: FxHashMap<(u8, ddp::Addr), SessionId>,
    listeners: FxHashMap<u8, Listener>,
    next_tid: u16,
}

impl Atp {
    /// ATP over `ddp`.
    pub fn new(ddp: ProtoId, settings: Settings) -> Atp {
        Atp {
            ddp,
            settings,
            sessions: Vec::new(),
            free: Vec::new(),
            by_peer: FxHashMap::default(),
            listeners: FxHashMap::default(),
            next_tid: 0,
        }
    }

    /// How many sessions are open.
    pub fn session_count(&self) -> usize {
        self.sessions.len() - self.free.len()
    }

    /// Transactions a responder keeps in its transaction list, all sessions.
    pub fn saved_transactions(&self) -> usize {
        self.sessions
            .iter()
            .flatten()
            .map(|s| match &s.role {
                Role::Responder(r) => r.saved.len(),
                Role::Requester(_) => 0,
            })
            .sum()
    }

    fn get_mut(&mut self, id: SessionId) -> Option<&mut Session> {
        self.sessions.get_mut(id.0 as usize)?.as_mut()
    }

    fn insert(&mut self, s: Session) -> Option<SessionId> {
        if self.session_count() >= self.settings.max_sessions {
            return None;
        }
        let key = (s.socket, s.remote);
        let id = match self.free.pop() {
            Some(i) => {
                self.sessions[i as usize] = Some(s);
                SessionId(i)
            }
            None => {
                self.sessions.push(Some(s));
                SessionId(self.sessions.len() as u32 - 1)
            }
        };
        self.by_peer.insert(key, id);
        Some(id)
    }

    /// Sends one ATP packet on a DDP session.
    fn send(cx: &mut Cx, ddp: SessionRef, header: &Repr, data: Message) {
        let mut m = data;
        m.push_slice(&header.to_bytes());
        cx.push(ddp, m);
    }

    /// Sends (again) the request of transaction `tid` and arms its retry timer.
    fn send_request(&mut self, id: SessionId, tid: u16, cx: &mut Cx) {
        let (xo, trel, every) = (
            self.settings.xo,
            self.settings.trel,
            self.settings.retry_interval,
        );
        let Some(s) = self.get_mut(id) else { return };
        let ddp = s.ddp;
        let Role::Requester(req) = &mut s.role else {
            return;
        };
        let Some(t) = req.pending.get_mut(&tid) else {
            return;
        };
        t.sends += 1;
        if let Some(old) = t.timer.take() {
            cx.cancel_timer(old);
        }
        t.timer = Some(cx.set_timer(cx.now() + every, token(RETRY, id, tid)));
        let header = Repr::request(tid, t.bitmap, xo.then_some(trel), [0; 4]);
        let data = t.data.clone();
        Self::send(cx, ddp, &header, data);
    }

    /// A new TID not outstanding on any session of this socket.
    fn tid(&mut self, req: &Requester) -> u16 {
        loop {
            self.next_tid = self.next_tid.wrapping_add(1);
            if !req.pending.contains_key(&self.next_tid) {
                return self.next_tid;
            }
        }
    }

    /// A TResp for a requester session.
    fn response(&mut self, id: SessionId, r: &Repr, msg: &mut Message, cx: &mut Cx) -> Up {
        let xo = self.settings.xo;
        let Some(s) = self.get_mut(id) else {
            return Up::Drop(DropReason::NoSession);
        };
        let ddp = s.ddp;
        let Role::Requester(req) = &mut s.role else {
            return Up::Drop(DropReason::Other("response-to-responder"));
        };
        let Some(t) = req.pending.get_mut(&r.tid) else {
            // The transaction completed (a late duplicate) or never was.
            return Up::Drop(DropReason::Other("no-transaction"));
        };
        if !t.take(r.bitmap_seq, r.eom, std::mem::take(msg)) {
            cx.count("duplicate-response");
            return Up::Consumed;
        }
        if !t.complete() {
            if r.sts {
                self.send_request(id, r.tid, cx);
            }
            return Up::Consumed;
        }
        let Some(mut t) = req.pending.remove(&r.tid) else {
            return Up::Consumed;
        };
        if let Some(timer) = t.timer.take() {
            cx.cancel_timer(timer);
        }
        *msg = t.reply();
        if xo {
            let mut rel = Repr::release(r.tid);
            rel.bitmap_seq = t.asked;
            Self::send(cx, ddp, &rel, Message::new());
        }
        cx.count("transaction-done");
        Up::Continue
    }

    /// A TReq for a responder session.
    fn request(&mut self, id: SessionId, r: &Repr, cx: &mut Cx) -> Up {
        let max = self.settings.max_transactions;
        let Some(s) = self.get_mut(id) else {
            return Up::Drop(DropReason::NoSession);
        };
        let ddp = s.ddp;
        let Role::Responder(resp) = &mut s.role else {
            return Up::Drop(DropReason::Other("request-to-requester"));
        };
        let w = Waiting {
            tid: r.tid,
            bitmap: r.bitmap_seq,
            xo: r.xo.then(|| r.trel_timeout()),
        };
        match resp.arrive(w, max) {
            Arrival::New => Up::Continue,
            Arrival::Waiting => {
                cx.count("duplicate-request");
                Up::Consumed
            }
            Arrival::Full => Up::Drop(DropReason::QueueFull),
            Arrival::Saved => {
                cx.count("answered-from-saved");
                if let Some(saved) = resp.saved.get(&r.tid) {
                    for (seq, p) in saved.packets.iter().enumerate() {
                        if r.bitmap_seq & (1 << seq) != 0 {
                            cx.push(ddp, p.clone());
                        }
                    }
                }
                Up::Consumed
            }
        }
    }

    /// A TRel for a responder session.
    fn release(&mut self, id: SessionId, r: &Repr, cx: &mut Cx) -> Up {
        let Some(Session {
            role: Role::Responder(resp),
            ..
        }) = self.get_mut(id)
        else {
            return Up::Drop(DropReason::Other("release-to-requester"));
        };
        match resp.saved.remove(&r.tid) {
            Some(saved) => {
                cx.cancel_timer(saved.timer);
                cx.count("released");
            }
            // The release timer went first, or the TRel is a duplicate.
            None => cx.count("release-unknown"),
        }
        Up::Consumed
    }

    /// A responder's answer to its oldest unanswered request.
    fn answer(&mut self, id: SessionId, msg: Message, cx: &mut Cx) {
        let Some(s) = self.get_mut(id) else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        let ddp = s.ddp;
        let Role::Responder(resp) = &mut s.role else {
            return;
        };
        let Some(w) = resp.waiting.pop_front() else {
            cx.count_drop(DropReason::Other("no-request"));
            return;
        };
        let count = msg.len().div_ceil(MAX_DATA).max(1);
        if count > MAX_RESPONSES {
            cx.count_drop(DropReason::Other("too-big"));
            return;
        }
        let mut rest = msg;
        let mut packets = Vec::with_capacity(count);
        for seq in 0..count {
            let tail = rest.split_off(rest.len().min(MAX_DATA));
            let header = Repr::response(w.tid, seq as u8, seq + 1 == count, [0; 4]);
            let mut p = std::mem::replace(&mut rest, tail);
            p.push_slice(&header.to_bytes());
            packets.push(p);
        }
        for (seq, p) in packets.iter().enumerate() {
            if w.bitmap & (1 << seq) != 0 {
                cx.push(ddp, p.clone());
            }
        }
        if let Some(trel) = w.xo {
            let timer = cx.set_timer(cx.now() + trel.duration(), token(RELEASE, id, w.tid));
            if let Some(old) = resp.saved.insert(w.tid, Saved { packets, timer }) {
                cx.cancel_timer(old.timer);
            }
        }
    }

    /// Makes a responder session for a request from a new requester.
    fn accept(&mut self, socket: u8, src: ddp::Addr, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let upper = self
            .listeners
            .get(&socket)
            .map(|l| l.upper)
            .ok_or(UpiError::NoSuchSession)?;
        if self.session_count() >= self.settings.max_sessions {
            return Err(UpiError::Exhausted("atp sessions"));
        }
        let parts = host::peer_parts(socket, src);
        let ddp = cx.open(self.ddp, parts.clone(), Qos::default())?;
        let id = self
            .insert(Session {
                upper,
                socket,
                remote: src,
                ddp,
                role: Role::Responder(Responder::default()),
            })
            .ok_or(UpiError::Exhausted("atp sessions"))?;
        cx.open_done(upper, id, parts);
        Ok(id)
    }
}

impl Protocol for Atp {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        host::demux_with(
            hdr,
            meta,
            |socket, src| {
                let id = *self.by_peer.get(&(socket, src))?;
                Some((id, self.sessions.get(id.0 as usize)?.as_ref()?.upper))
            },
            |socket| self.listeners.get(&socket).map(|l| l.upper),
        )
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        let Some(&header) = msg
            .pullup(HEADER_LEN)
            .and_then(|h| h.first_chunk::<HEADER_LEN>())
        else {
            return Up::Drop(DropReason::Truncated);
        };
        let r = match Header::new_checked(&header[..]).and_then(|h| Repr::parse(&h)) {
            Ok(r) => r,
            Err(e) => return Up::Drop(e.into()),
        };
        let Some(info) = DdpInfo::of(meta) else {
            return Up::Drop(DropReason::Other("no-ddp"));
        };
        msg.strip(HEADER_LEN);
        if msg.len() > MAX_DATA {
            return Up::Drop(DropReason::Malformed);
        }
        let id = match target {
            Target::Session(id) => id,
            Target::Enable(_) => {
                if r.function != Function::Request {
                    return Up::Drop(DropReason::NoSession);
                }
                if let Some(id) = self.by_peer.get(&(info.dst.socket, info.src)) {
                    *id
                } else {
                    return match self.accept(info.dst.socket, info.src, cx) {
                        Ok(id) => match self.request(id, &r, cx) {
                            Up::Continue => Up::Opened(id),
                            other => other,
                        },
                        Err(_) => Up::Drop(DropReason::Refused),
                    };
                }
            }
            Target::Protocol => return Up::Drop(DropReason::NoSession),
        };
        match r.function {
            Function::Request => self.request(id, &r, cx),
            Function::Response => self.response(id, &r, msg, cx),
            Function::Release => self.release(id, &r, cx),
        }
    }

    fn push(&mut self, sess: SessionId, msg: Message, cx: &mut Cx) {
        let max = self.settings.max_transactions;
        let Some(s) = self
            .sessions
            .get_mut(sess.0 as usize)
            .and_then(Option::as_mut)
        else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        let Role::Requester(req) = &mut s.role else {
            self.answer(sess, msg, cx);
            return;
        };
        if msg.len() > MAX_DATA {
            cx.count_drop(DropReason::Other("too-big"));
            return;
        }
        if req.pending.len() >= max {
            cx.count_drop(DropReason::QueueFull);
            return;
        }
        let taken = std::mem::take(req);
        let tid = self.tid(&taken);
        let mut taken = taken;
        taken.pending.insert(tid, Transaction::new(msg, u8::MAX));
        if let Some(Session {
            role: Role::Requester(req),
            ..
        }) = self.get_mut(sess)
        {
            *req = taken;
        }
        self.send_request(sess, tid, cx);
    }

    fn open(&mut self, mut req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        if self.session_count() >= self.settings.max_sessions {
            return Err(UpiError::Exhausted("atp sessions"));
        }
        let (local, remote, ddp) = host::open_requester(self.ddp, &mut req, cx)?;
        if self.by_peer.contains_key(&(local, remote)) {
            cx.close(ddp);
            return Err(UpiError::InUse);
        }
        self.insert(Session {
            upper: req.upper,
            socket: local,
            remote,
            ddp,
            role: Role::Requester(Requester::default()),
        })
        .ok_or_else(|| {
            cx.close(ddp);
            UpiError::Exhausted("atp sessions")
        })
    }

    fn open_enable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let socket = host::listen_socket(&req)?;
        if self.listeners.contains_key(&socket) {
            return Err(UpiError::InUse);
        }
        let ddp = cx.open(
            self.ddp,
            Participants::local([Addr::Port(u16::from(socket))]),
            req.qos,
        )?;
        self.listeners.insert(
            socket,
            Listener {
                upper: req.upper,
                ddp,
            },
        );
        Ok(())
    }

    fn open_disable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let socket = host::listen_socket(&req)?;
        match self.listeners.get(&socket) {
            Some(l) if l.upper == req.upper => {
                if let Some(l) = self.listeners.remove(&socket) {
                    cx.close(l.ddp);
                }
                Ok(())
            }
            _ => Err(UpiError::NoSuchSession),
        }
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        let Some(s) = self
            .sessions
            .get_mut(sess.0 as usize)
            .and_then(Option::take)
        else {
            return;
        };
        self.free.push(sess.0);
        self.by_peer.remove(&(s.socket, s.remote));
        match s.role {
            Role::Requester(r) => r
                .pending
                .into_values()
                .filter_map(|t| t.timer)
                .for_each(|t| cx.cancel_timer(t)),
            Role::Responder(r) => r.saved.into_values().for_each(|t| cx.cancel_timer(t.timer)),
        }
        cx.close(s.ddp);
    }

    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        _cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        match (op, sess) {
            (Control::GetMaxPayload, _) => Ok(Reply::Size(MAX_DATA)),
            (Control::GetParticipants, Some(id)) => {
                let s = self
                    .sessions
                    .get(id.0 as usize)
                    .and_then(Option::as_ref)
                    .ok_or(UpiError::NoSuchSession)?;
                Ok(Reply::Participants(host::peer_parts(s.socket, s.remote)))
            }
            (op, _) => Err(UpiError::Unsupported(op.name())),
        }
    }

    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        let kind = token >> 48;
        let id = SessionId((token >> 16) as u32);
        let tid = token as u16;
        let retries = self.settings.retries;
        let Some(s) = self.get_mut(id) else { return };
        match (&mut s.role, kind) {
            (Role::Requester(req), RETRY) => {
                let Some(t) = req.pending.get_mut(&tid) else {
                    return;
                };
                t.timer = None;
                if t.sends > retries {
                    req.pending.remove(&tid);
                    cx.count("transaction-failed");
                    return;
                }
                cx.count("request-retried");
                self.send_request(id, tid, cx);
            }
            (Role::Responder(resp), RELEASE) => {
                let expired = resp.saved.remove(&tid).is_some();
                cx.count_n("release-timeout", u64::from(expired));
            }
            _ => {}
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
