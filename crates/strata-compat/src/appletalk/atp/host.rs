//! The Strata side every imported ATP shares (`atp@bsd`, `atp@streams`):
//! what makes a module look like Strata's `atp` to the graph — the same
//! sessions (a requester per remote socket, responders made by a passive
//! open), participants, demux and options — while the transactions
//! themselves are the imported code's. A push becomes an [`AtpService`]
//! record (SendRequest, or SendResponse for the oldest request not yet
//! answered); a record the imported ATP hands its user becomes a delivery
//! on the right session. Written once: the two modules differ only in how
//! they carry records to the imported code and back.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use strata_core::{
    Addr, Control, Cx, Demux, DropReason, Message, Next, Open, PacketMeta, Participant,
    Participants, ProtoId, Protocol, Qos, Reply, SessionId, SessionRef, Target, Up, UpiError,
    Upper,
};

use super::Settings;
use crate::appletalk::ddp::next_of;
use crate::appletalk::endpoints::Endpoints;
use crate::appletalk::info::DdpInfo;
use crate::appletalk::wire::atp::{Function, HEADER_LEN, Header, MAX_DATA, Repr};
use crate::appletalk::wire::ddp;
use crate::atp_service::AtpService;

/// ATP's demux, whoever's sessions: `session` finds the session of a
/// (local socket, remote) pair, `listener` the upper of a passive open.
pub(crate) fn demux_with(
    hdr: &[u8],
    meta: &PacketMeta,
    session: impl FnOnce(u8, ddp::Addr) -> Option<(SessionId, Upper)>,
    listener: impl FnOnce(u8) -> Option<Upper>,
) -> Demux {
    let h = match Header::new_checked(hdr) {
        Ok(h) => h,
        Err(e) => return e.demux(),
    };
    let r = match Repr::parse(&h) {
        Ok(r) => r,
        Err(e) => return Demux::Drop(e.into()),
    };
    let Some(info) = DdpInfo::of(meta) else {
        return Demux::Drop(DropReason::Other("no-ddp"));
    };
    let (target, next) = match (
        session(info.dst.socket, info.src),
        listener(info.dst.socket),
    ) {
        (Some((id, upper)), _) => (Target::Session(id), next_of(upper)),
        (None, Some(upper)) if r.function == Function::Request => {
            (Target::Enable(u32::from(info.dst.socket)), next_of(upper))
        }
        _ => (Target::Protocol, Next::Here),
    };
    Demux::To {
        target,
        hdr_len: HEADER_LEN,
        next,
    }
}

/// The participants of a session from local `socket` to `remote`.
pub(crate) fn peer_parts(socket: u8, remote: ddp::Addr) -> Participants {
    Participants {
        remote: Participant::of([
            Addr::AppleTalk {
                net: remote.net,
                node: remote.node,
            },
            Addr::Port(u16::from(remote.socket)),
        ]),
        local: Participant::of([Addr::Port(u16::from(socket))]),
    }
}

/// A requester's open: the remote socket address from the participants, a
/// DDP session to it below, and the local socket DDP gave that session.
pub(crate) fn open_requester(
    below: ProtoId,
    req: &mut Open,
    cx: &mut Cx,
) -> Result<(u8, ddp::Addr, SessionRef), UpiError> {
    let mut parts = req.parts.clone();
    let socket = parts.remote.pop_port().ok_or(UpiError::BadParticipant(
        "atp needs a remote socket on top of the remote node",
    ))?;
    let (net, node) = parts
        .remote
        .pop_appletalk()
        .ok_or(UpiError::BadParticipant(
            "atp needs an AppleTalk node below the socket",
        ))?;
    let socket =
        u8::try_from(socket).map_err(|_| UpiError::BadParticipant("a DDP socket is one byte"))?;
    let remote = ddp::Addr::new(net, node, socket);
    let ddp = cx.open(below, std::mem::take(&mut req.parts), req.qos)?;
    let local = match cx.control(ddp.proto, Some(ddp.sess), Control::GetParticipants) {
        Ok(Reply::Participants(mut p)) => p.local.pop_port(),
        _ => None,
    };
    match local.and_then(|p| u8::try_from(p).ok()) {
        Some(local) => Ok((local, remote, ddp)),
        None => {
            cx.close(ddp);
            Err(UpiError::Unsupported("a DDP below that names its socket"))
        }
    }
}

