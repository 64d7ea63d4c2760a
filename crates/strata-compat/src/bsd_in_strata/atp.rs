//! `atp@bsd`: BSD's ATP ([`netatalk::atp`](crate::bsd::netatalk::atp), the
//! very file the native BSD subsystem compiles) as a node of a Strata graph,
//! over any Strata DDP (`ddp`, `ddp@bsd`, `ddp@streams`) and usable wherever
//! Strata's `atp` is.
//!
//! To Strata the module is an ATP (the sessions, participants and demux of
//! [`atp::host`](crate::appletalk::atp::host)). To BSD's ATP it is the
//! kernel ([`BsdKernel`]): a BSD socket per local DDP socket (number `n` is
//! `SockId(n)`); a push is `PRU_SEND` with the peer and an
//! [`AtpService`] record as control data; ATP's `pr_output` to DDP is a push
//! to the Strata DDP session of that socket and peer; a received packet is
//! copied into an mbuf chain and handed to `pr_input` as DDP would; what ATP
//! appends to a socket (`sbappendaddr`: a completed transaction, a request)
//! is what goes up; `pr_slowtimo` runs every 500 ms from a Strata timer
//! while any socket exists (ATP has no `pr_fasttimo`, so none is driven).

use strata_core::graph::{BuildInfo, ProtocolConfig};
use strata_core::{
    Control, Cx, Demux, DropReason, GraphError, Message, Open, PacketMeta, Protocol, Reply,
    SessionId, Target, TimerId, Up, UpiError,
};

use crate::appletalk::DdpInfo;
use crate::appletalk::atp::Settings;
use crate::appletalk::atp::host::Host;
use crate::appletalk::endpoints::Endpoints;
use crate::appletalk::wire::ddp as wire;
use crate::atp_service::AtpService;
use crate::bsd::kernel::{BsdKernel, HZ};
use crate::bsd::mbuf::{Mbuf, MbufPool, MbufType, NativeMbufs, m_devget};
use crate::bsd::netatalk::ATPROTO_ATP;
use crate::bsd::netatalk::atp::{Atp, AtpStats};
use crate::bsd::protosw::{
    InputArg, OutputArg, PrcCmd, Protosw, SockId, SockaddrAt, Usrreq, UsrreqOk,
};
use crate::bsd::system::SLOWTIMO;
use crate::errno::Errno;

/// What BSD's ATP appended to a socket: the record and the data.
struct Appended {
    from: SockaddrAt,
    rec: Option<AtpService>,
    data: Mbuf,
}

/// The kernel BSD's ATP sees: Strata's context for the length of one call.
struct Kernel<'k, 'c> {
    cx: &'k mut Cx<'c>,
    mbufs: &'k MbufPool,
    host: &'k Host,
    appended: Vec<Appended>,
}

fn at(a: SockaddrAt) -> wire::Addr {
    wire::Addr::new(a.net, a.node, a.port)
}

impl BsdKernel for Kernel<'_, '_> {
    fn mbufs(&self) -> &MbufPool {
        self.mbufs
    }

    fn ticks(&self) -> u64 {
        self.cx.now().as_nanos() / (1_000_000_000 / HZ)
    }

    fn pr_input(&mut self, _proto: u8, _m: Mbuf, _arg: InputArg) {
        self.cx.count("bsd-unexpected-pr_input");
    }

    fn pr_output(&mut self, _proto: u8, m: Mbuf, arg: OutputArg) -> Result<(), Errno> {
        // DDP below is Strata's: the session of this socket and peer.
        let ddp = self
            .host
            .ddp_to(arg.so.0 as u8, at(arg.dst))
            .ok_or(Errno::Ehostunreach)?;
        self.cx.push(ddp, Message::from(m.to_vec()));
        Ok(())
    }

    fn pr_usrreq(&mut self, _proto: u8, _so: SockId, req: Usrreq) -> Result<UsrreqOk, Errno> {
        // ATP asks DDP to attach, bind and detach its socket: Strata's DDP
        // sessions below are that socket already.
        match req {
            Usrreq::Attach | Usrreq::Detach | Usrreq::Bind(_) | Usrreq::Shutdown => {
                Ok(UsrreqOk::Done)
            }
            _ => Err(Errno::Eopnotsupp),
        }
    }

    fn pr_ctlinput(&mut self, _proto: u8, _cmd: PrcCmd, _addr: Option<SockaddrAt>) {}

