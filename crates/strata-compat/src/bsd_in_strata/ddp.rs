//! `ddp@bsd`: BSD's DDP ([`netatalk::ddp`](crate::bsd::netatalk::ddp), the
//! very file the native BSD subsystem compiles) as a node of a Strata graph,
//! over Strata's `eth` and under any Strata protocol that uses `ddp`.
//!
//! To Strata the module is a DDP: the same participants, the same
//! [`DdpInfo`](crate::appletalk::DdpInfo) record, the same demux (a pure
//! reading of the long header, which BSD has no equivalent of). To BSD's DDP
//! it is the kernel ([`BsdKernel`]): a Strata session of the layer above is a
//! BSD socket bound to its DDP socket number (sessions sharing a number share
//! the socket, since BSD demultiplexes by port alone); a send is `PRU_SEND`
//! with the destination and the DDP type as control data; `if_output` is a
//! push to the Ethernet session of the node's address (the address mapping
//! table, as the native Strata DDP keeps it); a received datagram is handed
//! over as an mbuf without a copy (what `m_devget` makes for a BSD driver,
//! over the message's own bytes: [`super::mbuf_of`]) to `pr_input`, and
//! what DDP appends to a socket (`sbappendaddr`) is what the
//! module passes up. What DDP drops is counted by DDP (`ddpstat`) and
//! reported to Strata by reason.

use strata_core::{
    Control, Cx, Demux, DropReason, Message, PacketMeta, Protocol, Reply, SessionId, Target, Up,
    UpiError,
};

use crate::appletalk::ddp::host::Host;
use crate::appletalk::endpoints::{Endpoints, dropped, with_bytes};
use crate::appletalk::wire::ddp::{self as wire, Header, Repr};
use crate::bsd::kernel::{BsdKernel, HZ};
use crate::bsd::mbuf::{Mbuf, MbufPool, MbufType, NativeMbufs, m_devget};
use crate::bsd::netatalk::ATPROTO_DDP;
use crate::bsd::netatalk::ddp::{Ddp, DdpStats};
use crate::bsd::protosw::{
    InputArg, OutputArg, PrcCmd, Protosw, SockId, SockaddrAt, Usrreq, UsrreqOk,
};
use crate::errno::Errno;

/// What BSD's DDP appended to a socket during one `pr_input`.
struct Appended {
    so: SockId,
    from: SockaddrAt,
    data: Mbuf,
    ddp_type: u8,
}

/// The kernel BSD's DDP sees: Strata's context for the length of one call.
struct Kernel<'k, 'c> {
    cx: &'k mut Cx<'c>,
    mbufs: &'k MbufPool,
    host: &'k mut Host,
    appended: Option<Appended>,
}

impl BsdKernel for Kernel<'_, '_> {
    fn mbufs(&self) -> &MbufPool {
        self.mbufs
    }

    fn ticks(&self) -> u64 {
        self.cx.now().as_nanos() / (1_000_000_000 / HZ)
    }

    fn pr_input(&mut self, _proto: u8, _m: Mbuf, _arg: InputArg) {
        // Every socket here is a DDP socket (`so_proto`): DDP appends to it
        // and never calls a protocol above directly.
        self.cx.count("bsd-unexpected-pr_input");
    }

    fn pr_output(&mut self, _proto: u8, _m: Mbuf, _arg: OutputArg) -> Result<(), Errno> {
        Err(Errno::Eopnotsupp)
    }

    fn pr_usrreq(&mut self, _proto: u8, _so: SockId, _req: Usrreq) -> Result<UsrreqOk, Errno> {
        Err(Errno::Eopnotsupp)
    }

    fn pr_ctlinput(&mut self, _proto: u8, _cmd: PrcCmd, _addr: Option<SockaddrAt>) {}

    fn if_output(&mut self, _ifp: usize, m: Mbuf, dst: SockaddrAt) -> Result<(), Errno> {
        let dst = wire::Addr::new(dst.net, dst.node, dst.port);
        let link = self
            .host
            .link_to(dst, self.cx)
            .map_err(|_| Errno::Ehostunreach)?;
        self.cx.push(link, super::message_of(&m));
        Ok(())
    }