/// The local socket of a passive open (1 to 254).
pub(crate) fn listen_socket(req: &Open) -> Result<u8, UpiError> {
    let mut local = req.parts.local.clone();
    local
        .pop_port()
        .and_then(|p| u8::try_from(p).ok())
        .filter(|s| *s != 0 && *s != 255)
        .ok_or(UpiError::BadParticipant(
            "a passive open needs a local socket, 1 to 254",
        ))
}

/// One session of an imported ATP.
#[derive(Debug)]
pub struct Session {
    /// Who is above.
    pub upper: Upper,
    /// The local DDP socket.
    pub socket: u8,
    /// The peer.
    pub remote: ddp::Addr,
    /// The DDP session below.
    pub ddp: SessionRef,
    /// A requester (else a responder made by a passive open).
    pub requester: bool,
    /// Requests delivered and not yet answered, oldest first (responders).
    waiting: VecDeque<u16>,
}

/// A socket open for requests from anyone.
#[derive(Debug)]
struct Listener {
    upper: Upper,
    ddp: SessionRef,
}

/// What a push asks of the imported ATP: `rec` for the endpoint of
/// `socket`, to `dst`.
pub struct Outgoing {
    /// The local DDP socket (the imported endpoint).
    pub socket: u8,
    /// Where to.
    pub dst: ddp::Addr,
    /// SendRequest or SendResponse.
    pub rec: AtpService,
}

/// An imported ATP's Strata side.
pub struct Host {
    /// The DDP below.
    pub ddp: ProtoId,
    /// The options (as `atp`'s).
    pub settings: Settings,
    sessions: Vec<Option<Session>>,
    free: Vec<u32>,
    by_peer: FxHashMap<(u8, ddp::Addr), SessionId>,
    listeners: FxHashMap<u8, Listener>,
}

impl Host {
    /// Over `ddp`, with `atp`'s settings.
    pub fn new(ddp: ProtoId, settings: Settings) -> Host {
        Host {
            ddp,
            settings,
            sessions: Vec::new(),
            free: Vec::new(),
            by_peer: FxHashMap::default(),
            listeners: FxHashMap::default(),
        }
    }

    /// How many sessions are open.
    pub fn session_count(&self) -> usize {
        self.sessions.len() - self.free.len()
    }

