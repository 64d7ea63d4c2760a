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
use strata_core::{Cx, DropReason, GraphError, Message, Protocol, TimerId, UpiError};

use crate::appletalk::DdpInfo;
use crate::appletalk::atp::Settings;
use crate::appletalk::atp::host::{Code, Host, Imported, Input, Outgoing};
use crate::appletalk::endpoints::{dropped, with_bytes};
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
        self.cx.push(ddp, super::message_of(&m));
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

/// BSD's ATP and the kernel around it: the [`Code`] of `atp@bsd`.
pub struct Bsd {
    /// The imported protocol, unmodified.
    atp: Atp,
    mbufs: MbufPool,
    attached: usize,
    slowtimo: Option<TimerId>,
}

/// The `atp@bsd` protocol object.
pub type BsdAtp = Imported<Bsd>;

/// Counts what a record handed up outside a pop means (a failure).
fn count_late(appended: Vec<Appended>, cx: &mut Cx) {
    for a in appended {
        if let Some(AtpService::RequestFailed { .. }) = a.rec {
            cx.count("transaction-failed");
        }
    }
}

impl Bsd {
    /// BSD's ATP, its mbufs from a pool of `mbufs` small mbufs and as many
    /// clusters.
    pub fn new(mbufs: usize) -> Bsd {
        Bsd {
            atp: Atp::new(),
            mbufs: NativeMbufs::pool(mbufs, mbufs),
            attached: 0,
            slowtimo: None,
        }
    }

    /// Runs `f` with BSD's ATP and a kernel lent Strata's context; returns
    /// what ATP appended to sockets.
    fn call<R>(
        &mut self,
        host: &Host,
        cx: &mut Cx,
        f: impl FnOnce(&mut Atp, &mut Kernel) -> R,
    ) -> (R, Vec<Appended>) {
        let mut k = Kernel {
            cx,
            mbufs: &self.mbufs,
            host,
            appended: Vec::new(),
        };
        let r = f(&mut self.atp, &mut k);
        (r, k.appended)
    }
}

impl BsdAtp {
    /// BSD ATP's own counters.
    pub fn stats(&self) -> &AtpStats {
        &self.code.atp.stats
    }
}

impl Code for Bsd {
    fn attach(&mut self, host: &mut Host, socket: u8, cx: &mut Cx) -> Result<(), UpiError> {
        let so = SockId(usize::from(socket));
        let (r, _) = self.call(host, cx, |atp, k| atp.pr_usrreq(k, so, Usrreq::Attach));
        r.map_err(|_| UpiError::Refused)?;
        self.attached += 1;
        if self.slowtimo.is_none() {
            self.slowtimo = Some(cx.set_timer(cx.now() + SLOWTIMO, 0));
        }
        Ok(())
    }

    fn detach(&mut self, host: &mut Host, socket: u8, cx: &mut Cx) {
        let so = SockId(usize::from(socket));
        let _ = self.call(host, cx, |atp, k| atp.pr_usrreq(k, so, Usrreq::Detach));
        self.attached -= 1;
        if self.attached == 0
            && let Some(t) = self.slowtimo.take()
        {
            cx.cancel_timer(t);
        }
    }

    fn input(&mut self, host: &mut Host, info: &DdpInfo, msg: &mut Message, cx: &mut Cx) -> Input {
        // What DDP's pr_input hands ATP: the packet as an mbuf chain.
        let Ok(m) = super::mbuf_of(&self.mbufs, msg, None) else {
            return Input::Dropped(DropReason::NoRoom);
        };
        let arg = InputArg::Ddp {
            src: SockaddrAt::new(info.src.net, info.src.node, info.src.socket),
            dst: SockaddrAt::new(info.dst.net, info.dst.node, info.dst.socket),
            so: SockId(usize::from(info.dst.socket)),
        };
        let before = self.atp.stats;
        let ((), mut appended) = self.call(host, cx, |atp, k| atp.pr_input(k, m, arg));
        let Some(a) = appended.pop() else {
            // Most packets that go no further were kept (a response, a
            // release): name the drop only when a drop counter moved.
            let after = &self.atp.stats;
            let drops = |s: &AtpStats| s.malformed + s.no_transaction + s.table_full + s.sb_full;
            if drops(after) == drops(&before) {
                return Input::Consumed;
            }
            return match dropped(&before.named(), &after.named()) {
                Some(r) => Input::Dropped(r),
                None => Input::Consumed,
            };
        };
        count_late(appended, cx);
        let Some(rec) = a.rec else {
            return Input::Dropped(DropReason::Other("no-record"));
        };
        *msg = super::message_of(&a.data);
        Input::Indication(at(a.from), rec)
    }

    fn output(&mut self, host: &mut Host, send: Outgoing, msg: Message, cx: &mut Cx) {
        let Ok(m) = with_bytes(&msg, |b| m_devget(&self.mbufs, b, None)) else {
            cx.count_drop(DropReason::NoRoom);
            return;
        };
        let so = SockId(usize::from(send.socket));
        let nam = SockaddrAt::new(send.dst.net, send.dst.node, send.dst.socket);
        let (r, appended) = self.call(host, cx, |atp, k| {
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
        count_late(appended, cx);
        match r {
            Ok(_) => {}
            Err(Errno::Emsgsize) => cx.count_drop(DropReason::Other("too-big")),
            Err(Errno::Eagain) => cx.count_drop(DropReason::QueueFull),
            Err(Errno::Enobufs) => cx.count_drop(DropReason::NoRoom),
            Err(_) => cx.count_drop(DropReason::Other("atp-refused")),
        }
    }

    fn timer(&mut self, host: &mut Host, _token: u64, cx: &mut Cx) {
        self.slowtimo = None;
        if self.attached == 0 {
            return;
        }
        let ((), appended) = self.call(host, cx, |atp, k| atp.pr_slowtimo(k));
        count_late(appended, cx);
        self.slowtimo = Some(cx.set_timer(cx.now() + SLOWTIMO, 0));
    }
}

/// The registry's factory of `atp@bsd` (`atp`'s options).
pub(super) fn make(c: &ProtocolConfig, b: &BuildInfo) -> Result<Box<dyn Protocol>, GraphError> {
    let ddp = b
        .lower_proto_except(&[])
        .ok_or_else(|| b.needs_below("ddp"))?;
    let host = Host::new(ddp, Settings::from_config(c)?);
    let mbufs: usize = c.options.get("mbufs")?.unwrap_or(4096);
    Ok(Box::new(BsdAtp::new(host, Bsd::new(mbufs))))
}