    fn if_output(&mut self, _ifp: usize, _m: Mbuf, _dst: SockaddrAt) -> Result<(), Errno> {
        Err(Errno::Eopnotsupp)
    }

    fn if_address(&self, _ifp: usize) -> Option<SockaddrAt> {
        None
    }

    fn if_route(&self, _dst: SockaddrAt) -> Option<usize> {
        None
    }

    fn so_proto(&self, _so: SockId) -> Option<u8> {
        Some(ATPROTO_ATP)
    }

    fn sbappendaddr(
        &mut self,
        _so: SockId,
        from: SockaddrAt,
        m: Mbuf,
        control: Option<Mbuf>,
    ) -> Result<(), Errno> {
        let rec = control.and_then(|c| AtpService::decode(&c.to_vec()));
        self.appended.push(Appended { from, rec, data: m });
        Ok(())
    }

    fn sbspace(&self, _so: SockId) -> usize {
        usize::MAX
    }

    fn sorwakeup(&mut self, _so: SockId) {}

    fn sowwakeup(&mut self, _so: SockId) {}

    fn soerror(&mut self, _so: SockId, _e: Errno) {}
}

/// The `atp@bsd` protocol object.
pub struct BsdAtp {
    host: Host,
    /// The imported protocol, unmodified.
    atp: Atp,
    mbufs: MbufPool,
    /// BSD sockets by local DDP socket (the endpoint is `SockId(socket)`).
    sockets: Endpoints<()>,
    slowtimo: Option<TimerId>,
}

/// Strata's drop reason for what BSD's ATP counted while dropping, or
/// `None` when it kept or answered the packet.
fn reason(before: &AtpStats, after: &AtpStats) -> Option<DropReason> {
    if after.malformed > before.malformed {
        Some(DropReason::Malformed)
    } else if after.no_transaction > before.no_transaction {
        Some(DropReason::Other("no-transaction"))
    } else if after.table_full > before.table_full || after.sb_full > before.sb_full {
        Some(DropReason::QueueFull)
    } else {
        None
    }
}

/// Counts what a record handed up outside a pop means (a failure).
fn count_late(rec: Option<AtpService>, cx: &mut Cx) {
    if let Some(AtpService::RequestFailed { .. }) = rec {
        cx.count("transaction-failed");
    }
}

impl BsdAtp {
    /// BSD's ATP behind `host`, its mbufs from a pool of `mbufs` small
    /// mbufs and as many clusters.
    pub fn new(host: Host, mbufs: usize) -> BsdAtp {
        BsdAtp {
            host,
            atp: Atp::new(),
            mbufs: NativeMbufs::pool(mbufs, mbufs),
            sockets: Endpoints::default(),
            slowtimo: None,
        }
    }

    /// BSD ATP's own counters.
    pub fn stats(&self) -> &AtpStats {
        &self.atp.stats
    }

    /// How many sessions are open.
    pub fn session_count(&self) -> usize {
        self.host.session_count()
    }

    /// Runs `f` with BSD's ATP and a kernel lent Strata's context; returns
    /// what ATP appended to sockets.
    fn call<R>(
        &mut self,
        cx: &mut Cx,
        f: impl FnOnce(&mut Atp, &mut Kernel) -> R,
    ) -> (R, Vec<Appended>) {
        let mut k = Kernel {
            cx,
            mbufs: &self.mbufs,
            host: &self.host,
            appended: Vec::new(),
        };
        let r = f(&mut self.atp, &mut k);
        (r, k.appended)
    }

    /// One more holder of socket `socket`, attached the first time.
    fn attach(&mut self, socket: u8, cx: &mut Cx) -> Result<(), UpiError> {
        if self.sockets.hold(socket) {
            return Ok(());
        }
        let so = SockId(usize::from(socket));
        let (r, _) = self.call(cx, |atp, k| atp.pr_usrreq(k, so, Usrreq::Attach));
        r.map_err(|_| UpiError::Refused)?;
        self.sockets.insert(socket, ());
        if self.slowtimo.is_none() {
            self.slowtimo = Some(cx.set_timer(cx.now() + SLOWTIMO, 0));
        }
        Ok(())
    }

    /// One holder fewer of socket `socket`; the last detaches it.
    fn detach(&mut self, socket: u8, cx: &mut Cx) {
        if self.sockets.release(socket).is_some() {
            let so = SockId(usize::from(socket));
            let _ = self.call(cx, |atp, k| atp.pr_usrreq(k, so, Usrreq::Detach));
        }
        if self.sockets.is_empty()
            && let Some(t) = self.slowtimo.take()
        {
            cx.cancel_timer(t);
        }
    }
}