    /// Session `id`.
    pub fn get(&self, id: SessionId) -> Option<&Session> {
        self.sessions.get(id.0 as usize)?.as_ref()
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

    /// ATP's demux over these sessions.
    pub fn demux(&self, hdr: &[u8], meta: &PacketMeta) -> Demux {
        demux_with(
            hdr,
            meta,
            |socket, src| {
                let id = *self.by_peer.get(&(socket, src))?;
                Some((id, self.get(id)?.upper))
            },
            |socket| self.listeners.get(&socket).map(|l| l.upper),
        )
    }

    /// The DDP session from `socket` to `dst` (where the imported ATP's
    /// packets to `dst` go).
    pub fn ddp_to(&self, socket: u8, dst: ddp::Addr) -> Option<SessionRef> {
        let id = self.by_peer.get(&(socket, dst))?;
        Some(self.get(*id)?.ddp)
    }

    /// A requester's open; the session and its local socket.
    pub fn open(&mut self, mut req: Open, cx: &mut Cx) -> Result<(SessionId, u8), UpiError> {
        if self.session_count() >= self.settings.max_sessions {
            return Err(UpiError::Exhausted("atp sessions"));
        }
        let (socket, remote, ddp) = open_requester(self.ddp, &mut req, cx)?;
        if self.by_peer.contains_key(&(socket, remote)) {
            cx.close(ddp);
            return Err(UpiError::InUse);
        }
        let s = Session {
            upper: req.upper,
            socket,
            remote,
            ddp,
            requester: true,
            waiting: VecDeque::new(),
        };
        match self.insert(s) {
            Some(id) => Ok((id, socket)),
            None => {
                cx.close(ddp);
                Err(UpiError::Exhausted("atp sessions"))
            }
        }
    }

    /// A passive open; its socket.
    pub fn open_enable(&mut self, req: Open, cx: &mut Cx) -> Result<u8, UpiError> {
        let socket = listen_socket(&req)?;
        if self.listeners.contains_key(&socket) {
            return Err(UpiError::InUse);
        }
        let ddp = cx.open(
            self.ddp,
            Participants::local([Addr::Port(u16::from(socket))]),
            req.qos,
        )?;
        let upper = req.upper;
        self.listeners.insert(socket, Listener { upper, ddp });
        Ok(socket)
    }

    /// The end of a passive open; its socket.
    pub fn open_disable(&mut self, req: Open, cx: &mut Cx) -> Result<u8, UpiError> {
        let socket = listen_socket(&req)?;
        match self.listeners.get(&socket) {
            Some(l) if l.upper == req.upper => {
                if let Some(l) = self.listeners.remove(&socket) {
                    cx.close(l.ddp);
                }
                Ok(socket)
            }
            _ => Err(UpiError::NoSuchSession),
        }
    }

    /// Closes session `sess` and the DDP session below it.
    pub fn close(&mut self, sess: SessionId, cx: &mut Cx) -> Option<Session> {
        let s = self.sessions.get_mut(sess.0 as usize)?.take()?;
        self.free.push(sess.0);
        self.by_peer.remove(&(s.socket, s.remote));
        cx.close(s.ddp);
        Some(s)
    }

    /// `atp`'s control operations.
    pub fn control(&self, sess: Option<SessionId>, op: Control) -> Result<Reply, UpiError> {
        match (op, sess) {
            (Control::GetMaxPayload, _) => Ok(Reply::Size(MAX_DATA)),
            (Control::GetParticipants, Some(id)) => {
                let s = self.get(id).ok_or(UpiError::NoSuchSession)?;
                Ok(Reply::Participants(peer_parts(s.socket, s.remote)))
            }
            (op, _) => Err(UpiError::Unsupported(op.name())),
        }
    }

    /// What a push on `sess` asks of the imported ATP, or the drop counted:
    /// a requester's message is a request, a responder's answers the oldest
    /// request it has not answered.
    pub fn outgoing(&mut self, sess: SessionId, cx: &mut Cx) -> Option<Outgoing> {
        let st = self.settings;
        let Some(s) = self.get_mut(sess) else {
            cx.count_drop(DropReason::NoSession);
            return None;
        };
        let rec = if s.requester {
            AtpService::SendRequest {
                xo: st.xo.then_some(st.trel),
                bitmap: 0xff,
                retries: st.retries.min(254) as u8,
                interval: (st.retry_interval.as_millis() / 100).clamp(1, 255) as u8,
                user: [0; 4],
            }
        } else {
            let Some(tid) = s.waiting.pop_front() else {
                cx.count_drop(DropReason::Other("no-request"));
                return None;
            };
            AtpService::SendResponse { tid, user: [0; 4] }
        };
        Some(Outgoing {
            socket: s.socket,
            dst: s.remote,
            rec,
        })
    }

    /// What a pop passes up for `rec`, a record the imported ATP handed its
    /// user on `socket` about a transaction with `from` (the data, if any,
    /// is in the popped message already). A request from a new requester
    /// makes its responder session.
    pub fn indicated(
        &mut self,
        target: Target,
        socket: u8,
        from: ddp::Addr,
        rec: AtpService,
        cx: &mut Cx,
    ) -> Up {
        let found = self.by_peer.get(&(socket, from)).copied();
        match rec {
            AtpService::ResponseInd { .. } => {
                cx.count("transaction-done");
                match found {
                    Some(id) if target == Target::Session(id) => Up::Continue,
                    _ => Up::Drop(DropReason::NoSession),
                }
            }
            AtpService::RequestInd { tid, .. } => {
                let (id, fresh) = match found {
                    Some(id) => (id, false),
                    None => match self.accept(socket, from, cx) {
                        Ok(id) => (id, true),
                        Err(_) => return Up::Drop(DropReason::Refused),
                    },
                };
                match self.get_mut(id) {
                    Some(s) if !s.requester => s.waiting.push_back(tid),
                    _ => return Up::Drop(DropReason::Other("request-to-requester")),
                }
                match target {
                    Target::Enable(_) if fresh => Up::Opened(id),
                    Target::Session(t) if t == id => Up::Continue,
                    _ => Up::Drop(DropReason::NoSession),
                }
            }
            AtpService::RequestFailed { .. } => {
                cx.count("transaction-failed");
                Up::Consumed
            }
            _ => Up::Drop(DropReason::Other("unexpected-record")),
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
        let parts = peer_parts(socket, src);
        let ddp = cx.open(self.ddp, parts.clone(), Qos::default())?;
        let s = Session {
            upper,
            socket,
            remote: src,
            ddp,
            requester: false,
            waiting: VecDeque::new(),
        };
        let Some(id) = self.insert(s) else {
            cx.close(ddp);
            return Err(UpiError::Exhausted("atp sessions"));
        };
        cx.open_done(upper, id, parts);
        Ok(id)
    }
}

/// What the imported code made of a received packet.
pub enum Input {
    /// It handed the user `rec` about a transaction with the address; the
    /// data (if any) replaced the message.
    Indication(ddp::Addr, AtpService),
    /// It kept or answered the packet.
    Consumed,
    /// It dropped the packet, counted.
    Dropped(DropReason),
}

/// The imported code behind an imported ATP node, with its emulation of
/// the code's subsystem: all that differs between `atp@bsd` and
/// `atp@streams`. Strata's side is [`Imported`].
pub trait Code: Send + 'static {
    /// Makes the endpoint of local socket `socket` (attaches a BSD socket,
    /// opens a stream).
    fn attach(&mut self, host: &mut Host, socket: u8, cx: &mut Cx) -> Result<(), UpiError>;
    /// Takes it away.
    fn detach(&mut self, host: &mut Host, socket: u8, cx: &mut Cx);
    /// Hands the code a packet DDP received (addresses in `info`) on an
    /// endpoint's socket.
    fn input(&mut self, host: &mut Host, info: &DdpInfo, msg: &mut Message, cx: &mut Cx) -> Input;
    /// Asks the code to send `msg` as `send` says.
    fn output(&mut self, host: &mut Host, send: Outgoing, msg: Message, cx: &mut Cx);
    /// A timer the code set fell due.
    fn timer(&mut self, host: &mut Host, token: u64, cx: &mut Cx);
}

/// An imported ATP as a Strata protocol: Strata's side ([`Host`]) and the
/// imported code ([`Code`]), its endpoints shared by the sessions on a socket.
pub struct Imported<C> {
    host: Host,
    endpoints: Endpoints<()>,
    /// The imported code and its emulated subsystem.
    pub code: C,
}

impl<C: Code> Imported<C> {
    /// `code` behind `host`.
    pub fn new(host: Host, code: C) -> Imported<C> {
        Imported {
            host,
            endpoints: Endpoints::default(),
            code,
        }
    }