    fn if_address(&self, _ifp: usize) -> Option<SockaddrAt> {
        let me = self.host.me(0);
        Some(SockaddrAt::new(me.net, me.node, 0))
    }

    fn if_route(&self, _dst: SockaddrAt) -> Option<usize> {
        Some(0)
    }

    fn so_proto(&self, _so: SockId) -> Option<u8> {
        Some(ATPROTO_DDP)
    }

    fn sbappendaddr(
        &mut self,
        so: SockId,
        from: SockaddrAt,
        m: Mbuf,
        control: Option<Mbuf>,
    ) -> Result<(), Errno> {
        let ddp_type = control.and_then(|c| c.data().first().copied()).unwrap_or(0);
        self.appended = Some(Appended {
            so,
            from,
            data: m,
            ddp_type,
        });
        Ok(())
    }

    fn sbspace(&self, _so: SockId) -> usize {
        usize::MAX
    }

    fn sorwakeup(&mut self, _so: SockId) {}

    fn sowwakeup(&mut self, _so: SockId) {}

    fn soerror(&mut self, _so: SockId, _e: Errno) {}
}

/// The `ddp@bsd` protocol object.
pub struct BsdDdp {
    host: Host,
    /// The imported protocol, unmodified.
    ddp: Ddp,
    mbufs: MbufPool,
    /// A BSD socket stands for every Strata session on its DDP socket number.
    sockets: Endpoints<SockId>,
    next_so: usize,
}

fn errno(e: Errno) -> UpiError {
    match e {
        Errno::Eaddrinuse => UpiError::InUse,
        Errno::Enobufs | Errno::Eaddrnotavail => UpiError::Exhausted("bsd ddp sockets"),
        _ => UpiError::Refused,
    }
}

impl BsdDdp {
    /// BSD's DDP behind `host`, its mbufs from a pool of `mbufs` small
    /// mbufs and as many clusters.
    pub fn new(host: Host, mbufs: usize) -> BsdDdp {
        BsdDdp {
            host,
            ddp: Ddp::new(),
            mbufs: NativeMbufs::pool(mbufs, mbufs),
            sockets: Endpoints::default(),
            next_so: 0,
        }
    }

    /// BSD DDP's own counters (`ddpstat`).
    pub fn stats(&self) -> &DdpStats {
        &self.ddp.stats
    }

    /// Runs `f` with BSD's DDP and a kernel lent Strata's context.
    fn call<R>(
        &mut self,
        cx: &mut Cx,
        f: impl FnOnce(&mut Ddp, &mut Kernel) -> R,
    ) -> (R, Option<Appended>) {
        let mut k = Kernel {
            cx,
            mbufs: &self.mbufs,
            host: &mut self.host,
            appended: None,
        };
        let r = f(&mut self.ddp, &mut k);
        (r, k.appended)
    }

    /// The BSD socket for DDP socket `port`, attached and bound the first time.
    fn socket(&mut self, port: u8, cx: &mut Cx) -> Result<SockId, UpiError> {
        if self.sockets.hold(port) {
            return self
                .sockets
                .get(port)
                .copied()
                .ok_or(UpiError::NoSuchSession);
        }
        let so = SockId(self.next_so);
        self.next_so += 1;
        let me = self.host.me(port);
        let bind = SockaddrAt::new(me.net, me.node, port);
        let (r, _) = self.call(cx, |ddp, k| {
            ddp.pr_usrreq(k, so, Usrreq::Attach)?;
            let bound = ddp.pr_usrreq(k, so, Usrreq::Bind(bind));
            if bound.is_err() {
                let _ = ddp.pr_usrreq(k, so, Usrreq::Detach);
            }
            bound
        });
        r.map_err(errno)?;
        self.sockets.insert(port, so);
        Ok(so)
    }
}

impl Protocol for BsdDdp {
    fn demux(&self, hdr: &[u8], meta: &mut PacketMeta) -> Demux {
        self.host.demux(hdr, meta)
    }