impl Protocol for BsdAtp {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        self.host.demux(hdr, meta)
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        let Some(info) = DdpInfo::of(meta) else {
            return Up::Drop(DropReason::Other("no-ddp"));
        };
        let socket = info.dst.socket;
        if self.sockets.get(socket).is_none() {
            return Up::Drop(DropReason::NoSession);
        }
        // What DDP's pr_input hands ATP: the packet as an mbuf chain.
        let Ok(m) = m_devget(&self.mbufs, &msg.to_vec(), None) else {
            return Up::Drop(DropReason::NoRoom);
        };
        let arg = InputArg::Ddp {
            src: SockaddrAt::new(info.src.net, info.src.node, info.src.socket),
            dst: SockaddrAt::new(info.dst.net, info.dst.node, socket),
            so: SockId(usize::from(socket)),
        };
        let before = self.atp.stats;
        let ((), mut appended) = self.call(cx, |atp, k| atp.pr_input(k, m, arg));
        let Some(a) = appended.pop() else {
            return match reason(&before, &self.atp.stats) {
                Some(r) => Up::Drop(r),
                None => Up::Consumed,
            };
        };
        appended.into_iter().for_each(|x| count_late(x.rec, cx));
        let Some(rec) = a.rec else {
            return Up::Drop(DropReason::Other("no-record"));
        };
        *msg = Message::from(a.data.to_vec());
        let up = self.host.indicated(target, socket, at(a.from), rec, cx);
        if let Up::Opened(_) = up {
            // The new responder session holds the socket too.
            let _ = self.sockets.hold(socket);
        }
        up
    }

    fn push(&mut self, sess: SessionId, msg: Message, cx: &mut Cx) {
        let Some(send) = self.host.outgoing(sess, cx) else {
            return;
        };
        let Ok(m) = m_devget(&self.mbufs, &msg.to_vec(), None) else {
            cx.count_drop(DropReason::NoRoom);
            return;
        };
        let so = SockId(usize::from(send.socket));
        let nam = SockaddrAt::new(send.dst.net, send.dst.node, send.dst.socket);
        let (r, appended) = self.call(cx, |atp, k| {
            let control = k
                .m_get(MbufType::Control)
                .and_then(|mut c| c.m_append(&send.rec.encode()).map(|_| c))?;
            atp.pr_usrreq(
                k,
                so,
                Usrreq::Send {
                    m,
                    nam: Some(nam),
                    control: Some(control),
                },
            )
        });
        appended.into_iter().for_each(|x| count_late(x.rec, cx));
        match r {
            Ok(_) => {}
            Err(Errno::Emsgsize) => cx.count_drop(DropReason::Other("too-big")),
            Err(Errno::Eagain) => cx.count_drop(DropReason::QueueFull),
            Err(Errno::Enobufs) => cx.count_drop(DropReason::NoRoom),
            Err(_) => cx.count_drop(DropReason::Other("atp-refused")),
        }
    }

    fn open(&mut self, req: Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let (id, socket) = self.host.open(req, cx)?;
        if let Err(e) = self.attach(socket, cx) {
            self.host.close(id, cx);
            return Err(e);
        }
        Ok(id)
    }

    fn open_enable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let socket = self.host.open_enable(req.clone(), cx)?;
        if let Err(e) = self.attach(socket, cx) {
            let _ = self.host.open_disable(req, cx);
            return Err(e);
        }
        Ok(())
    }

    fn open_disable(&mut self, req: Open, cx: &mut Cx) -> Result<(), UpiError> {
        let socket = self.host.open_disable(req, cx)?;
        self.detach(socket, cx);
        Ok(())
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        if let Some(s) = self.host.close(sess, cx) {
            self.detach(s.socket, cx);
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

    fn on_timer(&mut self, _token: u64, cx: &mut Cx) {
        self.slowtimo = None;
        if self.sockets.is_empty() {
            return;
        }
        let ((), appended) = self.call(cx, |atp, k| atp.pr_slowtimo(k));
        appended.into_iter().for_each(|x| count_late(x.rec, cx));
        self.slowtimo = Some(cx.set_timer(cx.now() + SLOWTIMO, 0));
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The registry's factory of `atp@bsd` (`atp`'s options).
pub(super) fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let ddp = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("ddp"))?;
    let host = Host::new(ddp, Settings::from_config(c)?);
    Ok(Box::new(BsdAtp::new(host, 4096)))
}