    /// How many sessions are open.
    pub fn session_count(&self) -> usize {
        self.host.session_count()
    }

    /// One more holder of socket `socket`'s endpoint, made the first time.
    fn hold(&mut self, socket: u8, cx: &mut Cx) -> Result<(), UpiError> {
        if !self.endpoints.hold(socket) {
            self.code.attach(&mut self.host, socket, cx)?;
            self.endpoints.insert(socket, ());
        }
        Ok(())
    }

    /// One holder fewer; the last takes the endpoint away.
    fn release(&mut self, socket: u8, cx: &mut Cx) {
        if self.endpoints.release(socket).is_some() {
            self.code.detach(&mut self.host, socket, cx);
        }
    }
}

impl<C: Code> Protocol for Imported<C> {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        self.host.demux(hdr, meta)
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        let Some(info) = DdpInfo::of(meta) else {
            return Up::Drop(DropReason::Other("no-ddp"));
        };
        let socket = info.dst.socket;
        if self.endpoints.get(socket).is_none() {
            return Up::Drop(DropReason::NoSession);
        }
        let (from, rec) = match self.code.input(&mut self.host, &info, msg, cx) {
            Input::Indication(from, rec) => (from, rec),
            Input::Consumed => return Up::Consumed,
            Input::Dropped(r) => return Up::Drop(r),
        };
        let up = self.host.indicated(target, socket, from, rec, cx);
        if let Up::Opened(_) = up {
            // The new responder session holds the endpoint too.
            self.endpoints.hold(socket);
        }
        up
    }

    fn push(&mut self, sess: SessionId, msg: Message, cx: &mut Cx) {
        if let Some(send) = self.host.outgoing(sess, cx) {
            self.code.output(&mut self.host, send, msg, cx);
        }
    }

    fn open(&mut self, req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let (id, socket) = self.host.open(req, cx)?;
        if let Err(e) = self.hold(socket, cx) {
            self.host.close(id, cx);
            return Err(e);
        }
        Ok(id)
    }

    fn open_enable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let socket = self.host.open_enable(req.clone(), cx)?;
        if let Err(e) = self.hold(socket, cx) {
            let _ = self.host.open_disable(req, cx);
            return Err(e);
        }
        Ok(())
    }

    fn open_disable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let socket = self.host.open_disable(req, cx)?;
        self.release(socket, cx);
        Ok(())
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        if let Some(s) = self.host.close(sess, cx) {
            self.release(s.socket, cx);
        }
    }

    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        _cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        self.host.control(sess, op)
    }

    fn on_timer(&mut self, token: u64, cx: &mut Cx) {
        self.code.timer(&mut self.host, token, cx);
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