    fn pop(&mut self, target: Target, msg: &mut Message, meta: &mut PacketMeta, cx: &mut Cx) -> Up {
        self.host.learn_node(cx);
        let read = with_bytes(msg, |b| {
            Header::new_checked(b).ok().map(|h| (h.dst(), h.src()))
        });
        let Some((dst, src)) = read else {
            return Up::Drop(DropReason::Truncated);
        };
        self.host.glean(src, meta, cx);
        // The driver's part, as `m_devget` without its copy: the received
        // buffer is handed over as the packet's mbuf.
        let Ok(m) = super::mbuf_of(&self.mbufs, msg, Some(0)) else {
            return Up::Drop(DropReason::NoRoom);
        };
        let before = self.ddp.stats;
        let ((), appended) = self.call(cx, |ddp, k| {
            ddp.pr_input(k, m, InputArg::Interface { ifp: 0 })
        });
        let Some(a) = appended else {
            return Up::Drop(
                dropped(&before.named(), &self.ddp.stats.named())
                    .unwrap_or(DropReason::Other("bsd-dropped")),
            );
        };
        let Some(port) = self
            .sockets
            .iter()
            .find(|(_, so)| **so == a.so)
            .map(|(p, _)| p)
        else {
            return Up::Drop(DropReason::NoSession);
        };
        let src = wire::Addr::new(a.from.net, a.from.node, a.from.port);
        let Ok(r) = Repr::new(src, dst, a.ddp_type, 0) else {
            return Up::Drop(DropReason::Malformed);
        };
        *msg = super::message_of(&a.data);
        self.host.up(target, port, &r, meta)
    }

    fn push(&mut self, sess: SessionId, msg: Message, cx: &mut Cx) {
        let Some(out) = self.host.outgoing(sess, cx) else {
            return;
        };
        let Some(so) = self.sockets.get(out.socket).copied() else {
            cx.count_drop(DropReason::NoSession);
            return;
        };
        let (remote, ddp_type) = (out.remote, out.ddp_type);
        let Ok(m) = with_bytes(&msg, |b| m_devget(&self.mbufs, b, None)) else {
            cx.count_drop(DropReason::NoRoom);
            return;
        };
        let nam = SockaddrAt::new(remote.net, remote.node, remote.socket);
        let (r, _) = self.call(cx, |ddp, k| {
            let control = k
                .m_get(MbufType::Control)
                .and_then(|mut c| c.m_append(&[ddp_type]).map(|_| c))?;
            ddp.pr_usrreq(
                k,
                so,
                Usrreq::Send {
                    m,
                    nam: Some(nam),
                    control: Some(control),
                },
            )
        });
        match r {
            Ok(_) => {}
            Err(Errno::Emsgsize) => cx.count_drop(DropReason::Other("too-big")),
            Err(Errno::Enobufs) => cx.count_drop(DropReason::NoRoom),
            Err(_) => cx.count_drop(DropReason::Unresolved),
        }
    }

    fn open(&mut self, mut req: strata_core::Open, cx: &mut Cx) -> Result<SessionId, UpiError> {
        let s = self.host.session(&mut req, cx)?;
        let port = s.socket;
        self.socket(port, cx)?;
        match self.host.table.insert(s) {
            Some(id) => Ok(id),
            None => {
                self.release(port, cx);
                Err(UpiError::Exhausted("ddp sessions"))
            }
        }
    }

    fn close(&mut self, sess: SessionId, cx: &mut Cx) {
        if let Some(s) = self.host.table.remove(sess) {
            self.release(s.socket, cx);
        }
    }

    fn control(
        &mut self,
        sess: Option<SessionId>,
        op: Control,
        cx: &mut Cx,
    ) -> Result<Reply, UpiError> {
        self.host.control(sess, op, cx)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl BsdDdp {
    /// Drops one session's hold on DDP socket `port`; the last one detaches
    /// the BSD socket.
    fn release(&mut self, port: u8, cx: &mut Cx) {
        if let Some(so) = self.sockets.release(port) {
            let _ = self.call(cx, |ddp, k| ddp.pr_usrreq(k, so, Usrreq::Detach));
        }
    }
}
